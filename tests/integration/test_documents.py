"""Texts of several sentences and HTML (#30): split into sentences, translated, put back with
their spacing, line breaks and markup; nothing lost."""

from __future__ import annotations

import re

import pytest
import torch

from tests.helpers import run_cli
from transformer_mt.errors import MTError
from transformer_mt.translate.documents import split_document, split_html, split_text
from transformer_mt.translate.sentences import symbols

PARAGRAPH = "Ein Mann fährt Fahrrad. Zwei Hunde spielen im Schnee. Eine Frau liest ein Buch."


def test_a_paragraph_splits_into_its_sentences_and_rebuilds_exactly():
    doc = split_text(PARAGRAPH, "de")
    assert doc.sentences == ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.",
                             "Eine Frau liest ein Buch."]
    assert doc.rebuild(doc.sentences) == PARAGRAPH


@pytest.mark.parametrize("text", [
    "  Erster Satz.  Zweiter Satz!\n\nDritter?\r\nVierter",  # spaces, blank line, CRLF
    "Dr. Müller kam am 3. Mai an. Er blieb z.B. zwei Tage.",  # abbreviations do not split
    "---\n...\n",  # no sentence: kept as it is
    "",
])
def test_whatever_is_not_a_sentence_is_kept(text):
    doc = split_text(text, "de")
    assert doc.rebuild(doc.sentences) == text
    marked = doc.rebuild([f"<{s}>" for s in doc.sentences])
    assert marked.replace("<", "").replace(">", "") == text  # each sentence, whole, in place
    assert all("\n" not in s and s == s.strip() for s in doc.sentences)


def test_a_line_of_items_is_read_item_by_item_its_separators_kept():
    """A byline, a breadcrumb, a menu ("Von Anna · 4. Dezember · 3 Min.", "Start | Hilfe"):
    each item is a sentence of its own, the spaced middle dot, bar or bullet between them
    kept (it was read as one sentence, whose translation dropped them); a bar inside a word
    separates nothing."""
    for text, items in (("Von Anna · 4. Dezember 2026 · 3 Min.",
                         ["Von Anna", "4. Dezember 2026", "3 Min."]),
                        ("Start | Hilfe\u00a0|\u00a0Kontakt", ["Start", "Hilfe", "Kontakt"]),
                        ("- Ein Hund • eine Katze", ["Ein Hund", "eine Katze"]),
                        ("a|b ist kein Trenner.", ["a|b ist kein Trenner."])):
        doc = split_text(text, "de")
        assert doc.sentences == items
        assert doc.rebuild([s.upper() for s in items]) == text.upper()
    page = split_html('<p class="meta">Von <a href="/anna">Anna</a> · <time>4. Dezember</time>'
                      "</p>", "de")
    assert page.sentences == ["Von Anna", "4. Dezember"]


def test_abbreviations_and_numbers_do_not_end_a_sentence():
    doc = split_text("Dr. Müller kam am 3. Mai an. Er blieb z.B. zwei Tage.", "de")
    assert doc.sentences == ["Dr. Müller kam am 3. Mai an.", "Er blieb z.B. zwei Tage."]


def test_a_bracket_or_quote_that_opens_a_sentence_is_of_that_sentence():
    """spaCy's sentencizer ends a sentence after every mark that follows its full stop, the
    next one's opening bracket or quote too ("Er lief. (" and "Eine Katze schläft.)", a
    placeholder cut in two); a mark after a space that touches the next sentence opens it,
    one that touches the full stop closes it."""
    for text, sentences in (
            ("Ein Hund läuft. (Eine Katze schläft.)", ["Ein Hund läuft.", "(Eine Katze schläft.)"]),
            ("Er lief. „Sie schläft.“ Dann ging er.", ["Er lief.", "„Sie schläft.“",
                                                        "Dann ging er."]),
            ("Ein Hund. {name} läuft. [1] Eine Katze.", ["Ein Hund.", "{name} läuft.",
                                                          "[1] Eine Katze."]),
            ('He said. "Hello." Then he left.', ["He said.", '"Hello."', "Then he left."]),
            ("Ein Hund.(Eine Katze.)", ["Ein Hund.(Eine Katze.)"])):
        doc = split_text(text, "de")
        assert doc.sentences == sentences
        assert doc.rebuild([s.upper() for s in sentences]) == text.upper()


