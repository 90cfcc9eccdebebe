"""Translated files kept for their download (``/translate_file``, ``/download_file``): in a
directory of the server's (one for all its workers), each under a random name, for
:data:`KEEP_S`. A name that is not one of them is not found, whatever it holds: no name reaches
outside the directory."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from transformer_mt.fileio import atomic_write_bytes

KEEP_S = 1800.0  # a translated file is kept this long for its download
NAME = re.compile(r"[0-9a-f]{32}\.[\w.-]{1,120}")


class FileStore:
    """Translated files for download, in ``directory`` (made, and removed at :meth:`close`,
    where none is given)."""

    def __init__(self, directory: str | None = None) -> None:
        self.own = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="mt-serve-files-"))

    def put(self, name: str, data: bytes) -> str:
        """Keep ``data`` as the translation of the file ``name``; returns its download name.
        Files older than :data:`KEEP_S` go first."""
        for old in self.directory.iterdir():
            if NAME.fullmatch(old.name) and time.time() - old.stat().st_mtime > KEEP_S:
                old.unlink(missing_ok=True)
        safe = re.sub(r"[^\w.-]", "_", Path(name).name)[-120:].lstrip(".") or "file"
        key = f"{uuid.uuid4().hex}.{safe}"
        atomic_write_bytes(self.directory / key, data)
        return key

    def get(self, key: str) -> bytes | None:
        """The file kept as ``key``, or None (an unknown or malformed name)."""
        path = self.directory / key
        if not NAME.fullmatch(key) or not path.is_file():
            return None
        return path.read_bytes()

    def close(self) -> None:
        if self.own:
            shutil.rmtree(self.directory, ignore_errors=True)
