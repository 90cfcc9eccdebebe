"""From raw Multi30k to batches: the corpus as ids, and token-budget batches with length bucketing.

The order of batches in an epoch is a pure function of ``(seed, epoch)``. That makes resumption
exact (a run stores only ``epoch`` and the index of the next step) and lets every distributed rank
build the same plan and take its own share without talking to the others.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer_mt.config import DataConfig
from transformer_mt.data.batch import Batch
from transformer_mt.data.multi30k import load_split
from transformer_mt.data.tokenize import tokenize_cached
from transformer_mt.data.vocab import Vocab

log = logging.getLogger(__name__)


@dataclass
class ParallelData:
    """A split as token lists and id tensors (source ends in ``<eos>``, target has both ends)."""

    src_tokens: list[list[str]]
    tgt_tokens: list[list[str]]
    src_raw: list[str]
    tgt_raw: list[str]
    src_ids: list[Tensor]
    tgt_ids: list[Tensor]
    n_dropped: int = 0  # pairs removed for being longer than data.max_len

    def __len__(self) -> int:
        return len(self.src_ids)

    @property
    def lengths(self) -> list[tuple[int, int]]:
        return [(len(s), len(t) - 1) for s, t in zip(self.src_ids, self.tgt_ids)]


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
        src_tokens=[list(src_tok[i]) for i in keep],
        tgt_tokens=[list(tgt_tok[i]) for i in keep],
        src_raw=[src_raw[i] for i in keep],
        tgt_raw=[tgt_raw[i] for i in keep],
        src_ids=[torch.tensor(src_vocab.encode(src_tok[i]), dtype=torch.long) for i in keep],
        tgt_ids=[torch.tensor(tgt_vocab.encode(tgt_tok[i], bos=True), dtype=torch.long)
                 for i in keep],
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
                world_size: int = 1) -> list[list[list[int]]]:
    """The optimizer steps of one epoch: each step is ``world_size`` batches, one per rank.

    Every batch of the epoch is used exactly once. When the last step has fewer batches than
    ranks, the missing ones are empty lists: that rank contributes no loss for the step.
    """
    batches = make_batches(lengths, max_tokens, seed, epoch)
    steps = []
    for start in range(0, len(batches), world_size):
        group = batches[start:start + world_size]
        steps.append(group + [[] for _ in range(world_size - len(group))])
    return steps


def collate(data: ParallelData, indices: Sequence[int]) -> Batch:
    return Batch.from_ids([data.src_ids[i] for i in indices], [data.tgt_ids[i] for i in indices])


def iterate_batches(data: ParallelData, max_tokens: int) -> Iterator[tuple[list[int], Batch]]:
    """Batches in length order without shuffling (for validation), with their example indices."""
    for indices in make_batches(data.lengths, max_tokens, seed=0, epoch=0, shuffle=False):
        yield indices, collate(data, indices)
