"""A PDF's translation in scripts whose letters are shaped or written right to left
(``translate/pdf_shaping.py``): each line in the order python-bidi's own (compiled)
implementation shows it; Arabic joined, drawn from the right and read back as the text;
Devanagari's conjuncts drawn and read back whole by poppler; what cannot be drawn refused
in one line."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import unicodedata
from itertools import pairwise

import pytest

from tests.integration.test_files_pdf import PARAGRAPH, pdf, rebuilt
from tests.integration.test_files_pdf_fonts import RUSSIAN, chars, installed
from transformer_mt.errors import MTError
from transformer_mt.packages import MissingPackageError
from transformer_mt.translate.files import read_file

pytest.importorskip("reportlab")
bidi = pytest.importorskip("bidi")
pytest.importorskip("uharfbuzz")

LINES = ["שלום world 123 (עולם)!", "Hello שלום, (world) 12.5% done.", "מספר 3 ו-4 [א] ב",
         "שלום", "abc def", "(a) שלום b [c]", "עברית: \"ציטוט\" - 2024 (abc) סוף.",
         "a - b ש 1/2 ת"]


@pytest.mark.parametrize("rtl", [True, False])
def test_a_line_is_in_the_order_python_bidis_compiled_algorithm_shows_it(rtl):
    """Equivalence: the pieces in the order they are drawn, each read from the right turned
    around, are the line as python-bidi's Rust implementation displays it (which mirrors no
    bracket: a piece read from the right is drawn with its brackets mirrored); each piece
    keeps the look of the run it came from, wherever the runs are cut."""
    from transformer_mt.translate.pdf_shaping import shaped, visual

    for line in LINES:
        for cuts in ([], [3], [2, 7, 9]):
            ends = [0, *[c for c in cuts if c < len(line)], len(line)]
            runs = [(line[a:b], i) for i, (a, b) in enumerate(pairwise(ends))]
            pieces = visual(runs, rtl)
            shown = "".join(text[::-1] if back else text for text, _, back in pieces)
            assert shown == bidi.get_display(line, base_dir="R" if rtl else "L"), line
            for text, look in runs:
                assert sorted("".join(t for t, lk, _ in pieces if lk == look)) == sorted(text)
    assert shaped("[x) «", True, "Helvetica", 10)[0] == "» (x]"
    for controls in ("\u202b{}\u202c", "\u2067{}\u2069", "\u202e{}"):  # (left out)
        line = LINES[0]
        assert visual([(controls.format(line), 0)], rtl) == visual([(line, 0)], rtl)


ARABIC = ["كلب في الحديقة", "رجل يركب دراجة عبر المدينة مع 2 كلاب. كلبان يلعبان في الحديقة "
          "الكبيرة.", "امرأة", "طفل", "صبي يقفز في الماء."]


@pytest.mark.skipif(not installed("بك"), reason="no TrueType font for Arabic installed")
def test_arabic_is_joined_drawn_from_the_right_and_read_back_as_its_text():
    """The paragraph's glyphs, read from the right a line at a time, are its translation
    (their joined forms as the letters they are); its letters joined (presentation forms);
    each line ends where the source's widest line ended, and wraps within the box."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    out = rebuilt(read_file("a.pdf", pdf(), "de", "ar"), ARABIC)
    drawn = [c for c in chars(out) if c.y0 < 745 and c.y1 > 690 and c.x0 < 290]
    lines = sorted({round(c.y0) for c in drawn}, reverse=True)
    assert len(lines) >= 2
    right = 72 + max(stringWidth(line, "Helvetica", 11) for line in PARAGRAPH)
    read = []
    for y in lines:
        line = sorted((c for c in drawn if round(c.y0) == y), key=lambda c: -c.x0)
        assert max(c.x1 for c in line) == pytest.approx(right, abs=0.5)
        assert min(c.x0 for c in line) >= 72 - 0.5
        read.append(unicodedata.normalize("NFKC", "".join(c.get_text() for c in line)))
    assert " ".join(" ".join(read).split()) == ARABIC[1]
    assert any(0xFE70 <= ord(c.get_text()[0]) <= 0xFEFF for c in drawn)  # (joined forms)


