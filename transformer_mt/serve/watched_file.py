"""``mt serve --glossary``'s and ``--memory``'s files, read again when they change, so that a
termbase or a translation memory edited while the server runs holds from the next request on,
in every worker, without a restart. A file that no longer reads (a bad line, gone,
half-written) leaves what was read before in use, said in the log and in /v1/info
(``glossary.error``, ``memory.error``) until it reads again."""
from __future__ import annotations

import logging
import os
import stat
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from transformer_mt.errors import MTError
from transformer_mt.translate.glossary import Glossary
from transformer_mt.translate.memory import Memory

if TYPE_CHECKING:
    from transformer_mt.translate import Translator

log = logging.getLogger(__name__)
Signature = tuple[int, int, int]  # (modified ns, size, inode): a file written again, or replaced
Kind = Literal["glossary", "memory"]  # what the file is: the translator's attribute it sets
_READING = threading.Lock()  # one re-read at a time (the event loop and the preparing thread)


def signature(path: str) -> Signature | None:
    """What tells the file apart from its previous versions, or None where it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


@dataclass
class WatchedFile:
    """A glossary's or a memory's file as last read (``seen``), and why its latest version was
    not used."""

    kind: Kind
    path: str
    seen: Signature | None
    languages: tuple[str, str] = ("", "")  # the model's (a termbase's, a TMX file's)
    error: str | None = None

    @classmethod
    def read(cls, kind: Kind, path: str, languages: tuple[str, str]
             ) -> tuple[Glossary | Memory, WatchedFile | None]:
        """What the file holds, read in ``languages``, and the file to watch: None for what is
        not a regular file (a pipe, ``/dev/stdin``: read once)."""
        watched = cls(kind, path, signature(path), languages)  # (a change while it reads: read
        found = watched.load()  # again)
        return found, watched if stat.S_ISREG(os.stat(path).st_mode) else None

    def load(self) -> Glossary | Memory:
        """The file read, or a one-line error."""
        if self.kind == "glossary":
            return Glossary.read(self.path, languages=self.languages)
        return Memory.read(self.path, self.languages)

    def refresh(self, translator: Translator) -> None:
        """The translator's glossary or memory read again from the file if it has changed."""
        if signature(self.path) == self.seen:  # (a stat a request: ~2 us)
            return
        with _READING:
            now = signature(self.path)
            if now == self.seen:  # (read by another thread meanwhile)
                return
            self.seen = now
            before = counted(getattr(translator, self.kind), self.kind)
            try:
                found = self.load()
            except MTError as exc:
                self.error = str(exc)
                log.error("%s; the %s read before stay in use", exc, before)
                return
            setattr(translator, self.kind, found)
            self.error = None
            log.info("read %s again: %s (before: %s)", self.path, counted(found, self.kind), before)


def counted(found: Glossary | Memory | None, kind: Kind) -> str:
    """A glossary's terms or a memory's translations, in words: '1 term', '2,417 terms'."""
    n = len(found.terms) if isinstance(found, Glossary) else len(found or ())
    return f"{n:,} {'term' if kind == 'glossary' else 'translation'}{'s' * (n != 1)}"
