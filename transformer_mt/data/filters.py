"""Cleaning the training pairs (``data.filter``): which pairs each filter removes.

Every filter reads facts the token-id cache keeps per line (token counts, characters, a hash
of the text, control characters: ``data/id_cache.py``), never the text itself, so filtering a
corpus of millions of pairs takes a few vectorised passes over arrays. The filters run in a
fixed order and a pair is counted against the first one that removes it, so the counts add up
to what was removed:

    empty      a side without tokens (empty, or whitespace only)     data.filter.drop_empty
    too_long   a side longer than data.max_len tokens (always on)   data.max_len
    chars      a side longer than data.filter.max_chars characters
    ratio      longer side / shorter side above data.filter.max_ratio (in tokens)
    control    a side with control characters                       data.filter.drop_control
    language   a side in another language (py3langid)               data.filter.language
    copy       the source is the target                             data.filter.drop_copies
    duplicate  a pair seen before (the first is kept)               data.filter.dedup
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from transformer_mt.config.data import FilterConfig
from transformer_mt.data.id_cache import EncodedSide

ORDER = ("empty", "too_long", "chars", "ratio", "control", "language", "copy", "duplicate")


def keep_pairs(src: EncodedSide, tgt: EncodedSide, lengths: np.ndarray, max_len: int | None,
               rules: FilterConfig | None, wrong_language: np.ndarray | None = None
               ) -> tuple[np.ndarray, dict[str, int]]:
    """The pairs (of the first ``len(lengths)``) that pass, as sorted int32 line numbers, and
    how many each filter removed. ``lengths``: (n, 2) tokens per side; ``wrong_language``:
    (n,) bool, a side in another language (``data/language_id.py``; needed by that filter)."""
    n = len(lengths)
    keep = np.ones(n, dtype=bool)
    removed: dict[str, int] = {}

    def drop(name: str, bad: np.ndarray | np.bool_) -> None:
        hit = bad & keep
        removed[name] = int(hit.sum())
        keep[hit] = False

    rules = rules or FilterConfig()
    if rules.drop_empty:
        drop("empty", (lengths == 0).any(axis=1))
    if max_len is not None:
        drop("too_long", (lengths > max_len).any(axis=1))
    if rules.max_chars is not None:
        drop("chars", (_facts(src, "chars", n) > rules.max_chars)
             | (_facts(tgt, "chars", n) > rules.max_chars))
    if rules.max_ratio is not None:
        longer = lengths.max(axis=1).astype(np.float64)
        shorter = np.maximum(lengths.min(axis=1), 1)
        drop("ratio", longer / shorter > rules.max_ratio)
    if rules.drop_control:
        drop("control", _facts(src, "control", n) | _facts(tgt, "control", n))
    if rules.language:
        if wrong_language is None:
            raise ValueError("data.filter.language needs each line's language")
        drop("language", np.asarray(wrong_language[:n]))
    if rules.drop_copies or rules.dedup:
        _drop_repeats(_facts(src, "hashes", n), _facts(tgt, "hashes", n), rules, keep, drop)
    return np.flatnonzero(keep).astype(np.int32), {k: removed[k] for k in ORDER
                                                    if k in removed}


def _drop_repeats(src_hash: np.ndarray, tgt_hash: np.ndarray, rules: FilterConfig,
                  keep: np.ndarray, drop: Callable[[str, np.ndarray], None]) -> None:
    """The filters on the lines' hashes: a target that copies its source, and (among the
    pairs still kept) a pair seen before."""
    if rules.drop_copies:
        drop("copy", src_hash == tgt_hash)
    if rules.dedup:
        pairs = np.stack([src_hash, tgt_hash], axis=1)  # (n, 2) uint64
        candidates = np.flatnonzero(keep)
        _, first = np.unique(pairs[candidates], axis=0, return_index=True)
        duplicate = np.ones(len(keep), dtype=bool)
        duplicate[candidates[first]] = False
        drop("duplicate", duplicate)


def _facts(side: EncodedSide, name: str, n: int) -> np.ndarray:
    values = getattr(side, name)
    if values is None:  # a cache entry written before the facts existed is rebuilt instead
        raise ValueError(f"the data cache entry has no '{name}'")
    return np.asarray(values[:n])


def describe_removed(removed: dict[str, int]) -> str:
    """``"3 empty, 12 too_long"`` (only the filters that removed something), or ``"none"``."""
    parts = [f"{count:,} {name}" for name, count in removed.items() if count]
    return ", ".join(parts) or "none"
