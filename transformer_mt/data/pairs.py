"""Sentence pairs as ids: :class:`ParallelData`, one corpus's pairs (two encoded sides, the
pairs the length limits and filters kept, and each pair's lengths), made by :func:`pair_up`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from transformer_mt.config.data import FilterConfig
from transformer_mt.data.filters import keep_pairs
from transformer_mt.data.id_cache import EncodedSide
from transformer_mt.data.vocab import BOS_ID, EOS_ID, UNK_ID, Vocab


@dataclass
class ParallelData:
    """Sentence pairs as ids: the pairs ``index`` of two encoded sides, whose type ids the
    lookup tables map into the vocabularies. A source gets ``<eos>``, a target ``<bos>`` and
    ``<eos>``, when a batch is built. ``references`` holds the raw target lines (validation and
    test sets only: a training corpus is never held as text)."""

    src: EncodedSide
    tgt: EncodedSide
    src_lookup: np.ndarray  # (types,) int64: type id -> vocabulary id
    tgt_lookup: np.ndarray
    index: np.ndarray  # (n,) int32: the pairs kept, as line numbers of the corpus
    lengths: np.ndarray  # (n, 2) int32: source tokens + <eos>, target tokens + <eos> (the loss's)
    references: list[str] | None = None
    removed: dict[str, int] = field(default_factory=dict)  # pairs each filter removed

    @property
    def n_dropped(self) -> int:
        return sum(self.removed.values())

    def __len__(self) -> int:
        return len(self.index)

    def source(self, k: int) -> np.ndarray:
        """``(S,)`` int64 ids of pair ``k``'s source, ending in ``<eos>``."""
        ids = self.src_lookup[self.src.sentence(int(self.index[k]))]
        return np.append(ids, EOS_ID)

    def source_words(self, k: int) -> list[str]:
        """Pair ``k``'s source tokens as the tokenizer wrote them (a word ``<unk>`` copies)."""
        return [self.src.types[t] for t in self.src.sentence(int(self.index[k])).tolist()]

    def target(self, k: int) -> np.ndarray:
        """``(T + 2,)`` int64 ids of pair ``k``'s target: ``<bos> y1 ... yn <eos>``."""
        ids = self.tgt_lookup[self.tgt.sentence(int(self.index[k]))]
        return np.concatenate([[BOS_ID], ids, [EOS_ID]])


def lookup_table(types: Sequence[str], vocab: Vocab) -> np.ndarray:
    """``(len(types),)`` int64: each type's vocabulary id (``<unk>``'s where it has none)."""
    return np.array([vocab.stoi.get(t, UNK_ID) for t in types], dtype=np.int64)


def pair_up(src: EncodedSide, tgt: EncodedSide, src_vocab: Vocab, tgt_vocab: Vocab,
            max_len: int | None = None, max_pairs: int | None = None,
            references: Sequence[str] | None = None,
            rules: FilterConfig | None = None,
            wrong_language: np.ndarray | None = None) -> ParallelData:
    """The first ``max_pairs`` pairs, less those with a side longer than ``max_len`` tokens
    and those the filters ``rules`` remove (``data/filters.py``)."""
    n = len(src) if max_pairs is None else min(max_pairs, len(src))
    lengths = np.empty((n, 2), dtype=np.int32)  # 8 bytes a pair: all that planning needs
    lengths[:, 0] = src.lengths()[:n]
    lengths[:, 1] = tgt.lengths()[:n]
    index, removed = keep_pairs(src, tgt, lengths, max_len, rules, wrong_language)
    if len(index) < n:
        lengths = lengths[index]
    lengths += 1  # <eos> on either side (the target's <bos> is not predicted)
    refs = None
    if references is not None:
        refs = [references[i] for i in index.tolist()]
    return ParallelData(src, tgt, lookup_table(src.types, src_vocab),
                        lookup_table(tgt.types, tgt_vocab), index, lengths, refs, removed)
