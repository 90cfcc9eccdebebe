"""Several models decoding as one: the mean of their next-token probabilities.

An :class:`Ensemble` offers what search needs of a model (``start_decoding``, ``decode_step``,
``decode_prefix``, ``cfg``, ``tgt_vocab_size``), so greedy, beam search and sampling run on it
unchanged. Its "logits" are ``log(mean_i p_i)``, log-probabilities search normalises again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from transformer_mt.model.transformer import DecoderState, Transformer


@dataclass
class EnsembleState:
    """Each member's :class:`DecoderState`, selected together."""

    states: list[DecoderState]

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        for state in self.states:
            state.select(rows, sentences)


class Ensemble(nn.Module):
    """Models trained for the same vocabularies, averaged in probability at every step."""

    def __init__(self, members: list[Transformer]) -> None:
        super().__init__()
        if len({m.tgt_vocab_size for m in members}) != 1:
            raise ValueError("ensemble members must share one target vocabulary")
        self.members = nn.ModuleList(members)
        # the tightest length limit of any member
        self.cfg = min((m.cfg for m in members), key=lambda c: c.max_positions)

    @property
    def tgt_vocab_size(self) -> int:
        return self.members[0].tgt_vocab_size

    def start_decoding(self, src: Tensor, src_mask: Tensor, group: int = 1) -> EnsembleState:
        return EnsembleState([m.start_decoding(src, src_mask, group) for m in self.members])

    def decode_step(self, last: Tensor, state: EnsembleState) -> Tensor:
        """(N,) newest tokens -> (N, V) log of the members' mean next-token probabilities."""
        return self._mean([m.decode_step(last, s) for m, s in zip(self.members, state.states)])

    def decode_prefix(self, prefix: Tensor, state: EnsembleState) -> Tensor:
        return self._mean([m.decode_prefix(prefix, s)
                           for m, s in zip(self.members, state.states)])

    def _mean(self, logits: list[Tensor]) -> Tensor:
        log_probs = torch.stack([z.float().log_softmax(dim=-1) for z in logits])  # (M, N, V)
        return torch.logsumexp(log_probs, dim=0) - math.log(len(logits))  # (N, V)
