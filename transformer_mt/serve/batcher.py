"""Dynamic batching: requests that arrive together are decoded together.

Requests become :class:`Job`\\ s (source ids, decoding settings) in a bounded queue on the
event loop (a full queue refuses at once: the server answers 429 instead of queueing without
bound). A scheduler task takes the first waiting job, then keeps taking jobs until the batch
holds ``batch_tokens`` source tokens or ``max_wait`` has passed since the first; it waits,
on an event and never by polling, only where another request can join: some are on their way
to the queue (received, not yet queued), or the last batch was of several requests. A lone
client's request is decoded at once. The batch's jobs are grouped by decoding settings and each
group decoded in one worker thread, the only one that touches the model, a length-sorted chunk
at a time: between chunks, the sentences of jobs that were cancelled (timed out, or their
client left) are dropped, and a chunk whose jobs are all cancelled stops at its next decoding
step (``decode/stopping.py``; ``--compile``'s graphs at the next chunk), so that nobody's
abandoned request holds the worker.
``batching=False`` decodes each request alone (what the load benchmark compares against).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from transformer_mt.config import DecodeConfig
from transformer_mt.decode.stopping import StoppedError
from transformer_mt.translate import Translation, Translator

log = logging.getLogger(__name__)

_alone = itertools.count()


@functools.lru_cache(maxsize=1)
def decoder_thread() -> ThreadPoolExecutor:
    """The process's one thread that runs the model: it loads it (``mt serve``), warms it up
    and decodes every batch. One thread, because each thread that runs PyTorch's operators
    gets a team of OpenMP threads of its own, and two teams on a small machine slow each
    other down: on 2 cores, decoding a lone sentence took 24 ms where the model was only ever
    touched by this thread, and 40-45 ms once the event loop's thread had run it too."""
    return ThreadPoolExecutor(1, thread_name_prefix="decoder")


class QueueFullError(Exception):
    """The queue holds as many requests as it may: try again later (HTTP 429)."""


class StoppingError(Exception):
    """The server is stopping and this request was not done within the grace period."""


@dataclass(eq=False)
class Job:
    """One request's sources and settings, and where its result goes."""

    ids: list[list[int]]
    cfg: DecodeConfig
    nbest: int = 1
    alone: bool = False  # decoded in a group of its own (a seeded sampling request)
    call: Callable[[], Any] | None = None  # instead of decoding: run this on the worker
    future: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop()
                                        .create_future())
    cancelled: bool = False
    key: str = ""

    def __post_init__(self) -> None:
        self.key = json.dumps([dataclasses.asdict(self.cfg), self.nbest], sort_keys=True)
        if self.alone:
            self.key += f"#{next(_alone)}"

    @property
    def tokens(self) -> int:
        return sum(len(x) for x in self.ids)


@dataclass
class BatchStats:
    """What the worker did, for the metrics: called with each decoded group."""

    on_batch: Callable[[int, int, float], None] = lambda requests, sentences, seconds: None


