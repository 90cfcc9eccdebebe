"""A training batch: padded ids, the teacher-forcing shift and the masks, in one tested place;
and :func:`collate`, which gathers one from a corpus's memory-mapped ids."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:
    from transformer_mt.data.id_cache import EncodedSide
    from transformer_mt.data.pairs import ParallelData


def source_mask(src: Tensor, pad_id: int = PAD_ID) -> Tensor:
    """Keys that may be attended to: ``(B, S) -> (B, 1, 1, S)`` bool, True for real tokens."""
    return (src != pad_id)[:, None, None, :]


@dataclass
class Batch:
    """Source and target ids of a few sentence pairs, padded to the longest of each side.

    ``tgt`` holds ``<bos> y1 ... yn <eos>``. Teacher forcing feeds ``tgt_in = tgt[:, :-1]`` to the
    decoder and asks it to predict ``tgt_out = tgt[:, 1:]``: position ``t`` sees the gold prefix up
    to ``y_t`` and predicts ``y_{t+1}``.

    The masks: :attr:`src_mask` hides source padding from every attention to the source. The
    decoder's self-attention needs only the causal mask (``model/attention.py``,
    :func:`~transformer_mt.model.attention.causal_mask`): padding follows the last real token,
    so no real position can see it, and padded positions are ignored by the loss.
    """

    src: Tensor  # (B, S) source ids, ending in <eos>, padded with <pad>
    tgt: Tensor  # (B, T+1) target ids: <bos> y1 ... yn <eos> (padded)
    n_tokens: int  # real (non-pad) target tokens, the loss normaliser
    n_src_tokens: int

    @property
    def tgt_in(self) -> Tensor:
        """``(B, T)`` decoder input: ``<bos> y1 ... yn`` (padded)."""
        return self.tgt[:, :-1]

    @property
    def tgt_out(self) -> Tensor:
        """``(B, T)`` decoder target: ``y1 ... yn <eos>`` (padded)."""
        return self.tgt[:, 1:]

    @classmethod
    def from_ids(cls, src: Sequence[Tensor], tgt: Sequence[Tensor], pad_id: int = PAD_ID) -> Batch:
        """Pad lists of 1-D id tensors (``tgt`` with ``<bos>`` and ``<eos>``) into a batch."""
        src_t = pad_sequence(list(src), batch_first=True, padding_value=pad_id)  # (B, S)
        tgt_t = pad_sequence(list(tgt), batch_first=True, padding_value=pad_id)  # (B, T+1)
        n_tokens = sum(len(t) for t in tgt) - len(tgt)
        n_src = sum(len(s) for s in src)
        return cls(src_t, tgt_t, n_tokens, n_src)

    @property
    def src_mask(self) -> Tensor:
        """``(B, 1, 1, S)``: True for real source tokens."""
        return source_mask(self.src)

    @property
    def size(self) -> int:
        return self.src.size(0)

    @property
    def padding_fraction(self) -> float:
        """Share of padded positions in source and target together."""
        total = self.src.numel() + self.tgt_out.numel()
        return 1.0 - (self.n_src_tokens + self.n_tokens) / max(total, 1)

    def to(self, device: torch.device) -> Batch:
        """Copy to ``device``: two contiguous tensors, pinned and non-blocking on CUDA (so the
        host need not wait); the teacher-forcing views are taken on the device."""
        if device.type == "cpu":
            return self
        pin = device.type == "cuda"

        def move(t: Tensor) -> Tensor:
            return (t.pin_memory() if pin else t).to(device, non_blocking=pin)

        return Batch(move(self.src), move(self.tgt), self.n_tokens, self.n_src_tokens)


def collate(pairs: ParallelData, rows: Sequence[int] | np.ndarray,
            tag: int | None = None) -> Batch:
    """The batch of pairs ``rows`` of one corpus: sources ``[tag] x1 ... <eos>`` and targets
    ``<bos> y1 ... <eos>``, padded with ``<pad>``, gathered from the memory-mapped ids in one go
    (the same as :meth:`Batch.from_ids` on each pair's ``source`` and ``target``: tested)."""
    rows = np.asarray(rows, dtype=np.int64)
    n = pairs.lengths[rows].astype(np.int64) - 1  # (B, 2) tokens without <eos>
    lines = pairs.index[rows].astype(np.int64)  # line numbers in the corpus
    src = _padded(pairs.src, pairs.src_lookup, lines, n[:, 0],
                  () if tag is None else (tag,))  # (B, S)
    tgt = _padded(pairs.tgt, pairs.tgt_lookup, lines, n[:, 1], (BOS_ID,))  # (B, T + 1)
    n_src, n_tgt = (n + np.array([1 + (tag is not None), 1])).sum(axis=0).tolist()
    return Batch(torch.from_numpy(src), torch.from_numpy(tgt), n_tgt, n_src)


def _padded(side: EncodedSide, lookup: np.ndarray, rows: np.ndarray, n: np.ndarray,
            lead: tuple[int, ...]) -> np.ndarray:
    """``(B, len(lead) + max(n) + 1)`` int64: the ``lead`` ids, each row's ``n`` ids (as
    vocabulary ids), ``<eos>``, then ``<pad>``."""
    b, first_col = len(rows), len(lead)
    out = np.full((b, first_col + int(n.max(initial=0)) + 1), PAD_ID, dtype=np.int64)
    first = np.cumsum(n) - n  # where each row's ids start in the gathered run
    column = np.arange(int(n.sum())) - np.repeat(first, n)  # (total,) position in its row
    ids = side.take(np.repeat(side.starts(rows), n) + column)  # (total,) type ids
    out[np.repeat(np.arange(b), n), column + first_col] = lookup[ids]
    out[np.arange(b), n + first_col] = EOS_ID
    if lead:
        out[:, :first_col] = lead
    return out
