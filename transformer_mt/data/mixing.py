"""Mixing the training corpora into epochs: weights, tags and sampled segmentations.

A :class:`TrainingSet` holds each training corpus (``data.train``: one, or a list) as pairs of
ids, once per segmentation (one; or ``data.sampling.copies`` sampled ones, for subword
regularization). :meth:`TrainingSet.epoch` lays out one epoch's examples as a pure function of
``(seed, epoch)``, like the batch plan built from it: exact resume and every distributed rank's
share stay what they were. Each corpus contributes

- the segmentation ``epoch % copies``;
- each of its pairs ``weight`` times: ``int(weight)`` times over, plus, for the fraction, a
  seeded draw without replacement that changes every epoch (0.5 = a different half);
- its ``tag`` token in front of every source (``<bt>`` for back-translations).

One corpus of weight 1 without tag or sampling is laid out as itself, so such a run trains
exactly as it did before mixing existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from transformer_mt.data.batch import Batch
from transformer_mt.data.id_cache import EncodedSide
from transformer_mt.data.pairs import ParallelData
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID


@dataclass
class TrainingCorpus:
    """One training corpus: its pairs once per segmentation, its weight and tag."""

    name: str  # what the logs call it
    copies: list[ParallelData]  # one per segmentation (the first is what reports count)
    weight: float = 1.0
    tag: str | None = None  # the token put before each source
    tag_id: int | None = None  # its vocabulary id

    @property
    def pairs(self) -> ParallelData:
        return self.copies[0]

    def draw(self, seed: int, epoch: int, k: int) -> tuple[ParallelData, np.ndarray]:
        """This epoch's segmentation and which of its pairs it contributes (``(m,)`` int64)."""
        data = self.copies[epoch % len(self.copies)]
        n = len(data)
        whole, part = divmod(self.weight, 1.0)
        rows = np.tile(np.arange(n, dtype=np.int64), int(whole))
        extra = round(part * n)
        if extra:
            rng = np.random.default_rng([seed, epoch, k])
            rows = np.concatenate([rows, np.sort(rng.choice(n, extra, replace=False))])
        return data, rows


@dataclass
class EpochData:
    """One epoch's examples: example ``i`` is pair ``rows[i]`` of corpus ``part[i]`` (in that
    corpus's segmentation ``parts[part[i]]``), ``lengths[i]`` its source (tag included) and
    target tokens, each with ``<eos>``."""

    parts: list[ParallelData]
    tags: list[int | None]
    part: np.ndarray  # (n,) int16
    rows: np.ndarray  # (n,) int64
    lengths: np.ndarray  # (n, 2) int32

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class TrainingSet:
    """The training corpora (see the module docstring)."""

    corpora: list[TrainingCorpus]

    def __len__(self) -> int:
        """Training pairs (of the first segmentation), each corpus counted once."""
        return sum(len(c.pairs) for c in self.corpora)

    @property
    def removed(self) -> dict[str, int]:
        """Pairs each filter removed, all corpora together."""
        total: dict[str, int] = {}
        for c in self.corpora:
            for name, count in c.pairs.removed.items():
                total[name] = total.get(name, 0) + count
        return total

    def summary(self) -> dict[str, Any]:
        """Pairs and pairs removed, all together and per corpus (checkpoints carry it)."""
        return {"pairs": len(self), "removed": self.removed,
                "corpora": [{"name": c.name, "pairs": len(c.pairs), "removed": c.pairs.removed,
                             "weight": c.weight, "tag": c.tag} for c in self.corpora]}

    def epoch(self, seed: int, epoch: int) -> EpochData | ParallelData:
        """Epoch ``epoch``'s examples: the corpus itself when there is nothing to mix."""
        if len(self.corpora) == 1:
            c = self.corpora[0]
            if len(c.copies) == 1 and c.weight == 1.0 and c.tag_id is None:
                return c.pairs
        parts, tags, part, rows, lengths = [], [], [], [], []
        for k, c in enumerate(self.corpora):
            data, chosen = c.draw(seed, epoch, k)
            parts.append(data)
            tags.append(c.tag_id)
            part.append(np.full(len(chosen), k, dtype=np.int16))
            rows.append(chosen)
            lengths.append(data.lengths[chosen] + np.array([c.tag_id is not None, 0],
                                                           dtype=np.int32))
        return EpochData(parts, tags, np.concatenate(part), np.concatenate(rows),
                         np.concatenate(lengths).astype(np.int32))


def collate(data: ParallelData | EpochData, indices: Sequence[int] | np.ndarray) -> Batch:
    """The batch of examples ``indices``: sources (``[tag] ... <eos>``) and targets (``<bos>
    ... <eos>``) padded with ``<pad>``, gathered from the memory-mapped ids."""
    indices = np.asarray(indices, dtype=np.int64)
    if isinstance(data, ParallelData):
        groups = [(data, None, indices, np.arange(len(indices)))]
    else:
        groups = []
        part = data.part[indices]
        for k in np.unique(part).tolist():
            at = np.flatnonzero(part == k)
            groups.append((data.parts[k], data.tags[k], data.rows[indices[at]], at))
    lengths = np.zeros((len(indices), 2), dtype=np.int64)
    pieces = []
    for pairs, tag, rows, at in groups:
        n = pairs.lengths[rows].astype(np.int64) - 1  # (b, 2) tokens without <eos>
        lines = pairs.index[rows].astype(np.int64)  # line numbers in the corpus
        src = _padded(pairs.src, pairs.src_lookup, lines, n[:, 0], () if tag is None
                         else (tag,))  # (b, S)
        tgt = _padded(pairs.tgt, pairs.tgt_lookup, lines, n[:, 1], (BOS_ID,))  # (b, T + 1)
        lengths[at] = n + np.array([1 + (tag is not None), 1])
        pieces.append((at, src, tgt))
    if len(pieces) == 1:
        src, tgt = pieces[0][1], pieces[0][2]
    else:
        src = np.full((len(indices), max(p[1].shape[1] for p in pieces)), PAD_ID, np.int64)
        tgt = np.full((len(indices), max(p[2].shape[1] for p in pieces)), PAD_ID, np.int64)
        for at, s, t in pieces:
            src[at, :s.shape[1]] = s
            tgt[at, :t.shape[1]] = t
    n_src, n_tgt = lengths.sum(axis=0).tolist()
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