class Batcher:
    """The decoding worker and its queue (``max_queue`` requests). Create it, and use it, on
    the server's event loop."""

    def __init__(self, translator: Translator, batch_tokens: int = 4096, max_wait: float = 0.01,
                 max_queue: int = 256, batching: bool = True,
                 stats: BatchStats | None = None, widest: int = 0) -> None:
        self.translator = translator
        self.widest = widest  # an n-best list's different texts searched up to this wide
        self.batch_tokens, self.max_wait, self.batching = batch_tokens, max_wait, batching
        self.max_queue = max_queue
        self.stats = stats or BatchStats()
        self.arriving = 0  # requests received, not yet queued (the server counts them)
        self._jobs: deque[Job] = deque()
        self._wake = asyncio.Event()
        self._closing = False
        self._last_batch = 1  # requests in the last batch
        self._current: list[Job] = []  # the jobs being decoded
        self._executor = decoder_thread()
        self._task = asyncio.get_running_loop().create_task(self._schedule())

    # ------------------------------------------------------------------------ requests

    def arrived(self) -> None:
        """A request counted in ``arriving`` has been queued or has failed."""
        self.arriving -= 1
        self._wake.set()

    async def translate(self, ids: list[list[int]], cfg: DecodeConfig, nbest: int = 1,
                        alone: bool = False, queued: Callable[[], None] | None = None
                        ) -> list[list[Translation]]:
        """Queue the sources and wait for their translations (``queued`` is called once they
        are in the queue). Cancelling the wait (a time limit, a client that left) cancels the
        job: what has not been decoded is dropped."""
        return await self._wait(Job(ids, cfg, nbest, alone), queued)

    async def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the worker (which owns the model), in turn with the decoding."""
        return await self._wait(Job([], DecodeConfig(), call=fn))

    async def _wait(self, job: Job, queued: Callable[[], None] | None = None) -> Any:
        if self._closing:
            raise StoppingError
        if len(self._jobs) >= self.max_queue:
            raise QueueFullError
        self._jobs.append(job)
        if queued is not None:
            queued()
        self._wake.set()
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            job.cancelled = True
            if job in self._jobs:  # not started: it leaves the queue
                self._jobs.remove(job)
            raise

    def waiting(self) -> int:
        return len(self._jobs)

    def abort(self) -> None:
        """Every job not yet done fails with :class:`StoppingError` (the grace period is over):
        the queued ones, and those being decoded (which stop at their next chunk)."""
        for job in [*self._jobs, *self._current]:
            job.cancelled = True
            if not job.future.done():
                job.future.set_exception(StoppingError())
        self._jobs.clear()

    async def close(self) -> None:
        """Finish the queued jobs, then stop the worker."""
        self._closing = True
        self._wake.set()
        await self._task  # (the decoder thread is the process's: it stays)

    # ------------------------------------------------------------------------ the scheduler

    async def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._jobs:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
            batch = await self._gather()
            if batch[0].call is not None:
                await self._run(batch[0], loop.run_in_executor(self._executor, batch[0].call))
                continue
            groups: dict[str, list[Job]] = {}
            for job in batch:
                groups.setdefault(job.key, []).append(job)
            self._current = batch
            for jobs in groups.values():
                await loop.run_in_executor(self._executor, self._decode, jobs)
            self._current = []

    async def _gather(self) -> list[Job]:
        """The first job and those that join it before the batch closes."""
        first = self._jobs.popleft()
        batch = [first]
        if first.call is not None:
            return batch
        tokens = first.tokens
        deadline = time.monotonic() + self.max_wait
        while self.batching and tokens < self.batch_tokens:
            if self._jobs:
                if self._jobs[0].call is not None:  # not a translation: after this batch
                    break
                job = self._jobs.popleft()
                batch.append(job)
                tokens += job.tokens
                continue
            # wait only where others may join: requests on their way, or clients that sent
            # together before. A lone client's request is decoded at once
            left = deadline - time.monotonic()
            if left <= 0 or self._closing or not (self.arriving > 0 or self._last_batch > 1):
                break
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except asyncio.TimeoutError:
                break
        self._last_batch = len(batch)
        return batch

    @staticmethod
    async def _run(job: Job, work: asyncio.Future[Any]) -> None:
        try:
            result = await work
        except Exception as exc:
            if not job.future.done():
                job.future.set_exception(exc)
            return
        if not job.future.done():
            job.future.set_result(result)

    # ------------------------------------------------------------------------ the worker

    def _decode(self, jobs: list[Job]) -> None:
        """Decode a group of jobs with the same settings (in the worker thread), a chunk of
        ``decode.batch_size`` length-sorted sentences at a time, skipping cancelled jobs."""
        cfg, nbest = jobs[0].cfg, jobs[0].nbest
        wanted = sorted(((len(x), j, i) for j, job in enumerate(jobs)
                         for i, x in enumerate(job.ids)), reverse=True)
        results: list[list[list[Translation]]] = [[[]] * len(job.ids) for job in jobs]
        failed: dict[int, BaseException] = {}
        start, decoded = time.perf_counter(), 0
        chunk_size = max(cfg.batch_size, 1)
        for at in range(0, len(wanted), chunk_size):
            chunk = [(j, i) for _, j, i in wanted[at:at + chunk_size]
                     if not jobs[j].cancelled and j not in failed]
            if not chunk:
                continue
            chunk_jobs = [jobs[j] for j in {j for j, _ in chunk}]
            try:
                out = self.translator.translate_ids(
                    [jobs[j].ids[i] for j, i in chunk], cfg, nbest,
                    stop=functools.partial(_all_cancelled, chunk_jobs), widest=self.widest)
            except StoppedError:  # every job of the chunk was cancelled while it decoded
                continue
            except Exception as exc:  # e.g. a beam too wide: every job of the chunk hears it
                log.debug("decoding failed: %s", exc)
                for j, _ in chunk:
                    failed[j] = exc
                continue
            decoded += len(chunk)
            for (j, i), hyps in zip(chunk, out, strict=True):
                results[j][i] = hyps
        self.stats.on_batch(sum(not job.cancelled for job in jobs), decoded,
                            time.perf_counter() - start)
        for j, job in enumerate(jobs):
            outcome: Any = failed.get(j, results[j])
            job.future.get_loop().call_soon_threadsafe(_settle, job.future, outcome)


def _all_cancelled(jobs: list[Job]) -> bool:
    return all(job.cancelled for job in jobs)


def _settle(future: asyncio.Future[Any], outcome: Any) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
