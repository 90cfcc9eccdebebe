"""A PDF's links follow their text (``translate/pdf_layout.py`` finds the letters under each
link annotation, ``pdf_writing.py`` moves the annotation over their translation): its
rectangle around the translation, a quadrilateral a line, its destination kept; a link or a
bold word that begins a line begins no paragraph."""

from __future__ import annotations

import io

import pytest

from tests.integration.test_files_pdf import rebuilt
from tests.integration.test_files_pdf_fonts import chars
from transformer_mt.translate.files import read_file

canvas = pytest.importorskip("reportlab.pdfgen.canvas")
pytest.importorskip("pypdf")

BLUE = (0.0, 0.0, 0.8)
LINES = ["Ein Hund spielt im Park mit einem roten Ball und",
         "läuft nach Hause. Mehr dazu auf unserer Seite."]


def linked(colour=BLUE) -> bytes:
    """A paragraph of two lines whose last sentence ("Mehr dazu auf unserer Seite.") lies
    under a link, drawn in ``colour``; a second link on a line of its own."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    out = io.BytesIO()
    c = canvas.Canvas(out)
    c.setFont("Helvetica", 11)
    start = LINES[1].index("Mehr")
    before = stringWidth(LINES[1][:start], "Helvetica", 11)
    c.drawString(72, 740, LINES[0])
    c.drawString(72, 726, LINES[1][:start])
    c.setFillColorRGB(*colour)
    c.drawString(72 + before, 726, LINES[1][start:])
    c.linkURL("https://example.org/mehr", (72 + before, 723, 72 + stringWidth(
        LINES[1], "Helvetica", 11), 735))
    c.setFillColorRGB(0, 0, 0)
    c.drawString(72, 650, "Impressum")
    c.linkURL("https://example.org/impressum", (70, 647, 130, 660))
    c.save()
    return out.getvalue()


def annotations(data: bytes) -> list[dict]:
    from pypdf import PdfReader

    return [a.get_object() for a in PdfReader(io.BytesIO(data)).pages[0]["/Annots"]]


def covers(rect, drawn) -> bool:
    """Whether ``rect`` is around the letters ``drawn`` (within a point and a half)."""
    x0, y0, x1, y1 = (float(v) for v in rect)
    return (abs(x0 - min(c.x0 for c in drawn)) < 1.5 and abs(x1 - max(c.x1 for c in drawn))
            < 1.5 and y0 <= min(c.y0 for c in drawn) + 1.5 and y1 >= max(c.y1 for c in drawn)
            - 1.5)


@pytest.mark.parametrize("colour", [BLUE, (0.0, 0.0, 0.0)])
def test_a_link_is_moved_over_its_translation_a_quadrilateral_a_line(colour):
    """The link's letters are a piece of their own (in the paragraph's colour too, as
    LaTeX's boxed links are); translated, the annotation's rectangle is around where their
    translation is drawn, each line's part a quadrilateral; its destination kept."""
    doc = read_file("a.pdf", linked(colour), "de", "en")
    assert doc.documents[0].sentences[-1] == "Mehr dazu auf unserer Seite."
    first = "A dog plays in the park with a red ball."
    link = "You can read more about all of this and much more on our own page."
    out = doc.rebuild([doc.documents[0].rebuild([first, link]),
                       doc.documents[1].rebuild(["Imprint and legal notice"])])
    drawn = [c for c in chars(out) if c.y0 > 690 and c.get_text().strip()]
    text = "".join(c.get_text() for c in drawn)
    starts = text.index("You")
    under = drawn[starts:starts + len(link.replace(" ", ""))]
    assert "".join(c.get_text() for c in under) == link.replace(" ", "")
    rows = sorted({round(c.y0) for c in under}, reverse=True)
    assert len(rows) == 2  # (the translation wraps across two lines)
    link_annot, imprint = annotations(out)
    assert link_annot["/A"]["/URI"] == "https://example.org/mehr"
    quads = [float(v) for v in link_annot["/QuadPoints"]]
    assert len(quads) == 8 * len(rows)
    assert covers(link_annot["/Rect"], under)
    for row, quad in zip(rows, [quads[i:i + 8] for i in range(0, len(quads), 8)],
                         strict=True):
        assert covers([quad[4], quad[5], quad[2], quad[3]],
                      [c for c in under if round(c.y0) == row])
    shown = [c for c in chars(out) if 640 < c.y0 < 660]
    assert covers(imprint["/Rect"], shown)
    assert imprint["/A"]["/URI"] == "https://example.org/impressum"


