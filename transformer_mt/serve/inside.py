"""The page's "look deeper" routes, for one sentence: the logit lens (``/v1/lens``), parts of
the model switched off (``/v1/switch``), the sentence across the training run (``/v1/run``)
and beside a second model (``/v1/compare``). ``transformer_mt/inside/lens.py`` does the work, on the
decoding worker, which owns the models: a switch's hooks are on the model only while it runs
there, so no other request decodes with them."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from transformer_mt.errors import MTError
from transformer_mt.serve.api import ERRORS, Text, check_texts
from transformer_mt.serve.deps import GivenKey, ServiceDep, api_key, client_id, client_left
from transformer_mt.serve.errors import RequestError
from transformer_mt.serve.service import Service

router = APIRouter(dependencies=[Depends(api_key)], responses=ERRORS)
RUN_FILES = ("kept_*.pt", "step_*.pt", "best.pt")


class Sentence(BaseModel):
    """One sentence of the model's source language."""

    model_config = ConfigDict(extra="forbid", strict=True)
    text: Text = Field(description="one sentence")


class LensRequest(Sentence):
    tokens: list[Text] | None = Field(None, description="the output tokens to read, as "
                                      "/v1/translate gives them (default: the greedy "
                                      "translation)")
    k: int = Field(3, ge=1, le=20, description="the most probable tokens each layer shows")


class LensResponse(BaseModel):
    output: list[str] = Field(description="the tokens written, <eos> last")
    layers: list[str] = Field(description="'embedding', 'layer 1', ...")
    top: list[list[list[tuple[str, float]]]] = Field(
        description="[layer][position]: the k most probable tokens and their probabilities")
    written: list[list[float]] = Field(
        description="[layer][position]: the probability of the token written there")


class SwitchRequest(Sentence):
    switches: list[Text] = Field(min_length=1, max_length=64, description="PART:LAYER[:HEAD]"
                                 "[=SCALE], e.g. 'cross:2:1' or 'decoder-ffn:1=0.5'; PART one "
                                 "of encoder-self, decoder-self, cross, encoder-ffn, decoder-ffn")


class Decoded(BaseModel):
    text: str
    tokens: list[str]
    log_prob: float


class SwitchResponse(BaseModel):
    trained: Decoded = Field(description="the greedy translation as trained")
    switched: Decoded = Field(description="the greedy translation with the parts switched")
    trained_scored: float | None = Field(description="the switched model's log-probability "
                                         "of the trained translation (null: impossible)")


class Snapshot(BaseModel):
    name: str
    step: int
    text: str
    log_prob: float
    links: list[tuple[int, int]] = Field(description="(source word, output word) pairs the "
                                         "last layer's cross-attention links, from 0")
    source_words: list[str]
    output_words: list[str]


class RunResponse(BaseModel):
    checkpoints: list[Snapshot] = Field(description="in the order of their steps")


class Side(BaseModel):
    name: str
    text: str
    log_prob: float
    of_other: float | None = Field(description="its log-probability of the other's "
                                   "translation (null: its vocabulary cannot write it)")
    links: dict[str, list[str]] = Field(description="'N:source word' -> the output words "
                                        "its cross-attention links to it")


class CompareResponse(BaseModel):
    models: list[Side]


def run_checkpoints(run_dir: str | None) -> list[str]:
    """The checkpoints of the run directory that ``/v1/run`` reads (names)."""
    if not run_dir:
        return []
    return sorted({p.name for pattern in RUN_FILES for p in Path(run_dir).glob(pattern)})


async def _on_worker(svc: Service, req: Sentence, request: Request, key: str | None,
                     work: Callable[[str], Any]) -> Any:
    """``work(sentence)`` on the decoding worker, for a request of one sentence that a PyTorch
    checkpoint answers; its errors as 422s."""
    problem = check_texts([req.text], svc.limits)
    if problem:
        raise RequestError(422, problem)
    if not svc.translator.engine.can_inspect:
        raise RequestError(422, "looking inside needs a PyTorch checkpoint (.pt), not an "
                           "exported model")
    svc.charge(client_id(request, key), len(req.text))
    prepared = await svc.prepare_off_loop([req.text], "text")
    if len(prepared.docs[0].sentences) != 1:
        raise RequestError(422, f"the text holds {len(prepared.docs[0].sentences)} sentences; "
                           "send one")
    try:
        return await svc.wait(svc.worker().call(lambda: work(req.text)), client_left(request))
    except (MTError, ValueError) as exc:
        raise RequestError(422, str(exc).splitlines()[0]) from None


