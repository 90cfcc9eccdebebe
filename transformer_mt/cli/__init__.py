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

Each command is a module of this package: its arguments (``add``) beside what it does (its
``cmd_*``: load what it needs, call the package, print or write the result). This module
holds the parser they join and how errors end: one line on stderr and a non-zero exit code
(``--debug``: the traceback).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

from transformer_mt.cli import (
    average,
    data,
    evaluate,
    export,
    info,
    plot,
    serve,
    trace,
    train,
    translate,
)
from transformer_mt.errors import MTError, os_reason

EXIT_ERROR = 2
# each adds its parser (``evaluate``: evaluate and score; ``export``: export and import)
COMMANDS = (train, data, translate, evaluate, export, average, plot, trace, serve, info)


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

    for command in COMMANDS:  # in the help's order
        command.add(sub, common)
    return parser


class _DefaultsFormatter(argparse.HelpFormatter):
    """Help that ends with the option's default, where it has one and does not say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: its --help shows every option's default, and an argument it does
    not know is its error (its usage, the option it most looks like), not the top level's."""

    def __init__(self, **kwargs: Any) -> None:
        self.options: list[str] = []  # its own options' strings (add_argument)
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(**kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options.extend(action.option_strings)
        return action

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self.given = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(unrecognized(extras, self.options))
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        super().error(message + as_option(message, getattr(self, "given", [])))


# the options whose value is a file to read, and what such a file is: (suffixes, or a
# directory); never an output, which a file already there must not be taken for
INPUT_OPTIONS = {"--config": ((".yaml", ".yml"), False), "--checkpoint": ((".pt",), True)}


def as_option(message: str, given: list[str]) -> str:
    """For the one missing option given as a bare argument that names its kind of file
    (``mt train config/cpu.yaml``): how to pass it."""
    option = message.removeprefix("the following arguments are required: ")
    if option not in INPUT_OPTIONS:
        return ""
    suffixes, directory = INPUT_OPTIONS[option]

    def fits(arg: str) -> bool:
        path = Path(arg)
        return (directory and path.is_dir()) or (path.is_file()
                                                 and path.suffix.lower() in suffixes)

    bare = [arg for before, arg in zip(["", *given], given, strict=False)
            if not arg.startswith("-") and not before.startswith("-") and fits(arg)]
    return f" (did you mean {option} {bare[0]}?)" if bare else ""


def unrecognized(extras: list[str], options: Iterable[str]) -> str:
    """The error for arguments a command does not take, the option most like the first
    option among them suggested."""
    message = f"unrecognized arguments: {' '.join(extras)}"
    flags = [arg.split("=", 1)[0] for arg in extras if arg.startswith("-")]
    close = difflib.get_close_matches(flags[0], list(options), n=1) if flags else []
    return message + (f" (did you mean {close[0]}?)" if close else "")


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


def _not_imported(exc: ImportError) -> str | None:
    """What to tell of a package that is not installed, or installed but not importable (a
    version another package lacks); None for our own modules' errors (a bug: the traceback)."""
    if (exc.name or "").startswith("transformer_mt"):
        return None
    if isinstance(exc, ModuleNotFoundError):
        if not exc.name:
            return None
        from transformer_mt.packages import missing_error

        return str(missing_error([exc.name.split(".")[0]]))
    return (f"a Python package is installed but cannot be imported: {exc} (upgrade it, or "
            "the package it names, with pip)")


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
    return _run(args, before_command)


def _run(args: argparse.Namespace,
         before_command: Callable[[argparse.Namespace], None] | None = None) -> int:
    """The command (and what comes before it: ``mt``'s ``import torch``, where a Ctrl-C as
    it starts lands), each way it can fail ending in one line on stderr and an exit code
    (``--debug``: the traceback instead)."""
    try:
        if before_command is not None:
            before_command(args)
        return args.func(args)
    except MTError as exc:
        if args.debug:
            raise
        print(f"mt {args.command}: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_ERROR)
    except ImportError as exc:  # a package imported where it is used
        said = None if args.debug else _not_imported(exc)
        if said is None:
            raise
        print(f"mt {args.command}: error: {said}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(f"mt {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        if args.debug:
            raise
        print(f"mt {args.command}: error: {os_error_line(exc)}", file=sys.stderr)
        return EXIT_ERROR


def os_error_line(exc: OSError) -> str:
    """What the system refused, as one line: the path and why ("'/proc/run': No such file or
    directory"), without Python's "[Errno 2]"."""
    if exc.filename is None or not exc.strerror:
        return str(exc)
    return f"'{exc.filename}': {os_reason(exc)}"