def test_a_page_without_links_and_a_link_over_no_text_are_left_as_they_were():
    out = io.BytesIO()
    c = canvas.Canvas(out)
    c.setFont("Helvetica", 11)
    c.drawString(72, 740, "Ein Hund spielt im Park.")
    c.linkURL("https://example.org", (300, 300, 400, 320))  # (over a picture, say)
    c.save()
    doc = read_file("a.pdf", out.getvalue(), "de", "en")
    annot = annotations(rebuilt(doc, ["A dog plays in the park."]))[0]
    assert [float(v) for v in annot["/Rect"]] == [300, 300, 400, 320]
    assert "/QuadPoints" not in annot


def test_a_bold_word_or_a_link_that_begins_a_line_begins_no_paragraph():
    """A paragraph's lines share a style: the line that begins with a bold word, and the
    one that begins with a link, run on from the lines before them."""
    lines = [[("Ein Hund spielt im Park mit einem roten Ball und", "Helvetica", 0)],
             [("läuft", "Helvetica-Bold", 0),
              (" dann schnell nach Hause zu seinem Herrn", "Helvetica", 0)],
             [("Mehr", "Helvetica", 0.8),
              (" dazu steht auf unserer Seite im Netz.", "Helvetica", 0)]]
    out = io.BytesIO()
    c = canvas.Canvas(out)
    for i, line in enumerate(lines):
        x = 72.0
        for text, font, blue in line:
            c.setFont(font, 11)
            c.setFillColorRGB(0, 0, blue)
            c.drawString(x, 740 - 14 * i, text)
            if blue:
                c.linkURL("https://example.org", (x, 737 - 14 * i, x + 28, 750 - 14 * i))
            x += c.stringWidth(text, font, 11)
    c.save()
    doc = read_file("a.pdf", out.getvalue(), "de", "en")
    assert [" ".join(d.sentences) for d in doc.documents] == [
        " ".join("".join(text for text, _, _ in line) for line in lines)]
    translated = rebuilt(doc, ["A dog plays in the park with a red ball and then runs home "
                               "to its owner. More about it is on our page on the web."])
    blue = [c for c in chars(translated) if c.graphicstate.ncolor == (0, 0, 0.8)
            and c.get_text().strip()]
    assert blue and covers(annotations(translated)[0]["/Rect"], blue)  # (no space in it)


def test_black_as_grey_and_black_as_rgb_are_one_paragraphs_colour():
    """Lines in the same black, one set as grey 0 (``0 g``, as LaTeX writes it) and the next
    as RGB (``0 0 0 rg``, after a link's colour, say) or CMYK, are one paragraph."""
    out = io.BytesIO()
    c = canvas.Canvas(out)
    c.setFont("Helvetica", 11)
    c.setFillGray(0)
    c.drawString(72, 740, "Ein Hund spielt im Park mit einem roten Ball und")
    c.setFillColorRGB(0, 0, 0)
    c.drawString(72, 726, "läuft dann schnell nach Hause zu seinem Herrn.")
    c.setFillColorCMYK(0, 0, 0, 1)
    c.drawString(72, 712, "Eine Katze schläft auf dem Dach in der warmen Sonne")
    c.setFillGray(0)
    c.drawString(72, 698, "und träumt.")
    c.save()
    doc = read_file("a.pdf", out.getvalue(), "de", "en")
    assert [" ".join(d.sentences) for d in doc.documents] == [
        "Ein Hund spielt im Park mit einem roten Ball und läuft dann schnell nach Hause zu "
        "seinem Herrn.", "Eine Katze schläft auf dem Dach in der warmen Sonne und träumt."]
