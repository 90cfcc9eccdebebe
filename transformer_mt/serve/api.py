"""The server's requests and answers as typed models: what a client may send (every field
checked, strict types for our API, LibreTranslate's looser ones for its routes) and what comes
back, so that ``/openapi.json`` describes both. No request can name a file: every field is
text, a number or a flag."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    create_model,
    model_validator,
)
from torch import Tensor

from transformer_mt.config import DecodeConfig, field_types, per_call_settings
from transformer_mt.inside.trace import BeamSteps, Inside
from transformer_mt.serve.settings import Limits
from transformer_mt.translate import Choice, Translation


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode (it holds a lone surrogate)") from None
    return text


Text = Annotated[str, AfterValidator(_valid_unicode)]


class _TranslateRequest(BaseModel):
    """``POST /v1/translate``: texts and, optionally, how to decode them (the decoding
    settings are :class:`DecodeConfig`'s, added by :func:`_decoding_fields`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: list[Text] | Text = Field(description="a text or a list of texts; each may hold "
                                    "several sentences (split, translated, put back)")
    format: Literal["text", "html"] = "text"
    nbest: int = Field(1, ge=1)
    attention: bool = Field(False, description="every layer's and head's attention: "
                            "cross-, decoder self- and encoder self-attention")
    topk: int = Field(0, ge=0, description="per output step, the k most probable next tokens")
    beam_steps: bool = Field(False, description="the hypotheses beam search kept at each step")
    prefix: list[Text] | Text | None = Field(
        None, description="how each text's translation begins, one per text (\"\": no "
        "prefix): the model continues it, and finishes an unfinished last word (\"A ma\" may "
        "become \"A man\"); a text with a prefix holds one sentence")
    alternatives: int = Field(0, ge=0, description="the k most probable tokens after the "
                              "prefix (or at the start), each with the translation completed "
                              "from it (texts of one sentence)")
    align: bool = Field(False, description="word alignment read off the last decoder layer's "
                        "cross-attention (heads averaged): [source word, output word] pairs, "
                        "from 0")
    glossary: dict[Text, Text] | None = Field(
        None, max_length=1000, description="source term -> the target term its translation "
        "must hold, exactly (source terms found as whole words, in any case)")
    avoid: dict[Text, list[Text]] | None = Field(
        None, max_length=1000, description="a glossary's source term -> words its translation "
        "must not hold where the term is (the model's own word for it: {\"Hund\": [\"dog\"]} "
        "with the glossary {\"Hund\": \"hound\"})")

    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)

    def prefixes(self) -> list[str] | None:
        """One prefix per text ("" for none), or None when the request gives none."""
        if self.prefix is None:
            return None
        return [self.prefix] if isinstance(self.prefix, str) else list(self.prefix)

    @property
    def steers(self) -> bool:
        """Whether decoding is steered (a prefix, alternatives, a glossary, kept spans):
        decoded on its own."""
        return (self.prefix is not None or self.alternatives > 0 or bool(self.glossary)
                or bool(self.avoid) or bool(self.settings()["keep_spans"]))

    @property
    def inspects(self) -> bool:
        return self.attention or self.topk > 0 or self.beam_steps or self.align

    @model_validator(mode="before")
    @classmethod
    def _one_name_each(cls, data: Any) -> Any:
        for f in per_call_settings():
            alias = f.metadata["alias"]
            if isinstance(data, dict) and alias and f.name in data and alias in data:
                raise ValueError(f"'{alias}' and '{f.name}' name the same setting: give one")
        return data

    def settings(self) -> dict[str, Any]:
        """The decoding settings the request gives (None: the checkpoint's), by name."""
        return {f.name: getattr(self, f.name) for f in per_call_settings()}


def _decoding_fields() -> dict[str, Any]:
    """:class:`DecodeConfig`'s per-call settings as optional fields, by the same names (the
    older short names ``beam`` and ``seed`` are accepted too); their bounds are checked where
    the config's are (:meth:`Translator.settings`)."""
    types = field_types(DecodeConfig)
    fields: dict[str, Any] = {}
    for f in per_call_settings():
        alias = f.metadata["alias"]
        fields[f.name] = (types[f.name] | None, Field(
            None, description=f.metadata["help"],
            validation_alias=AliasChoices(f.name, alias) if alias else None))
    return fields


TranslateRequest = create_model("TranslateRequest", __base__=_TranslateRequest,
                                __doc__=_TranslateRequest.__doc__, **_decoding_fields())


