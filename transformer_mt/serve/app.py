"""``mt serve``: a translation server (FastAPI on uvicorn) around a loaded :class:`Translator`.

    GET  /               the page: translate, see scores, n-best, attention and each step
    GET  /health         200 once the model is loaded and the decoder runs
    GET  /v1/info        languages, tokenizer, sizes, step, validation score, limits
    POST /v1/translate   {"text": [...], "beam": 5, "nbest": 3, "attention": true, "topk": 5}
    POST /translate      LibreTranslate's API ({"q", "source", "target"}); GET /languages
    GET  /metrics        Prometheus: requests, latencies, batch sizes, queue depth

Every answer to a bad request is a 4xx with ``{"error": "one line"}``, and the server keeps
serving: 400 (not UTF-8, not JSON), 401 (API key), 413 (body too large), 422 (a field wrong or
beyond the limits), 503 (the queue is full: try again), 504 (not done within the time limit).
"""

from __future__ import annotations

import contextlib
import hmac
import importlib.resources
import json
import logging
import signal
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from pydantic import BaseModel, ValidationError

from transformer_mt.engines import TorchEngine
from transformer_mt.errors import MTError
from transformer_mt.languages import language_name
from transformer_mt.serve.api import (
    LibreTranslateRequest,
    Limits,
    TranslateRequest,
    check_request,
    decode_settings,
    info_json,
    translation_json,
)
from transformer_mt.serve.batcher import Batcher, BatchStats, QueueFullError
from transformer_mt.trace import beam_steps, look_inside
from transformer_mt.translate import Translator

log = logging.getLogger("transformer_mt.serve")


@dataclass
class ServeOptions:
    """How the server batches, what it accepts, and what it says about the model."""

    limits: Limits = field(default_factory=Limits)
    api_key: str | None = None
    batch_tokens: int = 4096  # a batch closes at this many source tokens ...
    max_wait_ms: float = 10.0  # ... or this long after its first request
    max_queue: int = 256  # requests waiting; beyond, 503
    batching: bool = True  # False: each request decoded alone
    engine: str = "torch"
    about: dict[str, Any] = field(default_factory=dict)  # step, validation score, ...


