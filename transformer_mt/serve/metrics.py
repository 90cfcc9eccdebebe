"""The server's Prometheus metrics (``GET /metrics``): requests by route and status, their
latency, the batches the worker decodes (requests and sentences in each, seconds), the queue's
depth and the sentences answered from the cache; each server its own registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.requests = Counter("mt_requests", "HTTP requests", ["route", "status"],
                                registry=registry)
        self.latency = Histogram("mt_request_seconds", "time to answer a request", ["route"],
                                 registry=registry)
        self.batch_sentences = Histogram("mt_batch_sentences", "sentences decoded together",
                                         buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
                                         registry=registry)
        self.batch_requests = Histogram("mt_batch_requests", "requests decoded together",
                                        buckets=(1, 2, 4, 8, 16, 32, 64), registry=registry)
        self.decode_seconds = Histogram("mt_batch_seconds", "time to decode one batch",
                                        registry=registry)
        self.queue_depth = Gauge("mt_queue_depth", "requests waiting for the decoder",
                                 registry=registry)
        self.cache_hits = Counter("mt_cache_hits", "sentences answered from the cache",
                                  registry=registry)
        self.memory_hits = Counter("mt_memory_hits", "sentences translated as mt serve "
                                   "--memory holds them", registry=registry)

    def on_batch(self, n_requests: int, n_sentences: int, seconds: float) -> None:
        self.batch_requests.observe(n_requests)
        self.batch_sentences.observe(n_sentences)
        self.decode_seconds.observe(seconds)
