"""Translated files kept for their download (``/translate_file``, ``/download_file``): in a
directory of the server's (one for all its workers), each under a random name, for
:data:`KEEP_S`. A name that is not one of them is not found, whatever it holds: no name reaches
outside the directory. The files past their time are removed by a look through the directory
at most every :data:`SWEEP_S` (each file kept is one more to look at), and are not found from
then on even where that look has not come yet."""

from __future__ import annotations

import re
import shutil
import time
import uuid
from pathlib import Path

from transformer_mt.fileio import atomic_write_bytes, own_folder

KEEP_S = 1800.0  # a translated file is kept this long for its download
SWEEP_S = 60.0  # the directory looked through for files past KEEP_S at most this often
NAME = re.compile(r"[0-9a-f]{32}\.[\w.-]{1,120}")


class FileStore:
    """Translated files for download, in ``directory`` (made, and removed at :meth:`close`,
    where none is given)."""

    def __init__(self, directory: str | None = None) -> None:
        self.own = directory is None
        self.directory = Path(directory) if directory else own_folder("mt-serve-files-")
        self.next_sweep = 0.0  # (time.monotonic()'s)

    def put(self, name: str, data: bytes) -> str:
        """Keep ``data`` as the translation of the file ``name``; returns its download name.
        Files older than :data:`KEEP_S` go first, where the last look for them is
        :data:`SWEEP_S` old."""
        if time.monotonic() >= self.next_sweep:
            self.next_sweep = time.monotonic() + SWEEP_S
            for old in self.directory.iterdir():
                if NAME.fullmatch(old.name):
                    _past(old)
        safe = re.sub(r"[^\w.-]", "_", Path(name).name)[-120:].lstrip(".") or "file"
        key = f"{uuid.uuid4().hex}.{safe}"
        atomic_write_bytes(self.directory / key, data)
        return key

    def get(self, key: str) -> bytes | None:
        """The file kept as ``key``, or None (an unknown or malformed name)."""
        path = self.directory / key
        if not NAME.fullmatch(key) or not path.is_file() or _past(path):
            return None
        try:
            return path.read_bytes()
        except FileNotFoundError:  # (removed by another worker's look just now)
            return None

    def close(self) -> None:
        if self.own:
            shutil.rmtree(self.directory, ignore_errors=True)


def _past(path: Path) -> bool:
    """Whether the file at ``path`` is past :data:`KEEP_S` (then removed), or gone."""
    try:
        past = time.time() - path.stat().st_mtime > KEEP_S
    except FileNotFoundError:
        return True
    if past:
        path.unlink(missing_ok=True)
    return past
