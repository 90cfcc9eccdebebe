"""Sentences typed without their language's letters, "ae" for "ä", "ss" for "ß"
(``translate/spelling.py``): read as they are written with them and translated so; sentences
written with them, and those of a language without them, read as they are."""

from __future__ import annotations

import pytest

from tests.helpers import TOY_DE_EN, local_client
from transformer_mt.data.vocab import SPECIALS, Vocab
from transformer_mt.translate import Translator
from transformer_mt.translate.glossary import Glossary
from transformer_mt.translate.spelling import either_way, missing_letters, spellings

TOY = (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:30]
SPELT_OUT = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss", "Ä": "Ae", "Ö": "Oe",
                           "Ü": "Ue"})  # German on a keyboard without them (DIN 5007-2)
BARE = str.maketrans({"ä": "a", "ö": "o", "ü": "u", "ß": "ss", "Ä": "A", "Ö": "O", "Ü": "U"})


@pytest.mark.parametrize(("word", "letters", "readings"), [
    ("Maedchen", "äöü", ["Maedchen", "Mädchen"]), ("Madchen", "ä", ["Madchen", "Mädchen"]),
    ("Fuessen", "üß", ["Fuessen", "Fueßen", "Füssen", "Füßen"]),
    ("UEBER", "ü", ["UEBER", "ÜBER"]), ("Aerger", "ä", ["Aerger", "Ärger"]),
    ("Haere", "äæ", ["Haere", "Häre", "Hære"]),  # "ae": German's "ä", Danish "æ"
    ("Hund", "äöü", ["Hund", "Hünd"]), ("Hund", "äß", ["Hund"]), ("Maedchen", "ö", ["Maedchen"]),
])
def test_each_spelling_of_a_letter_is_read_as_typed_and_as_the_letter(word, letters, readings):
    assert spellings(word, letters) == readings


def test_a_glossary_term_is_matched_in_each_way_it_may_be_typed():
    assert either_way("Mädchen") == ["Mädchen", "Maedchen", "Madchen"]
    assert either_way("Straße") == ["Straße", "Strasse"]
    assert either_way("Strasse") == ["Strasse", "Straße"]  # (a bare vowel not read here)
    assert either_way("ÄRGER") == ["ÄRGER", "AeRGER", "ARGER"]


def test_a_sentence_is_respelt_where_it_lacks_every_letter_its_source_side_has():
    """The letters of the vocabulary's tokens a sentence has none of, where it has a spelling
    of one; none where it has one ("Ein Mädchen laeuft": typed with them) or where the source
    side has none (an English source: "queue" is English)."""
    german = Vocab([*SPECIALS, "Mädchen", "über", "Straße", "Hund"])
    assert missing_letters("Ein Maedchen laeuft ueber die Strasse", german) == "äüß"
    assert missing_letters("Ein Mädchen laeuft", german) == ""
    assert missing_letters("Ein Hund", german) == "äüß"  # ("u" may be a "ü" without dots)
    assert missing_letters("A queue of boats", Vocab([*SPECIALS, "queue", "boat"])) == ""


@pytest.mark.parametrize("run", ["trained_run", "subword_run"])
@pytest.mark.parametrize("spelt", [SPELT_OUT, BARE], ids=["spelt out", "bare"])
def test_a_sentence_typed_without_umlauts_translates_as_written_with_them(run, spelt, request):
    """Words and SentencePiece models: the toy sentences typed without "ä", "ö", "ü" and "ß"
    ("ae", or "a") are read back mostly as written, words typed alike as typed ("isst"), and
    each translates as that reading does, alone and in capitals; sentences as written read as
    they are."""
    found = request.getfixturevalue(run)
    translator = Translator.load((found[0] if run == "trained_run" else found) / "best.pt",
                                 "cpu")
    typed = [s.translate(spelt) for s in TOY]
    read = translator.as_read(typed)
    assert translator.as_read(TOY) == TOY
    words = [(a, b, c) for s, t, r in zip(TOY, typed, read, strict=True)
             for a, b, c in zip(s.split(), t.split(), r.split(), strict=True)]
    respelt = [(a, b, c) for a, b, c in words if a != b]
    right = sum(a == c for a, _, c in respelt)
    if spelt is SPELT_OUT:
        assert len(respelt) >= 10 and right >= 0.8 * len(respelt)
    else:  # a bare vowel read with its dots only into a word the model has whole
        assert len(respelt) >= 10 and right >= 4 and all(c in (a, b) for a, b, c in respelt)
    assert all(b == c for a, b, c in words if a == b)
    assert translator.translate(typed) == translator.translate(read)
    shouted = [s.upper() for s in typed]  # (in capitals, spelt out: read as written so)
    assert translator.as_read(shouted) == translator.as_read([s.upper() for s in TOY]) \
        or spelt is BARE


def test_the_server_reads_a_sentence_typed_without_umlauts_as_the_api_does(translator):
    """``/v1/translate`` and LibreTranslate's ``/translate``: the translations of
    ``Translator.translate``, which are the reading's."""
    pytest.importorskip("fastapi")
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    typed = [s.translate(SPELT_OUT) for s in TOY[:6]]
    expected = translator.translate(translator.as_read(typed))
    assert translator.as_read(typed) != typed
    with local_client(create_app(translator, ServeOptions())) as client:
        ours = client.post("/v1/translate", json={"text": typed}).json()
        libre = client.post("/translate", json={"q": typed, "source": "de", "target": "en"})
    assert [t["text"] for t in ours["translations"]] == expected
    assert libre.json()["translatedText"] == expected


def test_a_glossary_term_is_found_typed_either_way_in_a_sentence_typed_either_way(translator):
    """A term given with its letters or spelt out is found in a sentence typed either way, as
    typed and as read ("Strasse" read "Straße"), and its target is in the translation."""
    for term in ("Mädchen", "Maedchen"):
        glossary = Glossary({term: "lass"})
        for sentence in ("Ein Mädchen läuft.", "Ein Maedchen laeuft.", "Ein Madchen lauft."):
            typed_bare = term == "Maedchen" and "Madchen" in sentence  # (a term spelt out is
            assert glossary.required(sentence) == ["lass"] or typed_bare  # not read bare)
            assert "lass" in translator.translate([sentence], glossary=glossary)[0]
    assert Glossary({"Hund": "hound"}).required("Ein Huend") == []
