"""A PDF's glyphs read as text (ligatures as their letters), and a PDF's translation whose
letters PDF's standard fonts lack (``translate/pdf_fonts.py``):
drawn in an installed font that has them, embedded, read back as the text it is
(Cyrillic, Greek; Chinese wrapped between its letters where such a font is installed); the
family's bold or the regular drawn thicker; what cannot be drawn refused in one line."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_files_pdf import PARAGRAPH, pdf, rebuilt, texts
from transformer_mt.errors import MTError
from transformer_mt.translate.files import read_file

pytest.importorskip("pypdf")
pytest.importorskip("reportlab")


def installed(letters: str) -> list[str]:
    """The TrueType fonts fontconfig finds that have every one of ``letters``."""
    try:
        out = subprocess.run(["fc-list", "--format", "%{file}\t%{fontformat}\n",
                              ":charset=" + " ".join(f"{ord(c):x}" for c in letters)],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return sorted(line.split("\t")[0] for line in out.splitlines()
                  if line.endswith("\tTrueType"))


def fonts(data: bytes) -> dict[str, bool]:
    """Each font of the first page's resources (its name) and whether its file is embedded
    (the source's fonts stay in them, unused)."""
    from pypdf import PdfReader

    out = {}
    for font in PdfReader(io.BytesIO(data)).pages[0]["/Resources"]["/Font"].values():
        font = font.get_object()
        described = font.get("/FontDescriptor") or font.get("/DescendantFonts", [{}])[0].get(
            "/FontDescriptor")
        out[str(font["/BaseFont"])] = bool(described and "/FontFile2" in
                                           described.get_object())
    return out


def chars(data: bytes) -> list:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTChar

    return [c for box in next(extract_pages(io.BytesIO(data))) if hasattr(box, "__iter__")
            for line in box if hasattr(line, "__iter__") for c in line if isinstance(c, LTChar)]


RUSSIAN = ["Собака в парке", "Мужчина едет на велосипеде по городу. Две собаки играют.",
           "Γυναίκα", "Ребёнок", "Мальчик прыгает в воду."]


@pytest.mark.skipif(not installed("Жλ"), reason="no font for Cyrillic and Greek installed")
def test_cyrillic_and_greek_are_drawn_in_an_installed_font_embedded_and_read_back():
    """Equivalence: the PDF reads back as the translation (its fonts map back to Unicode);
    every font it draws in is embedded, none of PDF's standard ones; the bold heading in
    another face than the paragraph, at its size."""
    doc = read_file("a.pdf", pdf(), "de", "ru")
    out = rebuilt(doc, RUSSIAN)
    assert texts(out) == [" ".join(RUSSIAN[:4]), RUSSIAN[4]]
    drawn = chars(out)
    assert not any("Helvetica" in c.fontname for c in drawn)  # (the source's are unused)
    assert all(embedded for font, embedded in fonts(out).items() if "Helvetica" not in font)
    heading = next(c for c in drawn if c.get_text() == "С")
    body = next(c for c in drawn if c.get_text() == "М")
    assert heading.fontname != body.fontname and round(heading.size) == 16
    assert round(body.size) == 11


@pytest.mark.skipif(not installed("Жλ"), reason="no font for Cyrillic and Greek installed")
def test_the_font_mt_pdf_font_names_is_used_its_regular_drawn_thicker_for_bold(monkeypatch):
    from pypdf import PdfReader

    chosen = installed("Жλ")[0]
    monkeypatch.setenv("MT_PDF_FONT", chosen)
    out = rebuilt(read_file("a.pdf", pdf(), "de", "ru"), RUSSIAN)
    assert texts(out)[0] == " ".join(RUSSIAN[:4])
    assert len({c.fontname for c in chars(out)}) == 1  # the bold heading's too: thicker
    content = PdfReader(io.BytesIO(out)).pages[0].get_contents().get_data()
    assert re.search(rb"(^|\s)2 Tr\s", content)  # (filled and outlined)
    with pytest.raises(MTError, match=r"MT_PDF_FONT names \(.*\) has no '狗', which the "):
        rebuilt(read_file("a.pdf", pdf(), "de", "zh"), ["狗", *RUSSIAN[1:]])
    monkeypatch.setenv("MT_PDF_FONT", "/no/such/font.ttf")
    with pytest.raises(MTError, match=r"MT_PDF_FONT: no such font file '/no/such/font\.ttf'"):
        rebuilt(read_file("a.pdf", pdf(), "de", "ru"), RUSSIAN)


@pytest.mark.skipif(not installed("Жλ"), reason="no font for Cyrillic and Greek installed")
def test_without_fontconfig_the_font_folders_are_looked_through(monkeypatch, tmp_path):
    """Equivalence: without fc-list (macOS, Windows) the fonts of the usual folders are read
    and the same family chosen; none that has the letters: what to install, in one line."""
    from transformer_mt.translate import pdf_fonts

    doc = read_file("a.pdf", pdf(), "de", "ru")
    with_fontconfig = {c.fontname for c in chars(rebuilt(doc, RUSSIAN))}
    monkeypatch.setattr("subprocess.run", lambda *a, **k: (_ for _ in ()).throw(OSError()))
    pdf_fonts._scanned.cache_clear()
    monkeypatch.setattr(pdf_fonts, "font_folders", lambda: [Path("/usr/share/fonts")])
    assert {c.fontname for c in chars(rebuilt(doc, RUSSIAN))} == with_fontconfig
    pdf_fonts._scanned.cache_clear()
    monkeypatch.setattr(pdf_fonts, "font_folders", lambda: [tmp_path])
    with pytest.raises(MTError, match=r"no installed font has every letter of the "
                                      r"translation .*fonts-noto-core.*MT_PDF_FONT"):
        rebuilt(doc, RUSSIAN)
    pdf_fonts._scanned.cache_clear()


@pytest.mark.skipif(not installed("狗"), reason="no TrueType font for Chinese installed")
def test_chinese_is_wrapped_between_its_letters_within_its_box():
    """A paragraph without spaces wraps between its letters, a full stop staying with the
    letter before it: every letter within the box's width, read back in order."""
    long = "一个男人骑着自行车穿过城市。" * 3
    out = rebuilt(read_file("a.pdf", pdf(), "de", "zh"), ["公园里的一只狗", long, "女人",
                                                          "孩子", "男孩跳进水里。"])
    drawn = [c for c in chars(out) if c.y0 < 745 and c.y1 > 690 and c.x0 < 290]
    assert "".join(c.get_text() for c in drawn) == long
    assert len({round(c.y0) for c in drawn}) >= 2  # (wrapped)
    assert max(c.x1 for c in drawn) <= 72 + max(len(line) for line in PARAGRAPH) * 11 * 0.6
    starts = [c for c in drawn if round(c.x0) == 72]
    assert all(c.get_text() != "。" for c in starts)


@pytest.mark.skipif(not installed("ﬁ"), reason="no font with ligatures installed")
def test_ligatures_are_read_as_their_letters():
    """A typesetter's ligatures ("ﬁ", "ﬂ", "ﬀ": LaTeX's) reach the model as the letters
    it learned, not as one sign it never saw."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("with-ligatures", installed("ﬁ")[0]))
    out = io.BytesIO()
    c = canvas.Canvas(out)
    c.setFont("with-ligatures", 12)
    c.drawString(72, 700, "Wir ﬁnden den Fluss ﬂach und oﬀen.")
    c.save()
    doc = read_file("a.pdf", out.getvalue(), "de", "en")
    assert [d.sentences for d in doc.documents] == [["Wir finden den Fluss flach und offen."]]


def test_a_variable_fonts_named_styles_are_passed_over(monkeypatch):
    """Of what fontconfig lists, a variable font's named styles (an index past 65535) are
    passed over (ReportLab cannot draw them); fonts of CFF outlines (Noto Sans CJK's) are
    listed as such (they are made TrueType to be drawn: test_files_pdf_cff.py)."""
    from transformer_mt.translate import pdf_fonts

    listed = ("/f/Var.ttf\t0\tVar Sans\tRegular\tTrueType\n"
              "/f/Var.ttf\t65536\tVar Sans\tBold\tTrueType\n"
              "/f/Cjk.ttc\t2\tCjk Sans\tRegular\tCFF\n"
              "/f/Bitmap.pcf\t0\tOld\tRegular\tPCF\n")
    monkeypatch.setattr("subprocess.run", lambda args, **_: subprocess.CompletedProcess(
        args, 0, stdout=listed))
    assert pdf_fonts._listed({"Ж"}) == [("/f/Var.ttf", 0, "Var Sans", "Regular", False),
                                        ("/f/Cjk.ttc", 2, "Cjk Sans", "Regular", True)]
