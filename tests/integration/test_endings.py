"""A translation ends as its source ends (``decode.end_as_source``, translate/endings.py),
through the Translator, a page, a long sentence's parts, ``mt translate`` and the server. The
tiny run repeats a word to the output limit: its outputs are made its first three tokens and a
full stop, as a Multi30k model ends every translation."""

from __future__ import annotations

import dataclasses
import html
import re

import pytest

from tests.helpers import TOY_DE_EN, local_client, run_cli
from transformer_mt.translate import Translator
from transformer_mt.translate.long_sentences import clause_spans


@pytest.fixture()
def stopping(monkeypatch):
    """Makes every engine end each output with a full stop: the id of ``translator``'s."""
    from transformer_mt.translate.engines import TorchEngine

    decode = TorchEngine.decode

    def stop_with(translator):
        stop = translator.tgt_vocab.stoi["."]

        def decoding(*args, **kwargs):
            return [[dataclasses.replace(h, tokens=[*h.tokens[:3], stop]) for h in hyps]
                    for hyps in decode(*args, **kwargs)]

        monkeypatch.setattr(TorchEngine, "decode", decoding)
        return translator

    return stop_with


@pytest.fixture()
def stops(translator, stopping):
    """The tiny run's Translator, each of its outputs ending with a full stop."""
    return stopping(translator)


def sources() -> list[str]:
    """The toy corpus' test sentences without their full stops."""
    return [line.strip().removesuffix(".") for line in
            (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()]


def test_a_source_without_a_full_stop_gets_a_translation_without_one(stops):
    """Each translation is the model's own without its final full stop (the same search),
    with ``--no-end-as-source`` the model's own; a source that ends with one keeps it."""
    translator = stops
    texts = sources()
    theirs = translator.translate(texts, end_as_source=False)
    assert all(t.endswith(".") for t in theirs)
    assert translator.translate(texts) == [t.removesuffix(".").rstrip() for t in theirs]
    stopped = [f"{t}." for t in texts]
    assert translator.translate(stopped) == translator.translate(stopped, end_as_source=False)
    [[ours]], [[model]] = (translator.translate(texts[:1], nbest=1, end_as_source=e)
                           for e in (True, False))
    assert ours.ids == model.ids[:-1] and ours.score == model.score


def test_a_part_cut_after_a_comma_ends_with_it_and_markup_gets_no_full_stop(
        stops, subword_run, stopping):
    """A long sentence's parts end as they do in it (a comma, not a full stop, between them:
    a SentencePiece model's, whose vocabulary holds the comma); a sentence that ends in markup
    has no full stop in it: "A <b>dog</b>", not "A <b>dog.</b>"."""
    page = stops.translate(["<p>Ein Mann fährt <b>Fahrrad</b></p>"], form="html")[0]
    plain = stops.translate(["Ein Mann fährt Fahrrad"])[0]
    assert html.unescape(re.sub("<[^>]+>", "", page)) == plain and "." not in page, page
    translator = stopping(Translator.load(subword_run / "best.pt", "cpu"))
    short = translator.with_settings(translator.settings(max_input_tokens=16))  # 11-16 each
    long = "Ein Mann fährt Fahrrad, zwei Hunde spielen im Schnee, eine Frau liest ein Buch."
    parts = [long[a:b] for a, b in clause_spans(long, short.fits)]
    assert [p[-1] for p in parts] == [",", ",", "."]
    ours, theirs = ([h[0] for h in short.translate(parts, nbest=1, end_as_source=e)]
                    for e in (True, False))
    written = [translator.detokenize([translator.tgt_vocab.itos[h.ids[-1]]]) for h in ours]
    assert written == [",", ",", "."]  # (a comma this vocabulary holds as a byte, "<0x2C>")
    assert [h.ids[:-1] for h in ours] == [h.ids[:-1] for h in theirs]
    assert ours[2].ids == theirs[2].ids
    assert short.translate([long]) == [" ".join(h.text for h in ours)]


def test_the_flag_and_the_request_field_keep_the_models_ending(trained_run, stops):
    translator = stops
    checkpoint = str(trained_run[0] / "best.pt")
    text = sources()[0]
    runs = {flag: run_cli(["translate", "--checkpoint", checkpoint, *flag, text])
            for flag in ((), ("--no-end-as-source",))}
    assert all(r.returncode == 0 for r in runs.values())
    assert runs[()].stdout.strip() == translator.translate([text])[0]
    assert runs[("--no-end-as-source",)].stdout.strip() == translator.translate(
        [text], end_as_source=False)[0]
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    with local_client(create_app(translator, ServeOptions())) as client:
        got = {end: client.post("/v1/translate", json={"text": text, "end_as_source": end})
               .json()["translations"][0]["text"] for end in (True, False)}  # (cached apart)
    assert got == {end: translator.translate([text], end_as_source=end)[0]
                   for end in (True, False)}


def test_a_model_writes_the_words_its_vocabulary_holds_as_one_token(translator, subword_run):
    """What a long sentence's part begins with in lower case (``long_sentences.continued``):
    a word the model writes as one token of its own, as it is spelt."""
    from transformer_mt.translate.long_sentences import writer

    subwords = Translator.load(subword_run / "best.pt", "cpu")
    for model in (translator, subwords):  # (the toy corpus writes "Two" alone so)
        writes = writer(model)
        assert writes("runs") and writes("a") and not writes("two")
        assert not writes("xqzvw") and not writes("a runs")
