"""The data cache's one rule for every entry: written whole, checked whenever it is read.

An entry (token ids of a corpus side, a SentencePiece model, language labels) is a directory
under ``cache_dir()/KIND/``, named by a hash of everything that determines its content. It is
built in a temporary directory beside it, and its last file, ``sha256.json``, holds the SHA-256
of every other file: an entry counts only once that file exists, and every read checks each
file against it. A damaged entry (truncated, bit-flipped, edited) is rebuilt with a warning,
never used; a killed build leaves only a temporary directory, removed by the next one.
Processes that need the same entry at once (the ranks of a distributed run) take turns on its
lock: one builds, the others read.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from transformer_mt.errors import MTError
from transformer_mt.fileio import cache_dir, cache_key, file_lock, sha256_of

log = logging.getLogger(__name__)

CHECKSUMS = "sha256.json"


def cache_entry(kind: str, key_text: str, build: Callable[[Path], None],
                files: tuple[str, ...]) -> Path:
    """The directory of the checked entry for ``key_text``: read back if a complete, intact
    one exists, else made by ``build(directory)``, which writes ``files`` into it."""
    directory = free_cache_entry(kind, key_text, build, files, wait=True)
    assert directory is not None  # (it waited for its turn)
    return directory


def free_cache_entry(kind: str, key_text: str, build: Callable[[Path], None],
                     files: tuple[str, ...], wait: bool = False) -> Path | None:
    """:func:`cache_entry`, or None at once where another process holds the entry (is making
    it) and ``wait`` is False: the caller may make another entry meanwhile."""
    key = cache_key(key_text)
    directory = cache_dir() / kind / key
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MTError(f"cannot write the cache directory {cache_dir()} ({exc.strerror or exc}); "
                      "set MT_CACHE_DIR to a directory you can write") from None
    with file_lock(directory.with_suffix(".lock"), wait) as held:
        if not held:
            return None
        for stale in directory.parent.glob(f".{key}.*"):  # left by a killed build
            shutil.rmtree(stale, ignore_errors=True)
        complete = (directory / CHECKSUMS).is_file()
        damage = damage_of(directory, files) if complete else None
        if damage:
            log.warning("the cache entry %s is damaged (%s); making it again", directory, damage)
        if damage or not complete:
            shutil.rmtree(directory, ignore_errors=True)
            directory.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=directory.parent))
            try:
                build(tmp)
                digests = {name: sha256_of(tmp / name) for name in files}
                (tmp / CHECKSUMS).write_text(json.dumps(digests, indent=1), encoding="utf-8")
                os.replace(tmp, directory)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        return directory


def damage_of(directory: Path, files: tuple[str, ...]) -> str | None:
    """What is wrong with an entry's files (missing, changed), or None if they are as
    written."""
    try:
        expected = json.loads((directory / CHECKSUMS).read_text(encoding="utf-8"))
        for name in files:
            if not (directory / name).is_file():
                return f"{name} is missing"
            if sha256_of(directory / name) != expected.get(name):
                return f"{name} is not what was written"
    except (OSError, ValueError, AttributeError) as exc:
        return f"{CHECKSUMS} is unreadable: {exc}"
    return None