class RequestError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def create_app(translator: Translator, options: ServeOptions | None = None) -> FastAPI:
    """The ASGI application; its decoding worker starts and stops with the app's lifespan."""
    options = options or ServeOptions()
    limits = options.limits
    registry = CollectorRegistry()
    requests = Counter("mt_requests", "HTTP requests", ["route", "status"], registry=registry)
    latency = Histogram("mt_request_seconds", "time to answer a request", ["route"],
                        registry=registry)
    batch_sentences = Histogram("mt_batch_sentences", "sentences decoded together",
                                buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
                                registry=registry)
    batch_requests = Histogram("mt_batch_requests", "requests decoded together",
                               buckets=(1, 2, 4, 8, 16, 32, 64), registry=registry)
    decode_seconds = Histogram("mt_batch_seconds", "time to decode one batch",
                               registry=registry)
    queue_depth = Gauge("mt_queue_depth", "requests waiting for the decoder", registry=registry)

    def on_batch(n_requests: int, n_sentences: int, seconds: float) -> None:
        batch_requests.observe(n_requests)
        batch_sentences.observe(n_sentences)
        decode_seconds.observe(seconds)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher = Batcher(translator, options.batch_tokens, options.max_wait_ms / 1000,
                          options.max_queue, options.batching, BatchStats(on_batch),
                          arriving=lambda: app.state.arriving)
        queue_depth.set_function(batcher.waiting)
        app.state.batcher = batcher
        yield
        batcher.close()  # what is queued is finished first
        app.state.batcher = None

    app = FastAPI(title="transformer_mt", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url="/v1/openapi.json")
    app.state.batcher = None  # the decoding worker, while the app runs
    app.state.arriving = 0  # translation requests received, not yet queued

    @contextlib.contextmanager
    def arriving() -> Iterator[None]:
        """Count a translation request as on its way to the queue while the block runs."""
        app.state.arriving += 1
        try:
            yield
        finally:
            app.state.arriving -= 1

    @app.exception_handler(RequestError)
    async def problem(request: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse({"error": exc.message}, exc.status, headers=exc.headers)

    @app.middleware("http")
    async def measure(request: Request, call_next: Any) -> Response:
        start = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "other")
        seconds = time.perf_counter() - start
        requests.labels(route, str(response.status_code)).inc()
        latency.labels(route).observe(seconds)
        log.debug("%s %s %d %.1f ms", request.method, request.url.path, response.status_code,
                  seconds * 1000)
        return response

    def check_key(request: Request, body_key: str | None = None) -> None:
        if options.api_key is None:
            return
        given = body_key or request.headers.get("x-api-key") or ""
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        if not hmac.compare_digest(given.encode(), options.api_key.encode()):
            raise RequestError(401, "a valid API key is required: send it as "
                              "'Authorization: Bearer KEY' (or 'api_key' for LibreTranslate)")

    async def translate(sentences: list[str], req: TranslateRequest) -> list[dict[str, Any]]:
        batcher = app.state.batcher
        if batcher is None:
            raise RequestError(503, "the server is starting or stopping; try again")
        try:
            cfg = decode_settings(translator, req)
            results = await batcher.translate(sentences, cfg, req.nbest, limits.timeout_s)
            insides: list[Any] = [None] * len(sentences)
            beams: list[Any] = [None] * len(sentences)
            if req.attention or req.topk or req.beam_steps:
                if not isinstance(translator.engine, TorchEngine):
                    raise RequestError(422, "'attention', 'topk' and 'beam_steps' need a "
                                       "PyTorch checkpoint (.pt), not an exported model")

                def look() -> tuple[list[Any], list[Any]]:  # on the worker, which owns the model
                    found: tuple[list[Any], list[Any]] = ([], [])
                    for sentence, hyps in zip(sentences, results):
                        x = translator.encode([sentence])[0] if sentence.strip() else None
                        found[0].append(look_inside(translator, x, hyps[0].ids, max(req.topk, 1))
                                        if x and (req.attention or req.topk) else None)
                        found[1].append(beam_steps(translator, x, cfg)
                                        if x and req.beam_steps and cfg.beam_size > 1 else None)
                    return found

                insides, beams = await batcher.call(look, limits.timeout_s)
        except QueueFullError:
            raise RequestError(503, "the server is busy (its queue is full); try again shortly",
                              {"Retry-After": "1"}) from None
        except TimeoutError:
            raise RequestError(504, f"not translated within {limits.timeout_s:g} s; send fewer "
                              "or shorter sentences") from None
        except (MTError, ValueError, TypeError) as exc:
            raise RequestError(422, str(exc).splitlines()[0]) from None
        return [translation_json(r, i, b) for r, i, b in zip(results, insides, beams)]

    async def body(request: Request, model: type[BaseModel]) -> Any:
        """The request body as ``model``: read up to the size limit, UTF-8, JSON (or a form,
        as LibreTranslate clients send), every field checked."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limits.max_body_bytes:
            raise RequestError(413, f"the body is {int(declared):,} bytes; at most "
                              f"{limits.max_body_bytes:,}")
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > limits.max_body_bytes:
                raise RequestError(413, f"the body is over {limits.max_body_bytes:,} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise RequestError(400, "the body is not UTF-8 text") from None
        # JSON whatever the content type says (`curl -d` labels it a form), else a form
        if not text.lstrip().startswith(("{", "[")) and request.headers.get(
                "content-type", "").startswith("application/x-www-form-urlencoded"):
            data: Any = {k: v[0] if len(v) == 1 else v
                         for k, v in urllib.parse.parse_qs(text).items()}
        else:
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise RequestError(400, f"the body is not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise RequestError(422, "the body must be a JSON object, e.g. {\"text\": [\"...\"]}")
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = str(first["loc"][0]) if first["loc"] else "body"
            message = first["msg"]
            if where in ("text", "q") and first["type"] != "missing":
                message = "must be a sentence or a list of sentences (strings)"
            raise RequestError(422, f"'{where}': {message}") from None

    @app.get("/health")
    async def health() -> JSONResponse:
        ready = app.state.batcher is not None
        return JSONResponse({"status": "ready" if ready else "starting"}, 200 if ready else 503)

    @app.get("/v1/info")
    async def info() -> dict[str, Any]:
        return info_json(translator, options.engine, limits, options.about)

    @app.post("/v1/translate")
    async def v1_translate(request: Request) -> dict[str, Any]:
        with arriving():
            check_key(request)
            req = await body(request, TranslateRequest)
            problem = check_request(req, limits)
            if problem:
                raise RequestError(422, problem)
            decoding = translate(req.sentences(), req)
        return {"translations": await decoding}

    src, tgt = translator.config.data.src_lang, translator.config.data.tgt_lang

    @app.post("/translate")
    async def libre_translate(request: Request) -> dict[str, Any]:
        with arriving():
            req = await body(request, LibreTranslateRequest)
            check_key(request, req.api_key)
            if req.source not in (src, "auto") or req.target != tgt:
                raise RequestError(400, f"this model translates {src} into {tgt}, not "
                                   f"{req.source} into {req.target}")
            if req.format not in ("text", "html"):
                raise RequestError(400, "format must be text")
            ours = TranslateRequest(text=req.q)
            problem = check_request(ours, limits)
            if problem:
                raise RequestError(400, problem)
            decoding = translate(ours.sentences(), ours)
        texts = [t["text"] for t in await decoding]
        return {"translatedText": texts[0] if isinstance(req.q, str) else texts}

    @app.get("/languages")
    async def languages() -> list[dict[str, Any]]:
        return [{"code": src, "name": language_name(src), "targets": [tgt]},
                {"code": tgt, "name": language_name(tgt), "targets": []}]

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    page = importlib.resources.files("transformer_mt.serve").joinpath("page.html")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page.read_text(encoding="utf-8"))

    return app


def serve(translator: Translator, options: ServeOptions, host: str = "127.0.0.1",
          port: int = 8000, grace_s: float = 30.0) -> None:
    """Run the server until SIGINT/SIGTERM: then it stops accepting, lets the requests in
    flight finish (within ``grace_s``), finishes the queue, and returns."""
    import uvicorn

    config = uvicorn.Config(create_app(translator, options), host=host, port=port,
                            log_level="warning", timeout_graceful_shutdown=int(grace_s),
                            access_log=False)
    class Server(uvicorn.Server):
        """uvicorn's server, but a stop asked for by a signal is a normal end (exit code 0):
        uvicorn would raise the signal again once it has shut down."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {s: signal.signal(s, self.handle_exit)
                        for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)

    log.info("serving %s -> %s on http://%s:%d/ (API key %s)", translator.config.data.src_lang,
             translator.config.data.tgt_lang, host, port,
             "required" if options.api_key else "not required")
    Server(config).run()
    log.info("stopped")
