"""Spans kept as they are (``--keep-spans``: URLs, addresses, placeholders, numbers): each
comes out whole, wherever a sentence's end, inline markup or a bracket kept in place stands
beside it, and the translation writes no number but the source's."""

from __future__ import annotations

import re

import pytest

from tests.helpers import local_client
from transformer_mt.data.vocab import UNK_ID
from transformer_mt.errors import MTError
from transformer_mt.translate import Translator
from transformer_mt.translate.glossary import KEPT, Glossary, steered
from transformer_mt.translate.numbers import writer, written

ENGLISH = writer("de", "en")  # the toy's kept numbers as English writes them ("12,50": "12.50")


@pytest.fixture(scope="module", params=["words", "sentencepiece"])
def translator(request, trained_run, subword_run) -> Translator:
    run = trained_run[0] if request.param == "words" else subword_run
    return Translator.load(run / "best.pt", "cpu")


def test_a_number_is_written_only_as_the_source_has_it(translator):
    """With spans kept, a sentence whose every digit stands in a kept span (a number, a URL)
    avoids every target token that writes a digit (``Required.avoid``), which its kept spans
    still write: no other number beside them ("Nummer 93" gave "the number 93 9 #8"). A
    digit in a word ("3D") leaves them free, as does a glossary without kept spans."""
    g = Glossary(keep_spans=True)
    assert g.numbers_kept("42 Kinder um 10:30 auf https://x.org/7") and g.numbers_kept("Ja.")
    assert not g.numbers_kept("Eine 3D-Brille und 7 Hunde.")
    assert not Glossary({"Hund": "hound"}).numbers_kept("Ein Hund und 7 Katzen.")
    sentences = ["Zwei Hunde und 42 Kinder.", "Eine 3D-Brille und 7 Hunde.", "Ein Hund."]
    _, _, required = steered(translator, sentences, Glossary({"Hunde": "hounds"},
                                                             keep_spans=True))
    vocab = translator.tgt_vocab
    writes_a_digit = {(i,) for i in range(len(vocab)) if i != UNK_ID and re.search(
        r"[0-9]", translator.detokenize(vocab.decode([i])))}
    assert writes_a_digit or not translator.tokenizers[1].subword  # (bytes: digits)
    assert [r.text for r in required[0]] == ["hounds", "42"]
    assert all(set(r.avoid) == writes_a_digit for r in required[0])
    assert [r.avoid for r in required[1]] == [(), ()] and required[2] == []
    out = translator.translate(["Zwei Hunde sehen 42 Kinder und 7 Katzen um 10:30."],
                               beam_size=3, glossary=g)[0]
    assert sorted(re.findall(r"\d+", out)) == ["10", "30", "42", "7"], out


# texts where kept spans were lost (a fuzz, 2026-12-06): cut by a sentence's end, by inline
# markup, by a bracket or quote kept in place
TRICKY = ["„ ) „www.hund.de“ 42 . {name} !", "? ! — {name} %s Park „www.hund.de“",
          "Ein Hund (10:30) läuft. (Eine Katze um 9:15.)", "<p>1.000 «Max» <b>„gut“</b> Ende.</p>",
          "<p>EIN HUND <b>%s</b> Ende.</p>", "<p>— um 14:30 Uhr a.b@c.de <b>«Max»</b> Ende.</p>",
          "<p>(mit Hut) 1.000 ( [1] https://x.org/a?b=1 läuft <b>42</b> Ende.</p>"]


@pytest.mark.parametrize("text", TRICKY)
def test_every_kept_span_comes_out_whole_in_texts_and_pages(translator, text):
    form = "html" if text.startswith("<p>") else "text"
    out = translator.translate([text], form=form, glossary=Glossary(keep_spans=True))[0]
    for m in KEPT.finditer(re.sub("<[^>]+>", "", text)):
        span = written(m, ENGLISH)
        assert re.search(rf"(?<![\w.:/]){re.escape(span)}(?![\w:/])", out), (span, out)


# a number's sign: a currency's before or after it, a percentage's, degrees ("°", a symbol a
# text keeps in place apart from the words, but not apart from its number)
SIGNED = ["Ein Hund kostet 12,50 € und eine Katze $5.", "Zwei Hunde spielen bei 30 °C.",
          "Ein Mann zahlt 50 % von 3 £ für 1.000 ¥."]


