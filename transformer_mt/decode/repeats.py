"""Outputs that do not say the same thing twice: ``decode.no_repeat_ngram_size`` (Paulus et
al., 2017; fairseq's ``--no-repeat-ngram-size``, CTranslate2's and Hugging Face's
``no_repeat_ngram_size``).

A model trained briefly, or given a sentence unlike those it learned from, can fall into a
loop: "a tall tall tall tree", "is being pulled by a woman and is being pulled by ...". With a
size ``n`` > 0, search never writes an n-gram (``n`` tokens in a row) that its output already
holds: at each step the tokens that would end one are barred. They are barred after the
model's probabilities are normalised, as a forced prefix bars tokens (``decode/forcing.py``):
what is written still scores what the model gives it. ``<eos>`` is never barred (an output
holds it once), so every output can end.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_mt.decode.forcing import Forcing


def repeats(prefix: Tensor, n: int, vocab: int) -> Tensor | None:
    """(N, V): -inf for the tokens that would end an n-gram the prefix (N, t) holds already
    (its ``<bos>`` first), 0 for the others; None where ``n`` is 0 or no prefix holds an
    n-gram yet.

    The n-grams are the prefix's windows of ``n`` tokens; those whose first ``n - 1`` tokens
    are the prefix's last ``n - 1`` bar their last token.
    """
    t = prefix.size(1)
    if n <= 0 or t < n:
        return None
    windows = prefix.unfold(1, n, 1)  # (N, t - n + 1, n)
    again = (windows[..., :-1] == prefix[:, None, t - n + 1:]).all(dim=-1)  # (N, t - n + 1)
    hits = torch.zeros(prefix.size(0), vocab, device=prefix.device).scatter_reduce_(
        1, windows[..., -1], again.float(), "amax")  # (N, V) 1 where a window bars the token
    return torch.where(hits > 0, -torch.inf, 0.0)


def unforced_repeats(prefix: Tensor, n: int, vocab: int, forcing: Forcing | None, step: int,
                     sentence: Tensor, group: int = 1) -> Tensor | None:
    """:func:`repeats` of the prefixes (N*G, t), but none in the rows whose forced prefix is
    still being written (``sentence`` (N,): the forcing's row of each ``group`` rows): a forced
    token is written, repeat or not."""
    bars = repeats(prefix, n, vocab)
    if bars is None or forcing is None:
        return bars
    forced = torch.tensor(forcing.lengths(), device=prefix.device)[sentence] > step  # (N,)
    return bars.masked_fill(forced.repeat_interleave(group)[:, None], 0.0)


def with_repeats(bars: Tensor | None, prefix: Tensor, n: int, vocab: int,
                 forcing: Forcing | None, step: int, sentence: Tensor) -> Tensor | None:
    """What a forced prefix bars, ``bars`` (N, V) (-inf, 0; None: nothing), and what
    :func:`unforced_repeats` bars in the prefixes (N*G, t) of the sentences ``sentence``
    (N,): (N*G, V), a row each (``bars`` as it is where no repeat is barred)."""
    group = prefix.size(0) // sentence.size(0)
    again = unforced_repeats(prefix, n, vocab, forcing, step, sentence, group)
    if again is None:
        return bars
    return again if bars is None else again + bars.repeat_interleave(group, dim=0)


def barred_tokens(prefix: Tensor, n: int, vocab: int) -> list[set[int]]:
    """The tokens :func:`repeats` bars, a set for each row of ``prefix`` (N, t)."""
    bars = repeats(prefix, n, vocab)
    found: list[set[int]] = [set() for _ in range(prefix.size(0))]
    if bars is not None:
        for row, token in bars.isinf().nonzero().tolist():
            found[row].add(token)
    return found
