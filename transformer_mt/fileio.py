"""Files that are never half-written, and locks for work several processes may start at once."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import portalocker

from transformer_mt.errors import MTError


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` through ``write(fileobj)`` so that it either appears whole or not at all.

    The data goes to a temporary file in the same directory, is flushed and fsynced, then renamed
    over ``path``. On any failure (a full disk, say) the temporary file is removed, the previous
    ``path`` stays as it was, and an :class:`MTError` says what happened.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise MTError(f"could not write '{path}': {exc.strerror or exc}; "
                      "the previous file (if any) is unchanged. Free disk space or choose "
                      "another directory.") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a ``.lock`` file) across processes; others wait."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with portalocker.Lock(str(path), mode="a", flags=portalocker.LockFlags.EXCLUSIVE):
        yield


def cache_dir() -> Path:
    """The user cache directory: ``MT_CACHE_DIR``, else ``$XDG_CACHE_HOME/transformer_mt``."""
    if os.environ.get("MT_CACHE_DIR"):
        return Path(os.environ["MT_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "transformer_mt"

