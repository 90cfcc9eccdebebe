"""``mt average``: the weights of several checkpoints averaged into one.
"""

from __future__ import annotations

import argparse
from typing import Any

from transformer_mt.errors import MTError


def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt average``."""
    p = sub.add_parser("average", parents=[common], help="average the weights of checkpoints")
    p.add_argument("checkpoints", nargs="+", help="two or more checkpoints of one run (its "
                   "step_*.pt: the last train.keep_last saves)")
    p.add_argument("--output", required=True, help="the averaged checkpoint to write")
    p.set_defaults(func=cmd_average)


def cmd_average(args: argparse.Namespace) -> int:
    from transformer_mt.average import average_checkpoints
    from transformer_mt.checkpoint import save_checkpoint
    from transformer_mt.fileio import refuse_same_file

    if len(args.checkpoints) < 2:
        raise MTError("mt average needs two or more checkpoints")
    refuse_same_file(args.output, args.checkpoints)
    save_checkpoint(average_checkpoints(args.checkpoints), args.output)
    print(f"averaged {len(args.checkpoints)} checkpoints into {args.output}")
    return 0