def test_a_pdf_in_arabic_is_read_as_its_text_and_its_translation_drawn_from_its_left():
    """Equivalence: the Arabic PDF drawn above, read (its glyphs drawn from the left, in their
    joined forms; its brackets drawn mirrored as their ActualText says), is the text it was
    drawn from, a number inside too, its lines run together; translated into English, drawn
    from where its leftmost line began."""
    said = [ARABIC[0], "رجل يركب دراجة عبر المدينة (بسرعة) مع 2 كلاب. كلبان يلعبان في "
            "الحديقة «الكبيرة».", *ARABIC[2:]]
    arabic = rebuilt(read_file("a.pdf", pdf(), "de", "ar"), said)
    doc = read_file("a.pdf", arabic, "ar", "en")
    assert [" ".join(d.sentences) for d in doc.documents] == said
    out = rebuilt(doc, ["A dog in the park", " ".join(PARAGRAPH), "A woman", "A child", "A boy"])
    line = [c for c in chars(out) if 745 > c.y0 > 690 and c.x0 < 290]
    left = min(c.x0 for c in line)
    assert left == pytest.approx(min(c.x0 for c in chars(arabic) if 745 > c.y0 > 690 and
                                     c.x0 < 290), abs=0.5)


@pytest.mark.skipif(not installed("بك"), reason="no TrueType font for Arabic installed")
@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler's pdftotext missing")
def test_a_bracket_drawn_mirrored_is_read_by_poppler_as_the_bracket_it_is():
    said = "رجل (بسرعة) «هنا»"
    out = rebuilt(read_file("a.pdf", pdf(), "de", "ar"), [said, *ARABIC[1:]])
    shown = subprocess.run(["pdftotext", "-", "-"], input=out, capture_output=True,
                           check=True).stdout.decode()
    read = unicodedata.normalize("NFKC", shown.splitlines()[0].strip("\u202a\u202b\u202c"))
    assert read == said


@pytest.mark.skipif(not installed("بכ\u064e\u05b8"), reason="no font for Arabic and Hebrew")
@pytest.mark.parametrize("lang, said", [("ar", "كَلْبٌ فِي الحَدِيقَةِ"), ("he", "שָׁלוֹם עוֹלָם")])
def test_vowel_signs_drawn_on_their_letters_are_read_with_them(lang, said):
    """Equivalence: Arabic's harakat and Hebrew's points (marks of no width, drawn on their
    letters; HarfBuzz draws a cluster written right to left mark first) read back each with
    its letter, in Unicode's canonical order, the words whole."""
    out = rebuilt(read_file("a.pdf", pdf(), "de", lang), [said, *ARABIC[1:]])
    doc = read_file("a.pdf", out, lang, "en")
    assert doc.documents[0].sentences == [unicodedata.normalize("NFC", said)]


@pytest.mark.skipif(not installed("بכ"), reason="no TrueType font for Arabic and Hebrew")
@pytest.mark.parametrize("said", ["رجل يركب دراجة (بسرعة) مع 2 كلاب.",
                                  "שלום עולם (מספר 12) סוף."])
