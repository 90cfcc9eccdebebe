"""Which files in a directory are ours: the one rule by which the tool replaces or deletes
files it did not just create.

A directory the tool writes as a whole (a run directory, an export) holds ``manifest.json``,
naming what kind of directory it is and every file the tool wrote there. Only files it lists,
and only regular files, are the tool's to replace or delete; anything else in the directory
(a ``config.yaml`` of the user's, a ``model.bin`` that is a folder) is the user's, and a
command that would replace it stops with a one-line error instead. A directory without a
manifest holds nothing of ours.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterable
from pathlib import Path

from transformer_mt.errors import MTError
from transformer_mt.fileio import atomic_write_text

NAME = "manifest.json"
FORMAT = "transformer_mt"


class Manifest:
    """The manifest of ``directory``, a directory of ``kind`` (``run``, ``ctranslate2``)."""

    def __init__(self, directory: str | Path, kind: str) -> None:
        self.directory, self.kind = Path(directory), kind
        self.path = self.directory / NAME

    def exists(self) -> bool:
        return self.path.is_file()

    def kind_found(self) -> str | None:
        """The kind the manifest in the directory names (None where there is none, or it
        cannot be read: :meth:`owned` says why)."""
        try:
            kind = json.loads(self.path.read_text(encoding="utf-8")).get("kind")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            return None
        return kind if isinstance(kind, str) else None

    def owned(self) -> set[str]:
        """The names of the files the tool wrote here (none without a manifest)."""
        if not self.path.exists():
            return set()
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data["format"] != FORMAT or not isinstance(data["files"], list):
                raise ValueError("not a manifest of transformer_mt")
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise MTError(f"'{self.path}' is not a manifest this tool wrote ({exc}); move it "
                          "away, or choose another directory") from exc
        if data.get("kind") != self.kind:
            raise MTError(f"'{self.directory}' holds a {data.get('kind')} directory of this "
                          f"tool, not a {self.kind} one; choose another directory")
        return {str(name) for name in data["files"]}

    def foreign(self, names: Iterable[str]) -> list[str]:
        """Those of ``names`` present in the directory that are not the tool's: not listed in
        the manifest, or not a regular file (a directory, a link, a FIFO) in its place."""
        owned = self.owned()
        found = []
        for name in names:
            if name == NAME:
                continue
            path = self.directory / name
            try:
                mode = path.lstat().st_mode
            except FileNotFoundError:
                continue
            if name not in owned or not stat.S_ISREG(mode):
                found.append(name)
        return found

    def record(self, names: Iterable[str]) -> None:
        """Add ``names`` to the files the tool wrote here (the manifest is written whole)."""
        listed = self.owned() if self.path.exists() else set()
        new = listed | set(names)
        if new == listed and self.path.exists():
            return
        atomic_write_text(self.path, json.dumps({"format": FORMAT, "kind": self.kind,
                                                 "files": sorted(new)}, indent=1) + "\n")
