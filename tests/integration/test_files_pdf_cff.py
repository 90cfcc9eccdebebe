"""A PDF's translation drawn in a font of CFF outlines (OpenType's ``.otf``; Noto Sans CJK,
the Chinese, Japanese and Korean font most Linux desktops have), which ReportLab cannot
embed as it is: cut to the translation's letters and made TrueType (``pdf_fonts.py``), read
back as the translation; among Chinese, Japanese and Korean families, the one made for the
target's region."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.test_files_pdf import pdf, rebuilt, texts
from tests.integration.test_files_pdf_fonts import chars, fonts
from transformer_mt.translate.files import read_file

pytest.importorskip("pypdf")
pytest.importorskip("reportlab")
pytest.importorskip("fontTools")

LETTERS = "КТотак."
LOOK = (False, False)  # (regular)
CAT = ["Кот", "Кот так", "Тот", "Кот", "Так."]  # (the 5 paragraphs of ``pdf()``)


def cff_font(path: Path, family: str = "Test Cff Sans") -> Path:
    """An OpenType font of CFF outlines whose letters (:data:`LETTERS`) are each a shape
    of cubic curves, 600 units wide."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.t2CharStringPen import T2CharStringPen

    names = {c: f"uni{ord(c):04X}" for c in LETTERS}
    order = [".notdef", "space", *names.values()]
    strings = {}
    for i, glyph in enumerate(order):
        pen = T2CharStringPen(600, None)
        if glyph != "space":
            pen.moveTo((50, 0))
            pen.curveTo((50, 400 + 20 * i), (550, 400 + 20 * i), (550, 0))
            pen.closePath()
        strings[glyph] = pen.getCharString()
    builder = FontBuilder(1000, isTTF=False)
    builder.setupGlyphOrder(order)
    builder.setupCharacterMap({32: "space", **{ord(c): n for c, n in names.items()}})
    builder.setupCFF(family.replace(" ", "") + "-Regular", {"FullName": family}, strings, {})
    builder.setupHorizontalMetrics({g: (600, 50) for g in order})
    builder.setupHorizontalHeader(ascent=800, descent=-200)
    builder.setupNameTable({"familyName": family, "styleName": "Regular"})
    builder.setupOS2(sTypoAscender=800, sTypoDescender=-200, usWinAscent=800, usWinDescent=200)
    builder.setupPost()
    builder.save(str(path))
    return path


def test_a_font_of_cff_outlines_is_drawn_made_truetype_and_read_back(monkeypatch, tmp_path):
    """The one font that has the letters is CFF (found in the font folders, as without
    fontconfig, and as MT_PDF_FONT names it): the translation drawn in it, embedded as a
    TrueType subset, read back as it is; its glyphs' widths kept."""
    from transformer_mt.translate import pdf_fonts

    font = cff_font(tmp_path / "TestCff.otf")
    monkeypatch.setattr("subprocess.run", lambda *a, **k: (_ for _ in ()).throw(OSError()))
    monkeypatch.setattr(pdf_fonts, "font_folders", lambda: [tmp_path])
    pdf_fonts._scanned.cache_clear()
    try:
        doc = read_file("a.pdf", pdf(), "de", "ru")
        found = rebuilt(doc, CAT)
        monkeypatch.setenv("MT_PDF_FONT", str(font))
        named = rebuilt(doc, CAT)
    finally:
        pdf_fonts._scanned.cache_clear()
    for out in (found, named):
        assert texts(out) == [" ".join(CAT[:4]), CAT[4]]
        embedded = {f: e for f, e in fonts(out).items() if "Helvetica" not in f}
        assert embedded and all(embedded.values())  # (/FontFile2: TrueType outlines)
        assert all("Test-Cff-Sans" in f for f in embedded)
        body = [c for c in chars(out) if round(c.size) == 11 and c.get_text().strip()]
        assert body and all(abs(c.width - 0.6 * 11) < 0.01 for c in body)


def test_documents_of_other_letters_are_each_drawn_in_their_own_cut(monkeypatch, tmp_path):
    """Two translations in one process (a server, or ``mt translate`` of several files) whose
    letters differ: each drawn in a cut of its own letters and read back as it is (ReportLab
    knows a font by its PostScript name: each cut has one of its own)."""
    monkeypatch.setenv("MT_PDF_FONT", str(cff_font(tmp_path / "TestCff.otf")))
    doc = read_file("a.pdf", pdf(), "de", "ru")
    first, second = ["Кот"] * 5, ["Так."] * 5
    out = [rebuilt(doc, first), rebuilt(doc, second), rebuilt(doc, first)]
    for data, cat in zip(out, [first, second, first], strict=True):
        assert texts(data) == [" ".join(cat[:4]), cat[4]]
    names = {f.split("+")[-1] for data in out for f in fonts(data) if "Helvetica" not in f}
    assert len(names) == 2


