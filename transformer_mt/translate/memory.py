"""A translation memory: sentences translated before, their translations used as they are.

``mt translate --memory tm.tmx``, ``mt serve --memory``, ``Translator.with_settings(cfg,
memory=Memory.read(path, languages))``: a sentence of the input that the memory holds (the
same text but for its spacing and Unicode's composed form; case counts) is not decoded, its
translation is the memory's (a translation tool's "100 % match": a translator's approved
translation, a correction made once); the others are the model's. A sentence is one as the
input is split into sentences (a line's, a paragraph's, a subtitle's, a page's, a document's:
``documents.py``), never cut into parts for the model, its quotes and marks read with it; its
inline markup goes into the memory's translation as into the model's (the model's attention on
that translation: ``inline.py``). A text whole (a line of several sentences, a memory's unit of
two) is held too. The memory's translations are what a text gets as its one translation; an
n-best list, attention weights and a prefix are the model's own.

The file: a translation memory (``.tmx``, ``.tmx.gz``: ``data/tmx.py``), read in the model's
languages, or a TSV file of ``source<TAB>translation`` lines (blank and ``#`` lines skipped).
A source given twice: its last translation.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from transformer_mt.data.tmx import is_tmx, tmx_pairs
from transformer_mt.errors import MTError
from transformer_mt.translate.documents import Document
from transformer_mt.translate.user_files import tsv_rows


def key(sentence: str) -> str:
    """What a sentence is looked up by: NFC, its runs of spaces one space, no space around."""
    return " ".join(unicodedata.normalize("NFC", sentence).split())


@dataclass(frozen=True)
class Memory:
    """Source sentences (as :func:`key` writes them) and their translations."""

    translations: Mapping[str, str]

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]]) -> Memory:
        """The memory of (source, translation) pairs; a pair with either side empty left out."""
        return cls({key(s): t.strip() for s, t in pairs if key(s) and t.strip()})

    def get(self, sentence: str) -> str | None:
        """The translation the memory holds of ``sentence``, or None."""
        return self.translations.get(key(sentence))

    def holds(self, sentence: str) -> bool:
        """Whether the memory holds a translation of ``sentence``."""
        return self.get(sentence) is not None

    def __len__(self) -> int:
        return len(self.translations)

    @classmethod
    def read(cls, path: str | Path, languages: tuple[str, str]) -> Memory:
        """The memory in ``path``: a TMX file's units in ``languages`` (source, target), or a
        TSV file's lines; a one-line error where it does not read or holds no pair."""
        if is_tmx(path):
            return cls.of(tmx_pairs(Path(path), *languages, "--memory",
                                    named="the model's languages are the two read"))
        pairs = []
        for n, row in tsv_rows(path, "memory"):
            if len(row) != 2:
                raise MTError(f"{path}, line {n}: a memory's line is 'source<TAB>translation', "
                              f"not {len(row)} field(s)")
            pairs.append((row[0], row[1]))
        memory = cls.of(pairs)
        if not memory:
            raise MTError(f"the memory {path} holds no 'source<TAB>translation' line")
        return memory


def held_whole(text: str, memory: Memory | None) -> Document[str] | None:
    """A plain text that ``memory`` holds whole (a line of several sentences, a unit of two)
    as one sentence, its spacing around kept; else None (it is split into its sentences)."""
    if memory is None or memory.get(text) is None:
        return None
    start, end = len(text) - len(text.lstrip()), len(text.rstrip())
    return Document([text[start:end]], [[]],
                    lambda translations, links: text[:start] + translations[0] + text[end:])