def test_a_pages_source_wraps_its_lines_and_a_sentence_runs_on_across_them():
    """In HTML a line break is a space: a sentence across one is one sentence (each line
    was translated alone, "Ein Hund" and "läuft im Park."); in plain text a line ends one,
    unless it runs on into the next (``test_a_line_break_inside_a_sentence_...``). Chinese
    wrapped so reaches the model without a space (zero-width ones, which the tokenizers
    drop)."""
    page = "<p>Ein Hund\n  läuft im Park. Eine Katze\nschläft.</p><pre>Ein\nHund.</pre>"
    doc = split_html(page, "de")
    assert doc.sentences == ["Ein Hund\n  läuft im Park.", "Eine Katze\nschläft."]
    assert doc.rebuild(["A dog runs in the park.", "A cat sleeps."]) == (
        "<p>A dog runs in the park. A cat sleeps.</p><pre>Ein\nHund.</pre>")
    assert split_text("Ein Hund\nEine Katze.", "de").sentences == ["Ein Hund", "Eine Katze."]
    assert split_html("<p>狗在雪里\n  玩。</p>", "zh").sentences == [
        "狗在雪里\u200b\u200b\u200b玩。"]


def test_html_keeps_its_markup_and_translates_only_prose():
    html = ('<!DOCTYPE html><p class="a" title="Ein Titel.">Ein Mann. Zwei <b>Hunde</b>.</p>'
            '<script>var s = "Ein Hund.";</script><!-- Ein Kommentar. -->'
            '<code>x = 1.</code><p translate="no">Ein Name.</p>A &amp; B')
    doc = split_html(html, "de")
    assert doc.sentences == ["Ein Mann.", "Zwei Hunde.", "A & B", "Ein Titel."]  # <b> inside
    assert doc.cuts == [[], [5, 10], [], []]
    out = doc.rebuild(["One man.", "Two dogs.", "A < B", "A title."])  # no links: by position
    assert out == ('<!DOCTYPE html>\n<p class="a" title="A title.">One man. Two <b>dogs</b>.'
                   '</p><script>var s = "Ein Hund.";</script><!-- Ein Kommentar. -->'
                   '<code>x = 1.</code><p translate="no">Ein Name.</p>A &lt; B')
    assert doc.rebuild(["Q"] * 4).count("Q") == 4  # rebuilding twice works (alternatives)


def test_html_attributes_for_people_are_translated_in_place():
    """HTML's translatable attributes (an image's alt text, a title, a placeholder, a
    button's value, a page's description, not its keywords) and aria-label, where the element
    is translated; attributes in their order, a quote in a translation quoted; others as they
    were."""
    html = ('<head><meta name="description" content="Ein Hund läuft."><meta name="viewport" '
            'content="width=device-width"><meta property="og:title" content="Hunde"><meta '
            'name="keywords" content="Hund, Katze"></head><img src="a.png" alt="Zwei Hunde." '
            'id="x">'
            '<input type="text" value="Hallo" placeholder="Ihr Name"><input type="submit" '
            'value="Senden"><button aria-label="Schließen">x</button><div translate="no">'
            '<img alt="Kein Text." title="Kein Titel."></div><a href="y" title=" ">z</a>')
    doc = split_html(html, "de")
    assert doc.sentences == ["x", "z", "Ein Hund läuft.", "Hunde", "Zwei Hunde.", "Ihr Name",
                             "Senden", "Schließen"]
    out = doc.rebuild(["x", "z", "A dog runs.", "Dogs", 'Two "dogs".', "Your name", "Send",
                       "Close"])
    assert out == ('<head><meta name="description" content="A dog runs."/><meta name="viewport" '
                   'content="width=device-width"/><meta property="og:title" content="Dogs"/>'
                   '<meta name="keywords" content="Hund, Katze"/></head><img src="a.png" '
                   'alt=\'Two "dogs".\' '
                   'id="x"/><input type="text" value="Hallo" placeholder="Your name"/>'
                   '<input type="submit" value="Send"/><button aria-label="Close">x</button>'
                   '<div translate="no"><img alt="Kein Text." title="Kein Titel."/></div>'
                   '<a href="y" title=" ">z</a>')


