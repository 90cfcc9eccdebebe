"""A target prefix as text ("A man") made into what search forces (``decode/forcing.py``).

The prefix is tokenized as the target side is. If it ends in whitespace, every token is forced.
If not, its last token may be a word the user has not finished typing ("A ma" for "A man"): the
model would not write ``ma`` there, and forcing it would both mis-score the output and end the
word. So the last token is not forced; the token at that position is instead one of those the
target vocabulary has that begin with it (``▁ma``: ``▁ma``, ``▁man``, ``▁many``...), and search
picks among them as it would (their log-probabilities are the model's, over all tokens).
"""

from __future__ import annotations

from collections.abc import Sequence

from transformer_mt.data.tokenize import Tokenizer
from transformer_mt.data.vocab import SPECIALS, UNK_ID, Vocab
from transformer_mt.decode.forcing import Forcing
from transformer_mt.errors import MTError


def forcing_of(prefixes: Sequence[str], tokenizer: Tokenizer, vocab: Vocab,
               longest: int) -> Forcing:
    """What search forces for each prefix ("" forces nothing); ``longest``: the most output
    tokens the model writes. An :class:`MTError` where a prefix cannot be written."""
    tokens, then = [], []
    texts = [p if p.strip() else "" for p in prefixes]
    pieces_of = tokenizer.tokenize(texts)
    for text, pieces in zip(texts, pieces_of, strict=True):
        partial = pieces.pop() if pieces and not text[-1].isspace() else None
        ids = vocab.encode(pieces, eos=False)
        if UNK_ID in ids:
            word = pieces[ids.index(UNK_ID)]
            raise MTError(f"the prefix '{text}' holds '{word}', which this model's target "
                          "vocabulary does not have: it cannot write it; change the prefix")
        allowed = None if partial is None else completions(vocab, partial)
        if allowed == []:
            raise MTError(f"no token this model writes begins with '{partial}' (the end of the "
                          f"prefix '{text}'); change the prefix")
        if len(ids) + (allowed is not None) > longest:
            raise MTError(f"the prefix '{text}' has {len(ids) + (allowed is not None)} tokens; "
                          f"this model writes at most {longest}: shorten it")
        tokens.append(ids)
        then.append(allowed)
    return Forcing.of(tokens, then)


def completions(vocab: Vocab, partial: str) -> list[int]:
    """The ids of the tokens (specials aside) that begin with ``partial``."""
    return [i for i, token in enumerate(vocab.itos)
            if i >= len(SPECIALS) and token.startswith(partial)]
