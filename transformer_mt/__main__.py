"""The ``mt`` program; ``python -m transformer_mt`` is the same.

It runs :func:`transformer_mt.cli.main` in a process of its own, with one change to how that
process starts: importing torch makes ~1M objects that live as long as the process, and
Python's garbage collector went over all of them again and again while they were made and once
more at exit: ~0.4 s of a one-sentence ``mt translate`` of ~1.6 s (docs/benchmarks.md). So the
collector waits until torch is imported, just before the command runs, and what was made until
then is set aside for good (``gc.freeze``); it collects what the command makes as ever. ``mt
--help`` and a mistyped command end before torch is imported. ``cli.main`` called from Python
(the tests, a user's script) leaves the caller's collector alone.

And ``mt translate`` of a word (spaCy) model starts spaCy in a process of its own first
(``data/word_worker.py``), which imports it while this one imports torch.
"""

from __future__ import annotations

import argparse
import gc
import sys


def main() -> int:
    gc.disable()
    try:
        from transformer_mt.cli import main as run
    except BaseException:
        gc.enable()
        raise
    return run(before_command=_settle)


def _settle(args: argparse.Namespace) -> None:
    """Import torch while the collector still waits, then freeze what exists and let it run;
    ``mt translate``'s word worker first."""
    if args.command == "translate" and args.checkpoint:
        from transformer_mt.data import word_worker

        word_worker.start_for(args.checkpoint[0])
    try:
        import torch  # noqa: F401  (every command imports it: here, once, unscanned)
    finally:
        gc.freeze()
        gc.enable()


if __name__ == "__main__":
    sys.exit(main())
