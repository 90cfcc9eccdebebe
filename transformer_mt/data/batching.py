"""Token-budget batches with length bucketing, planned from the sentence lengths alone.

The order of batches in an epoch is a pure function of ``(seed, epoch)``. That makes resumption
exact (a run stores only ``epoch`` and the index of the next step) and lets every distributed
rank build the same plan and take its own share without talking to the others. :func:`collate`
then gathers a batch's ids from the memory-mapped corpus.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from transformer_mt.data.batch import Batch
from transformer_mt.data.id_cache import EncodedSide
from transformer_mt.data.prepare import ParallelData
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID


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


def collate(data: ParallelData, indices: Sequence[int] | np.ndarray) -> Batch:
    """The batch of examples ``indices``: sources (``... <eos>``) and targets (``<bos> ...
    <eos>``) padded with ``<pad>``, gathered from the memory-mapped ids in a few array
    operations, whatever the batch size."""
    indices = np.asarray(indices, dtype=np.int64)
    rows = data.index[indices].astype(np.int64)  # line numbers in the corpus
    lengths = data.lengths[indices].astype(np.int64)  # (B, 2), each with its <eos>
    src = _padded(data.src, data.src_lookup, rows, lengths[:, 0] - 1, lead=0)  # (B, S)
    tgt = _padded(data.tgt, data.tgt_lookup, rows, lengths[:, 1] - 1, lead=1)  # (B, T + 1)
    n_src, n_tgt = lengths.sum(axis=0).tolist()
    return Batch(torch.from_numpy(src), torch.from_numpy(tgt), n_tgt, n_src)


def _padded(side: EncodedSide, lookup: np.ndarray, rows: np.ndarray, n: np.ndarray,
            lead: int) -> np.ndarray:
    """``(B, lead + max(n) + 1)`` int64: ``lead`` x ``<bos>``, each row's ``n`` ids (as
    vocabulary ids), ``<eos>``, then ``<pad>``."""
    b = len(rows)
    out = np.full((b, lead + int(n.max(initial=0)) + 1), PAD_ID, dtype=np.int64)
    first = np.cumsum(n) - n  # where each row's ids start in the gathered run
    column = np.arange(int(n.sum())) - np.repeat(first, n)  # (total,) position in its row
    ids = side.take(np.repeat(side.starts(rows), n) + column)  # (total,) type ids
    out[np.repeat(np.arange(b), n), column + lead] = lookup[ids]
    out[np.arange(b), n + lead] = EOS_ID
    if lead:
        out[:, 0] = BOS_ID
    return out


def iterate_batches(data: ParallelData, max_tokens: int) -> Iterator[tuple[np.ndarray, Batch]]:
    """Batches in length order without shuffling (for validation), with their example indices."""
    for indices in make_batches(data.lengths, max_tokens, seed=0, epoch=0, shuffle=False):
        yield indices, collate(data, indices)
