"""The ``mt`` program; ``python -m transformer_mt`` is the same.

It runs :func:`transformer_mt.cli.main` in a process of its own, with one change to how that
process starts: importing torch and the rest makes ~1M objects that live as long as the process,
and Python's garbage collector went over all of them again and again while they were made and
once more at exit: ~0.4 s of a one-sentence ``mt translate`` of ~1.6 s (docs/benchmarks.md). So
the collector waits while the modules import, and what they made is then set aside for good
(``gc.freeze``); it collects what the command makes as ever. ``cli.main`` called from Python
(the tests, a user's script) leaves the caller's collector alone.
"""

from __future__ import annotations

import gc
import sys


def main() -> int:
    gc.disable()
    try:
        from transformer_mt.cli import main as run
    finally:
        gc.freeze()
        gc.enable()
    return run()


if __name__ == "__main__":
    sys.exit(main())
