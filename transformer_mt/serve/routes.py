"""Our own API (``/v1/...``), health, metrics and the page."""

from __future__ import annotations

import importlib.resources
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from transformer_mt.config import per_call_settings
from transformer_mt.serve import handling
from transformer_mt.serve.api import (
    ERRORS,
    ScoreRequest,
    ScoreResponse,
    TranslateRequest,
    TranslateResponse,
)
from transformer_mt.serve.deps import CallerDep, ServiceDep, api_key
from transformer_mt.serve.inside import run_checkpoints
from transformer_mt.translate.glossary import holding

router = APIRouter()


@router.get("/health", summary="200 once the model is loaded and the decoder runs")
async def health(svc: ServiceDep) -> Response:
    ready = svc.batcher is not None
    return JSONResponse({"status": "ok" if ready else "starting"}, 200 if ready else 503)


@router.get("/v1/info", summary="the model, its languages and decoding defaults, the limits")
async def info(svc: ServiceDep) -> dict[str, Any]:
    t, limits = svc.translator, svc.limits
    terms, memory = svc.options.glossary_file, svc.options.memory_file
    for watched in (terms, memory):
        if watched is not None:  # (as a request would find it)
            watched.refresh(t)
    cfg = t.config
    kept = holding(t, None, cfg.decode)
    out: dict[str, Any] = {
        "source_language": cfg.data.src_lang, "target_language": cfg.data.tgt_lang,
        "tokenizer": cfg.data.tokenizer, "engine": svc.options.engine,
        "vocabulary": {"source": len(t.src_vocab), "target": len(t.tgt_vocab)},
        "model": {"d_model": cfg.model.d_model, "heads": cfg.model.n_heads,
                  "encoder_layers": cfg.model.n_encoder_layers,
                  "decoder_layers": cfg.model.n_decoder_layers, "d_ff": cfg.model.d_ff},
        "decode": {f.name: getattr(cfg.decode, f.name) for f in per_call_settings()},
        "limits": {"max_sentences": limits.max_sentences, "max_chars": limits.max_chars,
                   "max_body_bytes": limits.max_body_bytes, "max_beam": limits.max_beam,
                   "max_source_tokens": t.max_source_tokens, "timeout_s": limits.timeout_s},
        "inspect": t.engine.can_inspect,
        "glossary": {"terms": len(t.glossary.terms) if t.glossary else 0,  # mt serve --glossary
                     "keep_spans": bool(kept and kept.keep_spans),  # (or by default)
                     **({"error": terms.error} if terms and terms.error else {})},
        "memory": {"translations": len(t.memory) if t.memory else 0,  # mt serve --memory
                   **({"error": memory.error} if memory and memory.error else {})},
        "look": {"run": run_checkpoints(svc.options.run_dir), "compare": svc.compare is not None},
    }
    out.update(svc.options.about)
    return out


@router.post("/v1/translate", response_model=TranslateResponse,
             response_model_exclude_none=True, responses=ERRORS,
             dependencies=[Depends(api_key)],
             summary="translate texts (each may hold several sentences, or HTML)")
async def translate(req: TranslateRequest, svc: ServiceDep, who: CallerDep) -> TranslateResponse:
    return await handling.translate(svc, req, who)


@router.post("/v1/score", response_model=ScoreResponse, responses=ERRORS,
             dependencies=[Depends(api_key)],
             summary="how probable the model finds given translations, token by token")
async def score(req: ScoreRequest, svc: ServiceDep, who: CallerDep) -> ScoreResponse:
    return await handling.score(svc, req, who)


@router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
async def metrics(svc: ServiceDep) -> Response:
    return Response(generate_latest(svc.metrics.registry), media_type=CONTENT_TYPE_LATEST)


PAGE = importlib.resources.files("transformer_mt.serve")


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def index() -> HTMLResponse:
    return HTMLResponse(PAGE.joinpath("page.html").read_text(encoding="utf-8"))


PAGE_FILES = {"page.js": "text/javascript", "look.js": "text/javascript", "page.css": "text/css"}


def _page_file(name: str) -> Callable[[], Awaitable[Response]]:
    async def page_file() -> Response:
        return Response(PAGE.joinpath(name).read_text(encoding="utf-8"),
                        media_type=PAGE_FILES[name])
    return page_file


for _name in PAGE_FILES:  # the page's scripts and style
    router.add_api_route("/" + _name, _page_file(_name), methods=["GET"], include_in_schema=False)
