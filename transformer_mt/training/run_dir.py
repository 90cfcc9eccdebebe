"""The run directory: what one training run writes, and how it keeps it safe.

::

    config.yaml        the resolved config
    src_vocab.json     tgt_vocab.json
    metrics.jsonl      one JSON record per logged step and per validation
    train.log          the log
    last.pt            full state, for resuming (every train.save_every steps and at the end)
    best.pt            weights with the best val BLEU so far
    step_NNNNNNN.pt    the weights of the last train.keep_last saves (for checkpoint averaging)
    kept_NNNNNNN.pt    the weights at the steps train.keep_steps names (mt trace --run-dir)
    manifest.json      the files above that this run wrote (manifest.py)

One run at a time holds the directory's lock; what a killed run left half-written is removed;
``--start overwrite`` deletes an earlier run's files, and only under the lock. A file with a
run file's name that no run wrote (the user's own ``config.yaml`` in ``--run-dir .``) is never
replaced or deleted: the run stops before it writes anything.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from transformer_mt.checkpoint import save_checkpoint
from transformer_mt.config import Config
from transformer_mt.data.vocab import Vocab
from transformer_mt.errors import ConfigError
from transformer_mt.fileio import atomic_write_text, remove_stale_temporaries, run_lock
from transformer_mt.logs import add_file_log
from transformer_mt.manifest import Manifest

log = logging.getLogger(__name__)

RUN_FILES = ("last.pt", "best.pt", "metrics.jsonl", "config.yaml", "src_vocab.json",
             "tgt_vocab.json", "train.log")


class MetricsLog:
    """``metrics.jsonl``: appended one record at a time, flushed, so a crash loses nothing.

    With ``tensorboard``, every number is also written as a TensorBoard scalar
    (``<type>/<name>``) under ``RUN_DIR/tensorboard``.
    """

    def __init__(self, path: Path, enabled: bool = True, tensorboard: bool = False) -> None:
        self.path, self.enabled = path, enabled
        self.writer = None
        if enabled and tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ConfigError("train.tensorboard needs the tensorboard package: "
                                  "pip install 'transformer_mt[tensorboard]'") from exc
            self.writer = SummaryWriter(str(path.parent / "tensorboard"))

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for key, value in record.items():
                if key not in ("step", "type") and isinstance(value, (int, float)):
                    self.writer.add_scalar(f"{record['type']}/{key}", value, record["step"])
            self.writer.flush()

    def truncate_after(self, step: int) -> None:
        """Drop records of steps after ``step`` (written after the checkpoint we resume from)."""
        if not (self.enabled and self.path.exists()):
            return
        text = self.path.read_text(encoding="utf-8", errors="replace")
        kept = [line for line in text.splitlines() if _record_step(line) <= step]
        atomic_write_text(self.path, "".join(line + "\n" for line in kept))


def _record_step(line: str) -> float:
    """The step of a metrics record; infinite (dropped) for a line that is not one (a record
    half-written when the process was killed)."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, TypeError, KeyError):
        return math.inf


