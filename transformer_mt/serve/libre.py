"""LibreTranslate's API, so that its clients work unchanged: ``/translate``, ``/detect``,
``/languages``, ``/frontend/settings``, ``/spec``, ``/suggest`` (with ``--suggestions``);
``/translate_file`` and ``/download_file`` are ``files.py``'s. Its status codes (400 a bad
request, 403 a bad key, 429 slow down) and its ``{"error": ...}`` bodies. Bodies as
LibreTranslate reads them: JSON, a url-encoded or multipart form, or the query string."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Request
from fastapi.routing import APIRoute
from starlette.datastructures import UploadFile
from starlette.responses import Response
from starlette.types import Message

from transformer_mt.config.languages import language_name
from transformer_mt.packages import installed
from transformer_mt.serve import handling
from transformer_mt.serve.api import (
    LIBRE_ERRORS,
    DetectedLanguage,
    DetectRequest,
    Language,
    LibreTranslateRequest,
    LibreTranslateResponse,
    SuggestRequest,
    check_texts,
)
from transformer_mt.serve.deps import CallerDep, GivenKey, ServiceDep, client_id, libre_key
from transformer_mt.serve.errors import RequestError
from transformer_mt.serve.guard import is_json
from transformer_mt.translate.files import FORMATS, LIBRARIES

FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def url_fields(raw: bytes, what: str) -> list[tuple[str, str]]:
    """The fields of a query string or url-encoded form, their bytes (raw, as ``curl -d``
    sends them, or %-escaped) read as UTF-8, as browsers and LibreTranslate read them
    (Starlette reads raw bytes as Latin-1: 'fährt' became 'fÃ¤hrt')."""
    try:
        return parse_qsl(raw.decode("utf-8"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise RequestError(400, f"the {what} is not UTF-8: send the text UTF-8 encoded "
                           "(curl: --data-urlencode 'q=...')") from None


async def given_fields(request: Request) -> list[tuple[str, Any]]:
    """A request's fields: those of its query string, then of its form (url-encoded or
    multipart); a body of another kind is refused."""
    fields = url_fields(request.scope["query_string"], "query string")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == FORMS[0]:
        fields += url_fields(await request.body(), "form")
    elif kind == FORMS[1]:
        form = await request.form()
        fields += [(name, (await item.read()).decode("utf-8", "replace")
                    if isinstance(item, UploadFile) else item)
                   for name, item in form.multi_items()]
    elif (await request.body()).strip():
        raise RequestError(400, "send JSON, a form or the query string; the body's "
                           f"type '{kind}' is not one of them")
    return fields


class FormsAsJSON(APIRoute):
    """A route whose body model may also come as a form or in the query string: those are
    turned into the JSON object the model reads (repeated fields become a list)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def as_json(request: Request) -> Response:
            if request.method != "POST" or is_json(request.headers.get("content-type")):
                return await handler(request)
            fields: dict[str, list[Any]] = {}
            for name, value in await given_fields(request):
                fields.setdefault(name, []).append(value)
            body = json.dumps({k: v[0] if len(v) == 1 else v
                               for k, v in fields.items()}).encode()
            scope = dict(request.scope)
            scope["headers"] = [(k, v) for k, v in request.scope["headers"]
                                if k not in (b"content-type", b"content-length")] + [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode())]
            sent = [False]

            async def receive() -> Message:
                if not sent[0]:
                    sent[0] = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await request.receive()

            return await handler(Request(scope, receive))

        return as_json


router = APIRouter(route_class=FormsAsJSON, tags=["LibreTranslate"], responses=LIBRE_ERRORS)


@router.post("/translate", response_model=LibreTranslateResponse,
             response_model_exclude_none=True, dependencies=[Depends(libre_key)],
             summary="LibreTranslate: translate text (a string or a list), plain or HTML")
async def translate(req: LibreTranslateRequest, svc: ServiceDep,
                    who: CallerDep) -> LibreTranslateResponse:
    return await handling.libre_translate(svc, req, who)


@router.post("/detect", response_model=list[DetectedLanguage],
             dependencies=[Depends(libre_key)],
             summary="LibreTranslate: the most likely languages of a text (py3langid)")
async def detect(req: DetectRequest, request: Request, svc: ServiceDep,
                 key: GivenKey) -> list[DetectedLanguage]:
    if not req.q.strip():
        raise RequestError(400, "Invalid request: missing q parameter")
    problem = check_texts([req.q], svc.limits)
    if problem:
        raise RequestError(400, problem)
    svc.charge(client_id(request, key), len(req.q))
    return [DetectedLanguage(language=code, confidence=round(100 * p, 2))
            for code, p in svc.detect(req.q)]


@router.get("/languages", response_model=list[Language],
            summary="LibreTranslate: the languages translated here")
async def languages(svc: ServiceDep) -> list[Language]:
    src, tgt = svc.src_lang, svc.tgt_lang
    return [Language(code=src, name=language_name(src), targets=[tgt]),
            Language(code=tgt, name=language_name(tgt), targets=[])]


@router.get("/frontend/settings", summary="LibreTranslate: what a front end needs to know")
async def frontend_settings(svc: ServiceDep) -> dict[str, Any]:
    src, tgt = svc.src_lang, svc.tgt_lang
    return {"charLimit": svc.limits.max_chars, "frontendTimeout": 500,
            "apiKeys": bool(svc.options.api_keys), "keyRequired": bool(svc.options.api_keys),
            "suggestions": svc.suggestions is not None, "filesTranslation": True,
            "supportedFilesFormat": [f for f, kind in FORMATS.items()
                                     if kind not in LIBRARIES or installed(LIBRARIES[kind])],
            "language": {"source": {"code": src, "name": language_name(src)},
                         "target": {"code": tgt, "name": language_name(tgt)}}}


@router.get("/spec", summary="LibreTranslate: the API's description (OpenAPI)")
async def spec(request: Request) -> dict[str, Any]:
    openapi: dict[str, Any] = request.app.openapi()
    return openapi


@router.post("/suggest", dependencies=[Depends(libre_key)],
             summary="LibreTranslate: keep a user's corrected translation (mt serve "
             "--suggestions FILE), for fine-tuning on")
async def suggest(req: SuggestRequest, request: Request, svc: ServiceDep,
                  key: GivenKey) -> dict[str, bool]:
    store = svc.suggestions
    if store is None:
        raise RequestError(403, "Suggestions are disabled on this server.")
    svc.check_pair(req.source, req.target)
    for name, text in (("q", req.q), ("s", req.s)):
        if not text.strip():
            raise RequestError(400, f"Invalid request: missing {name} parameter")
    problem = check_texts([req.q, req.s], svc.limits)
    if problem:
        raise RequestError(400, problem)
    svc.charge(client_id(request, key), len(req.q) + len(req.s))
    await asyncio.get_running_loop().run_in_executor(None, store.add, req.q, req.s, svc.src_lang,
                                                     svc.tgt_lang)
    return {"success": True}
