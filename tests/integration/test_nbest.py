"""N-best lists of different texts (``translate/nbest.py``): a subword model's search writes
one text in several segmentations; ``translate(nbest=k)`` and ``mt translate --nbest`` give k
different texts, from a wider search where the first holds fewer."""

from __future__ import annotations

import dataclasses
import math

import pytest

from tests.helpers import TOY_DE_EN, run_cli
from transformer_mt.config import DecodeConfig
from transformer_mt.translate.nbest import different
from transformer_mt.translate.results import Translation


def _found(texts: list[str], score: float = 0.0) -> list[Translation]:
    return [Translation(t, [], score - n) for n, t in enumerate(texts)]


def test_a_list_with_a_text_twice_is_searched_wider_and_keeps_its_first():
    """Each text once, its first (best) writing; the search again twice as wide where fewer
    than k differ, the first translation the narrower search's, the others best first; a
    sentence whose search gave fewer hypotheses than asked is not searched again."""
    widths = []

    def decode(cfg: DecodeConfig, n: int) -> list[list[Translation]]:
        widths.append((cfg.beam_size, n))
        if n == 3:
            return [_found(["a", "a", "b"]), _found(["x"]), _found(["p", "q", "r"])]
        return [_found(["a2", "a", "c", "b", "d", "e"][:n], 0.5), _found(["y", "x"]),
                _found(["s"] * n)]

    cfg = dataclasses.replace(DecodeConfig(), beam_size=2)
    lists = different(decode, cfg, 3, widest=12)
    assert widths == [(2, 3), (6, 6)]  # once: the first has 3 different texts at 6
    assert [[t.text for t in found] for found in lists] == [["a", "a2", "c"], ["x"],
                                                            ["p", "q", "r"]]
    assert [t.score for t in lists[0]] == [0.0, 0.5, -1.5]  # a's narrower writing kept


def test_the_wider_search_stays_within_the_widest_beam_allowed():
    widths = []

    def decode(cfg: DecodeConfig, n: int) -> list[list[Translation]]:
        widths.append(n)
        return [_found(["same"] * n)]

    assert [t.text for t in different(decode, DecodeConfig(), 3, 12)[0]] == ["same"]
    assert widths == [3, 6, 12]
    widths.clear()
    different(decode, DecodeConfig(), 3, widest=11)
    assert widths == [3, 6]


def test_a_subword_models_nbest_holds_each_text_once(subword_run):
    """The toy SentencePiece model: where its search's k best hold a text twice, the k
    translations are k different texts (those of the search four times as wide, at most),
    the first the search's best, then best first; ``mt translate --nbest`` prints them."""
    from transformer_mt.translate import Translator

    translator = Translator.load(subword_run / "best.pt", "cpu")
    k, cfg = 3, translator.settings(beam_size=3, replace_unk=False)  # (the search's words)
    toy = (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:40]
    raw = {s: translator.translate_ids(translator.encode([s]), cfg, k)[0] for s in toy}
    twice = [s for s in toy if len({t.text for t in raw[s]}) < k]
    if not twice:
        pytest.skip("this toy model's beams of 3 hold no text twice")
    for s in twice:
        [ours] = translator.translate([s], cfg, nbest=k)
        texts = [t.text for t in ours]
        assert len(set(texts)) == len(texts) and texts[0] == raw[s][0].text
        wide = dataclasses.replace(cfg, beam_size=4 * k)
        widest = {t.text for t in translator.translate_ids(translator.encode([s]), wide,
                                                           4 * k)[0]}
        assert len(texts) == min(k, len(widest | {t.text for t in raw[s]}))
        scores = [t.score for t in ours[1:]]
        assert scores == sorted(scores, reverse=True) and not any(map(math.isnan, scores))
    printed = run_cli(["translate", "--checkpoint", str(subword_run / "best.pt"), "--nbest",
                       str(k), "--beam-size", str(k), "--no-replace-unk", twice[0]])
    assert printed.returncode == 0, printed.stderr
    lines = [line.split("\t")[2] for line in printed.stdout.splitlines()]
    assert lines == [t.text for t in translator.translate([twice[0]], cfg, nbest=k)[0]]


