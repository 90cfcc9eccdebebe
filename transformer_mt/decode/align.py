"""Word alignments read off cross-attention (``mt translate --align``): each output token is
linked to the source token it attends to most, in one decoder layer (its heads averaged, or one
head), and token links become word links (``i-j``: source word ``i``, output word ``j``, from 0,
the format of fast_align, Moses and Marian).

Attention is not alignment: a head may look at a neighbour, at punctuation or at ``<eos>`` while
it writes a word, and a model is not trained to make it point anywhere in particular. Guided
alignment (Garg et al., 2019) trains one head against alignments from an aligner; without it,
the second-to-last layer often aligns better than the last. docs/decoding.md says more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is not imported for pharaoh() (mt --help stays light)
    from torch import Tensor


def token_links(attention: Tensor) -> list[int]:
    """The source token each output token attends to most.

    attention: (T_out + 1, S) weights of the output tokens and ``<eos>`` (rows) over the
    source tokens and ``<eos>`` (columns); the ``<eos>`` row and column take no part.
    Returns T_out source positions.
    """
    return attention[:-1, :-1].argmax(dim=-1).tolist()


def word_links(links: Sequence[int], src_words: Sequence[int],
               out_words: Sequence[int]) -> list[tuple[int, int]]:
    """Token links (``links[j]``: output token ``j``'s source token) as links between words
    (``src_words[i]``: the word of source token ``i``; ``out_words`` alike), each once, in
    output order then source order."""
    pairs = {(src_words[i], out_words[j]) for j, i in enumerate(links)}
    return sorted(pairs, key=lambda p: (p[1], p[0]))


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """Links as text, ``"0-0 1-2 2-1"``."""
    return " ".join(f"{i}-{j}" for i, j in pairs)
