"""Sentences written all in capitals, all in lower case or in title case
(``translate/casing.py``): read as they would be written otherwise, the translations of those
in capitals written in capitals; everything else as it was."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.helpers import TOY_DE_EN, local_client
from transformer_mt.data.vocab import SPECIALS, Vocab
from transformer_mt.translate import Translator
from transformer_mt.translate.casing import capitalized, shouts, titled, truecased, whispers
from transformer_mt.translate.spelling import Reading

TOY = (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:30]


@pytest.mark.parametrize(("sentence", "shouting"), [
    ("EIN HUND LÄUFT.", True), ("ACHTUNG!", True), ("USA", True), ("ΈΝΑΣ ΣΚΎΛΟΣ", True),
    ("Ein Hund läuft.", False), ("Ein USA-Urlaub.", False), ("A.", False), ("123 456", False),
    ("中国", False), ("我在IBM工作", False),  # no case; a Latin name in a caseless script
])
def test_a_sentence_shouts_where_its_letters_are_capitals(sentence, shouting):
    assert shouts(sentence) is shouting


@pytest.mark.parametrize(("sentence", "whispering"), [
    ("ein hund läuft.", True), ("usa", True), ("ένας σκύλος", True), ("Ein Hund läuft.", False),
    ("ein USA-urlaub.", False), ("a.", False), ("中国", False), ("我在ibm工作", False),
])
def test_a_sentence_whispers_where_its_letters_are_lower_case(sentence, whispering):
    assert whispers(sentence) is whispering


@pytest.mark.parametrize(("sentence", "title"), [
    ("Man Bites Dog In Central Park", True), ("Ein Hund Läuft Über Die Wiese.", True),
    ("Zwei Hunde.", False), ("Ein Hund läuft.", False), ("EIN HUND LÄUFT.", False),
    ("Ein Hund In Der USA", False),
])
def test_a_sentence_is_titled_where_each_word_has_a_capital(sentence, title):
    assert titled(sentence) is title


@pytest.mark.parametrize("run", ["trained_run", "subword_run"])
def test_a_sentence_in_capitals_translates_as_written_otherwise_in_capitals(run, request):
    """Words and SentencePiece models: the toy sentences in capitals are read back mostly as
    written (each word's case the one the source vocabulary spells most readily), and each
    translates as that reading does, in capitals: alone, as an n-best, among others in a
    text, in HTML; sentences as written are read as they are."""
    found = request.getfixturevalue(run)
    translator = Translator.load((found[0] if run == "trained_run" else found) / "best.pt",
                                 "cpu")
    shouted = [s.upper() for s in TOY]
    read = translator.as_read(shouted)
    assert translator.as_read(TOY) == TOY
    words = [(a, b) for s, r in zip(TOY, read, strict=True)
             for a, b in zip(s.split(), r.split(), strict=True)]
    assert sum(a == b for a, b in words) >= 0.8 * len(words)
    expected = [t.upper() for t in translator.translate(read)]
    assert translator.translate(shouted) == expected
    assert [[h.text for h in hyps] for hyps in translator.translate(shouted, nbest=2)] == [
        [h.text.upper() for h in hyps] for hyps in translator.translate(read, nbest=2)]
    assert translator.translate([" ".join(shouted[:3])], form="text") == [" ".join(
        expected[:3])]
    html = translator.translate([f"<p>{shouted[0]}</p>"], form="html")[0]
    assert html.startswith("<p>") and html[3:-4] == expected[0]
    mixed = [TOY[0], shouted[1]]
    assert translator.translate(mixed) == [translator.translate(TOY[:1])[0], expected[1]]
    begun = [s[:1].lower() + s[1:] for s in TOY]  # its first letter in lower case: read so
    assert sum(r == s for r, s in zip(translator.as_read(begun), TOY, strict=True)) >= 24
    whispered = [s.lower() for s in TOY]  # read alike; translated as the model writes
    assert translator.as_read(whispered) == read
    assert translator.translate(whispered) == translator.translate(read)
    headlines = [" ".join(w[:1].upper() + w[1:] for w in s.split(" ")) for s in TOY]
    assert translator.as_read(headlines) == [r if titled(h) else h
                                             for h, r in zip(headlines, read, strict=True)]
    assert translator.translate(headlines) == translator.translate(
        translator.as_read(headlines))


def test_a_span_with_a_number_or_an_address_is_read_as_it_is(translator):
    """In a sentence in one case, a number, an address, a file name or a placeholder is not
    recased; the first word is given a capital."""
    assert translator.as_read(["ein hund auf www.hund.de, max@hund.de und 3er-reihe"])[0] \
        .split()[3:] == ["www.hund.de,", "max@hund.de", "und", "3er-reihe"]
    assert translator.as_read(["www.hund.de zeigt"])[0].startswith("www.hund.de ")
    assert translator.as_read(["EIN HUND FÜR {NAME} UND %S"])[0].split()[3:] == [
        "{NAME}", "und", "%S"]
    # a span kept whole, its unit or sign apart from its number (was read "°c", "gb": the
    # span kept then "30" alone, and "°C" lost: "... DURING 30.")
    for typed in ("EIN HUND LÄUFT BEI 30 °C, 32 GB.", "Ein Hund Läuft Bei 30 °C Im Park"):
        read = translator.as_read([typed])[0]
        assert "30 °C" in read and read.split()[2] == "läuft"
        assert "32 GB" in read or "GB" not in typed
        assert "30 °C" in translator.translate([typed])[0].upper()


def test_the_server_translates_sentences_in_capitals_as_the_api_does(translator):
    """``/v1/translate`` and LibreTranslate's ``/translate``, batched and cached: the same
    translations as ``Translator.translate``, in capitals where the sentence is; the same
    sentence as written is not answered from the capitals' cache entry in capitals."""
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    shouted = [s.upper() for s in TOY[:4]]
    expected = translator.translate(shouted)
    with local_client(create_app(translator, ServeOptions())) as client:
        ours = client.post("/v1/translate", json={"text": shouted}).json()
        libre = client.post("/translate", json={"q": shouted, "source": "de", "target": "en"})
        again = client.post("/v1/translate", json={"text": translator.as_read(shouted)}).json()
    assert [t["text"] for t in ours["translations"]] == expected
    assert libre.json()["translatedText"] == expected
    assert [t["text"] for t in again["translations"]] == translator.translate(
        translator.as_read(shouted)) != expected


def test_a_word_with_an_apostrophe_is_cased_as_one():
    """"GEHT'S" is one word, its case chosen whole ("geht's", "Geht's" or "GEHT'S"): its
    clitic was chosen on its own, "geht'S" where the vocabulary knows "S" and not "s"."""
    vocab = Vocab([*SPECIALS, "S", "Ein", "Mann", "geht", "geht's"])
    reading = Reading(SimpleNamespace(subword=False), vocab)  # (a word model's: no spaCy)
    assert truecased("EIN MANN GEHT'S", reading) == "Ein Mann geht's"
    assert truecased("JOE'S HUND", reading) == "Joe's hund"


def test_a_first_word_in_lower_case_is_read_with_a_capital_where_that_costs_no_more():
    """Typed in haste, "ein Mann läuft." is read "Ein Mann läuft."; a first word the source
    side reads more readily in lower case ("und"), one with a capital inside ("iPhone") and
    an address stay as typed."""
    vocab = Vocab([*SPECIALS, "Ein", "ein", "Mann", "und"])
    reading = Reading(SimpleNamespace(subword=False), vocab)  # (a word model's: no spaCy)
    for typed, read in [("ein Mann läuft.", "Ein Mann läuft."), ("„ein Mann“", "„Ein Mann“"),
                        ("und dann Mann", "und dann Mann"), ("iPhone für Mann", "iPhone für Mann"),
                        ("www.mann.de zeigt", "www.mann.de zeigt"), ("3 Mann", "3 Mann")]:
        assert capitalized(typed, reading) == read
