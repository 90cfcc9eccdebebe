"""Corrections users sent (LibreTranslate's ``/suggest``), kept in SQLite in LibreTranslate's
own table (``suggestions``: q, s, source, target), so that either server's store reads as a
training corpus (``data.train: [{suggestions: FILE}]``) and a model is fine-tuned on what its
users corrected."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from transformer_mt.errors import DataError

TABLE = """CREATE TABLE IF NOT EXISTS suggestions (
    "q" TEXT NOT NULL, "s" TEXT NOT NULL, "source" TEXT NOT NULL, "target" TEXT NOT NULL)"""


class SuggestionStore:
    """A store the server writes: each suggestion committed before it answers."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._db.execute(TABLE)
            self._db.commit()
        except sqlite3.Error as exc:
            raise DataError(f"--suggestions '{path}': cannot keep suggestions there "
                            f"({exc}); give a new or existing SQLite file") from None

    def add(self, q: str, s: str, source: str, target: str) -> None:
        with self._lock, self._db:  # one transaction: committed, or not written at all
            self._db.execute("INSERT INTO suggestions (q, s, source, target) VALUES (?, ?, ?, ?)",
                             (q, s, source, target))

    def close(self) -> None:
        self._db.close()


def suggested_pairs(path: Path, source: str, target: str, key: str) -> list[tuple[str, str]]:
    """The (source text, suggested translation) pairs of ``path`` from ``source`` to
    ``target``, in the order they came; a file that is not such a store is named in one line."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT q, s FROM suggestions WHERE source = ? AND target = ? "
                              "ORDER BY rowid", (source, target)).fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise DataError(f"{key}.suggestions: '{path}' is not a store of suggestions ({exc}); "
                        "give the file of mt serve --suggestions (or LibreTranslate's "
                        "db/suggestions.db)") from None
    if not rows:
        raise DataError(f"{key}.suggestions: '{path}' holds no suggestion from {source} to "
                        f"{target} yet")
    return [(" ".join(q.split()), " ".join(s.split())) for q, s in rows]
