"""Brackets and quotation marks a model reads only as bytes or as unknown
(``translate/marks.py``): kept where they stand, between the words of the translation that read
the text around them, and not read; those a model knows, and other marks, read as they are."""

from __future__ import annotations

import re

import pytest

from tests.helpers import local_client
from transformer_mt.translate import Translator
from transformer_mt.translate.glossary import Glossary
from transformer_mt.translate.marks import unread_marks

# the toy corpus has full stops, but no brackets, question marks, commas or German quotes
SENTENCE = "Ein Mann (mit Hut) läuft."
WITHOUT = "Ein Mann mit Hut läuft."


@pytest.fixture(params=["words", "subwords"])
def translator(request, trained_run, subword_run) -> Translator:
    run = trained_run[0] if request.param == "words" else subword_run
    return Translator.load(run / "best.pt", "cpu")


def test_the_marks_a_model_reads_only_as_bytes_or_unknown(translator):
    unread = unread_marks(translator)

    def marks(sentence: str) -> list[str]:
        return [sentence[a:b] for a, b, _ in unread(sentence)]

    assert marks(SENTENCE) == ["(", ")"] and marks("Ein Hund läuft.") == []
    assert marks("„Zwei, drei!?“ ([Mann]/Frau) «a»") == ["„", "“", "([", "]", ")", "«", "»"]
    assert marks("Um 10:30 (https://a.de/b?c=1) ist's „gut“.") == ["(", ")", "„", "“"]
    assert marks("{name}, {n} (am Tor) geht’s „gut“") == ["(", ")", "„", "“"]
    assert marks("vor einem„Boston“-Schild") == ["„", "“"]


def test_marks_are_kept_where_they_stand_and_not_read(translator, monkeypatch):
    """Alone, in a text, in HTML and through the server: the model reads the sentence without
    the marks, and its translation holds each where it stood."""
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    plain = translator.translate([WITHOUT])[0]
    read: list[list[int]] = []
    decode = translator.engine.decode
    monkeypatch.setattr(translator.engine, "decode",
                        lambda ids, *a, **k: read.extend(ids) or decode(ids, *a, **k))
    out, text = translator.translate([SENTENCE, f"Ein Hund läuft. {SENTENCE}"])
    # (the sentence in both texts decoded once: long_sentences.translate_documents)
    assert sorted(read) == sorted(translator.encode([WITHOUT, "Ein Hund läuft."]))
    assert [c for c in out if c in "()"] == list("()")
    assert out.translate(str.maketrans("()", "  ")).split() == plain.split()
    assert text.endswith(out) and text.count("(") == 1
    page = translator.translate([f"<p>{SENTENCE}</p>"], form="html")[0]
    assert page == f"<p>{out}</p>"
    read.clear()  # cut by inline markup: shared out along links that read each mark in place
    cut = translator.translate(["<p>Ein <i>Mann</i> (mit <b>Hut</b>) läuft.</p>"], form="html")[0]
    assert read == translator.encode([WITHOUT])
    assert re.sub("<[^>]+>", "", cut) == f"<p>{out}</p>"[3:-4] and cut.count("(") == 1
    at = [cut.index(t) for t in ("<i>", "</i>", "(", "<b>", "</b>", ")")]  # (each in its piece)
    assert at == sorted(at) and cut.count("<b>") == cut.count("<i>") == 1, cut
    with local_client(create_app(translator, ServeOptions())) as client:
        answer = client.post("/translate", json={"q": SENTENCE, "source": "de", "target": "en"})
        assert answer.json()["translatedText"] == out


def test_a_mark_the_model_knows_is_read(translator, monkeypatch):
    read: list[list[int]] = []
    decode = translator.engine.decode
    monkeypatch.setattr(translator.engine, "decode",
                        lambda ids, *a, **k: read.extend(ids) or decode(ids, *a, **k))
    translator.translate(["Ein Hund läuft."])
    assert read == translator.encode(["Ein Hund läuft."])
    assert translator.translate(["(?)"]) == ["(?)"]  # no letter: no sentence, kept
    translator.translate(["Wo ist der Hund?"])  # (other marks: as the model reads them)
    assert read[1:] == translator.encode(["Wo ist der Hund?"])


