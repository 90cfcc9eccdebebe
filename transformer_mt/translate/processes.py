"""``--workers N`` (``mt translate``, ``mt evaluate``, ``Translator.load(workers=N)``): a
corpus's batches decoded by N processes on the CPU, this one and N - 1 more, the cores shared
out between them (``cores // N`` threads each).

Why: at 32 sentences a batch, a second thread gains little for the matrix products oneDNN runs
(docs/measurements/notes-2026-12.md: on a 2-core AVX2 CPU one process of two threads decoded
147-185 sentences a second, two processes of one thread each 247.6), so on a CPU of few cores
N processes of one thread each decode faster than one process of N threads.

How: decoding sorts the sources by length and cuts them into batches (``decode_corpus``); each
batch is decoded as it would be in one process, whichever process takes it, so the
translations are the same (``tests/system/test_processes.py``). The processes take the batches
one at a time from a shared counter, this one too, so that a process still starting (the
first call starts them; they stay for the engine's later calls) costs nothing: this one does
what they do not. They get the models through shared memory (nothing is read again) and ignore
Ctrl-C, which reaches this one; one that fails or ends leaves its batches to this process,
which then decodes in-process only, with a warning.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.queues
import os
import queue
import signal
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from transformer_mt.config import DecodeConfig
from transformer_mt.decode.search import Hypothesis, batches_of
from transformer_mt.device import threads_per_process
from transformer_mt.model.transformer import Transformer

log = logging.getLogger(__name__)

# fork on Linux: no start-up (torch and the models are there already; each process sets its
# threads before it decodes, as DataLoader's workers do); spawn elsewhere (macOS: fork is unsafe)
START = "fork" if sys.platform == "linux" else "spawn"
Decode = Callable[[Sequence[Sequence[int]]], list[list[Hypothesis]]]


class Workers:
    """N - 1 processes beside this one, each with its copy of the engine's models."""

    def __init__(self, members: Sequence[Transformer], compile: bool, processes: int) -> None:
        context: Any = multiprocessing.get_context(START)
        if context.get_start_method() == "spawn":
            for m in members:
                m.share_memory()
        self.threads = threads_per_process(processes)
        self._claims = context.Array("q", [0, 0])  # the call's number, its next batch
        self._results: multiprocessing.queues.Queue[Any] = context.Queue()
        self._tasks = [context.Queue() for _ in range(processes - 1)]
        self._call = 0
        self._procs = [context.Process(
            target=_work, args=(list(members), compile, self.threads, tasks, self._results,
                                self._claims), daemon=True, name=f"mt-decode-{n + 1}")
            for n, tasks in enumerate(self._tasks)]
        for p in self._procs:
            p.start()
        log.info("decoding the batches in %d processes of %d thread(s) each", processes,
                 self.threads)
        self.broken = False
        self.decoded_elsewhere = 0  # batches the other processes decoded, all calls together
        self._finalizer = weakref.finalize(self, _stop, self._procs, self._tasks, self._claims)

    def decode(self, ids: Sequence[Sequence[int]], cfg: DecodeConfig, nbest: int,
               scores: bool, here: Decode, progress: Callable[[int], object]
               ) -> list[list[Hypothesis]]:
        """Each source's hypotheses, as ``here`` (this process's decoding of some sources)
        gives them, the batches shared with the other processes."""
        batches = [[list(ids[i]) for i in b] for b in batches_of(ids, cfg.batch_size)]
        self._call += 1
        with self._claims.get_lock():
            self._claims[0], self._claims[1] = self._call, 0
        if not self.broken and any(p.exitcode is not None for p in self._procs):
            self._break("a decoding process ended")
        for tasks in [] if self.broken else self._tasks:
            tasks.put((self._call, batches, cfg, nbest, scores))
        done: dict[int, list[list[Hypothesis]]] = {}
        # (a call that raises leaves the others its batches: they are told of the next call,
        # and what they send of this one is not read)
        while (i := _claim(self._claims, self._call, len(batches))) is not None:
            done[i] = here(batches[i])
            progress(len(batches[i]))
            self._collect(done, progress, wait=False)
        while len(done) < len(batches) and not self.broken:
            self._collect(done, progress, wait=True)
        for i in sorted(set(range(len(batches))) - done.keys()):  # a failed process's
            done[i] = here(batches[i])
            progress(len(batches[i]))
        out: list[list[Hypothesis]] = [[] for _ in ids]
        for positions, i in zip(batches_of(ids, cfg.batch_size), range(len(batches)),
                                strict=True):
            for position, hyps in zip(positions, done[i], strict=True):
                out[position] = hyps
        return out

    def _collect(self, done: dict[int, list[list[Hypothesis]]],
                 progress: Callable[[int], object], wait: bool) -> None:
        """The results the other processes sent for this call (waiting for one with
        ``wait``); a process that ended or failed breaks the pool."""
        while True:
            try:
                call, i, hyps = self._results.get(timeout=1.0) if wait else \
                    self._results.get_nowait()
            except queue.Empty:
                if wait and any(p.exitcode is not None for p in self._procs):
                    self._break("a decoding process ended")
                return
            if call != self._call:  # an earlier call's, which ended without it
                continue
            if isinstance(hyps, str):
                self._break(hyps)
                return
            done[i] = hyps
            progress(len(hyps))
            self.decoded_elsewhere += 1
            wait = False

    def _break(self, why: str) -> None:
        log.warning("decoding in this process alone from now on: %s", why)
        self.close()

    def close(self) -> None:
        """Stop the other processes (this one decodes alone from now on)."""
        self.broken = True
        self._finalizer()


def _claim(claims: Any, call: int, batches: int) -> int | None:
    """The next batch of call ``call`` no process has taken, or None."""
    with claims.get_lock():
        if claims[0] != call or claims[1] >= batches:
            return None
        claims[1] += 1
        return int(claims[1] - 1)


def _stop(procs: list[Any], tasks: list[Any], claims: Any) -> None:
    """Stop the processes: no batch left to take (a call stopped by Ctrl-C had some), then
    told to end; one still busy after 2 s is killed."""
    with claims.get_lock():
        claims[0] = 0
    for q in tasks:
        with contextlib.suppress(Exception):
            q.put(None)
    for p in procs:
        p.join(timeout=2)
        if p.is_alive():
            p.kill()
            p.join()


def _work(members: list[Transformer], compile: bool, threads: int, tasks: Any, results: Any,
          claims: Any) -> None:
    """A decoding process: each call's batches it can claim, decoded, until told to stop."""
    from transformer_mt.translate.engines import TorchEngine

    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the first process's to handle
    torch.set_num_threads(threads)
    engine = TorchEngine(members, torch.device("cpu"), compile=compile)
    while (task := _next(tasks, parent)) is not None:
        call, batches, cfg, nbest, scores = task
        while (i := _claim(claims, call, len(batches))) is not None:
            try:
                results.put((call, i, engine.decode(batches[i], cfg, nbest, scores=scores)))
            except Exception as exc:  # this process's failure: the first one decodes it
                results.put((call, i, f"{type(exc).__name__}: {exc}"))


def _next(tasks: Any, parent: int) -> Any:
    """The next call's task; None to stop (told so, or the first process is gone: killed)."""
    while True:
        try:
            return tasks.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent:
                return None
