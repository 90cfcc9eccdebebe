"""Our own API (``/v1/...``), health, metrics and the page."""

from __future__ import annotations

import importlib.resources
import math
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from transformer_mt.config import DecodeConfig, per_call_settings
from transformer_mt.errors import MTError
from transformer_mt.serve.api import (
    ERRORS,
    ScoreRequest,
    ScoreResponse,
    TextTranslation,
    TranslateRequest,
    TranslateResponse,
    alternative_json,
    check_settings,
    check_texts,
    inspection_json,
    sentence_json,
)
from transformer_mt.serve.deps import GivenKey, ServiceDep, api_key, client_id, client_left
from transformer_mt.serve.guard import arrived
from transformer_mt.serve.inside import run_checkpoints
from transformer_mt.serve.service import Prepared, RequestError, Service, TextResult
from transformer_mt.translate import Choice, Translation

router = APIRouter()


@router.get("/health", summary="200 once the model is loaded and the decoder runs")
async def health(svc: ServiceDep) -> Response:
    ready = svc.batcher is not None
    return JSONResponse({"status": "ok" if ready else "starting"}, 200 if ready else 503)


@router.get("/v1/info", summary="the model, its languages and decoding defaults, the limits")
async def info(svc: ServiceDep) -> dict[str, Any]:
    t, limits = svc.translator, svc.limits
    cfg = t.config
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
        "look": {"run": run_checkpoints(svc.options.run_dir), "compare": svc.compare is not None},
    }
    out.update(svc.options.about)
    return out


@router.post("/v1/translate", response_model=TranslateResponse,
             response_model_exclude_none=True, responses=ERRORS,
             dependencies=[Depends(api_key)],
             summary="translate texts (each may hold several sentences, or HTML)")
async def translate(req: TranslateRequest, request: Request, svc: ServiceDep,
                    key: GivenKey) -> dict[str, Any]:
    texts = req.texts()
    problem = check_texts(texts, svc.limits) or check_settings(req, svc.limits)
    if problem:
        raise RequestError(422, problem)
    if req.inspects and not svc.translator.engine.can_inspect:
        raise RequestError(422, "'attention', 'topk', 'beam_steps' and 'align' need a "
                           "PyTorch checkpoint (.pt), not an exported model")
    try:
        cfg = svc.translator.settings(**req.settings())
    except (MTError, ValueError, TypeError) as exc:
        raise RequestError(422, str(exc).splitlines()[0]) from None
    svc.charge(client_id(request, key), sum(map(len, texts)))
    prepared = await svc.prepare_off_loop(texts, req.format == "html")
    if req.inspects:
        _check_budget(svc, prepared, cfg.beam_size, cfg.max_len_a, cfg.max_len_b, req)
    choices: list[list[Choice]] = []
    try:
        if req.steers:
            results, choices = await _steered(svc, prepared, cfg, req, request)
        else:
            results = await svc.decode(prepared, cfg, req.nbest, waiting=client_left(request),
                                      queued=lambda: arrived(request.scope))
    except (MTError, ValueError) as exc:
        raise RequestError(422, str(exc).splitlines()[0]) from None
    sentences = [_sentences(r) for r in results]
    for text, found in zip(sentences, choices, strict=False):
        if found:
            text[0]["alternatives"] = [alternative_json(c) for c in found]
    if req.inspects:
        await _inspect(svc, prepared, results, sentences, cfg, req, request)
    return {"translations": [_text_json(r, s) for r, s in zip(results, sentences, strict=True)]}


async def _steered(svc: Service, prepared: Prepared, cfg: DecodeConfig, req: TranslateRequest,
                   request: Request) -> tuple[list[TextResult], list[list[Choice]]]:
    """Texts decoded with their prefixes (and alternatives), on the worker, uncached: each text
    a prefix or alternatives are asked for must be one sentence."""
    prefixes = req.prefixes() or [""] * len(prepared.docs)
    per_sentence = []
    for n, (doc, prefix) in enumerate(zip(prepared.docs, prefixes, strict=True)):
        if (prefix or req.alternatives) and len(doc.sentences) != 1:
            raise RequestError(422, f"text {n} holds {len(doc.sentences)} sentences; a prefix "
                               "and alternatives continue one sentence: send it alone")
        per_sentence += [prefix] * len(doc.sentences)
    translator = svc.translator
    forced: list[int] = []  # per sentence, the output tokens its prefix forced

    def run() -> tuple[list[list[Translation]], list[list[Choice]]]:  # on the worker
        forcing = translator.forcing(per_sentence)
        forced.extend(len(tokens) for tokens in forcing.tokens)
        hyps = translator.translate_ids(prepared.ids, cfg, req.nbest, forcing=forcing)
        found = [translator.alternatives_with(cfg, x, prefix, req.alternatives)
                 for x, prefix in zip(prepared.ids, per_sentence, strict=True)
                 ] if req.alternatives else []  # a sentence a text, here
        return hyps, found

    arrived(request.scope)
    hyps, found = await svc.wait(svc.worker().call(run), client_left(request))
    results, at = [], 0
    for doc in prepared.docs:
        n = len(doc.sentences)
        results.append(TextResult(doc, hyps[at:at + n]))
        for h, count in zip(hyps[at:at + n], forced[at:at + n], strict=True):
            h[0].forced = count
        at += n
    return results, found


