"""What the routes hand off to (as vLLM's routes hand off to its serving classes): each
request's checks past its model's, its work on the decoding worker, and its answer as the
route's response model. A route only names its request, the service and the caller."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from transformer_mt.config import DecodeConfig
from transformer_mt.errors import MTError
from transformer_mt.serve.api import (
    DetectedLanguage,
    LibreTranslateRequest,
    LibreTranslateResponse,
    ScoredTranslation,
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
from transformer_mt.serve.deps import Caller
from transformer_mt.serve.errors import RequestError
from transformer_mt.serve.service import Service
from transformer_mt.serve.texts import Prepared, TextResult
from transformer_mt.translate import Choice, Translation
from transformer_mt.translate.glossary import SAMPLED, Glossary, holding, steered


async def translate(svc: Service, req: TranslateRequest, who: Caller) -> TranslateResponse:
    """``/v1/translate``: checked, charged, decoded (steered or as a batch), inspected."""
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
    svc.charge(who.client, sum(map(len, texts)))
    # a prefix, alternatives and what is inspected read each sentence whole (as mt translate;
    # a glossary's terms and kept spans are held by each part, as there too)
    whole = replace(cfg, max_sentence_tokens=cfg.max_input_tokens) \
        if req.prefix is not None or req.alternatives or req.inspects else cfg
    prepared = await svc.prepare_off_loop(texts, req.format, cfg=whole)
    if req.inspects:
        _check_budget(svc, prepared, cfg.beam_size, cfg.max_len_a, cfg.max_len_b, req)
    choices: list[list[Choice]] = []
    try:
        if req.steers:
            results, choices = await _steered(svc, prepared, cfg, req, who)
        else:
            results = await svc.decode(prepared, cfg, req.nbest, waiting=who.left,
                                       queued=who.queued, remember=not req.inspects)
    except (MTError, ValueError) as exc:
        raise RequestError(422, str(exc).splitlines()[0]) from None
    sentences = [_sentences(r) for r in results]
    for text, found in zip(sentences, choices, strict=False):
        if found:
            text[0]["alternatives"] = [alternative_json(c) for c in found]
    if req.inspects:
        await _inspect(svc, prepared, results, sentences, cfg, req, who)
    return TranslateResponse(translations=[_text_json(r, s) for r, s in zip(
        results, sentences, strict=True)])


async def _steered(svc: Service, prepared: Prepared, cfg: DecodeConfig, req: TranslateRequest,
                   who: Caller) -> tuple[list[TextResult], list[list[Choice]]]:
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
    read: list[str] = []  # per sentence, what the model read (a glossary's terms: their targets)
    base = holding(translator, None, cfg) if req.prefix is None and not req.alternatives \
        else None  # (the server's, with the spans kept where the checkpoint keeps them)
    glossary = (base or Glossary()).extended(req.glossary or {}, bool(req.settings()["keep_spans"]),
                                             req.avoid or {})
    if glossary and cfg.samples:
        raise RequestError(422, SAMPLED)

    def run() -> tuple[list[list[Translation]], list[list[Choice]]]:  # on the worker
        forcing = translator.forcing(per_sentence)
        forced.extend(len(tokens) for tokens in forcing.tokens)
        sentences = [s for d in prepared.docs for s in d.sentences]
        marked, ids, required = steered(translator, sentences, glossary, prepared.ids, cfg) \
            if glossary else ([], prepared.ids, None)
        read.extend(marked)
        hyps = translator.translate_ids(ids, cfg, req.nbest, required=required,
                                        forcing=forcing if req.prefix is not None else None,
                                        widest=svc.limits.max_beam)
        found = [translator.alternatives(doc.sentences[0], prefix, req.alternatives, cfg)
                 for doc, prefix in zip(prepared.docs, per_sentence, strict=True)
                 ] if req.alternatives else []  # a sentence a text, here
        return hyps, found

    who.queued()
    hyps, found = await svc.wait(svc.worker().call(run), who.left)
    if req.prefix is None and not req.alternatives and not req.inspects:  # (the memory's,
        hyps = [h if m is None else m for h, m in zip(hyps, svc.remembered(prepared),
                                                      strict=True)]  # as mt translate's)
    results, at = [], 0
    for doc in prepared.docs:
        n = len(doc.sentences)
        results.append(TextResult(doc, hyps[at:at + n]))
        for h, count in zip(hyps[at:at + n], forced[at:at + n], strict=True):
            h[0].forced = count
        at += n
    await svc.copy_unknown(results, cfg, who.left, read)
    await svc.link(results, who.left)
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
                   who: Caller) -> None:
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

    extra = await svc.wait(svc.worker().call(look), who.left)
    for (*_, out), more in zip(pairs, extra, strict=True):
        out.update(more)


async def score(svc: Service, req: ScoreRequest, who: Caller) -> ScoreResponse:
    """``/v1/score``: the pairs checked, charged and scored on the worker."""
    sources, translations = req.pairs()
    if len(sources) != len(translations):
        raise RequestError(422, f"{len(sources)} sources but {len(translations)} translations: "
                           "give one translation for each source")
    problem = check_texts(sources, svc.limits) or check_texts(translations, svc.limits)
    if not problem and len(sources) > svc.limits.max_sentences:
        problem = f"at most {svc.limits.max_sentences} pairs a request here"
    if problem:
        raise RequestError(422, problem)
    svc.charge(who.client, sum(map(len, sources)) + sum(map(len, translations)))
    translator = svc.translator

    def run() -> list[ScoredTranslation]:  # on the worker, which owns the model
        scored = translator.score(sources, translations, alpha=req.alpha, strict=True)
        return [ScoredTranslation(log_prob=_finite(s.log_prob), score=_finite(s.score),
                                  tokens=s.tokens,
                                  token_log_probs=[_finite(x) for x in s.log_probs])
                for s in scored]

    try:
        scores = await svc.wait(svc.worker().call(run), who.left)
    except (MTError, ValueError) as exc:
        raise RequestError(422, str(exc).splitlines()[0]) from None
    return ScoreResponse(scores=scores)


def _finite(x: float) -> float | None:
    """JSON has no infinity: an impossible token's log-probability is null."""
    return round(x, 5) if math.isfinite(x) else None


