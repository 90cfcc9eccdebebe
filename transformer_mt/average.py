"""Averaging the weights of several checkpoints of one run (``mt average``): the last few
checkpoints of a run, averaged, usually translate better than any one of them. Checkpoints of
trainings that started apart (another seed) have unrelated weights, and their average
translates nothing: they are refused (decode them together as an ensemble instead)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from transformer_mt.checkpoint import load_checkpoint
from transformer_mt.errors import CheckpointError

# the least cosine similarity of two checkpoints' weight matrices that averages: the saves of one
# run are 0.96-0.98 alike (steps 2,800 and 3,600 of the CPU recipe; a toy's start and step 500:
# 0.96), those of trainings that started apart 0.00-0.03 (other seeds)
MIN_SIMILARITY = 0.2


def similarity(these: dict[str, torch.Tensor], those: dict[str, torch.Tensor]) -> float:
    """The cosine similarity of two models' weight matrices (every floating tensor of two or
    more dimensions), taken as one vector each; 1 where either is all zeros."""
    dot = norm_these = norm_those = 0.0
    for key, value in these.items():
        if value.is_floating_point() and value.dim() >= 2:
            a, b = value.double().flatten(), those[key].double().flatten()
            dot, norm_these, norm_those = dot + float(a @ b), norm_these + float(a @ a), \
                norm_those + float(b @ b)
    return dot / math.sqrt(norm_these * norm_those) if norm_these and norm_those else 1.0


def _check_same_tensors(these: dict[str, torch.Tensor], those: dict[str, torch.Tensor],
                        path: str | Path, first: str | Path) -> None:
    missing, extra = sorted(set(those) - set(these)), sorted(set(these) - set(those))
    if missing or extra:
        what = f"lacks {missing[0]}" if missing else f"has an extra {extra[0]}"
        raise CheckpointError(f"'{path}' {what} compared with '{first}' ({len(missing)} missing, "
                              f"{len(extra)} extra tensors); only checkpoints of one run can be "
                              "averaged")
    for key, value in these.items():
        if value.shape != those[key].shape:
            raise CheckpointError(f"'{path}': {key} has shape {tuple(value.shape)}, "
                                  f"'{first}' has {tuple(those[key].shape)}; only checkpoints of "
                                  "one run can be averaged")


def average_checkpoints(paths: Iterable[str | Path]) -> dict[str, Any]:
    """Average the weights of several checkpoints of the same model (same config and vocab).

    The result carries the first checkpoint's config and vocabularies, the progress of the
    latest one (the highest step: what the average has seen), no training state, and the list
    of averaged files.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise CheckpointError("no checkpoints to average; pass two or more .pt files")
    seen: dict[Path, Path] = {}
    for given in paths:  # a file named twice would count twice
        where = Path(given).resolve()
        if where in seen:
            raise CheckpointError(f"'{given}' is the same file as '{seen[where]}'; each "
                                  "checkpoint counts once in an average")
        seen[where] = Path(given)
    first = load_checkpoint(paths[0])
    total = {k: v.double() if v.is_floating_point() else v.clone()
             for k, v in first["model"].items()}
    latest = first["progress"]
    for path in paths[1:]:
        ckpt = load_checkpoint(path)
        if (ckpt["src_vocab"], ckpt["tgt_vocab"]) != (first["src_vocab"], first["tgt_vocab"]) \
                or ckpt["config"].get("model") != first["config"].get("model"):
            raise CheckpointError(f"'{path}' has another model config or vocabulary than "
                                  f"'{paths[0]}'; only checkpoints of one run can be averaged")
        _check_same_tensors(ckpt["model"], first["model"], path, paths[0])
        alike = similarity(ckpt["model"], first["model"])
        if alike < MIN_SIMILARITY:
            raise CheckpointError(
                f"'{path}' comes from another training than '{paths[0]}' (their weights are "
                f"unrelated: cosine similarity {alike:.2f}, where the saves of one run are above "
                "0.9), and averaged they would translate nothing; decode separately trained "
                "models together as an ensemble instead (mt translate --checkpoint A "
                "--checkpoint B)")
        if ckpt["progress"].get("step", 0) > latest.get("step", 0):
            latest = ckpt["progress"]
        for k, v in ckpt["model"].items():
            if v.is_floating_point():
                total[k] += v.double()
    averaged = {k: (v / len(paths)).to(first["model"][k].dtype) if v.is_floating_point() else v
                for k, v in total.items()}
    out = {k: v for k, v in first.items() if k != "training_state"}
    out["model"] = averaged
    out["progress"] = dict(latest, averaged_from=[str(p) for p in paths])
    return out