class ScoreRequest(BaseModel):
    """``POST /v1/score``: sentences and their translations, to score as they are."""

    model_config = ConfigDict(extra="forbid", strict=True)

    source: list[Text] | Text = Field(description="a sentence or a list of sentences")
    translation: list[Text] | Text = Field(description="their translations, one each")
    alpha: float | None = Field(None, ge=0.0, le=10.0, description="the length penalty of "
                                "'score' (default: the checkpoint's decode.alpha)")

    def pairs(self) -> tuple[list[str], list[str]]:
        def listed(x: list[str] | str) -> list[str]:
            return [x] if isinstance(x, str) else list(x)

        return listed(self.source), listed(self.translation)


class ScoredTranslation(BaseModel):
    """A given translation's probability (null: impossible, a token the model never gives)."""

    log_prob: float | None = Field(description="the sum of the tokens' log-probabilities")
    score: float | None = Field(description="log_prob divided by the GNMT length penalty: "
                                "what beam search reports for this output")
    tokens: list[str] = Field(description="the translation's tokens, <eos> last")
    token_log_probs: list[float | None]


class ScoreResponse(BaseModel):
    scores: list[ScoredTranslation]


class Hypothesis(BaseModel):
    text: str
    score: float | None = Field(description="log-probability (beam: divided by the length "
                                "penalty); null where the engine gives none")


class Alternative(BaseModel):
    """A token at the position after the prefix, and the translation completed from it."""

    token: str
    log_prob: float | None = Field(description="the token's log-probability there (null where "
                                   "the engine gives none)")
    text: str
    score: float | None = Field(description="the completed translation's score, as 'score'")
    tokens: list[str]


class SentenceTranslation(Hypothesis):
    """One sentence's translation, and what was asked about it."""

    source: str | None = Field(None, description="the source sentence (texts of several)")
    tokens: list[str]
    nbest: list[Hypothesis] | None = None
    source_tokens: list[str] | None = None
    output_tokens: list[str] | None = None
    attention: list[list[list[list[float]]]] | None = Field(
        None, description="(decoder layers, heads, output tokens and <eos>, source tokens)")
    log_prob: float | None = Field(None, description="the translation's log-probability "
                                   "(with 'topk' or 'attention'): the sum of its steps'")
    decoder_attention: list[list[list[list[float]]]] | None = Field(
        None, description="(decoder layers, heads, output tokens and <eos>, <bos> and output "
        "tokens): decoder self-attention")
    encoder_attention: list[list[list[list[float]]]] | None = Field(
        None, description="(encoder layers, heads, source tokens, source tokens)")
    steps: list[dict[str, Any]] | None = None
    beam_steps: list[list[dict[str, Any]]] | None = Field(
        None, description="per step, the hypotheses kept: tokens and log_prob")
    beam_finished: list[dict[str, Any]] | None = Field(
        None, description="the hypotheses that ended: tokens, log_prob, score (log_prob "
        "divided by the length penalty: what beam search ranks by) and step")
    alternatives: list[Alternative] | None = None
    forced: int | None = Field(None, description="how many of 'tokens' the prefix forced (an "
                               "unfinished last word, which the model finished, not counted)")
    alignment: list[tuple[int, int]] | None = Field(
        None, description="[source word, output word] pairs, words counted from 0")


class TextTranslation(SentenceTranslation):
    """One text's translation. A text of one sentence carries that sentence's fields; one of
    several carries ``sentences``, and its own ``score`` and ``tokens`` are empty."""

    sentences: list[SentenceTranslation] | None = None


class TranslateResponse(BaseModel):
    translations: list[TextTranslation]


class LibreTranslateRequest(BaseModel):
    """LibreTranslate's ``POST /translate`` (JSON, a form or the query string)."""

    model_config = ConfigDict(extra="ignore")

    q: list[Text] | Text
    source: Text = "auto"
    target: Text
    format: Literal["text", "html"] = "text"
    alternatives: int = Field(0, ge=0)
    api_key: Text | None = None

    def texts(self) -> list[str]:
        return [self.q] if isinstance(self.q, str) else list(self.q)


class DetectRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    q: Text
    api_key: Text | None = None


class SuggestRequest(BaseModel):
    """LibreTranslate's ``POST /suggest``: a corrected translation ``s`` of ``q``."""

    model_config = ConfigDict(extra="ignore")

    q: Text = Field(description="the original text")
    s: Text = Field(description="the suggested translation")
    source: Text
    target: Text
    api_key: Text | None = None


class DetectedLanguage(BaseModel):
    language: str
    confidence: float = Field(description="0 to 100")


class LibreTranslateResponse(BaseModel):
    translatedText: str | list[str]  # noqa: N815 (LibreTranslate's field names)
    alternatives: list[str] | list[list[str]] | None = None
    detectedLanguage: DetectedLanguage | list[DetectedLanguage] | None = None  # noqa: N815


class Language(BaseModel):
    code: str
    name: str
    targets: list[str]