def test_a_line_drawn_a_direction_at_a_time_as_libreoffice_draws_it_is_read_whole(said):
    """A line drawn as LibreOffice and Word draw it: its glyphs from the left, each saying
    the letter it is where it is read (a bracket too), the number inside drawn after the
    words on both sides of it: read as one line, in the order it is read."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("Arabic-test", installed("بכ")[0]))
    shown = bidi.get_display(said, base_dir="R")  # (the letters as seen, none mirrored)
    number = next(i for i, c in enumerate(shown) if c.isdigit())
    parts = [(number + 2, shown[number + 2:]), (number, shown[number:number + 2]),
             (0, shown[:number])]  # (right to left)
    out = io.BytesIO()
    c = canvas.Canvas(out)
    c.setFont("Arabic-test", 12)
    for at, part in parts:
        c.drawString(300 + pdfmetrics.stringWidth(shown[:at], "Arabic-test", 12), 700, part)
    c.save()
    doc = read_file("a.pdf", out.getvalue(), "ar", "en")
    assert [" ".join(d.sentences) for d in doc.documents] == [said]


HINDI = ["पार्क में एक कुत्ता", "एक आदमी शहर में साइकिल चलाता है। दो कुत्ते खेलते हैं।",
         "महिला", "बच्चा", "लड़का पानी में कूदता है।"]


@pytest.mark.skipif(not installed("कत्"), reason="no TrueType font for Devanagari installed")
@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler's pdftotext missing")
def test_devanagari_is_shaped_and_poppler_reads_it_back_as_its_text():
    """Devanagari's conjuncts drawn as one glyph (fewer glyphs than letters), and the PDF
    read back by poppler (pdftotext, as its viewers copy text) as the translation: the
    words whose glyphs do not say their letters carry them (ActualText)."""
    out = rebuilt(read_file("a.pdf", pdf(), "de", "hi"), HINDI)
    heading = [c for c in chars(out) if c.y0 > 760]
    assert 0 < len(heading) < len(HINDI[0].replace(" ", ""))
    shown = subprocess.run(["pdftotext", "-", "-"], input=out, capture_output=True,
                           check=True).stdout.decode()
    assert " ".join(shown.split()) == " ".join(HINDI)


@pytest.mark.skipif(not installed("कत्"), reason="no TrueType font for Devanagari installed")
def test_devanagari_drawn_here_is_read_back_as_its_text_as_its_actualtext_says():
    """Equivalence: the Hindi PDF drawn here, read here, is the text it was drawn from (the
    glyphs of a conjunct say no letters of their own: their marked content's ActualText)."""
    out = rebuilt(read_file("a.pdf", pdf(), "de", "hi"), HINDI)
    doc = read_file("a.pdf", out, "hi", "en")
    assert [" ".join(d.sentences) for d in doc.documents] == HINDI


@pytest.mark.skipif(not installed("कत्"), reason="no TrueType font for Devanagari installed")
def test_a_vowel_sign_of_no_width_makes_no_space_inside_a_word():
    """A vowel sign drawn on the letter before it, of no width (as LibreOffice draws
    Devanagari), then the next letter a hair after the first: one word, as it is drawn
    (pdfminer.six alone puts a space after the sign)."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("Devanagari-test", installed("कत्")[0]))
    wide = pdfmetrics.stringWidth("क", "Devanagari-test", 12)
    out = io.BytesIO()
    c = canvas.Canvas(out)
    c.setFont("Devanagari-test", 12)
    for x, letter in ((100, "क"), (100 + wide * 0.7, "\u0941"), (100 + wide + 0.1, "त"),
                      (100 + 2 * wide + 4, "क")):
        c.drawString(x, 700, letter)
    c.save()
    doc = read_file("a.pdf", out.getvalue(), "hi", "en")
    assert [d.sentences for d in doc.documents] == [["कुत क"]]


def test_a_script_written_without_spaces_between_words_is_refused_in_one_line():
    doc = read_file("a.pdf", pdf(), "de", "th")
    with pytest.raises(MTError, match=r"'ส' \(Thai or Lao\), written without spaces between "
                                      r"words: where its lines may break is not known here"):
        rebuilt(doc, ["สุนัข", *RUSSIAN[1:]])


@pytest.mark.parametrize("module", ["bidi", "uharfbuzz"])
def test_without_its_libraries_a_pdf_into_arabic_is_refused_before_translating(
        monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingPackageError, match=rf"{module}.*transformer_mt\[files\]"):
        read_file("a.pdf", pdf(), "de", "ar")
    doc = read_file("a.pdf", pdf(), "de", "hi")  # (a script shaped, found as it is drawn)
    with pytest.raises(MissingPackageError, match=rf"{module}.*transformer_mt\[files\]"):
        rebuilt(doc, HINDI)