def test_html_translated_says_it_is_in_the_target_language():
    """``lang`` and ``xml:lang`` that said the source language say the target's where the
    text is translated (a page still marked German misleads screen readers and spellers)."""
    html = ('<html lang="de-DE"><p xml:lang="DE">Ein Hund.</p><p lang="de" translate="no">'
            'Ein Name.</p><p lang="fr">Un chien.</p></html>')
    out = split_html(html, "de", target="en").rebuild(["A dog.", "A dog."])
    assert out == ('<html lang="en"><p xml:lang="en">A dog.</p><p lang="de" translate="no">'
                   'Ein Name.</p><p lang="fr">A dog.</p></html>')
    assert split_html(html, "de").rebuild(["A dog.", "A dog."]).startswith('<html lang="de-DE">')


def test_html_reads_translate_and_repeated_attributes_as_browsers_do():
    """``translate`` keywords in any case, the nearest one deciding; an attribute given twice
    holds its first value."""
    html = ('<div translate=" NO "><p>Ein Name.</p><p translate="yes">Ein Hund.</p></div>'
            '<p translate="no" translate="yes">Kein Text.</p>'
            '<p translate="yes" translate="no">Ein Text.</p>')
    doc = split_html(html, "de")
    assert doc.sentences == ["Ein Hund.", "Ein Text."]
    assert 'translate="yes">A dog.</p>' in doc.rebuild(["A dog.", "A text."])


def test_texts_translate_as_their_sentences_one_by_one(trained_run):
    from transformer_mt.translate import Translator

    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    texts = [PARAGRAPH + "\nEin Hund.", "", "<p>Ein Hund. <i>Zwei Katzen.</i></p>"]
    got = translator.translate(texts[:2], form="text") + translator.translate(texts[2:],
                                                                               form="html")
    one_by_one = translator.translate([*split_text(PARAGRAPH, "de").sentences, "Ein Hund."])
    assert got[0] == " ".join(one_by_one[:3]) + "\n" + one_by_one[3]
    # a "sentence" that holds several is translated as a text is (its own spacing left out)
    assert translator.translate([f"  {PARAGRAPH}  "]) == [" ".join(one_by_one[:3])]
    assert translator.translate([PARAGRAPH], nbest=1)[0][0].text != " ".join(one_by_one[:3])
    assert got[1] == ""
    dog, cats = translator.translate(["Ein Hund.", "Zwei Katzen."])
    assert got[2] == f"<p>{dog} <i>{cats}</i></p>".replace("&", "&amp;")
    with pytest.raises(TypeError):
        translator.translate("Ein Hund.", form="text")
    with pytest.raises(MTError, match="per sentence"):
        translator.translate(texts[:1], form="text", nbest=2)
    with pytest.raises(MTError, match="unknown form"):
        translator.translate(texts[:1], form="pdf")  # type: ignore[call-overload]


