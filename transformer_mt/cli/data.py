"""``mt data``: what a config's corpora hold.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from transformer_mt.cli.flags import config_from_args
from transformer_mt.logs import bars_enabled


def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt data``."""
    p = sub.add_parser("data", parents=[common],
                       help="summarize a config's corpora: pairs, lengths, coverage, filters")
    p.add_argument("--config", required=True, help="YAML config, e.g. config/cpu.yaml")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config key, e.g. --set data.filter.max_ratio=3 (repeatable)")
    p.add_argument("--data-dir", help="local directory with the Multi30k .gz files")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_data)


def cmd_data(args: argparse.Namespace) -> int:
    from transformer_mt.data.summary import format_summary, summarize

    summary = summarize(config_from_args(args), progress=bars_enabled())
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 0