def test_a_cut_is_let_go_once_no_document_draws_with_it(monkeypatch, tmp_path):
    """A font cut to a document's letters stays registered while a document draws with it
    (documents drawn at once in a server's threads), and is let go of when none does but
    the ``KEEP`` last used: a process that translates PDF after PDF does not grow by a font
    for each."""
    from reportlab.pdfbase.pdfmetrics import getRegisteredFontNames

    from transformer_mt.translate import pdf_fonts

    monkeypatch.setenv("MT_PDF_FONT", str(cff_font(tmp_path / "TestCff.otf")))
    monkeypatch.setattr(pdf_fonts, "KEEP", 1)
    with pdf_fonts.faces("a.pdf", "Кот") as first:
        with pdf_fonts.faces("b.pdf", "Так.") as second, pdf_fonts.faces("c.pdf", "Кот") as again:
            assert again[LOOK] == first[LOOK] and second[LOOK] != first[LOOK]
        with pdf_fonts.faces("d.pdf", "Тот") as third:
            assert third[LOOK] not in (first[LOOK], second[LOOK])
            assert {second[LOOK].name, third[LOOK].name} <= set(getRegisteredFontNames())
        # (of the two no document draws with, "Тот" was used last)
        assert second[LOOK].name not in getRegisteredFontNames()
        assert first[LOOK].name in getRegisteredFontNames()
    assert first[LOOK].name not in getRegisteredFontNames()
    assert third[LOOK].name in getRegisteredFontNames()
    assert list(pdf_fonts._CUTS.values()) == [third[LOOK].name]


def test_only_the_looks_a_document_draws_in_are_cut(monkeypatch, tmp_path):
    """A family of CFF fonts (a regular and a bold): a translation without bold cuts only the
    regular (~0.5 s for a page of Chinese a cut), one with bold both."""
    from transformer_mt.translate import pdf_fonts
    from transformer_mt.translate.pdf_fonts import LOOKS

    files = {look: (str(cff_font(tmp_path / f"{look[0]}.otf")), 0, True) for look in LOOKS[:2]}
    monkeypatch.setattr(pdf_fonts, "_family", lambda *_: files)
    doc = read_file("a.pdf", pdf(), "de", "ru")  # (its heading bold)
    real = pdf_fonts._cut
    for translations, looks in [(["", *CAT[1:]], LOOKS[:1]), (CAT, LOOKS[:2])]:
        cut: list[str] = []
        monkeypatch.setattr(pdf_fonts, "_cut",
                            lambda path, *rest, cut=cut: cut.append(path) or real(path, *rest))
        assert texts(rebuilt(doc, translations))[0] == " ".join(translations[:4]).strip()
        assert sorted(set(cut)) == sorted(files[look][0] for look in looks)


def test_chinese_japanese_and_korean_are_drawn_in_their_regions_family(monkeypatch):
    """Noto Sans CJK's families share their letters and differ in how they draw them: the
    target's region chooses (SC for zh, TC for zh-TW, JP for ja, KR for ko); another
    language, or a family made for none, as before (sans-serif, then TrueType first)."""
    from transformer_mt.translate import pdf_fonts

    listed = "".join(f"/f/NotoSansCJK-Regular.ttc\t{i}\tNoto Sans CJK {r}\tRegular\tCFF\n"
                     for i, r in enumerate(["JP", "KR", "SC", "TC", "HK"]))
    listed += ("/f/NotoSerifCJK-Regular.ttc\t2\tNoto Serif CJK SC\tRegular\tCFF\n"
               "/f/DroidSansFallbackFull.ttf\t0\tDroid Sans Fallback\tRegular\tTrueType\n")
    monkeypatch.setattr("subprocess.run", lambda args, **_: subprocess.CompletedProcess(
        args, 0, stdout=listed))
    chosen = {target: pdf_fonts._family("a.pdf", {"狗"}, target)[(False, False)]
              for target in ["zh", "zh-Hans", "zh-TW", "zh_Hant", "ja", "ko", "ru", None]}
    assert {t: f[1] for t, f in chosen.items()} == {
        "zh": 2, "zh-Hans": 2, "zh-TW": 3, "zh_Hant": 3, "ja": 0, "ko": 1, "ru": 0, None: 0}
    assert chosen["ru"][0].endswith("DroidSansFallbackFull.ttf") and not chosen["ru"][2]


def japanese_fonts() -> bool:
    try:
        out = subprocess.run(["fc-list", ":charset=72ac", "family"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    return "Noto Sans CJK JP" in out


@pytest.mark.skipif(not japanese_fonts(), reason="Noto Sans CJK (fonts-noto-cjk) is not "
                                                "installed")
def test_japanese_is_drawn_in_noto_sans_cjk_jp():
    """The real thing (Debian's fonts-noto-cjk: a collection of CFF fonts): a Japanese
    translation drawn in Noto Sans CJK JP, read back as it is."""
    japanese = ["公園の犬", "男性が自転車で町を走っている。", "女性", "子供",
                "少年が水に飛び込む。"]
    out = rebuilt(read_file("a.pdf", pdf(), "de", "ja"), japanese)
    assert texts(out)[0].replace(" ", "") == "".join(japanese[:4])
    embedded = [f for f in fonts(out) if "Helvetica" not in f]
    assert embedded and all("NotoSansCJKjp" in f for f in embedded)