def test_a_notes_mark_stays_where_it_stood_and_is_not_read():
    """A superscript note's mark (Wikipedia's ``<sup class="reference">[1]</sup>``, a
    footnote's number, "[a]"), or an inline element of symbols alone ("↑"), is kept where it
    stands between the words around it and read as a space: "Fahrrad.[1] Eine Frau" was one
    sentence, whose translation lost words and put "[" inside the mark and "1" after it; a
    back link's "↑" was given the translation's first word. A superscript with words (or an
    exponent glued in a word: H<sub>2</sub>O) reads on as ever."""
    note = '<sup class="reference"><a href="#c1">[1]</a></sup>'
    page = (f"<p>Ein Mann fährt Fahrrad.{note} Eine Frau liest ein Buch<sup>2</sup>. "
            "Ein Hund<sup>[a]</sup> läuft. Ein Mann <sup>mit Hut</sup> lacht.</p>")
    doc = split_html(page, "de")
    assert doc.sentences == ["Ein Mann fährt Fahrrad.", "Eine Frau liest ein Buch .",
                             "Ein Hund  läuft.", "Ein Mann mit Hut lacht."]
    assert doc.rebuild(doc.sentences) == page
    assert doc.rebuild(["A man rides a bike.", "A woman reads a book.", "A dog runs.",
                        "A man with a hat laughs."]).startswith(
        f"<p>A man rides a bike.{note} A woman reads a book<sup>2</sup>. A dog<sup>[a]</sup> "
        "runs. A man")
    # inline symbols alone, a back link's arrow, an edit link's brackets: read as a space, kept
    page = ('<li><a href="#r">↑</a> Ein Mann liest ein Buch.</li><h2>Merkmale<span>[</span>'
            '<a href="?edit">Bearbeiten</a><span>]</span></h2><p>Es kostet <b>42</b> Euro.</p>')
    doc = split_html(page, "de")
    assert doc.sentences == ["Ein Mann liest ein Buch.", "Merkmale Bearbeiten",
                             "Es kostet 42 Euro."]  # (a number in a sentence read as ever)
    assert doc.rebuild(doc.sentences) == page
    assert doc.rebuild(["A man reads a book.", "Features edit", "It costs 42 euros."]) \
        .startswith('<li><a href="#r">↑</a> A man reads a book.</li><h2>')
    # a note's reference as EPUB 3 and DPUB-ARIA name it, of digits: a mark too
    book = ('<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/'
            'ops"><body><p>Ein Hund.<a epub:type="noteref" href="#n1">1</a> Zwei Katzen'
            '<a role="doc-noteref" href="#n2">2</a>.</p></body></html>')
    for xml in (True, False):
        doc = split_html(book, "de", xml)
        assert doc.sentences == ["Ein Hund.", "Zwei Katzen ."]
        assert 'Katzen<a role="doc-noteref" href="#n2">2</a>.' in doc.rebuild(doc.sentences)


def test_symbols_stay_where_they_stood_and_are_not_read(translator, monkeypatch):
    """Emoji and other symbols (a family joined by ZWJ, a skin tone, a flag, ©) are kept where
    they stand between the words around them and read as spaces: a model of sentences reads
    an emoji as rare bytes ("Ein Hund 🐶 läuft über die Wiese." gave "A dog is sumping
    sumping across the grassy field."); a text of symbols alone is kept as it is."""
    text = "Ein Hund 🐶 läuft 👨‍👩‍👧 mit 👍🏽 in 🇩🇪 © 2026."
    assert [text[a:b] for a, b, _ in symbols(text)] == ["🐶", "👨‍👩‍👧", "👍🏽", "🇩🇪", "©"]
    dog = translator.translate(["Ein Hund läuft."])[0]
    read: list[list[int]] = []
    decode = translator.engine.decode
    monkeypatch.setattr(translator.engine, "decode",
                        lambda ids, *a, **k: read.extend(ids) or decode(ids, *a, **k))
    one, alone, after = translator.translate(["Ein Hund 🐶 läuft.", "👍", "Ein Hund läuft. 🇩🇪"])
    assert one.count("🐶") == 1 and one.replace("🐶", " ").split() == dog.split()
    assert (alone, after) == ("👍", f"{dog} 🇩🇪")
    page = translator.translate(["<p>Ein Hund 🐶 läuft.</p>"], form="html")[0]
    assert page.count("🐶") == 1 and page.startswith("<p>") and page.endswith("</p>")
    assert read == translator.encode(["Ein Hund läuft."] * 3)


def test_numbers_dates_and_dashes_are_kept_not_translated(translator, monkeypatch):
    """A sentence without a letter is kept as it is, by the library, a file and the server
    (what a model writes for "3,5" is "3,5 3,5 3,5."), and the model reads only the others."""
    from tests.helpers import local_client
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions
    from transformer_mt.translate.files import translate_file

    dog = translator.translate(["Ein Hund."])[0]
    read: list[list[int]] = []
    decode = translator.engine.decode
    monkeypatch.setattr(translator.engine, "decode",
                        lambda ids, *a, **k: read.extend(ids) or decode(ids, *a, **k))
    assert translator.translate(["3,5", "Ein Hund. 12.04.2026", "—"]) == [
        "3,5", f"{dog} 12.04.2026", "—"]
    assert translator.translate(["„Ein Hund.“"]) == [f"“{dog}”"]  # read inside, English quotes
    assert translator.translate(["<td>42</td><td>Ein Hund.</td>"], form="html") == [
        f"<td>42</td><td>{dog}</td>"]
    assert translate_file(translator, "prices.txt", b"9,99\nEin Hund.\n") == (
        f"9,99\n{dog}\n".encode())
    assert read == translator.encode(["Ein Hund."] * 4)
    with local_client(create_app(translator, ServeOptions())) as client:
        answer = client.post("/v1/translate", json={"text": ["42", "Ein Hund. 3,5"]})
        assert [t["text"] for t in answer.json()["translations"]] == ["42", f"{dog} 3,5"]
        answer = client.post("/translate", json={"q": "1.", "source": "de", "target": "en"})
        assert answer.json()["translatedText"] == "1."


