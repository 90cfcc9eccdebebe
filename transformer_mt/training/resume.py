"""Resuming a run exactly, and fine-tuning from another run's checkpoint.

One table says what each may change. Resuming (``last.pt`` of the same run directory) refuses
a config whose model or data differ from the checkpoint's (the run would silently train
something else), warns where the batch plan, seed or learning rate differ (it trains on, but no
longer exactly as it would have), and takes any other key as it is (decoding, logging, saving).
Fine-tuning (``train.init_from``) keeps the model and its tokenizer and may change the rest.
Every path that compares configs goes through :func:`differences`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from transformer_mt.checkpoint import load_checkpoint, make_checkpoint, upgrade_config
from transformer_mt.config import Config, Start
from transformer_mt.data.prepare import training_fingerprint
from transformer_mt.errors import CheckpointError, MTError, TrainingError
from transformer_mt.training.distributed import DistInfo, gather_objects
from transformer_mt.training.state import Progress, Run

if TYPE_CHECKING:
    from transformer_mt.training.run_dir import RunDir

log = logging.getLogger(__name__)

# section.key patterns ("model.*": every key of the section), checked in this order
RESUME_REFUSES = ("model.*", "data.*")
RESUME_MAY_CHANGE = ("data.data_dir", "data.test")  # where the corpora lie; test sets
RESUME_WARNS = ("train.max_tokens", "train.accum_steps", "train.seed", "train.lr",
                "train.warmup_steps", "train.lr_schedule")
LINEAR_SCHEDULE_WARNS = ("train.max_steps",)  # a linear schedule's rates follow its length
# keys that a checkpoint made before them was trained without (their default then other than now)
KEPT_AS_TRAINED = ("data.mark_hyphens",)
FINE_TUNE_REFUSES = ("model.*", "data.src_lang", "data.tgt_lang", "data.tokenizer",
                     "data.shared_vocab", "data.lowercase", "data.mark_hyphens")


def as_trained(config: Config, stored: dict[str, Any]) -> dict[str, Any]:
    """The ``stored`` config in today's keys (:func:`checkpoint.upgrade_config`); where it
    predates a key of :data:`KEPT_AS_TRAINED`, ``config`` takes the value it was trained with
    (a word model made before ``data.mark_hyphens`` resumes, and is fine-tuned, with its
    hyphens split as they were, not as the key's default now splits them)."""
    upgraded = upgrade_config(stored)
    for key in KEPT_AS_TRAINED:
        section, name = key.split(".")
        if name not in stored.get(section, {}) and name in upgraded.get(section, {}):
            setattr(getattr(config, section), name, upgraded[section][name])
    return upgraded


def differences(stored: dict[str, Any], current: dict[str, Any], patterns: Iterable[str],
                unless: Iterable[str] = ()) -> Iterator[tuple[str, Any, Any]]:
    """``(section.key, stored value, current value)`` of each key matching ``patterns`` (and
    not ``unless``) whose value differs. A key an older checkpoint lacks counts as unchanged."""
    skip = set(unless)
    for pattern in patterns:
        section, name = pattern.split(".")
        keys = current[section] if name == "*" else [name]
        for key in keys:
            if f"{section}.{key}" in skip:
                continue
            now = current[section][key]
            before = stored.get(section, {}).get(key, now)
            if before != now:
                yield f"{section}.{key}", before, now


def checkpoint_to_resume(files: RunDir, config: Config, start: Start,
                         dist_info: DistInfo | None = None) -> dict[str, Any] | None:
    """``last.pt`` of ``run_dir`` to resume from, checked against the config; None for a new
    run. ``start``: ``auto`` resumes a run the directory holds, else starts one; ``resume``
    must resume; ``new`` refuses a directory that holds a run; ``overwrite`` starts afresh.

    Under torchrun, rank 0 decides and tells the others; a rank that does not see the same
    ``last.pt`` (a run directory that is not shared between machines) refuses, on every rank.
    """
    info = dist_info or DistInfo()
    run_dir = files.path
    path = run_dir / "last.pt"
    verdict: tuple[str, Any] = ("new", None)
    error: MTError | None = None
    ckpt = None
    if info.is_main:
        try:
            ckpt = _decide(files, config, start)
            verdict = ("resume", ckpt["progress"]["step"]) if ckpt is not None else ("new", None)
        except MTError as exc:
            error, verdict = exc, ("error", str(exc))
    verdict = gather_objects(verdict, info)[0]
    problem = None
    resumes = verdict[0] == "resume"
    if not info.is_main and verdict[0] != "error" and path.exists() != resumes:
        problem = (f"rank 0 {'resumes from' if resumes else 'sees no'} '{path}' and rank "
                   f"{info.rank} {'does not see it' if resumes else 'does'}: the run directory "
                   "(and the data cache) must be on a filesystem every machine of the run "
                   "shares")
    problems = [p for p in gather_objects(problem, info) if p]
    if error is not None:
        raise error
    if verdict[0] == "error":
        raise TrainingError(verdict[1])
    if problems:
        raise TrainingError(problems[0])
    if not resumes:
        return None
    if info.is_main:
        log.info("%s has a checkpoint: resuming that run (use a new --run-dir to start over)",
                 run_dir)
    return ckpt if ckpt is not None else load_checkpoint(path)


def _decide(files: RunDir, config: Config, start: Start) -> dict[str, Any] | None:
    """Rank 0's decision: the checked ``last.pt`` to resume from, or None. Nothing is decided
    in a directory whose files with a run file's name were not written by a run."""
    run_dir, path = files.path, files.path / "last.pt"
    files.check_owned(lambda: _holds_run(path))
    results = files.results()
    if start == "overwrite":
        return None
    if not path.exists():
        if start == "resume":
            raise TrainingError(f"--start resume: no checkpoint '{path}' to resume from; check "
                                "--run-dir, or drop --start resume to start a new run")
        if results:
            raise TrainingError(
                f"'{run_dir}' holds another run's files ({', '.join(results[:3])}) but "
                "no last.pt to resume from; choose a new --run-dir, or pass --start overwrite "
                "to delete them and start afresh")
        return None
    if start == "new":
        raise TrainingError(f"'{run_dir}' already holds a run (last.pt); resume it (--start "
                            "resume), start it afresh (--start overwrite) or choose a new "
                            "--run-dir")
    ckpt = load_checkpoint(path)
    if "training_state" not in ckpt:
        raise CheckpointError(f"'{path}' holds no training state to resume from")
    check_resumable(as_trained(config, ckpt["config"]), config, run_dir)
    stored = ckpt.get("corpus")
    if isinstance(stored, str) and stored != training_fingerprint(config.data):
        corpora = "; ".join(c.describe() for c in config.data.training_corpora())
        raise CheckpointError(
            f"the training corpus ({corpora}) has changed since the run in "
            f"'{run_dir}' started (its SHA-256 differs from the one in last.pt), so an exact "
            "resume would index into other text: restore the files, or train on the new data "
            f"from this run's weights in a new run (--set train.init_from={path})")
    return ckpt


def _holds_run(path: Path) -> bool:
    """Whether ``path`` is a ``last.pt`` of this tool's (a run of a version without manifests)."""
    if not path.is_file():
        return False
    try:
        return "training_state" in load_checkpoint(path)
    except MTError:
        return False


def check_resumable(stored: dict[str, Any], config: Config, run_dir: Path) -> None:
    """Refuse to resume a run trained with the ``stored`` config under ``config`` where it
    would train something else; warn where it would no longer be exactly the same run."""
    current = config.to_dict()
    warns = RESUME_WARNS + (LINEAR_SCHEDULE_WARNS if config.train.lr_schedule == "linear"
                            else ())
    for key, before, now in differences(stored, current, warns):
        log.warning("the run was trained with %s=%s, the config now says %s: resuming, but the "
                    "run is no longer exactly the one it would have been", key, before, now)
    for key, before, now in differences(stored, current, RESUME_REFUSES, RESUME_MAY_CHANGE):
        raise CheckpointError(f"the run in '{run_dir}' was trained with {key}={before!r}, the "
                              f"config now says {now!r}; use the run's config or a new "
                              "--run-dir")


def checkpoint_to_start_from(config: Config) -> dict[str, Any] | None:
    """``train.init_from``'s checkpoint for fine-tuning, checked against the config."""
    path = config.train.init_from
    if path is None:
        return None
    ckpt = load_checkpoint(path)
    stored = as_trained(config, ckpt["config"])
    for key, before, now in differences(stored, config.to_dict(), FINE_TUNE_REFUSES):
        raise CheckpointError(
            f"train.init_from: '{path}' was trained with {key}={before!r}, the config says "
            f"{now!r}; fine-tuning keeps the model and its tokenizer: set the same value")
    return ckpt


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state(device: torch.device | None = None) -> dict[str, Any]:
    """This process's random generators (Python, NumPy, torch, and ``device``'s if a GPU), as
    plain values and tensors. Each rank of a distributed run has its own."""
    np_state = np.random.get_state(legacy=False)  # the legacy tuple's values, by name
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [np_state["bit_generator"],
                  torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
                  int(np_state["state"]["pos"]), int(np_state["has_gauss"]),
                  float(np_state["gauss"])],
        "torch": torch.get_rng_state(),
    }
    if device is not None and device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device | None = None) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if isinstance(cuda, list):  # format of early checkpoints: every visible GPU's state
        cuda = cuda[0] if cuda else None
    if cuda is not None and device is not None and device.type == "cuda":
        torch.cuda.set_rng_state(cuda, device)


