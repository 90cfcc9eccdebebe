"""A target prefix as text ("A man") made into what search forces (``decode/forcing.py``).

The prefix is tokenized as the target side is. If it ends in whitespace, every token is forced.
If not, its last token may be a word the user has not finished typing ("A ma" for "A man"): the
model would not write ``ma`` there, and forcing it would both mis-score the output and end the
word. So the last token is not forced; the token at that position is instead one of those the
target vocabulary has that begin with it (``▁ma``: ``▁ma``, ``▁man``, ``▁many``...), and search
picks among them as it would (their log-probabilities are the model's, over all tokens).

A whole word the target vocabulary does not have (a word model's name, "A man from Tübingen ")
is forced as ``<unk>`` and written as it was typed, as a glossary's term is
(``Tokenizer.detokenize_keeping``): :attr:`Prefixes.kept`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from transformer_mt.data.tokenize import Tokenizer
from transformer_mt.data.vocab import SPECIALS, UNK_ID, Vocab
from transformer_mt.decode.forcing import Forcing
from transformer_mt.errors import MTError


@dataclass
class Prefixes(Forcing):
    """What search forces for each prefix, and per sentence the forced tokens written as the
    prefix's text: ``(start, end, text)``, a word the target vocabulary lacks forced as
    ``<unk>``."""

    kept: list[list[tuple[int, int, str]]] = field(default_factory=list)


def forcing_of(prefixes: Sequence[str], tokenizer: Tokenizer, vocab: Vocab,
               longest: int) -> Prefixes:
    """What search forces for each prefix ("" forces nothing); ``longest``: the most output
    tokens the model writes. An :class:`MTError` where a prefix cannot be written."""
    tokens, then, kept = [], [], []
    texts = [p if p.strip() else "" for p in prefixes]
    pieces_of = tokenizer.tokenize(texts)
    for text, pieces in zip(texts, pieces_of, strict=True):
        partial = pieces.pop() if pieces and not text[-1].isspace() else None
        ids = vocab.encode(pieces, eos=False)
        kept.append([(k, k + 1, pieces[k]) for k, i in enumerate(ids) if i == UNK_ID])
        allowed = None if partial is None else completions(vocab, partial)
        if allowed == []:
            raise MTError(f"no token this model writes begins with '{partial}' (the end of the "
                          f"prefix '{text}'); change the prefix")
        if len(ids) + (allowed is not None) > longest:
            raise MTError(f"the prefix '{text}' has {len(ids) + (allowed is not None)} tokens; "
                          f"this model writes at most {longest}: shorten it")
        tokens.append(ids)
        then.append(allowed)
    forcing = Forcing.of(tokens, then)
    return Prefixes(forcing.tokens, forcing.then, kept)


def completions(vocab: Vocab, partial: str) -> list[int]:
    """The ids of the tokens (specials aside) that begin with ``partial``."""
    return [i for i, token in enumerate(vocab.itos)
            if i >= len(SPECIALS) and token.startswith(partial)]
