"""Several models decoding as one: the mean of their next-token probabilities.

An :class:`Ensemble` offers what search needs of a model (``cfg``, ``tgt_vocab_size``; search
starts one decoding state per member and wraps them in an :class:`EnsembleState`), so greedy,
beam search and sampling run on it unchanged. Its "logits" are ``log(mean_i p_i)``,
log-probabilities search normalises again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from transformer_mt.decode.beam_step import StepByStep
from transformer_mt.model.transformer import Transformer

if TYPE_CHECKING:
    from transformer_mt.decode.state import DecodingState


@dataclass
class EnsembleState(StepByStep):
    """Each member's decoding state, advanced and selected together."""

    states: list[DecodingState]

    def next_logits(self, prefix: Tensor) -> Tensor:
        """(N, t) prefixes -> (N, V) log of the members' mean next-token probabilities."""
        total: Tensor | None = None  # log of the members' probabilities summed so far
        for state in self.states:
            log_probs = state.next_logits(prefix).float().log_softmax(dim=-1)  # (N, V)
            # log(p + q) from log p and log q, one pass (no (M, N, V) stack to reduce)
            total = log_probs if total is None else torch.logaddexp(total, log_probs, out=total)
        assert total is not None  # an ensemble has members
        return total - math.log(len(self.states))  # (N, V)

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        for state in self.states:
            state.select(rows, sentences)


class Ensemble(nn.Module):
    """Models trained for the same vocabularies, averaged in probability at every step."""

    def __init__(self, members: list[Transformer]) -> None:
        super().__init__()
        if len({m.tgt_vocab_size for m in members}) != 1:
            raise ValueError("ensemble members must share one target vocabulary")
        self.models = nn.ModuleList(members)  # registered: moved and saved with the ensemble
        self.members = list(members)
        self.tgt_vocab_size = members[0].tgt_vocab_size
        # the tightest length limit of any member
        self.cfg = min((m.cfg for m in members), key=lambda c: c.max_positions)
