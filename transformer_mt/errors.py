"""User-facing errors.

Anything the user can fix (a bad config, a missing file, a corrupt checkpoint) is raised as an
:class:`MTError`. The CLI prints it as one line on stderr and exits non-zero, without a traceback.
"""

from __future__ import annotations

from typing import Any


class MTError(Exception):
    """An error caused by the user's input, with a message that says what to do."""


class ConfigError(MTError, ValueError):
    """A configuration file, an override or a setting is invalid (from Python: a ValueError
    that says what was expected)."""


class DataError(MTError):
    """Data files are missing, corrupt or inconsistent."""


class CheckpointError(MTError):
    """A checkpoint is missing, unreadable, unsafe or incompatible."""


class TrainingError(MTError):
    """Training cannot go on (non-finite loss, interrupted run)."""


def os_reason(exc: OSError) -> str:
    """Why the system refused, without Python's "[Errno 2]" ("No such file or directory"); a
    path through a file (mkdir's FileExistsError, NotADirectoryError) says so."""
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        return "a part of this path is a file, not a folder"
    return exc.strerror or str(exc)


def ensure(ok: bool, key: str, message: str) -> None:
    """A config value must be ``ok``: else a :class:`ConfigError` naming its ``key``."""
    if not ok:
        raise ConfigError(f"config key '{key}' {message}")


def ensure_range(obj: Any, section: str, ranges: dict[str, tuple[float, float]]) -> None:
    for key, (low, high) in ranges.items():
        value = getattr(obj, key)
        ensure(low <= value <= high, f"{section}.{key}", f"must be in [{low}, {high}], got "
               f"{value}")


def ensure_positive(obj: Any, section: str, keys: list[str], optional: bool = False) -> None:
    for key in keys:
        value = getattr(obj, key)
        if optional and value is None:
            continue
        ensure(value > 0, f"{section}.{key}", f"must be positive, got {value}")
