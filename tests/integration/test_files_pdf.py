"""PDF documents (``translate/pdf.py``), made as documents are (ReportLab; a Word document
printed by LibreOffice where it is installed): each paragraph of each page read whole (its
lines' breaks and a word a hyphen cuts across them) and its translation drawn in its place,
the page's own text gone, its drawing, links and pages as they were; what is not translated
here refused in one line, before anything is translated."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import local_client
from transformer_mt.errors import MTError
from transformer_mt.translate.files import read_file, translate_file

pytest.importorskip("pypdf")
pytest.importorskip("pdfminer")
canvas = pytest.importorskip("reportlab.pdfgen.canvas")
LAParams = pytest.importorskip("pdfminer.layout").LAParams

PARAGRAPH = ["Ein Mann fährt mit dem Fahr-", "rad durch die Stadt. Zwei Hunde", "spielen."]


def pdf(draw=None, **options) -> bytes:
    """A two-page PDF: a bold coloured heading, a paragraph wrapped on three lines (a word cut
    by a hyphen), two cells side by side, a filled rectangle and a link; ``draw`` adds to the
    first page."""
    out = io.BytesIO()
    c = canvas.Canvas(out, **options)
    c.setFont("Helvetica-Bold", 16)
    c.setFillColorRGB(0.2, 0.3, 0.6)
    c.drawString(72, 770, "Ein Hund im Park")
    c.setFillColorRGB(0, 0, 0)
    c.setFont("Helvetica", 11)
    for i, line in enumerate(PARAGRAPH):
        c.drawString(72, 740 - 14 * i, line)
    c.drawString(72, 650, "Eine Frau")
    c.drawString(300, 650, "Ein Kind")
    c.rect(300, 500, 100, 50, fill=1)
    c.linkURL("https://example.org", (72, 640, 150, 660))
    if draw:
        draw(c)
    c.showPage()
    c.setFont("Helvetica", 11)
    c.drawString(72, 770, "Ein Junge springt ins Wasser.")
    c.save()
    return out.getvalue()


def texts(data: bytes) -> list[str]:
    """Each page's text as pdfminer reads it (figures' too), its whitespace single spaces."""
    from pdfminer.high_level import extract_text
    from pypdf import PdfReader

    pages = len(PdfReader(io.BytesIO(data)).pages)
    return [" ".join(extract_text(io.BytesIO(data), page_numbers=[n], laparams=LAParams(
        all_texts=True)).split()) for n in range(pages)]


def rebuilt(doc, translations: list[str]) -> bytes:
    """The file written with each paragraph's translation (the first sentence's, the others'
    empty)."""
    return doc.rebuild([d.rebuild([t, *[""] * (len(d.sentences) - 1)])
                        for d, t in zip(doc.documents, translations, strict=True)])


def painted(operations: list) -> list[bytes]:
    """The operators that paint (rectangles and fills; not a clip's rectangle: the page the
    translation is drawn on is clipped to the page's box)."""
    ops = [op for _, op in operations]
    return [op for op, then in zip(ops, [*ops[1:], b""], strict=True)
            if op in (b"f", b"B*", b"S") or (op == b"re" and then not in (b"W", b"W*"))]


def test_each_paragraph_is_read_whole_and_its_translation_drawn_in_its_place(translator):
    """Equivalence: the PDF's paragraphs are the texts the plain reader gives (a word cut by a
    hyphen read whole); the translated PDF shows each one's translation, as
    ``Translator.translate`` gives it, and none of the source; pages, drawing and links as they
    were; its language the target's."""
    from pypdf import PdfReader

    data = pdf()
    doc = read_file("a.pdf", data, "de", "en")
    sources = [" ".join(d.sentences) for d in doc.documents]
    assert sources == ["Ein Hund im Park", "Ein Mann fährt mit dem Fahrrad durch die Stadt. "
                       "Zwei Hunde spielen.", "Eine Frau", "Ein Kind",
                       "Ein Junge springt ins Wasser."]
    out = translate_file(translator, "a.pdf", data)
    expected = translator.translate([" ".join(PARAGRAPH).replace("Fahr- rad", "Fahrrad"),
                                     "Ein Hund im Park", "Eine Frau", "Ein Kind",
                                     "Ein Junge springt ins Wasser."], form="text")
    shown = texts(out)
    for translation in expected[:4]:
        assert " ".join(translation.split()) in shown[0]
    assert " ".join(expected[4].split()) in shown[1]
    assert not any(word in " ".join(shown) for word in ("Hund", "Fahr", "Junge"))
    before, after = PdfReader(io.BytesIO(data)), PdfReader(io.BytesIO(out))
    assert len(after.pages) == len(before.pages) == 2
    drawing = [painted(page.get_contents().operations) for page in (before.pages[0],
                                                                    after.pages[0])]
    assert drawing[0] == drawing[1] and drawing[0]
    assert [a["/A"]["/URI"] for a in after.pages[0]["/Annots"]] == ["https://example.org"]
    assert after.trailer["/Root"]["/Lang"] == "en"


def test_a_heading_keeps_its_font_size_and_colour_and_the_paragraph_its_own():
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTChar, LTTextBoxHorizontal

    doc = read_file("a.pdf", pdf(), "de", "en")
    out = rebuilt(doc, ["A dog in the park" if i == 0 else d.sentences[0]
                       for i, d in enumerate(doc.documents)])
    page = next(extract_pages(io.BytesIO(out)))
    first = {box.get_text().split()[0]: next(c for line in box for c in line
                                             if isinstance(c, LTChar))
             for box in page if isinstance(box, LTTextBoxHorizontal)}
    heading, body = first["A"], first["Ein"]
    assert heading.fontname == "Helvetica-Bold" and round(heading.size) == 16
    assert heading.graphicstate.ncolor == pytest.approx((0.2, 0.3, 0.6), abs=1e-3)
    assert body.fontname == "Helvetica" and round(body.size) == 11
    assert round(heading.matrix[4]) == 72 and round(heading.matrix[5]) == 770


def test_a_bold_word_in_a_paragraph_stays_bold_around_its_translation():
    """A paragraph's runs (a bold word, in a link's colour) read as one text, the translation
    shared out among them as in a Word document (``documents.split_flow``): given back as
    its own translation, each word looks as it did."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTChar

    out = io.BytesIO()
    c = canvas.Canvas(out)
    c.setFont("Helvetica", 11)
    c.drawString(72, 700, "Ein Hund läuft über die")
    c.setFont("Helvetica-Bold", 11)
    c.setFillColorRGB(0, 0, 0.8)
    c.drawString(72 + c.stringWidth("Ein Hund läuft über die ", "Helvetica", 11), 700,
                 "grüne Wiese")
    c.save()
    doc = read_file("a.pdf", out.getvalue(), "de", "en")
    assert [d.sentences for d in doc.documents] == [["Ein Hund läuft über die grüne Wiese"]]
    written = doc.rebuild([d.rebuild(d.sentences) for d in doc.documents])
    chars = [c for box in next(extract_pages(io.BytesIO(written))) if hasattr(box, "__iter__")
             for line in box for c in line if isinstance(c, LTChar)]
    looks = {font: "".join(c.get_text() for c in chars if c.fontname == font)
             for font in ("Helvetica", "Helvetica-Bold")}
    assert looks == {"Helvetica": "Ein Hund läuft über die ", "Helvetica-Bold": "grüne Wiese"}
    assert {c.graphicstate.ncolor for c in chars if c.fontname == "Helvetica-Bold"} == {
        (0, 0, 0.8)}


def test_a_long_translation_is_wrapped_in_its_box_and_made_smaller_to_fit():
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTChar, LTTextBoxHorizontal

    doc = read_file("a.pdf", pdf(), "de", "en")
    long = "A man rides his bicycle " * 6
    out = rebuilt(doc, [d.sentences[0] if i != 1 else long
                       for i, d in enumerate(doc.documents)])
    page = next(extract_pages(io.BytesIO(out)))
    box = next(b for b in page if isinstance(b, LTTextBoxHorizontal) and "bicycle" in
               b.get_text())
    sizes = {round(c.size, 1) for line in box for c in line if isinstance(c, LTChar)}
    assert len(sizes) == 1 and 11 * 0.6 <= sizes.pop() < 11
    assert box.x1 <= 72 + max(len(line) for line in PARAGRAPH) * 11 * 0.6  # (its width)
    assert " ".join(box.get_text().split()) == " ".join(long.split())


def rotated_text(c) -> None:
    c.saveState()
    c.rotate(30)
    c.drawString(300, 300, "Ein Schild")
    c.restoreState()


def invisible_text(c) -> None:
    text = c.beginText(72, 400)
    text.setTextRenderMode(3)
    text.textLine("Ein Text unter dem Bild")
    c.drawText(text)


def text_made_invisible_and_restored(c) -> None:
    c.saveState()
    invisible_text(c)
    c.restoreState()
    c.drawString(72, 300, "Ein Hund sieht das Bild.")  # (visible again: q/Q restored it)


@pytest.mark.parametrize("data, says", [
    (b"%PDF-1.7\n", "'a.pdf' is not a PDF that can be read"),
    (pdf(encrypt="geheim"), "'a.pdf' is encrypted; not translated here"),
    (pdf(rotated_text), "'a.pdf': page 1 is turned, or holds turned text; not translated"),
    (pdf(invisible_text), "page 1 holds invisible text (a scan's OCR layer, say)"),
])
def test_what_is_not_translated_here_is_refused_in_one_line(translator, data, says):
    with pytest.raises(MTError) as found:
        translate_file(translator, "a.pdf", data)
    assert says in str(found.value) and "\n" not in str(found.value)


def test_the_render_mode_is_the_graphics_states():
    """The render mode is the graphics state's: a ``Q`` restores it, so text after it is not
    taken for invisible (the OCR layer before it is: refused)."""
    with pytest.raises(MTError, match="invisible text"):
        doc = read_file("a.pdf", pdf(text_made_invisible_and_restored), "de", "en")
        rebuilt(doc, ["x"] * len(doc.documents))
    from transformer_mt.translate.pdf_writing import _without_text

    drawing = [([], b"q"), ([3], b"Tr"), ([], b"Q"), ([], b"BT"), (["Hund"], b"Tj"),
               ([], b"ET"), ([0, 0, 10, 10], b"re")]
    assert _without_text("a.pdf", 1, drawing) == [d for d in drawing if d[1] != b"Tj"]
    with pytest.raises(MTError, match="invisible text"):
        _without_text("a.pdf", 1, [([3], b"Tr"), ([], b"q"), ([], b"Q"), (["Hund"], b"Tj")])


def test_a_pdf_that_unpacks_past_the_limit_is_refused_before_it_is_read(monkeypatch):
    """A bomb (a small file whose drawings unpack to gigabytes) is refused from what pypdf,
    which stops a stream at 75 MB, counts; pdfminer.six, which sets no limit, never reads it."""
    monkeypatch.setattr("transformer_mt.translate.pdf.MOST_UNPACKED", 1000)
    with pytest.raises(MTError, match=r"'a\.pdf' unpacks to more than 0 MB"):
        read_file("a.pdf", pdf(lambda c: [c.drawString(72, y, "x" * 40)
                                          for y in range(100, 500, 10)]), "de", "en")
    assert read_file("a.pdf", pdf(), "de", "en").chars < 1000


def figure(c) -> None:
    """A figure (form XObject) with a line of text, drawn twice: in place and moved down."""
    c.beginForm("schild")
    c.setFont("Helvetica", 11)
    c.drawString(400, 400, "Ein Schild")
    c.endForm()
    c.doForm("schild")
    c.saveState()
    c.translate(0, -100)
    c.doForm("schild")
    c.restoreState()


def test_text_in_a_figure_is_translated_where_each_drawing_of_it_stands():
    """A figure's text is read as the page's (each place the figure is drawn, a paragraph of
    its own) and its translation drawn there; the figure keeps its drawing, not its text."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTTextBoxHorizontal

    doc = read_file("a.pdf", pdf(figure), "de", "en")
    assert [d.sentences[0] for d in doc.documents].count("Ein Schild") == 2
    out = rebuilt(doc, ["A sign" if d.sentences[0] == "Ein Schild" else "A dog."
                        for d in doc.documents])
    assert "Schild" not in texts(out)[0]
    placed = sorted((round(b.x0), round(b.y0)) for b in next(extract_pages(io.BytesIO(out)))
                    if isinstance(b, LTTextBoxHorizontal) and b.get_text().strip() == "A sign")
    before = sorted((round(b.x0), round(b.y0)) for b in next(extract_pages(io.BytesIO(
        pdf(figure)), laparams=LAParams(all_texts=True))) if hasattr(b, "__iter__")
        for b in ([b] if isinstance(b, LTTextBoxHorizontal) else b)
        if isinstance(b, LTTextBoxHorizontal) and b.get_text().strip() == "Ein Schild")
    assert placed == before and len(placed) == 2
    out = io.BytesIO()
    c = canvas.Canvas(out)
    figure(c)
    c.save()
    only = read_file("a.pdf", out.getvalue(), "de", "en")  # (its text in figures alone)
    assert texts(rebuilt(only, ["A sign", "A sign"]))[0] == "A sign A sign"
    out = io.BytesIO()
    c = canvas.Canvas(out)
    c.rect(100, 100, 300, 400, fill=1)  # (a scan: a picture, no text)
    c.save()
    with pytest.raises(MTError, match=r"holds no text \(pages scanned as pictures\?\)"):
        read_file("a.pdf", out.getvalue(), "de", "en")


def watermark(c) -> None:
    c.beginForm("entwurf")
    c.setFont("Helvetica", 40)
    c.rotate(45)
    c.drawString(400, 0, "ENTWURF")
    c.endForm()
    c.doForm("entwurf")


def test_a_figure_with_turned_text_keeps_its_text_and_the_page_is_translated(caplog):
    """A watermark turned across the page, in a figure: every figure keeps its text (said in
    a warning), the page's own text is translated."""
    doc = read_file("a.pdf", pdf(watermark), "de", "en")
    assert "ENTWURF" not in " ".join(d.sentences[0] for d in doc.documents)
    assert "turned text (a watermark?)" in caplog.text
    out = rebuilt(doc, ["A dog."] * len(doc.documents))
    assert "Hund" not in texts(out)[0]
    from pypdf import PdfReader  # (the figure's stream: pdfminer.six 20231228 reads turned
    forms = PdfReader(io.BytesIO(out)).pages[0]["/Resources"]["/XObject"].values()  # text
    assert b"(ENTWURF) Tj" in b"".join(f.get_object().get_data() for f in forms)  # apart)


def test_a_rotated_page_is_refused():
    out = io.BytesIO()
    c = canvas.Canvas(out)
    c.setPageRotation(90)
    c.drawString(72, 500, "Ein Hund.")
    c.save()
    with pytest.raises(MTError, match="page 1 is turned, or holds turned text"):
        read_file("a.pdf", out.getvalue(), "de", "en")


def test_the_server_translates_a_pdf_as_translate_file_does(translator):
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    data = pdf()
    with local_client(create_app(translator, ServeOptions())) as client:
        answer = client.post("/translate_file", data={"source": "de", "target": "en"},
                             files={"file": ("brief.pdf", data)})
        assert answer.status_code == 200, answer.text
        out = client.get(answer.json()["translatedFileUrl"]).content
    assert texts(out) == texts(translate_file(translator, "brief.pdf", data))


def test_a_translation_the_pdf_cannot_hold_is_a_400_and_the_server_goes_on(translator,
                                                                          monkeypatch):
    from transformer_mt.serve.app import create_app
    from transformer_mt.serve.settings import ServeOptions

    def no_font(name: str, text: str, target: str | None = None) -> dict:
        raise MTError(f"'{name}': no installed font has every letter of the "
                      "translation ('С'... are outside PDF's standard fonts)")

    with local_client(create_app(translator, ServeOptions())) as client:
        monkeypatch.setattr("transformer_mt.translate.pdf_writing.faces", no_font)
        answer = client.post("/translate_file", data={"source": "de", "target": "en"},
                             files={"file": ("brief.pdf", pdf())})
        assert answer.status_code == 400 and "no installed font has every" in \
            answer.json()["error"]
        monkeypatch.undo()
        assert client.post("/translate_file", data={"source": "de", "target": "en"},
                           files={"file": ("brief.pdf", pdf())}).status_code == 200


@pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice is not installed")
def test_a_word_document_printed_by_libreoffice(translator, tmp_path):
    """A real printer's PDF (subset TrueType fonts, a heading and its paragraph in one text
    box, a table, bullets in a symbol font): each paragraph translated in its style."""
    import docx

    document = docx.Document()
    document.add_heading("Ein Tag im Park", 1)
    document.add_paragraph("Ein Mann fährt mit dem Fahrrad durch die Stadt. " * 4)
    document.add_paragraph("Zwei Hunde spielen.", style="List Bullet")
    document.save(tmp_path / "brief.docx")
    subprocess.run(["soffice", "--headless", "--convert-to", "pdf", "--outdir", str(tmp_path),
                    str(tmp_path / "brief.docx")], check=True, capture_output=True, timeout=120)
    data = (tmp_path / "brief.pdf").read_bytes()
    doc = read_file("brief.pdf", data, "de", "en")
    assert [" ".join(d.sentences)[:14] for d in doc.documents] == [
        "Ein Tag im Par", "Ein Mann fährt", "Zwei Hunde spi"]
    shown = texts(translate_file(translator, "brief.pdf", data))[0]
    assert "Mann" not in shown and shown.count("•") == 1


def test_a_page_printed_by_chromium(browser, translator):
    """A browser's PDF (Skia: its own fonts, a list's bullets drawn, a link): the paragraph,
    the link's text and each list item read apart, in order, and each shown translated."""
    page = browser.new_page()
    page.set_content('<body style="font-family: sans-serif; width: 500px"><h1>Ein Tag im '
                     "Park</h1><p>Ein Mann fährt mit dem Fahrrad durch die Stadt. Zwei Hunde "
                     "spielen im Schnee. Eine Frau mit einem roten Hut sitzt auf einer Bank "
                     'und liest ein Buch.</p><p><a href="https://example.org">Ein Junge</a> '
                     "springt in einen See.</p><ul><li>Mehrere Personen stehen vor einem "
                     "Gebäude.</li><li>Ein Mädchen klettert.</li></ul></body>")
    data = page.pdf()
    doc = read_file("seite.pdf", data, "de", "en")
    assert [len(d.sentences) for d in doc.documents] == [1, 3, 1, 1, 1]
    expected = translator.translate([" ".join(d.sentences) for d in doc.documents],
                                    form="text")
    shown = texts(translate_file(translator, "seite.pdf", data))[0]
    assert shown.split() == " ".join(expected).split()


DAMAGED = pdf()
DAMAGED_THERE = (Path(__file__).parents[1] / "data" / "damaged.pdf").read_bytes()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, len(DAMAGED) - 1), st.integers(1, 400), st.binary(max_size=8))
def test_a_damaged_pdf_is_translated_or_refused_in_one_line(at, cut, junk):
    """A PDF cut short, or with bytes cut out or replaced anywhere: read and written again,
    or a one-line error; never a traceback, nor all the memory (tests/data/damaged.pdf is
    one such PDF, which pypdf 4.2-5.0 read until the memory ran out: 24 GB here)."""
    for data in (DAMAGED[:at], DAMAGED[:at] + junk + DAMAGED[at + cut:], DAMAGED_THERE):
        try:
            doc = read_file("a.pdf", data, "de", "en")
            rebuilt(doc, [" ".join(d.sentences) for d in doc.documents])
        except MTError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("'a.pdf'")
            assert "MemoryError" not in str(exc)
