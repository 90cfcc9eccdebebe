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

One corpus of weight 1 without tag or sampling is laid out as itself (its pairs in order), so
such a run trains exactly as it did before mixing existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from transformer_mt.data.batch import Batch, collate
from transformer_mt.data.pairs import ParallelData
from transformer_mt.data.vocab import PAD_ID


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

    def batch(self, indices: Sequence[int] | np.ndarray) -> Batch:
        """The batch of examples ``indices``: each corpus's examples gathered by
        :func:`~transformer_mt.data.batch.collate`, then put back in the order asked."""
        indices = np.asarray(indices, dtype=np.int64)
        part = self.part[indices]
        groups = [(np.flatnonzero(part == k), k) for k in np.unique(part).tolist()]
        pieces = [collate(self.parts[k], self.rows[indices[at]], self.tags[k])
                  for at, k in groups]
        if len(pieces) == 1:
            return pieces[0]
        src = torch.full((len(indices), max(p.src.size(1) for p in pieces)), PAD_ID)
        tgt = torch.full((len(indices), max(p.tgt.size(1) for p in pieces)), PAD_ID)
        for (at, _), piece in zip(groups, pieces, strict=True):
            rows = torch.from_numpy(at)
            src[rows, :piece.src.size(1)] = piece.src
            tgt[rows, :piece.tgt.size(1)] = piece.tgt
        return Batch(src, tgt, sum(p.n_tokens for p in pieces),
                     sum(p.n_src_tokens for p in pieces))


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
        """Pairs and pairs removed, all together and per corpus, and how long the sources
        are in tokens (all but the longest thousandth of them, and the longest): checkpoints
        carry it."""
        sources = np.concatenate([c.pairs.lengths[:, 0] - 1 for c in self.corpora])
        lengths = {"99.9%": int(np.percentile(sources, 99.9, method="higher")),
                   "max": int(sources.max())} if len(sources) else {}
        return {"pairs": len(self), "removed": self.removed, "source_tokens": lengths,
                "corpora": [{"name": c.name, "pairs": len(c.pairs), "removed": c.pairs.removed,
                             "weight": c.weight, "tag": c.tag} for c in self.corpora]}

    def output_ratio(self, b: int) -> float:
        """The least ``a`` for which decoding's output limit, ``a * source tokens + b`` (the
        source's ``<eos>`` counted, the target's not: ``search.max_output_lengths``), holds
        the target of all but the longest thousandth of the training pairs (of the first
        segmentation; the one that needs most left out of a smaller corpus, a pair that
        slipped out of line in it)."""
        lengths = np.concatenate([c.pairs.lengths for c in self.corpora])  # (n, 2), <eos> in
        if not len(lengths):
            return 0.0
        needed = np.maximum(lengths[:, 1] - 1 - b, 0) / lengths[:, 0]  # (n,)
        return float(np.percentile(needed, 99.9, method="lower"))

    def epoch(self, seed: int, epoch: int) -> EpochData:
        """Epoch ``epoch``'s examples (a pure function of ``seed`` and ``epoch``)."""
        parts: list[ParallelData] = []
        tags: list[int | None] = []
        part, rows, lengths = [], [], []
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