def test_a_mark_beside_a_kept_span_is_kept_and_the_span_whole(translator):
    """With spans kept, brackets round a number are kept as any others: the model reads the
    sentence without them, and the number comes out whole (read as they are, the marks' bytes
    made the model write "(((( 2:1")."""
    glossary = Glossary(keep_spans=True)
    out = translator.translate(["Ein Mann (10:30) läuft."], glossary=glossary)[0]
    plain = translator.translate(["Ein Mann 10:30 läuft."], glossary=glossary)[0]
    assert out.count("(") == out.count(")") == 1 and out.index("(") < out.index(")")
    assert re.search(r"(?<![\d:])10:30(?![\d:])", out), out
    assert out.translate(str.maketrans("()", "  ")).split() == plain.split()


def test_quotes_kept_apart_are_written_as_the_target_language_writes_them(translator):
    """German's „…“ kept apart come back as English's “…” (``quotation.py``), alone and in a
    sentence that inline markup cuts, each in the piece where its German mark stood."""
    plain = translator.translate([WITHOUT])[0]
    out = translator.translate(["Ein Mann „mit Hut“ läuft."])[0]
    assert "„" not in out and out.count("“") == out.count("”") == 1
    assert out.index("“") < out.index("”"), out
    assert out.translate(str.maketrans("“”", "  ")).split() == plain.split()
    cut = translator.translate(["<p>Ein <i>Mann</i> „mit <b>Hut</b>“ läuft.</p>"], form="html")[0]
    assert re.sub("<[^>]+>", "", cut) == f"<p>{out}</p>"[3:-4], cut
    at = [cut.index(t) for t in ("<i>", "</i>", "“", "<b>", "</b>", "”")]
    assert at == sorted(at), cut


def test_a_translation_that_lost_the_marks_the_model_read_is_one_that_read_them_apart(
        translator, monkeypatch):
    """Marks a model reads as words (make demo's "(" and "„") it may garble: "Ein Mann (mit
    Hut) läuft." gave "A man (in a hat is walking.". Where the translation's brackets or
    quotation marks do not number as the sentence's, the sentence is translated again with
    them kept apart, in ``mt translate`` and through the server alike; where they do, the
    translation is the model's."""
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions
    from transformer_mt.translate.marks import lost_marks

    lost = lost_marks(translator)
    assert lost(SENTENCE, "A man (in a hat is walking.") and not lost(SENTENCE, "A (man) runs.")
    assert lost("Ein „Mann“ läuft.", "A man runs.") and not lost("Ein „Mann“ läuft.",
                                                                   'A "man" runs.')
    assert not lost("Ein Mann läuft.", "A (man runs.") and not lost("Es geht’s.", "It’s.")
    apart = translator.translate([SENTENCE])[0]  # (the toy model reads no bracket)
    tokenizer, words = translator.tokenizers[0], translator.config.data.tokenizer == "spacy"
    tokenize = tokenizer.tokenize
    pieces = {c: c if words else f"\u2581{c}" for c in "()"}

    def reading(texts):  # now it reads them, as words
        texts = list(texts)
        return iter([[pieces[text]] if text in pieces else tokens
                     for text, tokens in zip(texts, tokenize(texts), strict=True)])

    monkeypatch.setattr(tokenizer, "tokenize", reading)
    for piece in pieces.values():
        monkeypatch.setitem(translator.src_vocab.stoi, piece, 5)
    read: list[list[int]] = []
    decode = translator.engine.decode
    monkeypatch.setattr(translator.engine, "decode",
                        lambda ids, *a, **k: read.extend(ids) or decode(ids, *a, **k))
    assert translator.translate([SENTENCE]) == [apart]
    assert read == translator.encode([SENTENCE, WITHOUT])  # read with them, then apart
    html = "<p>Ein <i>Mann</i> (mit <b>Hut</b>) läuft.</p>"  # (cut by inline markup too)
    page = translator.translate([html], form="html")[0]
    at = [page.index(t) for t in ("<i>", "</i>", "(", "<b>", "</b>", ")")]  # (each in place)
    assert at == sorted(at) and page.count("(") == page.count("<b>") == 1, page
    with local_client(create_app(translator, ServeOptions())) as client:
        answer = client.post("/translate", json={"q": SENTENCE, "source": "de", "target": "en"})
        assert answer.json()["translatedText"] == apart
        answer = client.post("/translate", json={"q": SENTENCE, "source": "de", "target": "en",
                                                 "alternatives": 2})  # (the best of n)
        best = answer.json()["translatedText"]
        assert best.count("(") == best.count(")") == 1 and best.index("(") < best.index(")")
        answer = client.post("/translate", json={"q": html, "source": "de", "target": "en",
                                                 "format": "html"})
        assert answer.json()["translatedText"] == page
    monkeypatch.setattr("transformer_mt.translate.marks._counted", lambda text: 0)
    assert "(" not in translator.translate([SENTENCE])[0]  # kept as the model wrote them
