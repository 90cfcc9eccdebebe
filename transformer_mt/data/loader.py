"""From raw Multi30k to batches: the corpus as ids, and token-budget batches with length bucketing.

The order of batches in an epoch is a pure function of ``(seed, epoch)``. That makes resumption
exact (a run stores only ``epoch`` and the index of the next step) and lets every distributed rank
build the same plan and take its own share without talking to the others.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import torch
from torch import Tensor

from transformer_mt.config import DataConfig
from transformer_mt.data.batch import Batch
from transformer_mt.data.multi30k import load_split
from transformer_mt.data.tokenize import tokenize_cached
from transformer_mt.data.vocab import Vocab

log = logging.getLogger(__name__)


class IdSequences(Sequence[Tensor]):
    """Many 1-D id sequences in one flat tensor: ``seqs[i]`` is a (length_i,) int64 view.

    A corpus of 29k pairs held as 58k small tensors costs ~30 MB of per-object overhead and
    scatters them over the heap; one flat tensor and its offsets cost what the ids do (3 MB).
    """

    def __init__(self, seqs: Iterable[Sequence[int]]) -> None:
        flat: list[int] = []
        offsets = [0]
        for seq in seqs:
            flat.extend(seq)
            offsets.append(len(flat))
        self.flat = torch.tensor(flat, dtype=torch.long)  # (total,)
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, i: int) -> Tensor: ...

    @overload
    def __getitem__(self, i: slice) -> list[Tensor]: ...

    def __getitem__(self, i: int | slice) -> Tensor | list[Tensor]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"sequence index {i} out of range")
        return self.flat[self.offsets[i]:self.offsets[i + 1]]

    def length(self, i: int) -> int:
        return self.offsets[i + 1] - self.offsets[i]


@dataclass
class ParallelData:
    """A split as id tensors (source ends in ``<eos>``, target has both ends) and raw text."""

    src_raw: list[str]
    tgt_raw: list[str]
    src_ids: IdSequences
    tgt_ids: IdSequences
    n_dropped: int = 0  # pairs removed for being longer than data.max_len

    def __len__(self) -> int:
        return len(self.src_ids)

    @property
    def lengths(self) -> list[tuple[int, int]]:
        return [(self.src_ids.length(i), self.tgt_ids.length(i) - 1) for i in range(len(self))]


def read_tokenized(cfg: DataConfig, split: str, max_pairs: int | None = None,
                   progress: bool = False) -> tuple[list[str], list[str], list[list[str]],
                                                     list[list[str]]]:
    """Raw and tokenized sentences of one split (first ``max_pairs`` pairs when given)."""
    src, tgt, sums = load_split(split, cfg.src_lang, cfg.tgt_lang, cfg.data_dir)
    src_tok = tokenize_cached(src, cfg.src_lang, sums[cfg.src_lang], cfg.lowercase, progress)
    tgt_tok = tokenize_cached(tgt, cfg.tgt_lang, sums[cfg.tgt_lang], cfg.lowercase, progress)
    if max_pairs is not None:
        src, tgt, src_tok, tgt_tok = src[:max_pairs], tgt[:max_pairs], src_tok[:max_pairs], \
            tgt_tok[:max_pairs]
    return src, tgt, src_tok, tgt_tok


def encode_pairs(src_tok: Sequence[Sequence[str]], tgt_tok: Sequence[Sequence[str]],
                 src_vocab: Vocab, tgt_vocab: Vocab, src_raw: Sequence[str] = (),
                 tgt_raw: Sequence[str] = (), max_len: int | None = None) -> ParallelData:
    """Turn token lists into id tensors, dropping pairs with a side longer than ``max_len``."""
    keep = [i for i, (s, t) in enumerate(zip(src_tok, tgt_tok))
            if max_len is None or (len(s) <= max_len and len(t) <= max_len)]
    src_raw = list(src_raw) or [" ".join(s) for s in src_tok]
    tgt_raw = list(tgt_raw) or [" ".join(t) for t in tgt_tok]
    return ParallelData(
        src_raw=[src_raw[i] for i in keep],
        tgt_raw=[tgt_raw[i] for i in keep],
        src_ids=IdSequences(src_vocab.encode(src_tok[i]) for i in keep),
        tgt_ids=IdSequences(tgt_vocab.encode(tgt_tok[i], bos=True) for i in keep),
        n_dropped=len(src_tok) - len(keep),
    )


def build_vocabs(cfg: DataConfig, src_tok: Sequence[Sequence[str]],
                 tgt_tok: Sequence[Sequence[str]]) -> tuple[Vocab, Vocab]:
    return (Vocab.build(src_tok, cfg.min_freq, cfg.max_vocab),
            Vocab.build(tgt_tok, cfg.min_freq, cfg.max_vocab))


def make_batches(lengths: Sequence[tuple[int, int]], max_tokens: int, seed: int, epoch: int,
                 shuffle: bool = True) -> list[list[int]]:
    """Group example indices into batches of at most ``max_tokens`` padded tokens.

    Examples are shuffled, then stably sorted by length, so each batch holds sentences of
    nearly equal length (little padding) and ties are broken differently every epoch. A batch
    costs ``n * max(longest source, longest target)`` tokens. The batch order is shuffled too.
    """
    n = len(lengths)
    gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(n, generator=gen).tolist() if shuffle else list(range(n))
    order.sort(key=lambda i: (lengths[i][1], lengths[i][0]))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        size = max(lengths[i])
        if current and (len(current) + 1) * max(longest, size) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        batches.append(current)
    if shuffle:
        perm = torch.randperm(len(batches), generator=gen).tolist()
        batches = [batches[i] for i in perm]
    return batches


def epoch_steps(lengths: Sequence[tuple[int, int]], max_tokens: int, seed: int, epoch: int,
                parts: int = 1) -> list[list[list[int]]]:
    """The optimizer steps of one epoch: each step is one batch of at most ``max_tokens``
    padded tokens, split into ``parts`` (ranks x accumulation steps) consecutive pieces.

    ``max_tokens`` is thus the budget of a whole optimizer step: 1 process or N ranks (or N
    accumulated pieces) take the same steps over the same examples, and the number of GPUs only
    decides how a step is shared. A batch of fewer examples than parts leaves some pieces empty:
    their rank contributes no loss for that step.
    """
    return [split_batch(batch, parts) for batch in make_batches(lengths, max_tokens, seed, epoch)]


def split_batch(batch: Sequence[int], parts: int) -> list[list[int]]:
    """``parts`` consecutive pieces of ``batch`` whose sizes differ by at most one."""
    size, extra = divmod(len(batch), parts)
    pieces, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        pieces.append(list(batch[start:end]))
        start = end
    return pieces


def collate(data: ParallelData, indices: Sequence[int]) -> Batch:
    return Batch.from_ids([data.src_ids[i] for i in indices], [data.tgt_ids[i] for i in indices])


def iterate_batches(data: ParallelData, max_tokens: int) -> Iterator[tuple[list[int], Batch]]:
    """Batches in length order without shuffling (for validation), with their example indices."""
    for indices in make_batches(data.lengths, max_tokens, seed=0, epoch=0, shuffle=False):
        yield indices, collate(data, indices)
