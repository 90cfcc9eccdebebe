"""``mt trace``: one sentence through every stage of the model, with shapes; its logit lens,
parts switched off, across a run's checkpoints, or two models side by side.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformer_mt.cli.flags import DEVICE_HELP
from transformer_mt.errors import MTError

if TYPE_CHECKING:
    from transformer_mt.translate import Translator


def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt trace``."""
    p = sub.add_parser("trace", parents=[common],
                       help="walk one sentence through every stage of the model")
    p.add_argument("sentence", nargs="?", help="the sentence, in the model's source language "
                   "('-', or none with standard input piped: the line standard input holds)")
    p.add_argument("--checkpoint", action="append", default=[], help="a trained checkpoint "
                   "(default: a seeded untrained model); twice: the two models side by side")
    p.add_argument("--figures", metavar="DIR", help="save attention maps of every layer and "
                   "head, and the positional encoding, here")
    p.add_argument("--data-dir", help="Multi30k (for the untrained model's vocabularies)")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--prefix", metavar="TEXT", help="the translation begins with TEXT: its "
                   "tokens are forced, the model continues")
    p.add_argument("--alternatives", type=int, metavar="K", help="end with the K most "
                   "probable tokens after --prefix, each completed")
    p.add_argument("--run-dir", metavar="DIR", help="the sentence translated by each "
                   "checkpoint the run DIR kept (train.keep_steps, keep_last, best), in order")
    p.add_argument("--lens", action="store_true", help="the logit lens: what each decoder "
                   "layer would write if it were the last")
    p.add_argument("--switch", action="append", default=[], metavar="PART:LAYER[:HEAD][=SCALE]",
                   help="decode again with a part off (or scaled): PART encoder-self, "
                   "decoder-self, cross (heads) or encoder-ffn, decoder-ffn; repeatable")
    p.set_defaults(func=cmd_trace)


def cmd_trace(args: argparse.Namespace) -> int:
    from transformer_mt.inside.lens import (
        Switch,
        trace_compare,
        trace_lens,
        trace_run,
        trace_switches,
    )
    from transformer_mt.inside.trace import trace
    from transformer_mt.translate import Translator

    args.sentence = _sentence(args.sentence)
    if args.run_dir:
        trace_run(args.run_dir, args.sentence, print, args.device)
        return 0
    if len(args.checkpoint) > 1:
        trace_compare([Translator.load(c, args.device) for c in args.checkpoint],
                      args.checkpoint, args.sentence, print)
        return 0
    if args.figures:
        from transformer_mt.inside.plots import pyplot

        pyplot()  # matplotlib is there, before any work
    if args.checkpoint:
        translator = Translator.load(args.checkpoint[0], args.device)
        print(f"model: {args.checkpoint[0]}")
    else:
        translator = _untrained(args.data_dir)
        print("model: seeded UNTRAINED model (default config): the stages are real, the "
              "translation is noise; pass --checkpoint for a trained one")
    switches = [Switch.parse(spec) for spec in args.switch]  # bad ones refused first
    trace(translator, args.sentence, print, Path(args.figures) if args.figures else None,
          prefix=args.prefix or "", alternatives=args.alternatives or 0)
    if args.lens:
        trace_lens(translator, args.sentence, print)
    if switches:
        trace_switches(translator, args.sentence, switches, print)
    return 0


def _untrained(data_dir: str | None, seed: int = 0) -> Translator:
    """A seeded, untrained model (the default config) with vocabularies built from its
    training corpus, Multi30k."""
    import torch

    from transformer_mt.build import build_model
    from transformer_mt.config import Config
    from transformer_mt.data.prepare import prepare_data
    from transformer_mt.translate import Translator
    from transformer_mt.translate.engines import TorchEngine

    config = Config()
    if data_dir:
        config.data.data_dir = data_dir
    data = prepare_data(config)
    torch.manual_seed(seed)
    model = build_model(config, data.src_vocab, data.tgt_vocab).eval()
    return Translator(TorchEngine([model], torch.device("cpu")), config, data.src_vocab,
                      data.tgt_vocab, data.tokenizers)


def _sentence(given: str | None) -> str:
    """The sentence to trace: the one given, or the line standard input holds ("-", or none
    given with standard input piped)."""
    import sys

    if (given is None and not sys.stdin.isatty()) or given == "-":
        lines = [line.strip() for line in sys.stdin.read().splitlines() if line.strip()]
        if len(lines) > 1:
            raise MTError(f"mt trace walks one sentence through the model; standard input "
                          f"holds {len(lines)} lines: give one")
        given = lines[0] if lines else ""
    if not (given or "").strip():
        raise MTError("give a sentence to trace, e.g. mt trace \"A sentence.\" (in the "
                      "model's source language)")
    return str(given).strip()