def _sentences(result: TextResult) -> list[dict[str, Any]]:
    return [sentence_json(h) for h in result.hyps]


def _text_json(result: TextResult, sentences: list[dict[str, Any]]) -> TextTranslation:
    if not sentences:  # nothing to translate: the text as it was (empty, or blank)
        return TextTranslation(text=result.text(), score=0.0, tokens=[])
    if len(sentences) == 1:
        return TextTranslation(**{**sentences[0], "text": result.text()})
    for sentence, source in zip(sentences, result.doc.sentences, strict=True):
        sentence["source"] = source
    nbest = None
    if any(len(h) > 1 for h in result.hyps):
        nbest = [{"text": result.text(k), "score": None}
                 for k in range(max(len(h) for h in result.hyps))]
    return TextTranslation(text=result.text(), score=None, tokens=[], nbest=nbest,
                           sentences=sentences)


def _check_budget(svc: Service, prepared: Prepared, beam: int, a: float, b: int,
                  req: TranslateRequest) -> None:
    """Refuse what the inspection answers would not fit in: numbers in the JSON, counted from
    the longest outputs the settings allow."""
    model = svc.translator.config.model
    heads = model.n_heads
    total = 0
    for x in prepared.ids:
        s, out = len(x), int(a * len(x) + b) + 1
        if req.attention:
            total += heads * (model.n_decoder_layers * out * (s + out)
                              + model.n_encoder_layers * s * s)
        total += 2 * req.topk * out
        if req.beam_steps and beam > 1:
            total += 5 * beam * out * out  # kept and finished hypotheses
    if total > svc.limits.max_inspect_values:
        raise RequestError(422, f"'attention', 'topk' and 'beam_steps' would answer up to "
                           f"{total:,} numbers; at most {svc.limits.max_inspect_values:,} a "
                           "request here: ask about fewer or shorter sentences")


async def _inspect(svc: Service, prepared: Prepared, results: list[TextResult],
                   sentences: list[list[dict[str, Any]]], cfg: DecodeConfig, req: TranslateRequest,
                   request: Request) -> None:
    from transformer_mt.inside.trace import beam_steps, look_inside

    texts = [s for r in results for s in r.doc.sentences]
    prefixes = [p for r, p in zip(results, req.prefixes() or [""] * len(results), strict=True)
                for _ in r.doc.sentences]
    pairs = [(x, text, prefix, hyps[0], out) for x, text, prefix, hyps, out in zip(
        prepared.ids, texts, prefixes, [h for r in results for h in r.hyps],
        [s for text in sentences for s in text], strict=True)]
    translator = svc.translator

    def look() -> list[dict[str, Any]]:  # on the worker, which owns the model
        found = []
        for x, text, prefix, best, _ in pairs:
            inside = look_inside(translator, x, best.ids, max(req.topk, 1), cfg.precision) \
                if req.attention or req.topk else None
            beam = beam_steps(translator, x, cfg, translator.forcing([prefix])) \
                if req.beam_steps and cfg.beam_size > 1 else None
            found.append(inspection_json(inside, beam, req.attention))
            if req.align:
                found[-1]["alignment"] = translator.align(text, best)
        return found

    extra = await svc.wait(svc.worker().call(look), client_left(request))
    for (*_, out), more in zip(pairs, extra, strict=True):
        out.update(more)


@router.post("/v1/score", response_model=ScoreResponse, responses=ERRORS,
             dependencies=[Depends(api_key)],
             summary="how probable the model finds given translations, token by token")
async def score(req: ScoreRequest, request: Request, svc: ServiceDep,
                key: GivenKey) -> dict[str, Any]:
    sources, translations = req.pairs()
    if len(sources) != len(translations):
        raise RequestError(422, f"{len(sources)} sources but {len(translations)} translations: "
                           "give one translation for each source")
    problem = check_texts(sources, svc.limits) or check_texts(translations, svc.limits)
    if not problem and len(sources) > svc.limits.max_sentences:
        problem = f"at most {svc.limits.max_sentences} pairs a request here"
    if problem:
        raise RequestError(422, problem)
    svc.charge(client_id(request, key), sum(map(len, sources)) + sum(map(len, translations)))
    translator = svc.translator

    def run() -> list[dict[str, Any]]:  # on the worker, which owns the model
        scored = translator.score(sources, translations, alpha=req.alpha, strict=True)
        return [{"log_prob": _finite(s.log_prob), "score": _finite(s.score),
                 "tokens": s.tokens, "token_log_probs": [_finite(x) for x in s.log_probs]}
                for s in scored]

    try:
        scores = await svc.wait(svc.worker().call(run), client_left(request))
    except (MTError, ValueError) as exc:
        raise RequestError(422, str(exc).splitlines()[0]) from None
    return {"scores": scores}


def _finite(x: float) -> float | None:
    """JSON has no infinity: an impossible token's log-probability is null."""
    return round(x, 5) if math.isfinite(x) else None


@router.get("/metrics", summary="Prometheus metrics")
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
