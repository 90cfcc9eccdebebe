"""What translating returns: translations (text, tokens, score; attention and alignment when
asked), scored given translations, alternatives at a position, and what an output must hold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from torch import Tensor

from transformer_mt.decode.search import length_penalty
from transformer_mt.errors import MTError


@dataclass
class Scored:
    """A given translation's tokens (``<eos>`` last) and the model's log-probability of each."""

    tokens: list[str]
    log_probs: list[float]
    alpha: float  # the length penalty's, for :attr:`score`

    @property
    def log_prob(self) -> float:
        return sum(self.log_probs)

    @property
    def score(self) -> float:
        """The log-probability divided by the GNMT length penalty: what beam search reports."""
        return self.log_prob / float(length_penalty(len(self.tokens), self.alpha))


class Required(NamedTuple):
    """A text an output must hold, and its target ids (the constraint search places); the
    target ids of the words it must then not hold (a glossary term's ``avoid``)."""

    text: str
    ids: list[int]
    avoid: tuple[tuple[int, ...], ...] = ()


class InputTooLongError(MTError):
    """A sentence longer than the model takes, where cutting it is not allowed."""

@dataclass
class Translation:
    text: str  # detokenized output
    tokens: list[str]
    # log-probability (beam search: divided by the length penalty); NaN if not asked for
    score: float
    ids: list[int] = field(default_factory=list)  # output ids, without <bos> and <eos>
    # cross-attention (T_out + 1, S) of the last decoder layer, mean over heads, if asked:
    # a row per output token and <eos>, a column per source token and <eos>
    attention: Tensor | None = None
    # word alignment, if asked: (source word, output word) pairs (decode/align.py)
    alignment: list[tuple[int, int]] | None = None
    forced: int = 0  # output tokens a target prefix forced
    # spans of output tokens (start, end) written as a given text: a glossary's terms, kept
    # spans, unknown words copied from the source (unknown.py)
    kept: list[tuple[int, int, str]] = field(default_factory=list)


@dataclass
class Choice:
    """An alternative at a position: the token there, its log-probability, and the whole
    translation search completes from it."""

    token: str
    log_prob: float
    translation: Translation
