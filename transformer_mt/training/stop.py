"""Stopping a run on SIGINT/SIGTERM: finish the current step, save ``last.pt``, exit 128 + N;
before the first step (preparing the data and the model), stop at once. And the clock of
``train.max_minutes``, a budget in time.

The handler only records the signal; the loop asks :meth:`StopSignals.agreed` after each step,
so a checkpoint is never written half-way through one. Under torchrun the ranks agree (at log
steps, through one all-reduce) so that all of them save and stop at the same step. The handler
logs nothing: it runs between two of the main thread's bytecodes, maybe inside the log's own
write to train.log, and a second write there fails ("reentrant call inside BufferedWriter", a
traceback on stderr); the signal is announced after the step instead.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from transformer_mt.errors import TrainingError
from transformer_mt.training.distributed import DistInfo

if TYPE_CHECKING:
    from transformer_mt.training.state import Progress

log = logging.getLogger(__name__)


class StopRequestedError(TrainingError):
    """Training stopped on SIGINT/SIGTERM after saving a checkpoint."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


class StopSignals:
    """SIGINT/SIGTERM ask the loop to save and stop after the current step; a second one
    stops at once."""

    def __init__(self, dist_info: DistInfo, device: torch.device, log_every: int) -> None:
        self.dist, self.device, self.log_every = dist_info, device, log_every
        self.signum: int | None = None
        self.stepping = False  # set by the loop; before it (data, model) a signal stops at once
        self.refused: StopRequestedError | None = None  # what a signal while preparing raised
        self.announced = False  # the signal logged (after the step it arrived in)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Handle the signals while the block runs; the previous handlers afterwards."""
        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not in the main thread
                previous[signum] = signal.signal(signum, self._on_signal)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signum is not None:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        if not self.stepping:  # preparing data or the model (minutes, maybe): nothing to save
            self.refused = StopRequestedError(
                f"stopped by {signal.Signals(signum).name} while preparing, before the first "
                "step: nothing trained, nothing saved", signum)
            raise self.refused
        self.signum = signum

    def start_stepping(self) -> None:
        """From here a signal stops the loop after a step, with a save. One that came while
        preparing stops the run now: its error may have been caught on the way, by a library
        that turns what it meets into an error of its own and goes on without."""
        if self.refused is not None:
            raise self.refused
        self.stepping = True

    def agreed(self, step: int) -> bool:
        """Whether to stop now: a signal arrived (on any rank; ranks agree at log steps only)."""
        signum = self.signum
        stop = signum is not None
        if signum is not None and not self.announced:
            self.announced = True
            log.warning("received %s by step %d: saving, then stopping",
                        signal.Signals(signum).name, step)
        if not self.dist.enabled:
            return stop
        if step % self.log_every:
            return False
        flag = torch.tensor([1.0 if stop else 0.0], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def error(self, step: int, last: Path, start: str = "auto") -> StopRequestedError:
        """The error that ends the run, once ``last`` is saved; how to resume it (the same
        command again would refuse the run with ``--start new``, delete it with ``overwrite``)."""
        signum = self.signum or signal.SIGTERM
        how = ("run the same command again" if start in ("auto", "resume")
               else f"run the same command with --start resume in place of --start {start}")
        return StopRequestedError(
            f"stopped by {signal.Signals(signum).name} at step {step}; checkpoint saved to "
            f"{last}; {how} to resume", signum)


class TrainingClock:
    """The run's training time, ``Progress.seconds`` (steps, validations and saves, summed over
    resumes; not preparing the data or the model), which ``train.max_minutes`` limits. Under
    torchrun the ranks' clocks differ a little: they take the largest at log steps only, so
    that every rank ends the run at the same step."""

    def __init__(self, dist_info: DistInfo, device: torch.device, log_every: int) -> None:
        self.dist, self.device, self.log_every = dist_info, device, log_every
        self.mark = time.perf_counter()

    def start(self) -> None:
        """Count from now (the loop's first step; a resumed run adds to its saved time)."""
        self.mark = time.perf_counter()

    def tick(self, progress: Progress) -> None:
        """Add the time since the last tick to ``progress.seconds`` (at the end of a step)."""
        if self.dist.enabled and progress.step % self.log_every:
            return
        now = time.perf_counter()
        seconds, self.mark = progress.seconds + now - self.mark, now
        if self.dist.enabled:
            total = torch.tensor([seconds], dtype=torch.float64, device=self.device)
            dist.all_reduce(total, op=dist.ReduceOp.MAX)
            seconds = float(total.item())
        progress.seconds = seconds