@router.post("/v1/lens", summary="the logit lens: what each decoder layer would write")
async def lens(req: LensRequest, request: Request, svc: ServiceDep,
               key: GivenKey) -> LensResponse:
    from transformer_mt.inside.lens import decode_switched, logit_lens
    from transformer_mt.translate.unknown import unwritable

    t = svc.translator

    def run(sentence: str) -> LensResponse:
        t.one_model("the logit lens")  # said before the greedy translation it may need
        tokens = req.tokens if req.tokens is not None else decode_switched(t, sentence)[0].tokens
        ids = t.tgt_vocab.encode(tokens, eos=False)  # a copied source word: <unk>
        unknown = unwritable(t, sentence, tokens, ids)
        if unknown:
            raise MTError(f"'tokens': {unknown[0]!r} is neither in the model's vocabulary nor "
                          "a word of the source")
        found = logit_lens(t, t.encode([sentence])[0], ids, req.k)
        top = [[list(zip(words, map(float, probs), strict=True))
                for words, probs in zip(layer, layer_probs.tolist(), strict=True)]
               for layer, layer_probs in zip(found.top_tokens, found.top_probs, strict=True)]
        return LensResponse(output=found.output, layers=found.layers, top=top,
                            written=found.written.tolist())

    result: LensResponse = await _on_worker(svc, req, request, key, run)
    return result


@router.post("/v1/switch", summary="switch attention heads or feed-forward blocks off (or "
             "scale them) and decode again")
async def switch(req: SwitchRequest, request: Request, svc: ServiceDep,
                 key: GivenKey) -> SwitchResponse:
    from transformer_mt.inside.lens import Switch, decode_switched

    try:
        switches = [Switch.parse(spec) for spec in req.switches]
    except MTError as exc:
        raise RequestError(422, str(exc)) from None

    def run(sentence: str) -> SwitchResponse:
        trained, _ = decode_switched(svc.translator, sentence)
        after, cost = decode_switched(svc.translator, sentence, switches)
        return SwitchResponse(
            trained=Decoded(text=trained.text, tokens=trained.tokens, log_prob=trained.score),
            switched=Decoded(text=after.text, tokens=after.tokens, log_prob=after.score),
            trained_scored=cost if math.isfinite(cost) else None)

    result: SwitchResponse = await _on_worker(svc, req, request, key, run)
    return result


@router.post("/v1/run", summary="the sentence translated by each checkpoint of the training "
             "run (mt serve --run-dir)")
async def run(req: Sentence, request: Request, svc: ServiceDep, key: GivenKey) -> RunResponse:
    from transformer_mt.inside.lens import across_training

    run_dir = svc.options.run_dir
    if not run_checkpoints(run_dir):
        raise RequestError(422, "this server has no training run to show: start it with "
                           "mt serve --run-dir DIR (a run directory of mt train)")
    device = str(svc.translator.device)

    def work(sentence: str) -> RunResponse:
        return RunResponse(checkpoints=[
            Snapshot(name=s.name, step=s.step, text=s.text, log_prob=s.score, links=s.links,
                     source_words=s.source_words, output_words=s.output_words)
            for s in across_training(str(run_dir), sentence, device)])

    result: RunResponse = await _on_worker(svc, req, request, key, work)
    return result


@router.post("/v1/compare", summary="the served model and a second one (mt serve --compare) "
             "side by side")
async def compare(req: Sentence, request: Request, svc: ServiceDep,
                  key: GivenKey) -> CompareResponse:
    from transformer_mt.inside.lens import side_by_side

    if svc.compare is None:
        raise RequestError(422, "this server has no second model: start it with mt serve "
                           "--compare CHECKPOINT")
    models = [svc.translator, svc.compare]
    names = [str(svc.options.about.get(k, k)) for k in ("checkpoint", "compare")]

    def work(sentence: str) -> CompareResponse:
        return CompareResponse(models=[
            Side(name=name, text=s.text, log_prob=s.log_prob, of_other=s.of_other,
                 links=s.links)
            for name, s in zip(names, side_by_side(models, sentence), strict=True)])

    result: CompareResponse = await _on_worker(svc, req, request, key, work)
    return result
