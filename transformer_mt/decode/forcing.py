"""Target prefixes: outputs that must begin a given way ("finish my sentence").

A :class:`Forcing` says, per sentence, which tokens the output starts with (``tokens``, forced
one a step) and, optionally, which tokens may come right after them (``then``: the completions
of a word the user had not finished typing). Greedy and beam search take one
(``decode/search.py``): at a forced step every other token is masked out of the choice, but
the token's log-probability is still the model's (normalised over the whole vocabulary), so a
forced output scores what it would score unforced (``decode/score.py`` gives the same number).
Once a sentence's forcing is over, search goes on as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Forcing:
    """How each sentence's output must begin: ``tokens[i]`` (ids, forced in order), then one of
    ``then[i]`` (ids; None: any token) at the position after them."""

    tokens: list[list[int]]
    then: list[list[int] | None]

    @classmethod
    def of(cls, tokens: Sequence[Sequence[int]],
           then: Sequence[Sequence[int] | None] | None = None) -> Forcing:
        return cls([list(t) for t in tokens], [None if x is None else list(x)
                                               for x in (then or [None] * len(tokens))])

    def subset(self, rows: Sequence[int]) -> Forcing:
        return Forcing([self.tokens[i] for i in rows], [self.then[i] for i in rows])

    def lengths(self) -> list[int]:
        """The output positions each sentence's forcing covers."""
        return [len(t) + (c is not None) for t, c in zip(self.tokens, self.then, strict=True)]

    def mask(self, step: int, vocab: int, device: torch.device) -> Tensor | None:
        """(B, V) bool: the tokens each sentence may produce at ``step`` (a row of all True
        where its forcing is over); None when no sentence's is left."""
        if step >= max(self.lengths(), default=0):
            return None
        allowed = torch.ones(len(self.tokens), vocab, dtype=torch.bool)  # (B, V)
        for i, (forced, then) in enumerate(zip(self.tokens, self.then, strict=True)):
            if step < len(forced):
                allowed[i] = False
                allowed[i, forced[step]] = True
            elif step == len(forced) and then is not None:
                allowed[i] = False
                allowed[i, then] = True
        return allowed.to(device)


def force(z: Tensor, forcing: Forcing | None, step: int, sentence: Tensor,
          group: int = 1) -> Tensor:
    """Logits z (N*G, V) with what ``forcing`` bars at ``step`` set to -inf; ``sentence`` (N,):
    the forcing's row (sentence) of each ``group`` rows of z."""
    allowed = None if forcing is None else forcing.mask(step, z.size(1), z.device)  # (B, V)
    if allowed is None:
        return z
    return z.masked_fill(~allowed[sentence.repeat_interleave(group)], -torch.inf)


def barred(forcing: Forcing | None, step: int, vocab: int, sentence: Tensor) -> Tensor | None:
    """(N, V): -inf for the tokens ``forcing`` bars at ``step`` in the sentences ``sentence``
    (N,) (its rows), 0 for the others, to add to log-probabilities; None where it bars none."""
    allowed = None if forcing is None else forcing.mask(step, vocab, sentence.device)
    if allowed is None:
        return None
    return torch.where(allowed[sentence], 0.0, -torch.inf)


def raise_limits(limits: Tensor, forcing: Forcing | None) -> Tensor:
    """Length limits (B,) raised where a sentence's forcing is longer: forced tokens are
    written, whatever the source's length."""
    if forcing is None:
        return limits
    return torch.maximum(limits, torch.tensor(forcing.lengths(), device=limits.device))

