"""Sentences longer than the model takes are cut into parts it takes (translate/long_sentences.py),
where a translator would cut them, and nothing is lost: the parts and what lies between them
are the sentence, and a document of parts rebuilds as the document of whole sentences does.
A line is read as one sentence without spaCy where spaCy would read one."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from transformer_mt.translate.documents import split_flow, split_html, split_text
from transformer_mt.translate.long_sentences import clause_spans, continued, fitted
from transformer_mt.translate.sentences import SENTENCE_ENDS


def words_at_most(n: int):
    """A stand-in for the model's limit: at most ``n`` words (spaces apart) a text."""
    return lambda texts: [len(t.split()) <= n for t in texts]


def parts(text: str, n: int) -> list[str]:
    return [text[a:b] for a, b in clause_spans(text, words_at_most(n))]


def assert_nothing_lost(text: str, spans: list[tuple[int, int]]) -> None:
    """The parts in order, with only white space between them and around them."""
    assert spans == sorted(spans) and all(a < b for a, b in spans)
    gaps = zip([0, *[b for _, b in spans]], [*[a for a, _ in spans], len(text)], strict=True)
    assert all(not text[a:b].strip() for a, b in gaps), (text, spans)


def test_a_sentence_is_cut_at_its_strongest_mark_near_its_middle():
    clauses = "eins zwei drei; vier fünf sechs, sieben acht neun, zehn elf zwölf"
    assert parts(clauses, 12) == [clauses]  # it fits: whole
    assert parts(clauses, 11) == ["eins zwei drei;", "vier fünf sechs, sieben acht neun, "
                                  "zehn elf zwölf"]
    assert parts(clauses, 4) == ["eins zwei drei;", "vier fünf sechs,", "sieben acht neun,",
                                 "zehn elf zwölf"]
    # a line of sentences: after a sentence's end first
    assert parts("Ein Mann, ein Hund. Eine Frau, eine Katze.", 3) == [
        "Ein Mann,", "ein Hund.", "Eine Frau,", "eine Katze."]
    # no mark: at the space nearest the middle; a dash is a clause's start
    assert parts("a b c d e f", 3) == ["a b c", "d e f"]
    assert parts("a b c – d e f g", 5) == ["a b c", "– d e f g"]
    assert parts("  a b c d  ", 2) == ["a b", "c d"]  # the text's own white space left out
    assert clause_spans("   ", words_at_most(1)) == []


def test_a_script_without_spaces_is_cut_after_its_marks_else_anywhere():
    def chars_at_most(n):
        return lambda texts: [len(t) <= n for t in texts]

    text = "一二三四五六，七八九十。"
    assert [text[a:b] for a, b in clause_spans(text, chars_at_most(7))] == ["一二三四五六，",
                                                                          "七八九十。"]
    word = "https://example.com/" + "x" * 40
    spans = clause_spans(word, chars_at_most(16))
    assert "".join(word[a:b] for a, b in spans) == word
    assert all(b - a <= 16 for a, b in spans)


def test_a_span_kept_as_it_is_is_cut_only_where_it_does_not_fit_alone():
    """A price and a template's placeholder hold a space, where no cut goes (``glossary.KEPT``:
    the span is written whole, "{{ user" and "name }}" were two parts); a span that does not
    fit alone is cut as a word too long is."""
    def shorter_than(n):
        return lambda texts: [len(t) < n for t in texts]

    text = "Ein Hund kostet 12,50 € und {{ user name }} heute."
    assert [text[a:b] for a, b in clause_spans(text, shorter_than(16))] == [
        "Ein Hund", "kostet 12,50 €", "und", "{{ user name }}", "heute."]
    assert [text[a:b] for a, b in clause_spans(text, shorter_than(8))][3:6] == [
        "12,50 €", "und", "{{ user"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["Hund", "Katze", ",", ";", ".", " ", "  ", "\n", "–", "(",
                                 ")", "，", "x" * 12]), max_size=40).map("".join),
       st.integers(1, 6))
@example("Hund" + "x" * 30, 1).via("one word too long: cut inside it")
def test_every_part_fits_and_nothing_is_lost(text, most):
    def fits(texts):  # words, and a word of more than 8 characters counts as two
        return [sum(1 + (len(w) > 8) for w in t.split()) <= most for t in texts]

    spans = clause_spans(text, fits)
    assert_nothing_lost(text, spans)
    assert all(fits([text[a:b]])[0] or b - a == 1 for a, b in spans)


