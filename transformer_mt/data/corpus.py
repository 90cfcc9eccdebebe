"""Parallel corpora as files: a Multi30k split, two line-parallel text files, one TSV file, a
translation memory (TMX: ``data/tmx.py``), or a store of suggestions (``data/suggestions.py``).

A :class:`Corpus` reads one side at a time as a stream of lines, so a corpus larger than
memory is never held whole. Everything a user can get wrong is found here and named in one
line: a missing, unreadable or empty file, a line that is not UTF-8 (its number), sides of
different lengths (both counts), a TSV line without exactly two columns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gzip
import hashlib
import itertools
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from transformer_mt.config.data import CorpusConfig, with_numbers
from transformer_mt.data import multi30k, numbers, tmx
from transformer_mt.data.suggestions import suggested_pairs
from transformer_mt.errors import DataError, MTError
from transformer_mt.fileio import STD_STREAM, not_a_file, open_input, sha256_of, text_lines

Side = Literal["src", "tgt"]


@functools.lru_cache(maxsize=64)
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    return sha256_of(path)


def file_sha256(path: Path) -> str:
    """The file's SHA-256, computed once per process for an unchanged file."""
    st = path.stat()
    return _sha256(path.resolve(), st.st_size, st.st_mtime_ns)


def read_lines(path: Path, ends: Counter[str] | None = None) -> Iterator[str]:
    """The lines of a UTF-8 text file, plain or gzipped, without line ends (counted in
    ``ends``, given) and BOM; ``-`` is standard input, and a pipe is read too
    (:func:`~transformer_mt.fileio.open_input`)."""
    name = "standard input" if str(path) == STD_STREAM else f"'{path}'"
    try:
        with open_input(path) as f:
            gzipped = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            with gzip.GzipFile(fileobj=f) if gzipped else contextlib.nullcontext(f) as lines:
                yield from text_lines(lines, name, ends)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"cannot read {name}: {exc}") from exc


