"""What several commands read alike: the config of ``--config`` and ``--set``, and the flags of
what decodes and how.
"""

from __future__ import annotations

import argparse
import typing
from typing import TYPE_CHECKING

from transformer_mt.config import DecodeConfig, field_types, per_call_settings

if TYPE_CHECKING:
    from transformer_mt.config import Config


ENGINES = ["auto", "torch", "ctranslate2"]  # as translate/engines.py (not imported: torch)
ENGINE_HELP = ("decode with our PyTorch model or with CTranslate2 (a model exported by mt "
               "export: --checkpoint is then its directory); auto (default): CTranslate2 for "
               "such a directory, else PyTorch")
DEVICE_HELP = "auto (a GPU where PyTorch sees one, else the CPU), cpu, cuda, cuda:N or mps"


def add_engine_flags(p: argparse.ArgumentParser) -> None:
    """What decodes, and on what: ``--engine``, ``--device`` and ``--compile``."""
    p.add_argument("--engine", choices=ENGINES, default="auto", help=ENGINE_HELP)
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--compile", action="store_true",
                   help="compile the decoding steps (CPU, one model; ~1 minute the first "
                   "time for a checkpoint, then read from the cache in ~0.1 s): one sentence "
                   "at a time 2.5-5x faster, batches 1.2-1.4x")


def add_workers_flag(p: argparse.ArgumentParser) -> None:
    """``--workers``: processes that decode a command's batches side by side (CPU)."""
    p.add_argument("--workers", type=_positive, default=1, metavar="N",
                   help="decode the batches in N processes side by side, each with its share "
                   "of the CPU's cores (on a CPU of few cores, 2 processes of one thread "
                   "decode batches faster than 1 of two); CTranslate2: N batches at once")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of processes (1 or more)")
    return int(text)


def add_decoding_flags(p: argparse.ArgumentParser, names: list[str] | None = None) -> None:
    """The decoding settings a call may change (``names``, default all), as flags made from
    their declaration in :class:`DecodeConfig`: ``--beam-size`` sets ``beam_size``, its older
    short name ``--beam`` too; unset, the checkpoint's value holds."""
    types = field_types(DecodeConfig)
    for f in per_call_settings():
        if names is None or f.name in names:
            alias = [f"--{f.metadata['alias']}"] if f.metadata["alias"] else []
            choices = typing.get_args(types[f.name]) or None  # a Literal's values
            help = f"{f.metadata['help']}; default: the checkpoint's decode.{f.name}"
            name = f"--{f.name.replace('_', '-')}"
            if types[f.name] is bool:  # --replace-unk / --no-replace-unk
                p.add_argument(name, *alias, dest=f.name, help=help,
                               action=argparse.BooleanOptionalAction)
                continue
            p.add_argument(name, *alias, dest=f.name, type=str if choices else types[f.name],
                           choices=choices, help=help,
                           metavar=None if choices else f.name.split("_")[-1].upper())


def config_from_args(args: argparse.Namespace) -> Config:
    """The config of ``--config``, ``--set`` and ``--data-dir``."""
    from transformer_mt.config.file import load_config

    overrides = list(args.set or [])
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    return load_config(args.config, overrides)
