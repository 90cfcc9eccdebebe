"""``mt train``: train (or resume) a model from a YAML config.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from transformer_mt.cli.flags import config_from_args
from transformer_mt.config import START_MODES


def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt train``."""
    p = sub.add_parser("train", parents=[common], help="train a model from a YAML config")
    p.add_argument("--config", required=True, help="YAML config, e.g. config/quickstart.yaml")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config key, e.g. --set model.d_model=256 (repeatable)")
    p.add_argument("--run-dir", help="where checkpoints and logs go (default: runs/<name>)")
    p.add_argument("--data-dir", help="local directory with the Multi30k .gz files")
    p.add_argument("--start", choices=START_MODES, default="auto",
                   help="auto: resume the run in --run-dir if it holds one (last.pt), else start "
                   "one; resume: resume it, or fail; new: start one, or fail if --run-dir holds "
                   "a run; overwrite: start afresh, deleting an earlier run's files in --run-dir "
                   "(checkpoints, metrics, logs)")
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from transformer_mt.training.trainer import train

    config = config_from_args(args)
    run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / config.name
    progress = train(config, run_dir, args.start, progress=None if not args.quiet else False)
    if os.environ.get("RANK", "0") != "0":  # under torchrun, rank 0 speaks for all
        return 0
    best = run_dir / "best.pt"
    print(f"trained to step {progress.step}; best val BLEU {progress.best_bleu:.2f} "
          f"(step {progress.best_step}); best checkpoint: {best}")
    return 0
