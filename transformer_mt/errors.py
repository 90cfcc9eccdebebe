"""User-facing errors.

Anything the user can fix (a bad config, a missing file, a corrupt checkpoint) is raised as an
:class:`MTError`. The CLI prints it as one line on stderr and exits non-zero, without a traceback.
"""

from __future__ import annotations


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
