"""The command line: ``mt COMMAND``, one entry point.

    mt train       train (or resume) a model from a YAML config
    mt data        summarize a config's corpora: pairs, lengths, coverage, filters
    mt translate   translate sentences, a file or standard input with a checkpoint
    mt evaluate    translate a test set (or --src/--ref files) and score it with sacreBLEU
    mt score       the log-probability of given translations, token by token (and as beam
                   search scores them: divided by the length penalty)
    mt export      convert a checkpoint for CTranslate2, or into a Hugging Face model
    mt import      a Hugging Face Marian/Pegasus model (OPUS-MT) as a checkpoint
    mt average     average the weights of several checkpoints into one
    mt plot        plot loss, BLEU and learning rate of a run directory
    mt trace       walk one sentence through every stage of the model, with shapes
    mt serve       a translation server: JSON API, LibreTranslate API, a web page
    mt info        describe a checkpoint (config, sizes, step, best BLEU)

This module holds what can be typed (the parser) and how errors end (one line on stderr, a
non-zero exit code; ``--debug`` shows the traceback); ``commands.py`` what each command does.
"""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Callable
from typing import Any

from transformer_mt.commands import (
    cmd_average,
    cmd_data,
    cmd_info,
    cmd_plot,
    cmd_trace,
    cmd_train,
    cmd_translate,
)
from transformer_mt.config import START_MODES, DecodeConfig, per_call_settings
from transformer_mt.errors import MTError
from transformer_mt.evaluate_commands import cmd_evaluate, cmd_score
from transformer_mt.interop import cmd_export, cmd_import
from transformer_mt.serve.command import add_serve

EXIT_ERROR = 2
DEVICE_HELP = "auto (a GPU where PyTorch sees one, else the CPU), cpu, cuda, cuda:N or mps"


# ---------------------------------------------------------------------------------------- main

def add_engine_flags(p: argparse.ArgumentParser) -> None:
    """What decodes, and on what: ``--engine``, ``--device`` and ``--compile``."""
    p.add_argument("--engine", choices=["torch", "ctranslate2"], default="torch",
                   help="decode with our PyTorch model, or with a model exported by mt export "
                   "(--checkpoint is then its directory)")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--compile", action="store_true",
                   help="compile the decoding steps (CPU, one model; ~1 minute the first "
                   "time for a checkpoint, then read from the cache in ~0.1 s): one sentence "
                   "at a time 2.5-5x faster, batches 1.2-1.4x")


