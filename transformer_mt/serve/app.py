"""``mt serve``: a translation server (FastAPI on uvicorn) around a loaded :class:`Translator`.

    GET  /               the page: translate, see scores, n-best, attention and each step
    GET  /health         {"status": "ok"} once the model is loaded and the decoder runs
    GET  /v1/info        languages, tokenizer, sizes, step, validation score, limits
    POST /v1/translate   {"text": [...], "beam_size": 5, "nbest": 3, "attention": true, "topk": 5}
    POST /v1/score       how probable the model finds given translations
    POST /v1/lens, /v1/switch, /v1/run, /v1/compare   looking inside, for one sentence
    POST /translate      LibreTranslate's API (and /detect, /languages, /frontend/settings, /spec)
    GET  /metrics        Prometheus: requests, latencies, batch sizes, queue depth
    GET  /docs           Swagger UI over /openapi.json (served from a wheel: no CDN)

Every answer to a bad request is a 4xx with ``{"error": "one line"}``, and the server keeps
serving. The routes live in ``routes.py`` (ours) and ``libre.py`` (LibreTranslate's), the
door in ``guard.py``, what they share in ``service.py``, the uvicorn process in ``server.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import gc
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware

from transformer_mt.internals import fastapi_private
from transformer_mt.serve import files, inside, libre, routes
from transformer_mt.serve.batcher import decoder_thread
from transformer_mt.serve.errors import RequestError
from transformer_mt.serve.guard import Guard
from transformer_mt.serve.service import Service
from transformer_mt.serve.settings import ServeOptions
from transformer_mt.translate import Translator

log = logging.getLogger("transformer_mt.serve")

LIBRE_PATHS = {"/translate", "/detect", "/translate_file", "/suggest", "/languages",
               "/frontend/settings", "/spec"}


def one_line(error: dict, fields: list[str] | None = None) -> str:
    """A pydantic error as one line: the field, and what is wrong with it; ``fields``, the
    route's required ones, for a body that is no JSON object."""
    where = [str(x) for x in error.get("loc", ()) if x != "body"]
    field = where[0] if where else "body"
    if error.get("type") == "missing":
        return f"Invalid request: missing {field} parameter"
    if error.get("type") == "json_invalid":
        return f"the body is not JSON ({error.get('ctx', {}).get('error', 'invalid')})"
    if field in ("text", "q") and error.get("type") in ("list_type", "string_type"):
        return f"'{field}': must be a text or a list of texts (strings)"
    if error.get("type") in ("model_attributes_type", "dict_type", "model_type"):
        named = ", ".join(f"'{name}'" for name in fields or ())
        return "the body must be a JSON object" + (f" holding {named}" if named else "")
    if error.get("type") == "extra_forbidden":
        return f"'{field}': unknown field"
    message = str(error.get("msg", "invalid")).replace("Value error, ", "")
    if message.startswith("Expected UploadFile"):  # a form's text where a file goes
        return f"'{field}': send a file, as an upload (curl: -F '{field}=@NAME')"
    return f"'{field}': {message}".splitlines()[0]


class _App(FastAPI):
    """FastAPI, whose /openapi.json says that a key-less server takes requests without one:
    ``{}`` among each operation's ways to authenticate, as OpenAPI writes "or none" (clients
    generated from it then send none)."""

    def openapi(self) -> dict[str, Any]:
        made = self.openapi_schema is None
        schema = super().openapi()
        if made and not self.state.service.options.api_keys:
            for operation in (op for path in schema["paths"].values() for op in path.values()):
                if operation.get("security"):
                    operation["security"].append({})
        return schema


# the texts' field of each translating route: (its own, the other's, the other route)
TEXT_FIELDS = {"/v1/translate": ("text", "q", "LibreTranslate's POST /translate"),
               "/translate": ("q", "text", "POST /v1/translate")}


def sent_instead(error: dict, body: Any, path: str) -> str:
    """For a missing field, what the body holds in its place: the other API's field for the
    texts, or a name like it ("texts" for "text")."""
    if error.get("type") != "missing" or not isinstance(body, dict) or not error.get("loc"):
        return ""
    field = str(error["loc"][-1])
    own, other, route = TEXT_FIELDS.get(path, ("", "", ""))
    if field == own and other in body:
        return f" ('{other}' is the field of {route}; this route takes '{own}')"
    close = difflib.get_close_matches(field, [k for k in body if isinstance(k, str)], n=1)
    return f" (the body has '{close[0]}': did you mean '{field}'?)" if close else ""


