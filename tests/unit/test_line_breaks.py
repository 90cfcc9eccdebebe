"""A line break inside a sentence (a page's ``<br>``, a document's soft line break, a text
wrapped by hand): the sentence is read whole, the break kept between the words of its
translation (``sentences.soft_breaks``, ``documents.split_flow``, ``inline.share``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_mt.translate.documents import split_flow, split_html, split_text
from transformer_mt.translate.inline import share
from transformer_mt.translate.sentences import CONJUNCTIONS, sentence_spans, soft_breaks


@pytest.mark.parametrize(("text", "lang", "runs_on"), [
    ("Ein Mann in einem blauen Hemd fährt\nmit dem Fahrrad.", "de", True),  # lower case after
    ("Ein Mann mit einem blauen\nHelm.", "de", True),  # German: a noun after a lower-case word
    ("Ein Mann mit einem\nblauen Helm und einer roten\nJacke fährt.", "de", True),
    ("Datei öffnen\nDatei speichern", "de", False),  # where no sentence ends: lines of a menu
    ("Hallo Anna,\nwie geht es dir?", "de", True),
    ("A man rides with the\nBBC team.", "en", True),  # a stop word before
    ("Our services\nContact us", "en", False),  # a heading and a link
    ("Contact us\nAbout", "en", False),  # a stop word, but no sentence ends: a menu
    ("رجل يركب مع\nصديقه في المدينة.", "ar", True),  # no case: a stop word ("with") before
    ("رجل يركب\nصديقه في المدينة.", "ar", False),
    ("Max Muster\nHauptstraße 5\n10115 Berlin", "de", False),  # an address
    ("Ein Hund läuft.\nzwei Katzen", "de", False),  # a mark that ends a sentence
    ("Zutaten:\nmehl", "de", False),
    ("Anna,\nTom", "de", False),
    ("Ein Mann\n\nfährt.", "de", False),  # a blank line: a paragraph
    ("Einkaufen\n- mehl", "de", False),  # a list item
    ("一个男人骑着自行\n车穿过城市。", "zh", True),  # wrapped at a width: a line as long
    ("男の人が自転車に乗って\n町を走っている。", "ja", True),
    ("他说，\n我们走吧", "zh", True),
    ("第一章\n他走了。", "zh", False),  # a heading, shorter than the line after it
    ("打开文件\n保存文件", "zh", False),
])
def test_a_line_runs_on_into_the_next_where_no_sentence_ends(text, lang, runs_on):
    breaks = len(soft_breaks(text, lang))
    assert breaks == runs_on * text.count("\n")
    assert len(split_text(text, lang).sentences) == len(sentence_spans(text, lang)) - breaks


def test_a_sentence_across_a_line_break_is_read_whole_and_the_break_kept_in_it():
    """Plain text: one sentence, read with a space; its translation cut where the words
    around the break go (here by position), the break and the spaces around it as they were;
    the line that ends a sentence ends it as ever."""
    doc = split_text("Ein Mann in einem Hemd  \n fährt mit dem Fahrrad.\nEin Hund.", "de")
    assert doc.sentences == ["Ein Mann in einem Hemd    fährt mit dem Fahrrad.", "Ein Hund."]
    assert doc.rebuild(["A man in a shirt rides a bike.", "A dog."]) == (
        "A man in a shirt  \n rides a bike.\nA dog.")


def test_a_br_inside_a_sentence_stays_between_its_words_and_one_after_a_sentence_ends_it():
    page = "<p>Ein Mann mit einem<br>Hut fährt Rad.<br/>Ein Hund läuft.</p>"
    doc = split_html(page, "de")
    assert doc.sentences == ["Ein Mann mit einem Hut fährt Rad.", "Ein Hund läuft."]
    assert doc.rebuild(["A man with a hat rides a bike.", "A dog runs."]) == (
        "<p>A man with a hat<br/>rides a bike.<br/>A dog runs.</p>")  # (by position)


LINES = st.lists(st.text(alphabet="abcXY ,.", min_size=1, max_size=12), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(LINES)
def test_lines_that_run_on_read_as_one_and_come_back_as_they_were(lines):
    """Equivalence: a text's sentences are those of the same text with its soft line breaks
    read as spaces; each sentence given back as its own translation gives the text back
    (each break where it was)."""
    text = "\n".join(lines)
    breaks = soft_breaks(text, "en")
    spaced = "".join(" " if any(a <= i < b for a, b, _ in breaks) else c
                     for i, c in enumerate(text))
    doc = split_text(text, "en")
    assert doc.sentences == [spaced[a:b] for a, b in sentence_spans(spaced, "en")]
    assert doc.rebuild(doc.sentences) == text


def test_a_kept_piece_of_no_text_takes_no_word_even_where_the_links_read_it():
    """A line break (or a note's mark) kept in a sentence: a word whose links all read it goes
    beside it, not into it (its text would be lost: the piece comes back as it was)."""
    source, cuts = "Ein Hund \n läuft", [8, 11]
    links = [(o, 9) for o in range(len("A dog runs"))]  # every character reads the break
    out = share(source, cuts, "A dog runs", links, kept=[False, True, False])
    assert not out[1].strip() and "".join(out) == "A dog runs"  # (a space at most)


def test_a_mark_stays_on_its_words_side_of_a_line_break():
    """A comma that reads the text after the break stays with the word it is written
    against: no line begins with a comma, nor ends with an opening bracket."""
    source = "Ein Mann mit Bart\nund Brille."  # the break at 17
    translation = "A man with a beard, (glasses)."
    after = translation.index(",")
    links = [(o, 3 if o < after else 20) for o in range(len(translation))]
    flow = split_flow([source], "de")
    assert flow.cuts == [[17, 18]]
    out = "".join(flow.rebuild([translation], [links]))
    assert out == "A man with a beard,\n(glasses)."


@pytest.mark.parametrize(("text", "lang", "read"), [
    ("Ein Mann fährt mit dem Fahr-\nrad.", "de", "Ein Mann fährt mit dem Fahrrad."),
    ("Er wohnt in Baden-\nWürttemberg.", "de", "Er wohnt in Baden-Württemberg."),
    ("Seit COVID-\n19 nicht.", "de", "Seit COVID-19 nicht."),
    ("A long-term plan, a long-\nterm one.", "en", "A long-term plan, a long-term one."),
    ("A plan for the long-\nterm.", "en", "A plan for the longterm."),  # (no other to say)
    ("Der Ein-\nund Ausgang.", "de", "Der Ein- und Ausgang."),  # a word's other part
    ("Both pre-\nand post-war.", "en", "Both pre- and post-war."),
    ("Er kam –\nund ging.", "de", "Er kam – und ging."),  # a dash: a comma's place
    ("一个男人骑着自行\n车穿过城市。", "zh", "一个男人骑着自行车穿过城市。"),  # (no space)
])
def test_a_word_cut_across_lines_is_read_whole(text, lang, read):
    """Text copied from a PDF, hyphenated: a hyphen that only cut a word (lower case after it)
    is gone, one that is the word's stays ("Baden-Württemberg"), one that stands for a word's
    other part ("Ein- und Ausgang") and a dash stay before a space; Chinese runs on with
    none."""
    doc = split_text(text, lang)
    assert [s.replace("\u00ad", "") for s in doc.sentences] == [read]  # (tokenizers drop it)
    assert " ".join(doc.sentences[0].split()) == doc.sentences[0]


@pytest.mark.parametrize("text", ["Fahr-\n\nrad.", "Punkte-\n- eins", "Ein Mann -\nZwei Hunde"])
def test_a_hyphen_before_a_blank_line_a_list_or_a_capital_after_a_space_ends_its_line(text):
    assert len(split_text(text, "de").sentences) == 2


@pytest.mark.parametrize(("text", "lang"), [
    ("Ein Mann fährt mit dem Fahr-\nrad durch die Stadt.\nEin Hund.", "de"),
    ("一个男人骑着自行\n车穿过城市。\n一只狗。", "zh"),
])
def test_a_word_cut_across_lines_comes_back_whole_with_the_break_between_words(text, lang):
    doc = split_text(text, lang)
    out = doc.rebuild(["A man is riding a bike through the city.", "A dog."])
    assert out.count("\n") == 2 and "-" not in out
    assert out.replace("\n", " ") == "A man is riding a bike through the city. A dog."


WORDS = st.lists(st.text(alphabet="abcdeäß", min_size=4, max_size=9), min_size=2, max_size=8)


@settings(max_examples=200, deadline=None)
@given(WORDS, st.data())
def test_words_cut_by_hyphens_read_as_the_whole_text_and_come_back_with_their_lines(words, data):
    """Equivalence: a text whose words are cut across lines by hyphens ("ab-\ncd") reads as
    the same text with the words whole (its soft hyphens aside: no tokenizer reads them); its
    translation comes back with as many lines and every word, no hyphen added."""
    whole = "Der " + " ".join(words) + "."
    cut_at = data.draw(st.sets(st.integers(0, len(words) - 1), min_size=1))
    cut = "Der " + " ".join(f"{w[:2]}-\n{w[2:]}" if i in cut_at and w[2:] not in
                            CONJUNCTIONS["de"] else w for i, w in enumerate(words)) + "."
    doc = split_text(cut, "de")
    assert [s.replace("\u00ad", "") for s in doc.sentences] == split_text(whole, "de").sentences
    out = doc.rebuild([whole])
    assert out.count("\n") == cut.count("\n") and out.replace("\n", " ").split() == whole.split()


def test_list_markers_and_zero_width_characters_are_kept_out_of_sentences():
    text = "- Ein Hund.\n1. Zwei Katzen.\n2) Ein Mann. Eine Frau.\n\u200b* Ein Kind.\u200b"
    doc = split_text(text, "de")
    assert doc.sentences == ["Ein Hund.", "Zwei Katzen.", "Ein Mann.", "Eine Frau.",
                             "Ein Kind."]
    assert doc.rebuild(["A dog.", "Two cats.", "A man.", "A woman.", "A child."]) == (
        "- A dog.\n1. Two cats.\n2) A man. A woman.\n\u200b* A child.\u200b")
    assert split_text("-5 Grad. 3.5 Meter.", "de").sentences == ["-5 Grad.", "3.5 Meter."]
    # numbered paragraphs (a German law's "(1)") and lettered items, but not a word in brackets
    text = ("(1) Die Würde.\n[2] Ein Hund.\na) Ein Mann.\n(b) Eine Frau.\n(iv) Ein Kind.\n"
            "(Foto) Ein Ball.")
    doc = split_text(text, "de")
    assert doc.sentences == ["Die Würde.", "Ein Hund.", "Ein Mann.", "Eine Frau.", "Ein Kind.",
                             "(Foto) Ein Ball."]
    assert doc.rebuild(["Dignity.", "A dog.", "A man.", "A woman.", "A child.",
                        "(Photo) A ball."]) == ("(1) Dignity.\n[2] A dog.\na) A man.\n(b) A "
                                                "woman.\n(iv) A child.\n(Photo) A ball.")