class RunDir:
    """One run's directory; only the main process (rank 0) writes into it."""

    def __init__(self, path: Path, is_main: bool = True) -> None:
        self.path, self.is_main = path, is_main
        self._held = contextlib.ExitStack()  # the directory's lock, while training
        self._file_log: logging.Handler | None = None
        self.manifest = Manifest(path, "run")

    def files(self) -> list[Path]:
        """The files a run writes into its directory (and an earlier run may have left)."""
        files = [self.path / name for name in RUN_FILES if (self.path / name).is_file()]
        return files + self.checkpoints()

    def checkpoints(self) -> list[Path]:
        """The step checkpoints here: the last saves', then those of ``train.keep_steps``."""
        return sorted(self.path.glob("step_*.pt")) + sorted(self.path.glob("kept_*.pt"))

    def results(self) -> list[str]:
        """The names of an earlier run's results here (checkpoints, metrics)."""
        return [f.name for f in self.files()
                if f.name in ("best.pt", "metrics.jsonl") or f.name.startswith(("step_", "kept_"))]

    def check_owned(self, is_old_run: Callable[[], bool] = lambda: False) -> None:
        """Refuse a directory where a run would replace files that no run wrote. A directory
        without a manifest whose ``is_old_run()`` (a run of a version without manifests: its
        ``last.pt`` is one) has its run files taken as the run's."""
        names = [*RUN_FILES, *(p.name for p in self.checkpoints())]
        foreign = self.manifest.foreign(names)
        if foreign and not self.manifest.exists() and is_old_run():
            log.info("%s holds a run without %s: its run files are taken as the run's",
                     self.path, self.manifest.path.name)
            return
        if foreign:
            raise ConfigError(
                f"'{self.path}' holds {', '.join(foreign)}, not written by a run (its "
                f"{self.manifest.path.name} does not list them), and a run writes files of "
                "these names there; train into a directory of its own (--run-dir runs/NAME). "
                "Nothing was written")

    def claim(self, overwrite: bool) -> None:
        """Lock the directory for this run (rank 0) and clear what a killed run left.

        With ``overwrite``, an earlier run's files are deleted here, under the lock.
        """
        if not self.is_main:
            return
        self._held.enter_context(run_lock(self.path))
        for tmp in remove_stale_temporaries(self.path):
            log.info("removed %s, left by a write that was interrupted", tmp)
        if overwrite:
            for path in self.files():
                path.unlink()
                log.info("--start overwrite: removed %s", path)
        self.manifest.record([*RUN_FILES, *(p.name for p in self.checkpoints())])

    def open(self) -> None:
        """Create the directory and log to its ``train.log`` (rank 0 only)."""
        if self.is_main:
            self.path.mkdir(parents=True, exist_ok=True)
            self._file_log = add_file_log(self.path / "train.log")

    def metrics_log(self, tensorboard: bool) -> MetricsLog:
        return MetricsLog(self.path / "metrics.jsonl", enabled=self.is_main,
                          tensorboard=tensorboard)

    def write_run_files(self, config: Config, src_vocab: Vocab, tgt_vocab: Vocab) -> None:
        """``config.yaml`` and the vocabularies."""
        if self.is_main:
            atomic_write_text(self.path / "config.yaml",
                              yaml.safe_dump(config.to_dict(), sort_keys=False))
            src_vocab.save(self.path / "src_vocab.json")
            tgt_vocab.save(self.path / "tgt_vocab.json")

    def save_last(self, ckpt: dict[str, Any], step: int, keep_last: int,
                  kept: bool = False) -> None:
        """Write ``last.pt`` and, with ``keep_last``, a step checkpoint (its weights), keeping
        the last ``keep_last`` of those; and, for a step of ``train.keep_steps`` (``kept``),
        one kept for good."""
        save_checkpoint(ckpt, self.path / "last.pt")
        weights = {k: v for k, v in ckpt.items() if k != "training_state"}
        if kept:
            self.manifest.record([f"kept_{step:07d}.pt"])
            save_checkpoint(weights, self.path / f"kept_{step:07d}.pt")
        if keep_last > 0:
            self.manifest.record([f"step_{step:07d}.pt"])
            save_checkpoint(weights, self.path / f"step_{step:07d}.pt")
            for old in sorted(self.path.glob("step_*.pt"))[:-keep_last]:
                old.unlink()
        log.debug("saved %s at step %d", self.path / "last.pt", step)

    def save_best(self, ckpt: dict[str, Any]) -> None:
        save_checkpoint(ckpt, self.path / "best.pt")

    def last_good(self) -> str:
        """Where to go on from, for an error message: a checkpoint that exists, or none."""
        last = self.path / "last.pt"
        if last.is_file():
            return (f"The last good checkpoint is {last}; lower train.lr or raise "
                    "train.warmup_steps, then resume")
        return ("No checkpoint was saved before; lower train.lr or raise train.warmup_steps "
                "and start again")

    def close_log(self) -> None:
        """Stop writing ``train.log``."""
        if self._file_log is not None:
            logging.getLogger("transformer_mt").removeHandler(self._file_log)
            self._file_log.close()
            self._file_log = None

    def release(self) -> None:
        """Let go of the directory's lock."""
        self._held.close()