def identity(doc, linked: bool):
    """``doc`` rebuilt with each sentence as its own translation, each character read where it
    stands (``linked``) or by relative position."""
    links = [[(o, o) for o in range(len(s))] if linked else None for s in doc.sentences]
    return doc.rebuild(doc.sentences, links)


PIECES = ["Ein Mann mit einem roten Hut, ", "der", " über die Straße geht, und eine Frau, "
          "die ", "ein Buch", " liest. Zwei Hunde."]


def test_a_document_of_parts_rebuilds_as_the_document_of_whole_sentences():
    for doc in (split_flow(PIECES, "de"),
                split_html("<p>Ein Mann mit einem <b>roten Hut</b>, der über die Straße geht, "
                           "und <i>eine Frau, die</i> liest.</p><p>Zwei Hunde.</p>", "de"),
                split_text("Ein Mann, der geht, und eine Frau, die liest.\nZwei Hunde.", "de")):
        [parted] = fitted([doc], words_at_most(4))
        assert len(parted.sentences) > len(doc.sentences)
        assert all(len(s.split()) <= 4 for s in parted.sentences)
        for linked in (True, False):
            assert identity(parted, linked) == identity(doc, linked)
        # a part's own cuts are the sentence's cuts inside it, from where it begins
        assert any(parted.cuts) == any(doc.cuts)
        assert all(0 < x < len(s) for c, s in zip(parted.cuts, parted.sentences, strict=True)
                   for x in c)
        assert sum(map(len, parted.cuts)) <= sum(map(len, doc.cuts))
    fits = split_text("Zwei Hunde. Ein Mann.", "de")
    assert fitted([fits], words_at_most(4))[0] is fits  # whole sentences: the document itself


def test_parts_translations_are_joined_with_a_space_but_in_a_script_without():
    doc = split_text("a b c, d e f", "de")
    [parted] = fitted([doc], words_at_most(3))
    assert parted.sentences == ["a b c,", "d e f"]
    assert parted.rebuild(["A B C,", "D E F"]) == "A B C, D E F"
    assert parted.rebuild(["A B C,", ""]) == "A B C,"  # an empty translation adds no space
    assert parted.rebuild(["甲，", "乙"]) == "甲，乙"  # into Chinese
    [parted] = fitted([split_text("一二三，四五六", "zh")], lambda ts: [len(t) <= 4 for t in ts])
    assert parted.sentences == ["一二三，", "四五六"]
    assert parted.rebuild(["One two three,", "four five six"]) == (
        "One two three, four five six")  # from Chinese
    assert parted.rebuild(["甲，", "乙"]) == "甲，乙"
    assert parted.rebuild(["ก ข", "ค"]) == "ก ขค"  # Thai
    [parted] = fitted([split_text("abcdefgh", "de")], lambda ts: [len(t) <= 4 for t in ts])
    assert parted.rebuild(parted.sentences) == "abcdefgh"  # a word cut: no space


def test_a_sentence_without_a_letter_is_kept_as_it_is_not_translated():
    """A number, a date, a dash (a table's cell, a list's numbering): no part the model reads
    (it wrote "3,5 3,5 3,5." for "3,5"), kept as it is where it stands, markup around it too;
    a document of such sentences alone is read by no model at all."""
    doc = split_html("<td>3,5</td><td>Ein <b>Hund</b>.</td><td>12.04.2026 — (3)</td>", "de")
    assert doc.sentences[0] == "3,5" and len(doc.sentences) == 3
    [parted] = fitted([doc], words_at_most(50))
    assert parted.sentences == ["Ein Hund."] and parted.cuts == [doc.cuts[1]]
    assert parted.rebuild(["A dog."]) == (
        "<td>3,5</td><td>A <b>dog</b>.</td><td>12.04.2026 — (3)</td>")
    [numbers] = fitted([split_text("42\n\n1.\t€ 9,99", "de")], words_at_most(50))
    assert numbers.sentences == [] and numbers.rebuild([]) == "42\n\n1.\t€ 9,99"
    [mixed] = fitted([split_text("3 Hunde. 42", "de")], words_at_most(50))
    assert mixed.sentences == ["3 Hunde."] and mixed.rebuild(["3 dogs."]) == "3 dogs. 42"
    [chinese] = fitted([split_text("三只狗。", "zh")], words_at_most(50))
    assert chinese.sentences == ["三只狗。"]  # a letter of any script


