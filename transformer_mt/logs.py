"""Console and file logging, and whether progress bars are shown.

Progress bars (tqdm) appear when stderr is a terminal; otherwise periodic log lines from the
``transformer_mt.progress`` logger take their place. ``--quiet`` silences both.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

PROGRESS_LOGGER = "transformer_mt.progress"
_state = {"bars": False}


class _ConsoleFilter(logging.Filter):
    """Hide periodic progress lines on the console while a progress bar shows the same."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_state["bars"] and record.name == PROGRESS_LOGGER)


class _ConsoleHandler(logging.StreamHandler):
    """The console handler :func:`setup_logging` adds (and replaces when called again)."""


def setup_logging(quiet: bool = False, debug: bool = False) -> None:
    root = logging.getLogger("transformer_mt")
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    for handler in list(root.handlers):
        if isinstance(handler, _ConsoleHandler):
            root.removeHandler(handler)
    handler = _ConsoleHandler(sys.stderr)
    handler.setLevel(logging.WARNING if quiet else logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    handler.addFilter(_ConsoleFilter())
    root.addHandler(handler)
    root.propagate = False
    _state["bars"] = not quiet and sys.stderr.isatty()


PROGRESS_FROM = 50  # inputs (lines, a file's sentences) from which a command shows progress


def bars_enabled() -> bool:
    return _state["bars"]


def add_file_log(path: Path) -> logging.Handler:
    """Also write every log record to ``path`` (the run's ``train.log``)."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("transformer_mt").addHandler(handler)
    return handler
