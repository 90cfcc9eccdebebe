"""What the server's processes share: the rate limits' counts and the translation cache.

In memory by default (one process). With ``--shared-storage redis://HOST:PORT/DB``, in Redis:
every process, on one machine or many behind a load balancer, counts one limit per client and
reads one cache (as LibreTranslate's ``--shared-storage``). A Redis that cannot be reached at
start is a one-line error. One that goes away while serving costs no request: each process
falls back to its own memory (one warning line; a client may then get up to N times its limit,
a cached sentence is decoded again) and tries Redis again every ``RETRY_S`` seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import asdict
from typing import Any

from cachetools import LRUCache
from limits import RateLimitItem
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

from transformer_mt.errors import MTError
from transformer_mt.translate import Translation

log = logging.getLogger("transformer_mt.serve")

TIMEOUT_S = 0.5  # a Redis call slower than this counts as Redis being away
RETRY_S = 5.0  # how long a process keeps to its own memory after Redis failed
TTL_S = 7 * 24 * 3600  # a cached translation's life in Redis (its memory policy may end it first)
CACHE_UNIT = 64  # output tokens: a cached entry counts one unit per 64 of its n-best's


def cache_units(hyps: list[Translation]) -> int:
    """What a cached sentence's translations weigh against ``--cache-size``: an n-best of 32
    long outputs weighs as much as the ~30 one-best translations its memory would hold."""
    return max(1, -(-sum(len(h.tokens) + 1 for h in hyps) // CACHE_UNIT))


class Storage:
    """Rate-limit counts and cached translations, in this process or in Redis."""

    def __init__(self, cache_size: int, uri: str | None = None, model_id: str = "") -> None:
        self._cache: LRUCache[Any, list[Translation]] = LRUCache(
            max(cache_size, 1), getsizeof=cache_units)
        self._lock = threading.Lock()
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self.uri, self._down_until = uri, 0.0
        self._redis: Any = None
        self._shared_limiter: MovingWindowRateLimiter | None = None
        self._prefix = f"mt:{model_id}:"  # models sharing a Redis never share translations
        if uri:
            self._connect(uri)

    def _connect(self, uri: str) -> None:
        try:
            import redis
        except ModuleNotFoundError as exc:
            from transformer_mt.packages import missing_error

            raise missing_error(["redis"], ["--shared-storage"]) from exc
        try:
            self._redis = redis.Redis.from_url(uri, socket_timeout=TIMEOUT_S,
                                               socket_connect_timeout=TIMEOUT_S)
            self._redis.ping()
            storage = storage_from_string(uri, wrap_exceptions=True, socket_timeout=TIMEOUT_S,
                                          socket_connect_timeout=TIMEOUT_S)
        except (ValueError, redis.RedisError) as exc:
            raise MTError(f"--shared-storage '{uri}': cannot reach Redis there ({exc}); give "
                          "redis://HOST:PORT/DB of a running Redis") from None
        self._shared_limiter = MovingWindowRateLimiter(storage)

    # ------------------------------------------------------------------ Redis, or memory

    def _shared(self) -> bool:
        return self._redis is not None and time.monotonic() >= self._down_until

    def _away(self, exc: Exception) -> None:
        if time.monotonic() >= self._down_until:
            log.warning("shared storage %s is not answering (%s): limits and cache in this "
                        "process's memory; Redis again in %g s", self.uri,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__, RETRY_S)
        self._down_until = time.monotonic() + RETRY_S

    # ------------------------------------------------------------------ rate limits

    def hit(self, item: RateLimitItem, client: str, name: str, cost: int) -> bool:
        """Count ``cost`` against ``client``'s ``name`` limit; False if it is over."""
        if self._shared() and self._shared_limiter is not None:
            try:
                return bool(self._shared_limiter.hit(item, name, client, cost=cost))
            except Exception as exc:  # limits' StorageError, whatever Redis raised under it
                self._away(exc)
        return bool(self._limiter.hit(item, name, client, cost=cost))

    # ------------------------------------------------------------------ translations

    def _key(self, settings: str, ids: list[int]) -> str:
        return self._prefix + hashlib.sha256(json.dumps([settings, ids]).encode()).hexdigest()

    def get(self, settings: str, ids_list: list[list[int]]) -> list[list[Translation] | None]:
        """The cached translations of each source (None: not cached)."""
        if self._shared():
            try:
                raw = self._redis.mget([self._key(settings, ids) for ids in ids_list])
                return [None if r is None else [Translation(**h) for h in json.loads(r)]
                        for r in raw]
            except Exception as exc:  # redis' errors: away; a bad entry: not cached
                self._away(exc)
        with self._lock:
            return [self._cache.get((settings, tuple(ids))) for ids in ids_list]

    def put(self, settings: str, ids: list[int], hyps: list[Translation]) -> None:
        if cache_units(hyps) > self._cache.maxsize:  # it cannot fit
            return
        if self._shared():
            value = json.dumps([asdict(h) | {"attention": None} for h in hyps])
            try:
                self._redis.set(self._key(settings, ids), value, ex=TTL_S)
                return
            except Exception as exc:
                self._away(exc)
        with self._lock:
            self._cache[(settings, tuple(ids))] = hyps