def test_a_number_keeps_its_currency_percent_or_degree_sign(translator):
    """A price, a percentage, a temperature is kept whole, its sign with it (a model of
    captions wrote "12,50" alone, dropped "$" and "%", and "30 °C" came out as "30 °'s")."""
    assert [m.group() for m in KEPT.finditer(" ".join(SIGNED))] == [
        "12,50 €", "$5", "30 °C", "50 %", "3 £", "1.000 ¥"]
    # (a sign only where it stands beside the number: "%s" is a placeholder, "5 Euro" a word;
    # a unit written on or spaced, whole: "0" of "0,5l" was kept, "%i" of "50%ige", "30" of
    # "30 km/h"; a digit in a word is none)
    assert [m.group() for m in KEPT.finditer(
        "5 Euro, 7 %s, 30°Celsius, 0,5l, 10km/h, eine 50%ige, 3D-Brille, MP3, 3er, 5G, "
        "30 km/h, 5 kg, 10 min, 2 mittags, #19, 5-6 Hunde, 2021-05-03, 5-Trikot")] == [
        "5", "7", "%s", "30", "0,5l", "10km/h", "50%", "30 km/h", "5 kg", "10 min", "2", "#19",
        "5-6", "2021-05-03", "5"]
    for form in ("sentences", "text"):
        for source, out in zip(SIGNED, translator.translate(SIGNED, form=form), strict=True):
            assert _holds_every_span(source, out), (form, out)
    # the amount in bold, its currency not: each where the page has it
    page = translator.translate(["<p>Zwei Hunde kosten <b>12,50</b> € im Park.</p>"],
                                form="html")[0]
    assert re.search(r"<b>12.50</b> ?€", page), page
    # the currency, percent or degree sign in markup, its number not: read with its number
    # (it was a mark kept in place apart: "12.50 on a wooden <b>€</b>structure.")
    for sign, english in (("12,50 <b>€</b>", r"12.50 ?<b>€</b>"), ("<b>$</b>5", r"<b>\$</b>5"),
                          ("30 <i>°C</i>", r"30 ?<i>°C</i>"), ("50 <b>%</b>", r"50 ?<b>%</b>")):
        page = translator.translate([f"<p>Zwei Hunde sehen {sign} im Park.</p>"], form="html")[0]
        assert re.search(english, page), page
    # (a sign alone, no number beside it, is a mark as ever)
    assert "<b>€</b>" in translator.translate(["<p>Ein Hund <b>€</b> im Park.</p>"],
                                              form="html")[0]


# a minus or plus sign that starts a number, thousands in groups of three after a space (an
# ordinary, a no-break or a narrow no-break one), a telephone number in international notation
WHOLE = ["Ein Hund friert bei −5 °C und -12 Grad.", "Ein Haus kostet 1 250 000 Euro.",
         "Zwei Hunde kosten 1\u00a0250\u00a0000,50 € und 3\u202f500 $.",
         "Ein Mann ruft +49 30 1234567 an."]


def test_a_number_is_kept_with_its_sign_its_groups_of_thousands_or_as_a_telephone_number(
        translator):
    """A number's minus sign is kept with it ("-5 °C" came out as "5 °C": a temperature
    turned), a number in groups of three is one ("1 250 000 Euro" came out as "250 1 of
    000"), and so is a telephone number ("+49 30 1234567" came out as "+49 1234567 on 30")."""
    assert [m.group() for m in KEPT.finditer(" ".join(WHOLE))] == [
        "−5 °C", "-12", "1 250 000", "1\u00a0250\u00a0000,50 €", "3\u202f500 $",
        "+49 30 1234567"]
    # (a hyphen between numbers is a range's; a sign after a letter or a number none; a
    # group of two or four digits is a number of its own; a "+" and a short number no
    # telephone's)
    assert [m.group() for m in KEPT.finditer(
        "5-6 Hunde, a-5, C++11, 2010 300, 1234 567, 1 2345, 12 34, +5 10, (-4), –3, 10 – 20")] == [
        "5-6", "5", "11", "2010", "300", "1234", "567", "1", "2345", "12", "34", "+5", "10",
        "-4", "–3", "10", "20"]
    whole = [["−5 °C", "-12"], ["1,250,000"], ["€1,250,000.50", "$3,500"], ["+49 30 1234567"]]
    for form in ("sentences", "text"):
        for spans, out in zip(whole, translator.translate(WHOLE, form=form, beam_size=3),
                              strict=True):
            assert all(span in out for span in spans), (form, out)