@dataclass(frozen=True)
class Corpus:
    """A parallel corpus on disk, from its config entry (``key`` names it in errors)."""

    key: str  # e.g. data.train
    paths: tuple[Path, ...]  # (src, tgt) files, or (tsv,), (tmx,) or (suggestions store,)
    multi30k: str | None = None
    languages: tuple[str, str] | None = None  # a suggestions store's: the pairs read from it
    tmx: tuple[str, str] | None = None  # a translation memory's: the languages read from it
    numbers: int = 0  # variants of each pair with numbers, after it (data/numbers.py)

    @classmethod
    def from_config(cls, corpus: CorpusConfig, key: str, src_lang: str, tgt_lang: str,
                    data_dir: str | None = None) -> Corpus:
        """Resolve the files and check that they exist and are not empty (Multi30k's are
        located, and downloaded if need be)."""
        if corpus.numbers:
            plain = dataclasses.replace(corpus, numbers=0)
            found = cls.from_config(plain, key, src_lang, tgt_lang, data_dir)
            return dataclasses.replace(found, numbers=corpus.numbers)
        if corpus.multi30k is not None:
            names = (f"{corpus.multi30k}.{src_lang}.gz", f"{corpus.multi30k}.{tgt_lang}.gz")
            return cls(key, tuple(multi30k.locate(n, data_dir) for n in names), corpus.multi30k)
        name = next((n for n in ("tsv", "tmx", "suggestions") if getattr(corpus, n) is not None),
                    None)
        if name is not None:
            paths: tuple[Path, ...] = (Path(str(getattr(corpus, name))).expanduser(),)
            keys = [f"{key}.{name}"]
        else:
            paths = (Path(str(corpus.src)).expanduser(), Path(str(corpus.tgt)).expanduser())
            keys = [f"{key}.src", f"{key}.tgt"]
        for path, name in zip(paths, keys, strict=True):
            what = not_a_file(path)
            if what:
                raise DataError(f"{name}: '{path}' {what}; give the path of a text file "
                                "(relative paths start from the working directory)")
            try:
                with open(path, "rb") as f:
                    empty = not f.read(1)
            except OSError as exc:
                raise DataError(f"{name}: cannot read '{path}': {exc.strerror or exc}") from exc
            if empty:
                raise DataError(f"{name}: '{path}' is empty; a corpus needs sentence pairs")
        if corpus.suggestions is not None:
            found = cls(key, paths, languages=(src_lang, tgt_lang))
            found.pairs()  # a store without the pair's suggestions: refused now
            return found
        return cls(key, paths, tmx=(src_lang, tgt_lang) if corpus.tmx is not None else None)

    def pairs(self) -> list[tuple[str, str]]:
        """A suggestions store's pairs (read again each time: the server adds to it)."""
        assert self.languages is not None
        return suggested_pairs(self.paths[0], *self.languages, self.key)

    @property
    def two_files(self) -> bool:
        """Whether its sides are two files of their own (whose lengths may differ)."""
        return len(self.paths) == 2 and self.multi30k is None

    def fingerprint(self, side: Side) -> str:
        """What identifies one side's text: its file's SHA-256 (and the column of a TSV; and
        the variants with numbers)."""
        if self.numbers:
            plain = dataclasses.replace(self, numbers=0).fingerprint(side)
            return f"{plain}:numbers={self.numbers}.{numbers.VERSION}"
        if self.multi30k is not None:
            return multi30k.SHA256[self.paths[0 if side == "src" else 1].name]
        if self.languages is not None:  # the pairs themselves: the file's bytes lag a write
            text = "\n".join(p[0 if side == "src" else 1] for p in self.pairs())
            return "suggestions:" + hashlib.sha256(text.encode()).hexdigest()
        if self.tmx is not None:
            return f"{file_sha256(self.paths[0])}:tmx{tmx.VERSION}:{'-'.join(self.tmx)}:{side}"
        if len(self.paths) == 1:  # a TSV file's column
            return f"{file_sha256(self.paths[0])}:{side}"
        return file_sha256(self.paths[0 if side == "src" else 1])

    def lines(self, side: Side) -> Iterator[str]:
        """One side's sentences, line by line; with ``numbers``, each pair's variants after it
        (:func:`~transformer_mt.data.numbers.number_variants`)."""
        if not self.numbers:
            yield from self._side(side)
            return
        column = 0 if side == "src" else 1
        for n, (src, tgt) in enumerate(itertools.zip_longest(self._side("src"),
                                                             self._side("tgt"))):
            if src is None or tgt is None:  # sides of different lengths: said so (raises)
                self.check_parallel(*(sum(1 for _ in self._side(s)) for s in ("src", "tgt")))
                return
            yield (src, tgt)[column]
            for variant in numbers.number_variants(src, tgt, self.numbers, seed=n):
                yield variant[column]

    def _side(self, side: Side) -> Iterator[str]:
        """One side's sentences as the corpus has them."""
        if self.languages is not None:
            yield from (p[0 if side == "src" else 1] for p in self.pairs())
            return
        column = 0 if side == "src" else 1
        if self.tmx is not None:
            pairs = tmx.tmx_pairs(self.paths[0], *self.tmx, f"{self.key}.tmx")
            yield from (p[column] for p in pairs)
            return
        if len(self.paths) == 2:
            yield from self._read(self.paths[column], f"{self.key}.{side}")
            return
        for n, line in enumerate(self._read(self.paths[0], f"{self.key}.tsv"), start=1):
            fields = line.split("\t")
            if len(fields) != 2:
                raise DataError(f"{self.key}: '{self.paths[0]}' line {n} has {len(fields)} "
                                "tab-separated columns; a TSV corpus needs exactly two "
                                "(source<TAB>target)")
            yield fields[column]

    @staticmethod
    def _read(path: Path, key: str) -> Iterator[str]:
        """The file's lines (:func:`read_lines`), what is wrong with them named with the
        config's key ("data.train.tsv: 'train.tsv', line 301: not valid UTF-8 ...")."""
        try:
            yield from read_lines(path)
        except MTError as exc:
            raise DataError(f"{key}: {exc}") from exc

    def check_parallel(self, n_src: int, n_tgt: int) -> None:
        """Refuse sides of different lengths, or a corpus without a line."""
        if n_src != n_tgt:
            raise DataError(f"{self.key}: '{self.paths[0]}' has {n_src:,} lines but "
                            f"'{self.paths[1]}' has {n_tgt:,}; the two sides must be parallel "
                            "line by line")
        if n_src == 0:
            raise DataError(f"{self.key}: '{self.paths[0]}' holds no sentence pairs")

    def describe(self) -> str:
        if self.numbers:
            return with_numbers(dataclasses.replace(self, numbers=0).describe(), self.numbers)
        if self.multi30k is not None:
            return f"Multi30k {self.multi30k}"
        if self.languages is not None:
            return f"suggestions in {self.paths[0]}"
        if self.tmx is not None:
            return f"{self.paths[0]} (its {self.tmx[0]} and {self.tmx[1]} segments)"
        return " + ".join(str(p) for p in self.paths)
