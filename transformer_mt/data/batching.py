"""Token-budget batches with length bucketing, planned from the sentence lengths alone.

The order of batches in an epoch is a pure function of ``(seed, epoch)``. That makes resumption
exact (a run stores only ``epoch`` and the index of the next step) and lets every distributed
rank build the same plan and take its own share without talking to the others. ``collate``
(``data/batch.py``) then gathers a batch's ids from the memory-mapped corpora.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from transformer_mt.data.batch import Batch, collate
from transformer_mt.data.pairs import ParallelData


def make_batches(lengths: np.ndarray | Sequence[tuple[int, int]], max_tokens: int, seed: int,
                 epoch: int, shuffle: bool = True) -> list[np.ndarray]:
    """Group example indices into batches of at most ``max_tokens`` padded tokens.

    ``lengths`` is ``(n, 2)``: each example's source and target length. Examples are shuffled,
    then stably sorted by (target, source) length, so each batch holds sentences of nearly equal
    length (little padding) and ties are broken differently every epoch. A batch costs
    ``n * max(longest source, longest target)`` tokens. The batch order is shuffled too. Only
    arrays are built (no Python object per example), so millions of pairs plan in seconds.
    """
    lengths = np.asarray(lengths).reshape(-1, 2)
    n = len(lengths)
    gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = (torch.randperm(n, generator=gen).numpy() if shuffle
             else np.arange(n)).astype(np.int32)  # 4 bytes an example: corpora are large
    order = order[np.lexsort((lengths[order, 0], lengths[order, 1]))]  # stable
    sizes = lengths.max(axis=1)[order]
    starts: list[int] = []  # where each batch but the first begins in ``order``
    count = longest = 0
    chunk = 1 << 16
    for offset in range(0, n, chunk):  # as Python ints a chunk at a time: fast, little memory
        for j, size in enumerate(sizes[offset:offset + chunk].tolist(), start=offset):
            if count and (count + 1) * max(longest, size) > max_tokens:
                starts.append(j)
                count = longest = 0
            count += 1
            longest = max(longest, size)
    batches = np.split(order, starts) if n else []
    if shuffle:
        perm = torch.randperm(len(batches), generator=gen).tolist()
        batches = [batches[i] for i in perm]
    return batches


def epoch_steps(lengths: np.ndarray | Sequence[tuple[int, int]], max_tokens: int, seed: int,
                epoch: int, parts: int = 1) -> list[list[np.ndarray]]:
    """The optimizer steps of one epoch: each step is one batch of at most ``max_tokens``
    padded tokens, split into ``parts`` (ranks x accumulation steps) consecutive pieces.

    ``max_tokens`` is thus the budget of a whole optimizer step: 1 process or N ranks (or N
    accumulated pieces) take the same steps over the same examples, and the number of GPUs only
    decides how a step is shared. A batch of fewer examples than parts leaves some pieces empty:
    their rank contributes no loss for that step.
    """
    return [split_batch(batch, parts) for batch in make_batches(lengths, max_tokens, seed, epoch)]


def split_batch(batch: np.ndarray, parts: int) -> list[np.ndarray]:
    """``parts`` consecutive pieces of ``batch`` whose sizes differ by at most one."""
    size, extra = divmod(len(batch), parts)
    pieces, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        pieces.append(batch[start:end])
        start = end
    return pieces


def iterate_batches(data: ParallelData, max_tokens: int) -> Iterator[tuple[np.ndarray, Batch]]:
    """Batches in length order without shuffling (for validation), with their example indices."""
    for indices in make_batches(data.lengths, max_tokens, seed=0, epoch=0, shuffle=False):
        yield indices, collate(data, indices)