class ErrorBody(BaseModel):
    error: str


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what} for status, what in (
        (400, "a text that cannot be translated (too long, too many sentences)"),
        (401, "a valid API key is required"), (413, "the body is too large"),
        (415, "the body is not JSON"), (422, "a field is missing, unknown or out of range"),
        (429, "too many requests: slow down"), (504, "not translated within the time limit"))}
LIBRE_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what} for status, what in (
        (400, "a bad request: a missing or wrong field, a language not translated here"),
        (403, "a valid API key is required"), (413, "the body is too large"),
        (429, "too many requests: slow down"))}


def check_settings(req: TranslateRequest, limits: Limits) -> str | None:
    """What is wrong with ``req``'s settings beyond their types (None: nothing)."""
    settings = req.settings()
    if max(settings["beam_size"] or 1, req.nbest) > limits.max_beam:
        return f"'beam' and 'nbest' are at most {limits.max_beam} here"
    if req.topk > limits.max_topk:
        return f"'topk' is at most {limits.max_topk}"
    if req.alternatives > limits.max_alternatives:
        return f"'alternatives' is at most {limits.max_alternatives} here"
    prefixes = req.prefixes()
    if prefixes is not None and len(prefixes) != len(req.texts()):
        return (f"{len(prefixes)} prefixes for {len(req.texts())} texts: give one per text "
                "(\"\" for none)")
    return None


def check_texts(texts: list[str], limits: Limits) -> str | None:
    if not texts:
        return "no text to translate"
    for n, text in enumerate(texts):
        if len(text) > limits.max_chars:
            return (f"text {n} has {len(text):,} characters; at most {limits.max_chars:,} "
                    "here: split it into several requests")
    return None


def alternative_json(choice: Choice) -> dict[str, Any]:
    t = choice.translation
    return {"token": choice.token, "log_prob": _number(choice.log_prob), "text": t.text,
            "score": _number(t.score), "tokens": t.tokens}


def _number(x: float) -> float | None:
    """JSON has no NaN: a score that was not computed is null."""
    return None if math.isnan(x) else round(x, 5)


def sentence_json(hyps: list[Translation]) -> dict[str, Any]:
    """One sentence's translation: the best, and the n-best where there are several."""
    best = hyps[0]
    out: dict[str, Any] = {"text": best.text, "score": _number(best.score),
                           "tokens": best.tokens}
    if best.forced:
        out["forced"] = best.forced
    if len(hyps) > 1:
        out["nbest"] = [{"text": h.text, "score": _number(h.score)} for h in hyps]
    return out


def inspection_json(inside: Inside | None = None, beam: BeamSteps | None = None,
                    attention: bool = True) -> dict[str, Any]:
    """What the model did for one sentence: attention, next-token candidates, beam steps.
    Every number about a translation's probability is a log-probability (natural log) but the
    finished hypotheses' ``score``, which is divided by the length penalty, as search ranks
    them."""
    out: dict[str, Any] = {}
    if inside is not None:
        out["source_tokens"] = inside.source
        out["output_tokens"] = inside.output
        if attention:  # asked for (and counted in the request's budget) or not sent
            # (L, H, T_out + 1, S): a row per output token and <eos>, a column per source one
            out["attention"] = _rounded(inside.cross)
            out["decoder_attention"] = _rounded(inside.self_attention)  # (L, H, T+1, T+1)
            out["encoder_attention"] = _rounded(inside.encoder)  # (L_enc, H, S, S)
        out["steps"] = [{"chosen": token, "log_prob": _number(log_prob),
                         "top": [[inside_token, round(p, 5)] for inside_token, p in zip(
                             tokens, probs, strict=True)]}
                        for token, log_prob, tokens, probs in zip(
                            inside.output, inside.log_probs, inside.top_tokens,
                            inside.top_probs.tolist(), strict=True)]
        out["log_prob"] = _number(sum(inside.log_probs))
    if beam is not None:
        out["beam_steps"] = [[{"tokens": tokens, "log_prob": _number(log_prob)}
                              for tokens, log_prob in step] for step in beam.kept]
        out["beam_finished"] = [{"tokens": tokens, "log_prob": _number(log_prob),
                                 "score": _number(score), "step": step}
                                for tokens, log_prob, score, step in beam.finished]
        # the translation's log-probability as the search summed it (the beam tree's figure;
        # the one forward pass above may round otherwise, in bf16 by ~0.01)
        found = [lp for tokens, lp, _, _ in beam.finished
                 if inside is not None and tokens == inside.output[:-1]]
        if found:
            out["log_prob"] = _number(found[0])
    return out


def _rounded(t: Tensor) -> Any:
    return t.double().mul(1e4).round().div(1e4).tolist()