def test_the_servers_nbest_is_different_texts_searched_within_its_max_beam(subword_run,
                                                                            monkeypatch):
    """``/v1/translate``'s ``nbest`` holds different texts too, searched wider only as far as
    ``mt serve``'s ``max_beam``: the same lists as ``translate(nbest=k)``'s where that is four
    times k; none wider than the limit."""
    pytest.importorskip("fastapi")
    from tests.helpers import local_client
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import Limits, ServeOptions
    from transformer_mt.translate import Translator

    translator = Translator.load(subword_run / "best.pt", "cpu")
    k, cfg = 3, translator.settings(beam_size=3, replace_unk=False)
    toy = (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:40]
    twice = [s for s in toy if len({t.text for t in translator.translate_ids(
        translator.encode([s]), cfg, k)[0]}) < k][:4]
    if not twice:
        pytest.skip("this toy model's beams of 3 hold no text twice")
    widths = []
    search = translator.engine.decode
    monkeypatch.setattr(translator.engine, "decode", lambda ids, c, *args, **kwargs: (
        widths.append(c.beam_size) or search(ids, c, *args, **kwargs)))
    expected = [[t.text for t in found] for found in translator.translate(twice, cfg, nbest=k)]
    for max_beam in (4 * k, 5):  # (5: no search twice as wide)
        options = ServeOptions(limits=Limits(max_beam=max_beam), batching=False)
        with local_client(create_app(translator, options)) as client:
            widths.clear()
            got = client.post("/v1/translate", json={
                "text": twice, "beam": k, "nbest": k, "replace_unk": False}).json()
        texts = [[h["text"] for h in t["nbest"]] for t in got["translations"]]
        assert all(len(set(t)) == len(t) for t in texts) and max(widths) <= max_beam
        assert (2 * k in widths) == (max_beam == 4 * k)  # searched wider: a text twice
        if max_beam == 4 * k:
            assert texts == expected


def test_sampling_draws_n_different_translations_each_as_one_draw_alone(subword_run):
    """With sampling, ``nbest=k`` is k draws of each sentence, not a search: k different
    texts (more draws where fewer differ), each what one draw gives alone with its seed
    (``draw_seed``), the first draw's (``sample_seed`` itself: one translation's) first, the
    others best scored first; a sentence's the same alone or among others; ``mt translate
    --nbest`` and ``/v1/translate`` give those."""
    pytest.importorskip("fastapi")
    from tests.helpers import local_client
    from transformer_mt.decode.sampling import draw_seed
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import Limits, ServeOptions
    from transformer_mt.translate import Translator

    translator = Translator.load(subword_run / "best.pt", "cpu")
    k, seed = 3, 7
    cfg = translator.settings(sample_topk=20, temperature=1.5, sample_seed=seed,
                              replace_unk=False)
    toy = (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:5]
    lists = translator.translate(toy, cfg, nbest=k)
    for s, found in zip(toy, lists, strict=True):
        draws: dict[str, float] = {}  # each text drawn alone, its best score
        [[first]] = translator.translate([s], cfg, nbest=1)
        for j in range(4 * k):
            [[one]] = translator.translate([s], dataclasses.replace(
                cfg, sample_seed=draw_seed(seed, j)), nbest=1)
            draws[one.text] = max(one.score, draws.get(one.text, -math.inf))
        texts, scores = [t.text for t in found], [t.score for t in found]
        assert len(set(texts)) == len(texts) == min(k, len(draws))
        assert texts[0] == first.text and scores[0] == pytest.approx(first.score, abs=1e-4)
        assert scores[1:] == sorted(scores[1:], reverse=True)
        assert scores[1:] == pytest.approx([draws[t] for t in texts[1:]], abs=1e-4)
    assert [t.text for t in translator.translate(toy[1:2], cfg, nbest=k)[0]] == [
        t.text for t in lists[1]]
    printed = run_cli(["translate", "--checkpoint", str(subword_run / "best.pt"), "--nbest",
                       str(k), "--sample-topk", "20", "--temperature", "1.5", "--sample-seed",
                       str(seed), "--no-replace-unk", toy[0]])
    assert printed.returncode == 0, printed.stderr
    assert [line.split("\t")[2] for line in printed.stdout.split("\n")[:-1]] == [
        t.text for t in lists[0]]  # (split at newlines alone: a sampled piece may be \x1e)
    options = ServeOptions(limits=Limits(max_beam=4 * k), batching=False)
    with local_client(create_app(translator, options)) as client:
        got = client.post("/v1/translate", json={
            "text": toy, "nbest": k, "sample_topk": 20, "temperature": 1.5,
            "sample_seed": seed, "replace_unk": False})
    assert got.status_code == 200, got.text
    assert [[h["text"] for h in t["nbest"]] for t in got.json()["translations"]] == [
        [t.text for t in found] for found in lists]
