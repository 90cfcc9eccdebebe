"""The decoding state of ``--compile`` (``decode/compiled.py``): the incremental decoder's
:class:`~transformer_mt.decode.incremental.DecoderState`, whose steps run the compiled graphs,
and which reads each hypothesis's past through its ancestors where the graphs do, so that its
key/value buffer is never reordered nor compacted: a step of 32 sentences' beams of 5 copied
every filled position of every layer (~10 MB at position 15) to keep the hypotheses it chose,
and again when sentences left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from transformer_mt.decode.beam_step import Choice
from transformer_mt.decode.incremental import DecoderState

if TYPE_CHECKING:
    from transformer_mt.decode.compiled import CompiledDecoding


@dataclass
class CompiledState(DecoderState):
    """The incremental decoder's state (:class:`DecoderState`) of a ``CompiledDecoding``,
    whose steps run its graphs: a lone sentence's, a batch's; and, where one sentence is left
    with a beam the beam graph takes, a step and the search's choice from it as one
    (:meth:`choose_next`).

    Where the graphs read each hypothesis's past through ``ancestors`` (a batch's steps in the
    batch graph, a lone beam's in the beam graph), the key/value buffer is never reordered:
    ``ancestors`` (N*G, offset + 1) holds the row of each position's keys and values, the
    last the row the hypothesis writes next (``slots``, a batch's: its rows stay its
    sentence's, and those of sentences that left stay unused; a lone beam's: 0 to K - 1).
    Anything else reads rows as :class:`DecoderState` has them: ancestors are settled first
    (:meth:`_settle`: each hypothesis's past copied into its own row).
    """

    fused = True  # pick_next, choose_next: a step and its choice in one graph, where loaded
    decoding: CompiledDecoding | None = None
    ancestors: Tensor | None = None
    slots: Tensor | None = None  # (N*G,) a batch's: the row each hypothesis writes in
    lone: bool = False  # one sentence, its padding dropped

    def next_logits(self, prefix: Tensor) -> Tensor:
        """:meth:`DecoderState.next_logits`; a batch's step (several sentences) in the batch
        graph, read through ``ancestors`` and written at ``slots``."""
        decoding = self.decoding
        if (self.slots is None or decoding is None or decoding._batch is None
                or self.offset >= decoding.max_positions
                or (self.cross_kv.size(0) == 1 and self.group == 1 and decoding._one)):
            self._settle()  # (the last sentence's greedy steps: the lone graph, batch_step)
            return super().next_logits(prefix)
        assert self.ancestors is not None and self.src_mask is not None
        group = self.group
        first = self.offset == 0 and group > 1  # a sentence's G <bos> rows: decoded once
        every = group if first else 1
        slots, ancestors = self.slots[::every], self.ancestors[::every]  # (N*G', ...)
        kv = self.reserve(self.slots.numel() if self.self_kv is None else self.self_kv.size(0))
        last = prefix[::every, -1].contiguous()  # (N*G',)
        logits, fresh = decoding._run(decoding._batch, [
            last.view(self.cross_kv.size(0), -1), kv,
            ancestors.view(self.cross_kv.size(0), last.size(0) // self.cross_kv.size(0), -1),
            self.cross_kv.contiguous(), self.src_mask.contiguous()])
        # the buffer's dtype: fp32 where the model is bf16 (attention computes in fp32 on the CPU)
        kv.select(1, self.offset).index_copy_(0, slots, fresh.to(kv.dtype))  # (N*G', L, 2, H, Dh)
        self.offset += 1
        if first:  # each sentence's G hypotheses share its one past
            logits = logits.repeat_interleave(group, dim=0)  # (N*G, V)
            ancestors = ancestors.repeat_interleave(group, dim=0)
        self.ancestors = torch.cat([ancestors, self.slots[:, None]], dim=1)
        return logits

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """:meth:`DecoderState.select`; where a batch's rows are read through ancestors,
        nothing of the buffer is copied: the ancestors (and, as sentences leave, the slots)
        are selected."""
        if self.slots is None:
            super().select(rows, sentences)
            return
        assert self.ancestors is not None
        self.ancestors = self.ancestors[rows]  # (N'*G, offset + 1)
        if sentences is None:  # beams reordered: each writes in its own row next
            self.ancestors[:, -1] = self.slots
        else:
            self.slots = self.slots[rows]
            self._select_sentences(sentences)

    def choose(self, z: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor,
               step: int | Tensor, barred: Tensor | None = None) -> Choice:
        """Beam search's choice from a step's logits (a batch's), compiled where loaded."""
        if self.decoding is None:
            return super().choose(z, scores, n_finished, limits, step, barred)
        return self.decoding.choose(z, scores, n_finished, limits, step, barred)

    def pick_next(self, prefix: Tensor, limits: Tensor,
                  barred: Tensor | None) -> tuple[Tensor, Tensor] | None:
        """Greedy search's next step and its pick in one compiled call (``graphs.StepGraph``):
        the token (1,) and its log-probability (1,) for one sentence's prefix (1, T), at its
        length limit ``limits`` (1,), with ``barred`` (1, V) what a forced prefix bars (None:
        nothing); the state advanced. None where it does not apply (several sentences, the
        graph not loaded): the caller steps and picks as ever."""
        decoding = self.decoding
        if (decoding is None or decoding._one is None or self.group != 1
                or self.cross_kv.size(0) != 1 or self.offset >= decoding.max_positions):
            return None
        self._lone()
        kv = self.reserve(1)  # (1, capacity, L, 2, H, Dh)
        _, fresh, token, logprob = decoding._run(decoding._one, [
            prefix[:, -1].contiguous(), kv, prefix.new_empty(self.offset + 1), self.cross_kv,
            limits.contiguous(), decoding.none_barred(prefix.device) if barred is None
            else barred.contiguous()])
        kv.select(1, self.offset).copy_(fresh)  # (1, L, 2, H, Dh)
        self.offset += 1
        return token, logprob

    def _lone(self) -> None:
        """A batch's last sentence as a lone one: each row its own past, the source's padding
        dropped (masked anyway), as a lone sentence's graphs take it."""
        if self.lone:
            return
        self._settle()
        length = int(self.src_mask.sum())
        self.memory, self.src_mask = self.memory[:, :length], self.src_mask[..., :length]
        self.cross_kv, self.lone = self.cross_kv[..., :length, :].contiguous(), True

    def choose_next(self, prefix: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor,
                    barred: Tensor | None) -> tuple[Choice, Tensor] | None:
        """Beam search's next step and its choice in one compiled call (``graphs.BeamGraph``):
        the :class:`Choice` (as ``beam_step.choose`` makes it from this step's log-probabilities)
        and the next step's prefixes (K, T + 1), the state advanced. ``prefix`` (K, T), the
        others as ``beam_step.choose`` takes them (``barred`` (1, V): what a forced prefix bars;
        None: nothing). None where it does not apply (several sentences, a beam the graph
        does not take, the graph not loaded): the caller steps and chooses as ever.
        """
        decoding, k = self.decoding, prefix.size(0)
        if (decoding is None or decoding._beam is None or self.cross_kv.size(0) != 1
                or not 2 <= k <= decoding.widest_beam or self.offset >= decoding.max_positions):
            return None
        self._lone()
        if barred is None:
            barred = decoding.none_barred(prefix.device)  # (1, V)
        kv = self.reserve(k)  # (K, capacity, L, 2, H, Dh)
        ancestors = self.ancestors
        if ancestors is None:
            ancestors = torch.arange(k, device=prefix.device)[:, None].expand(
                -1, prefix.size(1)).contiguous()  # (K, T)
        *fields, fresh, following, self.ancestors = decoding._run(decoding._beam, [
            prefix.contiguous(), kv, ancestors, self.cross_kv, barred, scores.contiguous(),
            n_finished.contiguous(), limits.contiguous()])
        kv.select(1, self.offset).copy_(fresh)  # (K, L, 2, H, Dh): row h, hypothesis h's
        self.offset += 1
        return Choice(*fields), following

    def _select_hypotheses(self, rows: Tensor) -> None:
        """:meth:`DecoderState._select_hypotheses`, each row first given its own past where
        it was read through ancestors."""
        if rows.numel():
            self._settle()
        self.ancestors = None
        super()._select_hypotheses(rows)

    def _settle(self) -> None:
        """Each hypothesis's past into its own row (row i: hypothesis i's), where it was read
        through ancestors; then rows are read as :class:`DecoderState` has them."""
        kv, ancestors = self.self_kv, self.ancestors
        self.ancestors = self.slots = None
        if kv is not None and ancestors is not None and self.offset:
            filled = self.offset
            kv[:ancestors.size(0), :filled] = kv[ancestors[:, :filled],
                                                 torch.arange(filled, device=kv.device)]
