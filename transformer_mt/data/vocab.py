"""A word vocabulary: tokens to ids and back, with four specials at fixed ids."""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from transformer_mt.errors import DataError
from transformer_mt.fileio import atomic_write_text

UNK, PAD, BOS, EOS = "<unk>", "<pad>", "<bos>", "<eos>"
SPECIALS = (UNK, PAD, BOS, EOS)
UNK_ID, PAD_ID, BOS_ID, EOS_ID = range(4)


class Vocab:
    """Maps tokens to ids. Ids 0-3 are ``<unk> <pad> <bos> <eos>``; unknown tokens map to 0."""

    def __init__(self, tokens: Sequence[str]) -> None:
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise DataError(f"a vocabulary must start with the specials {SPECIALS}")
        # Fresh copies of the strings: tokens of a just-read corpus lie scattered among millions
        # of others, and keeping a few thousand of those alive would pin ~40 MB of freed memory.
        self.itos: list[str] = [t.encode().decode() for t in tokens]
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise DataError("a vocabulary must not list a token twice")

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 2,
              max_size: int | None = None) -> Vocab:
        """Count tokens; keep those seen ``min_freq`` times, most frequent first (ties by text)."""
        return cls.from_counts(Counter(tok for sent in sentences for tok in sent), min_freq,
                               max_size)

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_freq: int = 2,
                    max_size: int | None = None, reserved: Sequence[str] = ()) -> Vocab:
        """The tokens counted ``min_freq`` times or more, most frequent first (ties by text),
        after the specials and the ``reserved`` tokens (corpus tags), which are always in."""
        first = [*SPECIALS, *reserved]
        kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in first),
                      key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[: max(0, max_size - len(first))]
        return cls([*first, *kept])

    def __len__(self) -> int:
        return len(self.itos)

    @functools.cached_property
    def letters(self) -> frozenset[str]:
        """The letters its tokens are written with."""
        return frozenset(c for t in self.itos for c in t if c.isalpha())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def encode(self, tokens: Sequence[str], bos: bool = False, eos: bool = True) -> list[int]:
        ids = [self.stoi.get(t, UNK_ID) for t in tokens]
        return ([BOS_ID] if bos else []) + ids + ([EOS_ID] if eos else [])

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Ids to tokens, stopping at ``<eos>`` and skipping ``<bos>``/``<pad>``."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i in (BOS_ID, PAD_ID):
                continue
            out.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return out

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps(self.itos, ensure_ascii=False, indent=0) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        try:
            tokens = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"cannot read vocabulary '{path}': {exc}") from exc
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise DataError(f"vocabulary '{path}' must be a JSON list of strings")
        return cls(tokens)