def test_a_sentence_across_inline_markup_is_translated_whole(trained_run, subword_run):
    """"Ein Mann fährt <b>Fahrrad</b>." is one sentence: its translation is the sentence's,
    shared out around and inside the <b> along the model's attention (words or subwords)."""
    import html as html_lib

    from transformer_mt.translate import Translator
    from transformer_mt.translate.inline import attention_links

    page = "<p>Ein Mann fährt <b>Fahrrad</b>. Zwei Hunde spielen.</p>"
    sentences = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen."]
    for run in (trained_run[0], subword_run):
        translator = Translator.load(run / "best.pt", "cpu")
        out = translator.translate([page], form="html")[0]
        first, second = translator.translate(sentences)
        whole = f"{first} {second}"
        assert html_lib.unescape(re.sub("<[^>]+>", "", out)) == whole
        if len(re.findall(r"\w+|[^\w\s]", first)) >= 2:  # enough to give <b> a word
            assert re.fullmatch(r"<p>.+<b>\S.*</b>.*</p>", out, re.S), out
        links = attention_links(translator, sentences[:1], [whole])[0]
        assert links and all(0 <= o < len(whole) and 0 <= s < len(sentences[0])
                             for o, s in links)
    # the weights of a padded batch are each pair's alone (padding masked, then cut off)
    texts = [*sentences, "Ein Hund.", PARAGRAPH]  # of different lengths
    sources = translator.encode(texts)
    outputs = [h[0].ids for h in translator.translate(texts[::-1], nbest=1)]
    for batched, src, out in zip(translator.engine.cross_attention(sources, outputs, 0, 1),
                                 sources, outputs, strict=True):
        alone = translator.cross_attention(src, out, 0, 1)  # (a layer and a head)
        assert batched.shape == alone.shape == (len(out) + 1, len(src))
        torch.testing.assert_close(batched, alone, atol=1e-5, rtol=1e-4)
    one = Translator.load(trained_run[0] / "best.pt", "cpu")
    # inline code: read in its sentence, kept as it is (the words that read it left out)
    coded = one.translate(['<p>Ein Mann <code>x = f(1)</code> läuft.</p>'], form="html")[0]
    assert re.fullmatch(r"<p>[^<]*<code>x = f\(1\)</code>[^<]*</p>", coded), coded
    two = Translator.load([trained_run[0] / "best.pt"] * 2, "cpu")  # their attention: averaged
    assert attention_links(two, sentences[:1], ["A man."]) == attention_links(
        one, sentences[:1], ["A man."])
    assert two.translate([page], form="html") == one.translate([page], form="html")


def test_mt_translate_translates_a_line_of_sentences_sentence_by_sentence(trained_run,
                                                                          tmp_path):
    """A line that holds several sentences is translated sentence by sentence (a model
    trained on sentences leaves the later ones out of one translation) and stays one line;
    ``--split-sentences``, which asked for it before it was the default, is the same."""
    ckpt = str(trained_run[0] / "best.pt")
    source = tmp_path / "in.de"
    source.write_text(PARAGRAPH + "\nEin Hund.\n", encoding="utf-8")
    split = run_cli(["translate", "--checkpoint", ckpt, "--input", str(source)])
    assert split.returncode == 0, split.stderr
    whole = run_cli(["translate", "--checkpoint", ckpt, *split_text(PARAGRAPH, "de").sentences,
                     "Ein Hund."])
    lines = whole.stdout.splitlines()
    assert split.stdout.splitlines() == [" ".join(lines[:3]), lines[3]]
    assert run_cli(["translate", "--checkpoint", ckpt, "--input", str(source),
                    "--split-sentences"]).stdout == split.stdout
    nbest = run_cli(["translate", "--checkpoint", ckpt, "--input", str(source), "--nbest", "2"])
    assert nbest.returncode == 0 and "1 line(s) hold several sentences" in nbest.stderr
    refused = run_cli(["translate", "--checkpoint", ckpt, "--split-sentences", "--nbest", "2",
                       "Ein Hund."])
    assert refused.returncode != 0 and "--split-sentences" in refused.stderr
    assert split_document("<b>x</b>", "de", "html").sentences == ["x"]


