"""``mt plot``: loss, BLEU and learning rate of a run directory, as pictures.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt plot``."""
    p = sub.add_parser("plot", parents=[common], help="plot loss, BLEU and lr of a run")
    p.add_argument("run_dir")
    p.add_argument("--output", help="directory for the PNGs (default: RUN_DIR/plots)")
    p.set_defaults(func=cmd_plot)


def cmd_plot(args: argparse.Namespace) -> int:
    from transformer_mt.inside.plots import plot_run

    for path in plot_run(Path(args.run_dir), Path(args.output) if args.output else None):
        print(path)
    return 0