def test_a_sentence_in_quotes_is_read_without_them_and_put_back_in_them():
    """„Ein Hund läuft.“: a model trained without such marks drops them ("A dog runs."); the
    sentence is read inside them and its translation put back in them, also in parts; quotes
    inside a sentence, or two quotations in one, are read as ever."""
    [doc] = fitted([split_text("„Ein Hund läuft.“ Er sagt: „Ja.“\n«Zwei Hunde.»", "de")],
                   words_at_most(50))
    assert doc.sentences == ["Ein Hund läuft.", "Er sagt: „Ja.“", "Zwei Hunde."]
    assert doc.rebuild(["A dog runs.", "He says: “Yes.”", "Two dogs."]) == (
        "„A dog runs.“ He says: “Yes.”\n«Two dogs.»")
    [long] = fitted([split_text("„eins zwei drei, vier fünf sechs.“", "de")], words_at_most(3))
    assert long.sentences == ["eins zwei drei,", "vier fünf sechs."]
    assert long.rebuild(["one two three,", "four five six."]) == (
        "„one two three, four five six.“")
    for text in ("„Ja“ und „Nein“", "„ “", "„Ja."):
        [same] = fitted([split_text(text, "de")], words_at_most(50))
        assert same.rebuild(same.sentences) == text


def test_the_marks_that_end_a_sentence_are_spacys():
    from spacy.pipeline.sentencizer import Sentencizer

    assert frozenset(Sentencizer.default_punct_chars) == SENTENCE_ENDS


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["Ein", "Hund", "z.B.", "3.", "Dr.", " ", "  ", ".", "!", "?",
                                 "?!", "…", "...", "。", "“", "\"", ")", "-", "😀", "\n", "—",
                                 "x", "।"]), max_size=14).map("".join))
@example("Ein Hund. 😀").via("a sentence after the full stop without a letter")
@example("Ein Hund.\" Zwei").via("a quote after the full stop")
@example("EinDr.  .").via("a full stop after two spaces: spaCy's sentence of its own")
@example("Ein。.").via("a Chinese full stop, then a mark: no sentence after it")
def test_a_line_read_as_one_sentence_without_spacy_is_what_spacy_reads(text):
    """A line with no mark before other text is one sentence without asking spaCy's
    sentencizer (a second to load); asking it gives the same sentences."""
    from transformer_mt.translate import sentences

    quick = sentences.sentence_spans(text, "de")
    one_sentence = sentences._one_sentence
    try:
        sentences._one_sentence = lambda line: False  # spaCy reads every line
        assert sentences.sentence_spans(text, "de") == quick
    finally:
        sentences._one_sentence = one_sentence


def test_a_part_that_goes_on_its_sentence_begins_in_lower_case_where_the_model_writes_so():
    """The model begins each part's translation as a sentence; one whose source goes on a
    sentence (begins in lower case) begins in lower case, where the model writes that word
    so (a name, a German noun, "I" and what is no word stay)."""
    doc = split_text("Ein Mann fährt Fahrrad, zwei Hunde spielen im Schnee, Peter liest.", "de")
    [parted] = fitted([doc], words_at_most(5), lambda word: word in {"two", "the", "der"})
    assert parted.sentences == ["Ein Mann fährt Fahrrad,", "zwei Hunde spielen im Schnee,",
                                "Peter liest."]
    assert parted.rebuild(["A man rides a bike,", "Two dogs play in the snow,",
                           "Peter reads."]) == (
        "A man rides a bike, two dogs play in the snow, Peter reads.")  # (its source: "Peter")
    [kept] = fitted([doc], words_at_most(5))  # a model that writes none so
    assert kept.rebuild(["A,", "Two dogs,", "P."]) == "A, Two dogs, P."
    for translation in ("Hunde spielen,", "I see,", "USA,", "„Two“,", "Peter,", "2 dogs,"):
        assert continued(translation, lambda word: word in {"two", "i", "usa"}) == translation
    assert continued("Der Hund,", lambda word: word == "der") == "der Hund,"
