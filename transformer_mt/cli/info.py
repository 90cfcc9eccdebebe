"""``mt info``: what a checkpoint holds (config, sizes, step, best BLEU), or an export
(``mt export``'s directory: the engine, the type it decodes in, sizes, config).
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt info``."""
    p = sub.add_parser("info", parents=[common], help="describe a checkpoint (or an export)")
    p.add_argument("checkpoint", nargs="?", help="a checkpoint (.pt) or a directory mt export "
                   "wrote")
    p.add_argument("--checkpoint", dest="flagged", metavar="CHECKPOINT",
                   help="the same, as the other commands name it")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_info)


def _checkpoint(args: argparse.Namespace) -> str:
    """The checkpoint named once: as the argument or with --checkpoint."""
    from transformer_mt.errors import MTError

    named = {c for c in (args.checkpoint, args.flagged) if c is not None}
    if len(named) != 1:
        raise MTError("name one checkpoint: mt info CKPT (or --checkpoint CKPT)" if not named
                      else f"two checkpoints named ({' and '.join(sorted(named))}): give one")
    return named.pop()


def cmd_info(args: argparse.Namespace) -> int:
    from transformer_mt.build import model_from_checkpoint
    from transformer_mt.checkpoint import load_checkpoint
    from transformer_mt.translate.engines import engine_for

    args.checkpoint = _checkpoint(args)
    if engine_for(args.checkpoint) == "ctranslate2":
        return _print(_export_info(args.checkpoint), args.json)
    ckpt = load_checkpoint(args.checkpoint)
    model, config, src_vocab, tgt_vocab = model_from_checkpoint(ckpt, args.checkpoint)
    p = ckpt["progress"]
    info = {"checkpoint": str(args.checkpoint), "format_version": ckpt["format_version"],
            "torch_version": ckpt.get("torch_version"), "step": p.get("step"),
            "epoch": p.get("epoch"), "best_val_bleu": p.get("best_bleu"),
            "best_step": p.get("best_step"), "training_minutes": round(p.get("seconds", 0) / 60, 2),
            "parameters": model.num_parameters(),
            "src_vocab": len(src_vocab), "tgt_vocab": len(tgt_vocab),
            "resumable": "training_state" in ckpt, "config": config.to_dict()}
    if "seconds" not in p:  # a checkpoint of before train.max_minutes does not say
        del info["training_minutes"]
    if "averaged_from" in p:
        info["averaged_from"] = p["averaged_from"]
    if "data" in ckpt:  # pairs trained on, what each filter removed, how long the sources were
        info["training_pairs"] = ckpt["data"].get("pairs")
        info["removed_pairs"] = ckpt["data"].get("removed")
        info["source_tokens"] = ckpt["data"].get("source_tokens")
        corpora = ckpt["data"].get("corpora") or []
        if len(corpora) > 1:  # each corpus: its pairs, weight, tag and what was removed
            info["training_corpora"] = corpora
    return _print(info, args.json)


def _export_info(path: str) -> dict[str, Any]:
    """What ``mt export`` wrote: the engine, the type and the threads it decodes with here,
    the vocabularies and the config it was exported with."""
    from transformer_mt.translate.exported import CTranslate2Engine, load_exported, named

    loaded = load_exported(path, "cpu")  # (says how to install CTranslate2 where it is not)
    import ctranslate2

    engine = loaded.engine
    assert isinstance(engine, CTranslate2Engine)
    return {"export": str(path), "engine": f"CTranslate2 {ctranslate2.__version__}",
            "compute_type": engine.translator.compute_type,
            "threads": named((engine.threads, engine.translator.num_translators)),
            "src_vocab": len(loaded.src_vocab), "tgt_vocab": len(loaded.tgt_vocab),
            "config": loaded.config.to_dict()}


def _print(info: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(json.dumps(info, indent=2))
        return 0
    for key, value in info.items():
        if key != "config":
            print(f"{key:>16}: {value}")
    print("          config:")
    for section, values in info["config"].items():
        if isinstance(values, dict):
            print(f"    {section}: " + ", ".join(f"{k}={v}" for k, v in values.items()))
    return 0