def rank_rng_state(saved: dict[str, Any], rank: int,
                   world_size: int) -> tuple[dict[str, Any] | None, bool]:
    """The generator state that ``rank`` of ``world_size`` resumes from, and whether the resume
    is exact (saved by as many ranks). A rank the saved run did not have gets None: it keeps
    its fresh seed (``train.seed`` + rank)."""
    states = saved.get("ranks", [saved])  # early checkpoints hold one state
    state = states[rank] if rank < len(states) else None
    return state, len(states) == world_size


def restore(run: Run, ckpt: dict[str, Any], path: Path, precision: str, rank: int,
            world_size: int, device: torch.device) -> None:
    """Put a resumed run back where ``ckpt`` (read from ``path``) left it: weights, optimizer,
    scaler, progress, this rank's random generators and the open log interval's sums."""
    state = ckpt["training_state"]
    run.model.load_state_dict(ckpt["model"])
    try:
        run.optimizer.load_state_dict(state["optimizer"])
    except ValueError as exc:
        raise CheckpointError(f"the optimizer state in '{path}' does not fit this version's "
                              f"optimizer ({exc}); start a new run or use the release that "
                              "wrote it") from exc
    saved = state.get("precision", precision)
    if saved != precision:
        log.warning("the run trained in %s and resumes in %s: the loss scaler starts afresh",
                    saved, precision)
    elif state["scaler"] and run.scaler.is_enabled():
        run.scaler.load_state_dict(state["scaler"])
    run.progress = Progress(**ckpt["progress"])
    rng, exact = rank_rng_state(state["rng"], rank, world_size)
    if not exact:
        log.warning("the run was saved by another number of processes than the %d now: the "
                    "batches stay the same, but the random streams (dropout) of the ranks "
                    "differ, so the resume is not exact", world_size)
    if rng is not None:
        set_rng_state(rng, device)
    run.loss_since_log = state["loss_since_log"].to(device)


def run_checkpoint(run: Run, config: Config, precision: str,
                   rng: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A checkpoint of the run; with every rank's ``rng``, resumable (``last.pt``): what
    :func:`restore` puts back."""
    training_state = None
    if rng is not None:
        training_state = {"optimizer": run.optimizer.state_dict(),
                          "scaler": run.scaler.state_dict(), "precision": precision,
                          "rng": {"ranks": rng},
                          "loss_since_log": run.loss_since_log.detach().cpu().clone()}
    return make_checkpoint(run.model, config, run.src_vocab, run.tgt_vocab,
                           asdict(run.progress), training_state, run.subword_models,
                           run.corpus, run.train_data.summary())