async def libre_translate(svc: Service, req: LibreTranslateRequest,
                          who: Caller) -> LibreTranslateResponse:
    """LibreTranslate's ``/translate``: its checks and 400s, the source detected where it
    is ``auto``, the alternatives it asks for."""
    svc.check_pair(req.source, req.target)
    texts = req.texts()
    problem = check_texts(texts, svc.limits)
    if problem:
        raise RequestError(400, problem)
    if req.alternatives > svc.limits.max_alternatives:
        raise RequestError(400, "Invalid request: alternatives parameter must be <= "
                           f"{svc.limits.max_alternatives}")
    svc.charge(who.client, sum(map(len, texts)))
    prepared = await svc.prepare_off_loop(texts, req.format)
    detected = None
    if req.source.lower() == "auto":  # (LibreTranslate reads codes in any case)
        language, confidence = svc.check_source([s for d in prepared.docs for s in d.sentences])
        detected = DetectedLanguage(language=language, confidence=confidence)
        # already in the target language: as it is, as LibreTranslate does
        if language == svc.tgt_lang:
            return _as_they_are(req, detected)
    nbest = req.alternatives + 1
    try:
        cfg = svc.translator.settings(beam_size=max(svc.translator.config.decode.beam_size,
                                                    nbest))
    except (MTError, ValueError) as exc:
        raise RequestError(400, str(exc).splitlines()[0]) from None
    wait: dict[str, Any] = {"waiting": who.left, "queued": who.queued}
    results = await svc.decode(prepared, cfg, nbest, **wait)
    one = isinstance(req.q, str)
    out: dict[str, Any] = {"translatedText": results[0].text() if one else
                           [r.text() for r in results]}
    if req.alternatives:
        # (each sentence's n-best is different texts, searched as wide as max_beam: nbest.py)
        alternatives = [r.alternatives(req.alternatives) for r in results]
        out["alternatives"] = alternatives[0] if one else alternatives
    if detected is not None:
        out["detectedLanguage"] = detected if one else [detected] * len(texts)
    return LibreTranslateResponse(**out)


def _as_they_are(req: LibreTranslateRequest,
                 detected: DetectedLanguage) -> LibreTranslateResponse:
    """The answer for texts that are already in the target language: the texts."""
    out: dict[str, Any] = {"translatedText": req.q, "detectedLanguage": detected}
    if req.alternatives:
        out["alternatives"] = []
    if not isinstance(req.q, str):
        out["detectedLanguage"] = [detected] * len(req.q)
        out["alternatives"] = [[] for _ in req.q] if req.alternatives else None
    return LibreTranslateResponse(**out)
