"""``mt serve --glossary``'s file, read again when it changes, so that a termbase edited while
the server runs holds from the next request on, in every worker, without a restart. A file
that no longer reads (a bad line, gone, half-written) leaves the terms read before in use,
said in the log and in /v1/info (``glossary.error``) until it reads again."""
from __future__ import annotations

import logging
import os
import stat
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from transformer_mt.errors import MTError
from transformer_mt.translate.glossary import Glossary
from transformer_mt.translate.tbx import glossary_languages

if TYPE_CHECKING:
    from transformer_mt.translate import Translator

log = logging.getLogger(__name__)
Signature = tuple[int, int, int]  # (modified ns, size, inode): a file written again, or replaced
_READING = threading.Lock()  # one re-read at a time (the event loop and the preparing thread)


def signature(path: str) -> Signature | None:
    """What tells the file apart from its previous versions, or None where it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


@dataclass
class GlossaryFile:
    """A glossary's file as last read (``seen``), and why its latest version was not used."""

    path: str
    seen: Signature | None
    error: str | None = None
    languages: tuple[str, str] = ("", "")  # a termbase's: the model's (Glossary.read)

    @classmethod
    def read(cls, path: str, checkpoint: str) -> tuple[Glossary, GlossaryFile | None]:
        """The glossary (a termbase's in ``checkpoint``'s languages), and the file to watch:
        None for what is not a regular file (a pipe, ``/dev/stdin``: read once)."""
        seen = signature(path)  # before the read: a change while it reads is read again
        languages = glossary_languages(path, checkpoint)
        glossary = Glossary.read(path, languages=languages)
        regular = stat.S_ISREG(os.stat(path).st_mode)
        return glossary, cls(path, seen, languages=languages) if regular else None

    def refresh(self, translator: Translator) -> None:
        """``translator.glossary`` read again from the file if it has changed since."""
        if signature(self.path) == self.seen:  # (a stat a request: ~2 us)
            return
        with _READING:
            now = signature(self.path)
            if now == self.seen:  # (read by another thread meanwhile)
                return
            self.seen = now
            before = len(translator.glossary.terms) if translator.glossary else 0
            try:
                glossary = Glossary.read(self.path, languages=self.languages)
            except MTError as exc:
                self.error = str(exc)
                log.error("%s; the %s read before stay in use", exc, counted(before))
                return
            translator.glossary, self.error = glossary, None
            log.info("read %s again: %s (before: %s)", self.path, counted(len(glossary.terms)),
                     f"{before:,}")


def counted(n: int) -> str:
    """``n`` terms, in words: '1 term', '2,417 terms'."""
    return f"{n:,} term{'s' * (n != 1)}"
