"""Dynamic batching: requests that arrive together are decoded together.

One worker thread owns the translator. Each request becomes a :class:`Job` in a bounded queue
(a full queue refuses at once: the server answers 503 instead of queueing without bound). The
worker takes the first waiting job, then keeps taking jobs until the batch holds
``batch_tokens`` source tokens or ``max_wait`` has passed since the first (it does not wait
where no other request can join: none on its way to the queue, and the last batch was one
request); it groups the jobs by
decoding settings, decodes each group as one call of the engine (which sorts by length into
its own batches) and hands every job its own results, in its own order.
``batching=False`` decodes each request alone (what the load benchmark compares against).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from transformer_mt.config import DecodeConfig
from transformer_mt.translate import Translation, Translator

log = logging.getLogger(__name__)


POLL_S = 0.0005  # how often a batch that waits for arriving requests looks at the queue


class QueueFullError(Exception):
    """The queue holds as many requests as it may: try again later (HTTP 503)."""


@dataclass
class Job:
    """One request's sentences and settings, and where its result goes."""

    sentences: list[str]
    cfg: DecodeConfig
    nbest: int
    done: Callable[[list[list[Translation]] | BaseException], None]
    cancelled: bool = False
    call: Callable[[], Any] | None = None  # instead of decoding: run this on the worker
    ids: list[list[int]] = field(default_factory=list)  # encoded by the worker
    nonempty: list[int] = field(default_factory=list)

    @property
    def key(self) -> str:
        """Jobs with the same key are decoded in one call."""
        return json.dumps([dataclasses.asdict(self.cfg), self.nbest], sort_keys=True)


@dataclass
class BatchStats:
    """What the worker did, for the metrics: called with each decoded group."""

    on_batch: Callable[[int, int, float], None] = lambda requests, sentences, seconds: None


class Batcher:
    """The decoding worker and its queue (``max_queue`` requests)."""

    def __init__(self, translator: Translator, batch_tokens: int = 4096, max_wait: float = 0.01,
                 max_queue: int = 256, batching: bool = True,
                 stats: BatchStats | None = None,
                 arriving: Callable[[], int] = lambda: 1) -> None:
        """``arriving``: how many requests the server has received but not yet queued (a
        batch waits up to ``max_wait`` only while there are some; by default, always)."""
        self.translator = translator
        self.arriving = arriving
        self._last_batch = 1  # requests in the last batch
        self.batch_tokens, self.max_wait, self.batching = batch_tokens, max_wait, batching
        self.jobs: queue.Queue[Job | None] = queue.Queue(maxsize=max_queue)
        self.stats = stats or BatchStats()
        self._thread = threading.Thread(target=self._run, name="decoder", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Queue ``job``, or raise :class:`QueueFullError` at once."""
        try:
            self.jobs.put_nowait(job)
        except queue.Full:
            raise QueueFullError from None

    async def translate(self, sentences: list[str], cfg: DecodeConfig, nbest: int = 1,
                        timeout: float | None = None) -> list[list[Translation]]:
        """Queue the sentences and wait for their translations (``TimeoutError`` past
        ``timeout`` seconds; the job is then dropped if it has not started)."""
        future: asyncio.Future[list[list[Translation]]] = \
            asyncio.get_running_loop().create_future()
        return await self._wait(Job(list(sentences), cfg, nbest, _settler(future)), future,
                                timeout)

    async def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run ``fn`` on the worker (which owns the model), in turn with the decoding."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        job = Job([], DecodeConfig(), 1, _settler(future), call=fn)
        return await self._wait(job, future, timeout)

    async def _wait(self, job: Job, future: asyncio.Future[Any], timeout: float | None) -> Any:
        self.submit(job)
        try:
            return await asyncio.wait_for(future, timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            job.cancelled = True
            raise

    def waiting(self) -> int:
        return self.jobs.qsize()

    def close(self, timeout: float | None = None) -> None:
        """Finish the queued jobs, then stop the worker."""
        self.jobs.put(None)
        self._thread.join(timeout)

    # ------------------------------------------------------------------------ the worker

    def _run_call(self, job: Job) -> None:
        if job.cancelled or job.call is None:
            return
        try:
            job.done(job.call())
        except Exception as exc:
            job.done(exc)

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self.jobs.get()
            if first is None:
                return
            if first.call is not None:
                self._run_call(first)
                continue
            batch, stop = self._gather(first)
            groups: dict[str, list[Job]] = {}
            for job in batch:
                groups.setdefault(job.key, []).append(job)
            for jobs in groups.values():
                self._decode(jobs)

    def _gather(self, first: Job) -> tuple[list[Job], bool]:
        """The first job and those that join it before the batch closes; and whether the
        queue was closed meanwhile."""
        batch = [first]
        tokens = self._encode(first)
        deadline = time.monotonic() + self.max_wait
        while self.batching and tokens < self.batch_tokens:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                # wait only where others may join: requests on their way (received, not yet
                # queued), or clients that sent together before. A lone client's request is
                # decoded at once
                waiting_for = self.arriving() > 0 or self._last_batch > 1
                if not waiting_for or time.monotonic() >= deadline:
                    break
                time.sleep(POLL_S)
                continue
            if job is None:
                return batch, True
            if job.call is not None:  # not a translation: run it now, in arrival order
                self._run_call(job)
                continue
            batch.append(job)
            tokens += self._encode(job)
        self._last_batch = len(batch)
        return batch, False

    def _encode(self, job: Job) -> int:
        try:
            job.nonempty = [i for i, s in enumerate(job.sentences) if s.strip()]
            job.ids = self.translator.encode([job.sentences[i] for i in job.nonempty])
        except Exception as exc:  # a tokenizer failing on one request fails that request
            job.done(exc)
            job.cancelled = True
        return sum(len(x) for x in job.ids)

    def _decode(self, jobs: list[Job]) -> None:
        jobs = [j for j in jobs if not j.cancelled]
        if not jobs:
            return
        ids = [x for j in jobs for x in j.ids]
        start = time.perf_counter()
        try:
            results = self.translator.translate_ids(ids, jobs[0].cfg, jobs[0].nbest)
        except Exception as exc:  # e.g. a beam too wide: every job of the group hears it
            log.debug("decoding failed: %s", exc)
            for job in jobs:
                job.done(exc)
            return
        self.stats.on_batch(len(jobs), len(ids), time.perf_counter() - start)
        at = 0
        for job in jobs:
            out: list[list[Translation]] = [[Translation("", [], 0.0)]
                                             for _ in job.sentences]
            for i in job.nonempty:
                out[i] = results[at]
                at += 1
            job.done(out)


def _settler(future: asyncio.Future[Any]) -> Callable[[Any], None]:
    """A callback for the worker thread that settles ``future`` on its event loop."""
    loop = future.get_loop()

    def done(result: Any) -> None:
        def settle() -> None:
            if future.done():
                return
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        loop.call_soon_threadsafe(settle)

    return done
