"""The server's requests and answers: what a client may send (checked field by field, strict
types, no unknown fields), the decoding settings it becomes, and the JSON that comes back.
No request can name a file: every field is text, a number or a flag."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from transformer_mt.config import DecodeConfig
from transformer_mt.trace import Inside
from transformer_mt.translate import Translation, Translator


@dataclass
class Limits:
    """What one request may ask for."""

    max_body_bytes: int = 1_000_000
    max_sentences: int = 128
    max_chars: int = 5_000  # per sentence
    timeout_s: float = 60.0  # queued and decoded within this, or 504
    max_beam: int = 32
    max_topk: int = 20


class TranslateRequest(BaseModel):
    """``POST /v1/translate``: sentences and, optionally, how to decode them."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: list[str] | str
    beam: int | None = Field(None, ge=1)
    nbest: int = Field(1, ge=1)
    alpha: float | None = None
    max_len_a: float | None = None
    max_len_b: int | None = None
    sample_topk: int | None = Field(None, ge=0)
    temperature: float | None = None
    seed: int | None = Field(None, ge=0, lt=2**63)
    attention: bool = False  # every decoder layer's and head's cross-attention
    topk: int = Field(0, ge=0)  # per output step, the k most probable next tokens
    beam_steps: bool = False  # the hypotheses beam search kept at each step

    def sentences(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)


class LibreTranslateRequest(BaseModel):
    """LibreTranslate's ``POST /translate``."""

    model_config = ConfigDict(extra="ignore", strict=True)

    q: list[str] | str
    source: str = "auto"
    target: str
    format: str = "text"
    api_key: str | None = None


def check_request(req: TranslateRequest, limits: Limits) -> str | None:
    """What is wrong with ``req`` beyond its types (None: nothing)."""
    sentences = req.sentences()
    if not sentences:
        return "'text' holds no sentence"
    if len(sentences) > limits.max_sentences:
        return (f"{len(sentences)} sentences in one request; at most {limits.max_sentences}: "
                "split it")
    for n, s in enumerate(sentences):
        if len(s) > limits.max_chars:
            return (f"sentence {n} has {len(s):,} characters; at most {limits.max_chars:,} "
                    "(one sentence per item)")
    if max(req.beam or 1, req.nbest) > limits.max_beam:
        return f"'beam' and 'nbest' are at most {limits.max_beam} here"
    if req.topk > limits.max_topk:
        return f"'topk' is at most {limits.max_topk}"
    if req.nbest > 1 and req.sample_topk:
        return "'nbest' needs search: sampling gives one translation"
    return None


def decode_settings(translator: Translator, req: TranslateRequest) -> DecodeConfig:
    """The checkpoint's decoding settings changed by ``req`` (``ValueError`` if out of range)."""
    return translator.settings(beam_size=req.beam, alpha=req.alpha, max_len_a=req.max_len_a,
                               max_len_b=req.max_len_b, sample_topk=req.sample_topk,
                               temperature=req.temperature, sample_seed=req.seed)


def _number(x: float) -> float | None:
    """JSON has no NaN: a score that was not computed is null."""
    return None if math.isnan(x) else round(x, 5)


def translation_json(hyps: list[Translation], inside: Inside | None = None,
                     beam: list[list[tuple[list[str], float]]] | None = None) -> dict[str, Any]:
    best = hyps[0]
    out: dict[str, Any] = {"text": best.text, "score": _number(best.score),
                           "tokens": best.tokens}
    if len(hyps) > 1:
        out["nbest"] = [{"text": h.text, "score": _number(h.score)} for h in hyps]
    if inside is not None:
        out["source_tokens"] = inside.source
        out["output_tokens"] = inside.output
        out["attention"] = inside.cross.double().mul(1e4).round().div(1e4).tolist()
        # (L, H, T_out + 1, S): a row per output token and <eos>, a column per source token
        out["steps"] = [{"chosen": token,
                         "top": [[inside_token, round(p, 5)] for inside_token, p in zip(
                             tokens, probs)]}
                        for token, tokens, probs in zip(inside.output, inside.top_tokens,
                                                        inside.top_probs.tolist())]
    if beam is not None:
        out["beam_steps"] = [[{"tokens": tokens, "score": _number(score)}
                              for tokens, score in step] for step in beam]
    return out


def info_json(translator: Translator, engine: str, limits: Limits,
              about: dict[str, Any]) -> dict[str, Any]:
    """``GET /v1/info``: what the model is (``about``: its step and validation score, from the
    checkpoint) and what the server accepts."""
    cfg = translator.config
    out: dict[str, Any] = {
        "source_language": cfg.data.src_lang, "target_language": cfg.data.tgt_lang,
        "tokenizer": cfg.data.tokenizer, "engine": engine,
        "vocabulary": {"source": len(translator.src_vocab), "target": len(translator.tgt_vocab)},
        "model": {"d_model": cfg.model.d_model, "heads": cfg.model.n_heads,
                  "encoder_layers": cfg.model.n_encoder_layers,
                  "decoder_layers": cfg.model.n_decoder_layers, "d_ff": cfg.model.d_ff},
        "decode": {"beam": cfg.decode.beam_size, "alpha": cfg.decode.alpha,
                   "max_len_a": cfg.decode.max_len_a, "max_len_b": cfg.decode.max_len_b},
        "limits": {"max_sentences": limits.max_sentences, "max_chars": limits.max_chars,
                   "max_body_bytes": limits.max_body_bytes, "max_beam": limits.max_beam,
                   "timeout_s": limits.timeout_s},
    }
    out.update(about)
    return out