def test_a_sentence_longer_than_the_model_takes_is_translated_in_parts(trained_run, caplog):
    """Past ``decode.max_input_tokens`` a sentence is cut at its clauses and translated part
    by part, as a text, in a page (its markup across a cut kept) and by ``mt translate``; an
    n-best list, asked of one sentence, reads its first tokens (with a warning)."""
    import html as html_lib

    from transformer_mt.translate import Translator
    from transformer_mt.translate.long_sentences import clause_spans

    loaded = Translator.load(trained_run[0] / "best.pt", "cpu")
    short = loaded.with_settings(loaded.settings(max_input_tokens=8))
    long = "Ein Mann fährt Fahrrad, zwei Hunde spielen im Schnee, eine Frau liest ein Buch."
    parts = [long[a:b] for a, b in clause_spans(long, short.fits)]
    assert parts == ["Ein Mann fährt Fahrrad,", "zwei Hunde spielen im Schnee,",
                     "eine Frau liest ein Buch."]
    one_by_one = short.translate([*parts, "Ein Hund."])
    with caplog.at_level("WARNING"):
        assert short.translate([long, "Ein Hund."]) == [" ".join(one_by_one[:3]),
                                                         one_by_one[3]]
        assert short.translate([f"{long} Ein Hund."], form="text") == [" ".join(one_by_one)]
        page = short.translate([long.replace("Fahrrad, zwei", "<b>Fahrrad, zwei</b>")],
                               form="html")[0]
    assert html_lib.unescape(re.sub("<[^>]+>", "", page)) == " ".join(one_by_one[:3])
    assert page.count("<b>") == page.count("</b>") == 1
    assert "only the first" not in caplog.text
    with caplog.at_level("WARNING"):
        short.translate([long], nbest=2)
    assert "17 tokens; only the first 8" in caplog.text


def test_a_sentence_longer_than_the_training_taught_is_translated_in_parts(trained_run):
    """``mt train`` records how long the training's sources were (all but the longest
    thousandth, and the longest); a sentence longer than that is translated in parts
    (``decode.max_sentence_tokens``, 0: that length), unless a call says otherwise. A
    checkpoint without the record translates whole what ``max_input_tokens`` allows."""
    import numpy as np

    from tests.helpers import REPO, TOY_DE_EN
    from transformer_mt.translate import Translator
    from transformer_mt.translate.long_sentences import clause_spans

    path = trained_run[0] / "best.pt"
    translator = Translator.load(path, "cpu")
    sources = (TOY_DE_EN / "train.de").read_text(encoding="utf-8").splitlines()[:300]
    lengths = sorted(len(t) for t in translator.tokenizers[0].tokenize(sources))
    recorded = torch.load(path, weights_only=True)["data"]["source_tokens"]
    assert recorded == {"99.9%": int(np.percentile(lengths, 99.9, method="higher")),
                        "max": lengths[-1]}
    assert translator.config.decode.max_sentence_tokens == recorded["99.9%"]
    long = "Ein Mann fährt Fahrrad, zwei Hunde spielen im Schnee, eine Frau liest ein Buch."
    parts = [long[a:b] for a, b in clause_spans(long, translator.fits)]
    assert len(parts) > 1 and all(translator.fits(parts))
    assert translator.translate([long]) == [" ".join(translator.translate(parts))]
    assert translator.translate([long], max_sentence_tokens=250) == [
        translator.translate([long], nbest=1)[0][0].text]  # whole, as asked
    old = Translator.load(REPO / "tests/data/checkpoint-0.1/best.pt", "cpu")
    assert old.config.decode.max_sentence_tokens == 0 and old.fits([long])