def add_decoding_flags(p: argparse.ArgumentParser, names: list[str] | None = None) -> None:
    """The decoding settings a call may change (``names``, default all), as flags made from
    their declaration in :class:`DecodeConfig`: ``--beam-size`` sets ``beam_size``, its older
    short name ``--beam`` too; unset, the checkpoint's value holds."""
    types = typing.get_type_hints(DecodeConfig)
    for f in per_call_settings():
        if names is None or f.name in names:
            alias = [f"--{f.metadata['alias']}"] if f.metadata["alias"] else []
            choices = typing.get_args(types[f.name]) or None  # a Literal's values
            p.add_argument(f"--{f.name.replace('_', '-')}", *alias, dest=f.name,
                           type=str if choices else types[f.name], choices=choices,
                           metavar=None if choices else f.name.split("_")[-1].upper(),
                           help=f"{f.metadata['help']}; default: the checkpoint's "
                           f"decode.{f.name}")


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    from transformer_mt import __version__

    # --quiet and --debug work before the command and after it (SUPPRESS: a command's parser
    # leaves what the top level set alone)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="only warnings and errors")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="debug logs; tracebacks on errors")

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "not installed"
    parser = argparse.ArgumentParser(
        prog="mt", description="Train a Transformer to translate, translate with it and score "
        "it.")
    parser.add_argument("--quiet", action="store_true", help="only warnings and errors")
    parser.add_argument("--debug", action="store_true", help="debug logs; tracebacks on errors")
    parser.add_argument("--version", action="version",
                        version=f"mt (transformer_mt) {__version__}, torch {torch_version}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_CommandParser)

    for add in (_add_train, _add_data, _add_translate, _add_evaluate, _add_score, _add_export,
                _add_import,
                _add_average, _add_plot, _add_trace, add_serve, _add_info):  # help order
        add(sub, common)
    return parser


def _add_train(sub: Any, common: argparse.ArgumentParser) -> None:
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


def _add_data(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt data``."""
    p = sub.add_parser("data", parents=[common],
                       help="summarize a config's corpora: pairs, lengths, coverage, filters")
    p.add_argument("--config", required=True, help="YAML config, e.g. config/cpu.yaml")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config key, e.g. --set data.filter.max_ratio=3 (repeatable)")
    p.add_argument("--data-dir", help="local directory with the Multi30k .gz files")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_data)


def _add_translate(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt translate``."""
    p = sub.add_parser("translate", parents=[common], help="translate sentences, a file or stdin")
    p.add_argument("sentences", nargs="*", help="sentences to translate")
    p.add_argument("--checkpoint", required=True, action="append",
                   help="a .pt checkpoint (e.g. runs/X/best.pt); repeat it for an ensemble "
                   "that averages the models' probabilities")
    p.add_argument("--input", help="file with one sentence per line")
    p.add_argument("--split-sentences", action="store_true",
                   help="a line may hold several sentences (a paragraph): split it, translate "
                   "each, and put the line back together")
    p.add_argument("--output", help="write translations here instead of stdout")
    p.add_argument("--nbest", type=int, default=1, help="print the N best translations")
    add_decoding_flags(p)
    add_engine_flags(p)
    p.add_argument("--attention", metavar="PNG",
                   help="save a cross-attention heatmap of the (one) sentence here")
    p.add_argument("--prefix", metavar="TEXT",
                   help="each translation begins with TEXT; the model continues it (an "
                   "unfinished last word is finished: \"A ma\" may become \"A man\")")
    p.add_argument("--alternatives", type=int, metavar="K",
                   help="print the K most probable tokens after --prefix (or at the start), "
                   "each with the translation completed from it: index, token, "
                   "log-probability, text")
    p.add_argument("--align", action="store_true",
                   help="print each translation's word alignment after \" ||| \" (source-output "
                   "word pairs from 0, e.g. 0-0 1-2), read off the cross-attention of --layer "
                   "and --head")
    p.add_argument("--layer", type=int, default=-1, help="decoder layer for --attention and "
                   "--align (default: the last)")
    p.add_argument("--head", type=int, help="head for --attention and --align (default: mean "
                   "over heads)")
    p.set_defaults(func=cmd_translate)


def _add_evaluate(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt evaluate``."""
    p = sub.add_parser("evaluate", parents=[common],
                       help="score a checkpoint with sacreBLEU, or compare several")
    p.add_argument("--checkpoint", action="append",
                   help="a checkpoint to translate and score; repeat it to compare checkpoints "
                   "(paired bootstrap resampling against the first)")
    p.add_argument("--hyp", action="append",
                   help="a file of translations to score (or compare) as they are, against "
                   "--ref or the checkpoints' references; repeatable")
    p.add_argument("--split", help="a test set named in the checkpoint's data.test, or valid "
                   "(default: the first test set, test_2016_flickr for Multi30k)")
    p.add_argument("--src", help="score this source file (plain or .gz, a sentence per line)")
    p.add_argument("--ref", help="the references of --src, line by line")
    p.add_argument("--output", help="write the detokenized translations here")
    add_decoding_flags(p, ["beam_size", "precision"])
    p.add_argument("--data-dir", help="local directory with the Multi30k .gz files")
    p.add_argument("--max-sentences", type=int, help="score only the first N sentences")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON record")
    p.set_defaults(func=cmd_evaluate)


def _add_score(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt score``."""
    p = sub.add_parser("score", parents=[common],
                       help="how probable a model finds given translations, token by token")
    p.add_argument("--checkpoint", required=True, help="a checkpoint (.pt), or an exported "
                   "model directory with --engine ctranslate2")
    p.add_argument("--src", required=True, help="the source sentences, one a line")
    p.add_argument("--hyp", required=True, help="their translations to score, line by line")
    add_decoding_flags(p, ["alpha", "precision"])
    p.add_argument("--engine", choices=["torch", "ctranslate2"], default="torch")
    p.add_argument("--max-sentences", type=int, help="score only the first N pairs")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--json", action="store_true", help="a JSON record a line: log_prob, score, "
                   "tokens, token_log_probs")
    p.set_defaults(func=cmd_score)


def _add_import(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt import``."""
    p = sub.add_parser("import", parents=[common],
                       help="a Hugging Face Marian or Pegasus model (e.g. OPUS-MT) as a "
                       "checkpoint to translate with and fine-tune")
    p.add_argument("directory", help="the transformers model directory (with its "
                   "MarianTokenizer files: source.spm, target.spm, vocab.json)")
    p.add_argument("checkpoint", help="the checkpoint to write (.pt); a config to fine-tune "
                   "it with is written beside it (.finetune.yaml)")
    p.add_argument("--src-lang", help="the source language, where the model does not say")
    p.add_argument("--tgt-lang", help="the target language, where the model does not say")
    p.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint")
    p.set_defaults(func=cmd_import)


def _add_export(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt export``."""
    p = sub.add_parser("export", parents=[common],
                       help="convert a checkpoint for CTranslate2 or Hugging Face transformers")
    p.add_argument("checkpoint")
    p.add_argument("output_dir", metavar="OUTPUT",
                   help="the directory to write (argos: the .argosmodel file)")
    p.add_argument("--format", choices=["ctranslate2", "huggingface", "argos"],
                   default="ctranslate2",
                   help="ctranslate2: for mt translate --engine ctranslate2 (and CTranslate2 "
                   "itself); huggingface: a transformers model directory (SentencePiece "
                   "models); argos: an Argos Translate package file (.argosmodel; SentencePiece "
                   "models of one vocabulary), which LibreTranslate serves")
    p.add_argument("--quantization", choices=["int8", "int8_float32", "float16", "bfloat16"],
                   help="ctranslate2: store the weights quantized (default: float32, as "
                   "trained)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier export in OUTPUT_DIR (nothing else is replaced)")
    p.set_defaults(func=cmd_export)


def _add_average(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt average``."""
    p = sub.add_parser("average", parents=[common], help="average the weights of checkpoints")
    p.add_argument("checkpoints", nargs="+")
    p.add_argument("--output", required=True)
    p.set_defaults(func=cmd_average)


def _add_plot(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt plot``."""
    p = sub.add_parser("plot", parents=[common], help="plot loss, BLEU and lr of a run")
    p.add_argument("run_dir")
    p.add_argument("--output", help="directory for the PNGs (default: RUN_DIR/plots)")
    p.set_defaults(func=cmd_plot)


def _add_trace(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt trace``."""
    p = sub.add_parser("trace", parents=[common],
                       help="walk one sentence through every stage of the model")
    p.add_argument("sentence")
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


def _add_info(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt info``."""
    p = sub.add_parser("info", parents=[common], help="describe a checkpoint")
    p.add_argument("checkpoint")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)


class _DefaultsFormatter(argparse.HelpFormatter):
    """Help that ends with the option's default, where it has one and does not say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: its --help shows every option's default."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(**kwargs)


def _not_utf8(argv: list[str]) -> str | None:
    """Why an argument cannot be taken: bytes that are not UTF-8 (Python keeps them as lone
    surrogates, which no tokenizer, log or file format can write), or None."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            byte = ord(arg[exc.start]) - 0xDC00  # how surrogateescape keeps an undecodable byte
            return (f"the argument '{shown}' is not valid UTF-8 (byte 0x{byte:02x} where a "
                    "character should be); pass sentences and "
                    "paths in UTF-8 (a terminal or locale in another encoding sends others: "
                    "e.g. LANG=C.UTF-8), or rename the file")
    return None


def main(argv: list[str] | None = None,
         before_command: Callable[[argparse.Namespace], None] | None = None) -> int:
    """Run ``mt ARGV`` (default: this process's arguments) and return its exit code;
    ``before_command`` is called once the arguments are checked, before the command runs
    (``mt`` itself imports torch there: transformer_mt/__main__.py)."""
    from transformer_mt.logs import setup_logging

    argv = sys.argv[1:] if argv is None else argv
    odd = _not_utf8(argv)
    if odd:
        print(f"mt: error: {odd}", file=sys.stderr)
        return EXIT_ERROR
    args = build_parser().parse_args(argv)
    setup_logging(args.quiet, args.debug)
    for name in ("beam_size", "nbest", "max_sentences"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            print(f"mt {args.command}: error: --{name.replace('_', '-')} must be at least 1",
                  file=sys.stderr)
            return EXIT_ERROR
    if before_command is not None:
        before_command(args)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    """The command, each way it can fail ending in one line on stderr and an exit code
    (``--debug``: the traceback instead)."""
    try:
        return args.func(args)
    except MTError as exc:
        if args.debug:
            raise
        print(f"mt {args.command}: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_ERROR)
    except ModuleNotFoundError as exc:  # a package imported where it is used
        if args.debug or not exc.name or exc.name.startswith("transformer_mt"):
            raise
        from transformer_mt.packages import missing_error

        print(f"mt {args.command}: error: {missing_error([exc.name.split('.')[0]])}",
              file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"mt {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        if args.debug:
            raise
        print(f"mt {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