def create_app(translator: Translator, options: ServeOptions | None = None,
               compare: Translator | None = None) -> FastAPI:
    """The ASGI application; its decoding worker starts and stops with the app's lifespan.
    ``compare``: a second model, for ``/v1/compare``."""
    svc = Service(translator, options or ServeOptions(), compare)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # before /health says ok, on the thread that decodes: the first request costs what
        # the next ones do
        if not svc.warm:  # (mt serve warms it up before it listens)
            await asyncio.get_running_loop().run_in_executor(decoder_thread(), svc.warm_up)
        fastapi_private.read_endpoints(app)
        # what loading made (millions of objects: torch, spaCy, the app) is kept for good,
        # and no longer walked by the collector: its first full collection took ~3 ms of the
        # first request's time, and every later one would have walked it again
        gc.collect()
        gc.freeze()
        svc.start()
        yield
        await svc.stop()

    app = _App(title="transformer_mt", summary=f"{svc.src_lang} -> {svc.tgt_lang} "
               "translation: our API and LibreTranslate's", lifespan=lifespan,
               docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    app.state.service = svc
    app.include_router(routes.router)
    app.include_router(inside.router)
    app.include_router(libre.router)
    app.include_router(files.router)

    _error_handlers(app)
    _docs(app)
    if svc.options.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(svc.options.cors_origins),
                           allow_methods=["GET", "POST"],
                           allow_headers=["Content-Type", "Authorization", "X-API-Key"])
    app.add_middleware(Guard, service=svc)  # the outermost: first to see a request
    return app


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status, headers=headers)


async def _request_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestError)
    return _error(exc.status, exc.message, exc.headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    message = str(exc.detail)
    if exc.status_code == 400 and "parsing the body" in message:
        message = "the body could not be parsed as JSON (too deeply nested, or not JSON)"
    elif exc.status_code == 404:
        message = f"there is no {request.url.path} here; see /docs for the API"
    elif exc.status_code == 405:
        message = f"{request.url.path} does not take {request.method}; see /docs"
    return _error(exc.status_code, message, exc.headers)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # a value's own complaint (a lone surrogate) says more than a union's type mismatch
    errors = sorted(exc.errors(), key=lambda e: e.get("type") != "value_error")
    message = one_line(errors[0], required_fields(request)) + sent_instead(
        errors[0], exc.body, request.url.path) if errors else "the request is not valid"
    libre_route = request.url.path in LIBRE_PATHS
    status = 400 if libre_route or (errors and errors[0].get("type") == "json_invalid") \
        else 422
    return _error(status, message)


def required_fields(request: Request) -> list[str]:
    """The fields the JSON body of the request's route must hold, as its OpenAPI schema
    (/openapi.json, made once) says."""
    schema = request.app.openapi()
    operation = schema["paths"].get(request.url.path, {}).get(request.method.lower(), {})
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    name = body.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
    return list(schema.get("components", {}).get("schemas", {}).get(name, {}).get("required", []))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("%s %s failed", request.method, request.url.path)
    return _error(500, f"the server failed on this request ({type(exc).__name__}); its log "
                  "says more")


def _error_handlers(app: FastAPI) -> None:
    """Every error as JSON ``{"error": one line}`` with its status: ours, FastAPI's, a request
    that does not validate (400 on LibreTranslate's routes, as it answers), and the unexpected
    (500, logged with its traceback)."""
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(Exception, _unexpected)


def _docs(app: FastAPI) -> None:
    """Swagger UI at /docs, its files (Swagger UI 5, which reads the OpenAPI 3.1 FastAPI
    writes) served from the fastapi-offline wheel: no CDN."""
    try:
        import fastapi_offline
    except ModuleNotFoundError:
        return
    from fastapi.staticfiles import StaticFiles

    static = Path(fastapi_offline.__file__).parent / "static"
    app.mount("/docs/static", StaticFiles(directory=static), name="swagger")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="transformer_mt API",
                                   swagger_js_url="/docs/static/swagger-ui-bundle.js",
                                   swagger_css_url="/docs/static/swagger-ui.css",
                                   swagger_favicon_url="/docs/static/favicon.png")