def test_a_kept_number_is_written_as_the_target_language_writes_it(translator):
    """``localize_numbers`` (on by default): a kept number's separators are English's in the
    toy's English ("1,75 m" and "1.000 Hunde" read as 175 and one there), its currency's
    sign before it and its percent sign against it ("€1,250.50", "50%"), as a sentence, a
    text, a page (as the source lays it out where its markup cuts the span), and over HTTP;
    off (``False``, the request's ``false``), as the source writes them. A time and a date
    stay as they are."""
    sources = ["Ein Hund ist 1,75 m groß.", "Zwei Hunde sehen 1.000 Katzen um 14:30.",
               "Ein Mann zahlt 1.250,50 € am 3.5.2021.", "Ein Hund zahlt 50 % und -5 $."]
    ours = [["1.75 m"], ["1,000", "14:30"], ["€1,250.50", "3.5.2021"], ["50%", "-$5"]]
    theirs = [["1,75 m"], ["1.000", "14:30"], ["1.250,50 €", "3.5.2021"], ["50 %", "-5 $"]]
    for form in ("sentences", "text"):
        for spans, out in zip(ours, translator.translate(sources, form=form, beam_size=3),
                              strict=True):
            assert all(span in out for span in spans), (form, out)
        for spans, out in zip(theirs, translator.translate(
                sources, form=form, beam_size=3, localize_numbers=False), strict=True):
            assert all(span in out for span in spans) and "1.75" not in out, (form, out)
    page = translator.translate(["<p>Ein Hund kostet <b>1.250</b>,50 € im Park.</p>"],
                                form="html")[0]
    assert re.search(r"<b>1,250</b>\.50 ?€", page), page
    for page in translator.translate(["<p>Ein Hund kostet <b>1.250,50 €</b> im Park.</p>",
                                      "<p>Ein Hund kostet <b>1.250,50 €</b>.</p>"], form="html"):
        assert "€1,250.50</b>" in page, page  # (nothing after it in the bold)
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    with local_client(create_app(translator, ServeOptions())) as client:
        for localize, spans in ((True, ours), (False, theirs)):
            r = client.post("/v1/translate", json={"text": sources, "beam_size": 3,
                                                   "localize_numbers": localize})
            assert r.status_code == 200, r.text
            outs = [t["text"] for t in r.json()["translations"]]
            assert all(all(x in out for x in xs) for xs, out in zip(spans, outs, strict=True))


SPANS = ["Zwei Hunde sehen https://example.org/a?b=1 und 42 Kinder um 10:30.",
         "Ein Mann schreibt an anna.berg@example.org, {name}.", "Ein Hund."]


def _holds_every_span(source: str, out: str) -> bool:
    return all(written(m, ENGLISH) in out for m in KEPT.finditer(source))


def test_spans_are_kept_by_default_where_the_search_can(translator):
    """``decode.keep_spans`` (on by default): a call that asks for nothing keeps every span
    as ``--keep-spans`` does; ``keep_spans=False`` translates without; sampling and a
    prefix, whose search cannot keep them, translate without them unless asked for there (an
    error then, as with a glossary)."""
    assert translator.config.decode.keep_spans
    kept = translator.translate(SPANS, beam_size=3, glossary=Glossary(keep_spans=True))
    assert translator.translate(SPANS, beam_size=3) == kept
    assert all(_holds_every_span(s, out) for s, out in zip(SPANS, kept, strict=True))
    plain = translator.translate(SPANS, beam_size=3, keep_spans=False)
    assert not all(_holds_every_span(s, out) for s, out in zip(SPANS, plain, strict=True))
    assert plain[2] == kept[2]  # (nothing to keep: as ever)
    sampled = {"sample_topk": 5, "sample_seed": 3}
    assert translator.translate(SPANS, **sampled) == translator.translate(
        SPANS, keep_spans=False, **sampled)
    prefixed = {"nbest": 1, "prefix": ["Two", "A", ""]}
    assert translator.translate(SPANS, **prefixed) == translator.translate(
        SPANS, keep_spans=False, **prefixed)
    for asked in (sampled, prefixed):
        with pytest.raises(MTError, match="cannot be given together"):
            translator.translate(SPANS, keep_spans=True, **asked)


def _cache_hits(client) -> float:
    return next(float(line.split()[1]) for line in client.get("/metrics").text.splitlines()
                if line.startswith("mt_cache_hits_total"))


def test_the_server_keeps_spans_by_default_and_caches_them(translator):
    """The server keeps spans as the checkpoint does (``/v1/info`` says so), each request may
    turn it off (``keep_spans: false``) or keep them (``true``); a sentence whose spans were
    kept is read from the cache the second time; a prefix's or a sampling request translates
    without them; ``mt serve --no-keep-spans`` translates without them."""
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    kept = translator.translate(SPANS, beam_size=3)
    plain = translator.translate(SPANS, beam_size=3, keep_spans=False)

    def texts(client, **body) -> list[str]:
        r = client.post("/v1/translate", json={"text": SPANS, "beam_size": 3, **body})
        assert r.status_code == 200, r.text
        return [t["text"] for t in r.json()["translations"]]

    with local_client(create_app(translator, ServeOptions())) as client:
        info = client.get("/v1/info").json()
        assert info["decode"]["keep_spans"] and info["glossary"]["keep_spans"]
        assert texts(client) == kept == texts(client)  # (the second: every part cached)
        hits = _cache_hits(client)
        assert hits >= len(SPANS) and texts(client, keep_spans=True) == kept
        assert texts(client, keep_spans=False) == plain and _cache_hits(client) == hits
        r = client.post("/v1/translate", json={"text": SPANS[0], "prefix": "Two"})
        assert r.status_code == 200 and r.json()["translations"][0]["text"].startswith("Two")
        assert texts(client, sample_topk=5, beam_size=1)
    server = translator.with_settings(translator.settings(keep_spans=False))
    with local_client(create_app(server, ServeOptions())) as client:
        assert not client.get("/v1/info").json()["glossary"]["keep_spans"]
        assert texts(client) == plain and texts(client, keep_spans=True) == kept
