"""OpenDocument files (translate/opendocument.py): a presentation's slides, notes and footer,
its spans; a spreadsheet's text cells and comments, not what its values show. Read back as XML
from the written zip, not through the code under test."""

from __future__ import annotations

import io
import zipfile

import pytest

pytest.importorskip("odf")

from tests.helpers import saved
from tests.helpers import zipped_parts as parts
from transformer_mt.errors import MTError
from transformer_mt.translate.files import translate_file


def odf_presentation() -> bytes:
    """An .odp: a slide's text box with a sentence a span cuts, its speaker notes, and the
    footer text it shows."""
    pytest.importorskip("odf")
    from odf import draw, presentation, style, text
    from odf.opendocument import OpenDocumentPresentation

    doc = OpenDocumentPresentation()
    layout = style.PageLayout(name="L")
    doc.automaticstyles.addElement(layout)
    master = style.MasterPage(name="M", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    footer = presentation.FooterDecl(name="f1")
    footer.addText("Nur für den Unterricht")
    doc.presentation.addElement(footer)
    page = draw.Page(masterpagename=master, usefootername="f1")
    doc.presentation.addElement(page)
    slide, notes = text.P(), text.P()
    slide.addText("Ein Mann fährt ")
    slide.addElement(text.Span(text="Fahrrad"))
    slide.addText(".")
    notes.addText("Zwei Hunde spielen im Schnee.")
    speaker = presentation.Notes()
    for holder, paragraph in ((page, slide), (speaker, notes)):
        frame = draw.Frame(width="9cm", height="2cm", x="1cm", y="1cm")
        box = draw.TextBox()
        box.addElement(paragraph)
        frame.addElement(box)
        holder.addElement(frame)
    page.addElement(speaker)
    return saved(doc.write)


def test_an_odp_keeps_its_slides_and_spans_and_translates_every_text(translator):
    source = odf_presentation()
    written = translate_file(translator, "talk.odp", source)
    with zipfile.ZipFile(io.BytesIO(written)) as book:
        assert book.infolist()[0].filename == "mimetype" and book.read("mimetype") == \
            b"application/vnd.oasis.opendocument.presentation"
    odf_ns = {"text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0"}
    before, after = (parts(data, "content")["content.xml"] for data in (source, written))
    old, new = (x.xpath("//text:p", namespaces=odf_ns) for x in (before, after))
    assert len(new) == len(old) == 2
    for o, n in zip(old, new, strict=True):
        assert "".join(n.itertext()).strip() and "".join(n.itertext()) != "".join(o.itertext())
    assert [len(p.xpath("text:span", namespaces=odf_ns)) for p in new] == [1, 0]
    assert "".join(new[0].xpath("text:span//text()", namespaces=odf_ns)).strip()
    footer = after.xpath("//presentation:footer-decl/text()", namespaces={
        "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"})
    assert footer and footer[0].strip() and "Unterricht" not in footer[0]  # every slide's


def test_an_odp_named_odt_is_refused_in_one_line(translator):
    with pytest.raises(MTError, match=r"^'talk.odt' is not an OpenDocument text \(.odt\): its "
                       r"type is application/vnd.oasis.opendocument.presentation$"):
        translate_file(translator, "talk.odt", odf_presentation())


def odf_spreadsheet() -> bytes:
    """An .ods as LibreOffice Calc writes one: text cells (one with a span, one with its value
    as ``office:string-value`` too, one with a comment), a number, a date and a formula's
    text result."""
    pytest.importorskip("odf")
    from odf import office, table, text
    from odf.opendocument import OpenDocumentSpreadsheet

    doc = OpenDocumentSpreadsheet()
    sheet = table.Table(name="Tiere")
    doc.spreadsheet.addElement(sheet)
    commented = table.TableCell(valuetype="string")
    note = office.Annotation()
    note.addElement(text.P(text="Eine Frau liest ein Buch."))
    commented.addElement(note)
    commented.addElement(text.P(text="Ein Mann läuft."))
    spanned = text.P(text="Ein Mann fährt ")
    spanned.addElement(text.Span(text="Fahrrad"))
    spanned.addText(".")
    cells = [commented, table.TableCell(valuetype="string"),
             table.TableCell(valuetype="string", stringvalue="Zwei Hunde spielen."),
             table.TableCell(valuetype="float", value="42"),
             table.TableCell(valuetype="date", datevalue="2026-12-04"),
             table.TableCell(valuetype="string", formula='of:=CONCATENATE("Ein ";"Hund")')]
    cells[1].addElement(spanned)
    for cell, shown in zip(cells[2:], ["Zwei Hunde spielen.", "42", "04.12.26", "Ein Hund"],
                           strict=True):
        cell.addElement(text.P(text=shown))
    row = table.TableRow()
    for cell in cells:
        row.addElement(cell)
    sheet.addElement(row)
    return saved(doc.write)


def test_an_ods_translates_its_text_cells_and_comments_not_what_values_show(translator):
    """A spreadsheet's text cells and comments are translated; what a cell shows of a number,
    a date or a formula's result is written from its value, and stays (as Excel's: sheets.py);
    a text cell's ``office:string-value`` goes with its translated text."""
    source = odf_spreadsheet()
    written = translate_file(translator, "sheet.ods", source)
    with zipfile.ZipFile(io.BytesIO(written)) as book:
        assert book.read("mimetype") == b"application/vnd.oasis.opendocument.spreadsheet"
    ns = {"text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
          "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
          "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0"}
    before, after = (parts(data, "content")["content.xml"].xpath("//table:table-cell",
                                                                  namespaces=ns)
                     for data in (source, written))
    shown = [["".join(p.itertext()) for p in cell.xpath(".//text:p", namespaces=ns)]
             for cell in (*before, *after)]
    old, new = shown[:len(before)], shown[len(before):]
    assert len(new) == len(old) == 6
    for o, n in zip(old[:3], new[:3], strict=True):  # the comment, then the cell's text
        assert all(t.strip() and t != s for s, t in zip(o, n, strict=True))
    assert new[3:] == old[3:] == [["42"], ["04.12.26"], ["Ein Hund"]]
    assert after[1].xpath("text:p/text:span", namespaces=ns)
    string_value = f"{{{ns['office']}}}string-value"
    assert before[2].get(string_value) and after[2].get(string_value) is None
    assert [dict(c.attrib) for c in after[3:]] == [dict(c.attrib) for c in before[3:]]


def test_an_opendocument_translated_between_directions_is_written_the_targets_way():
    """English into Arabic: the default paragraph, and a style said left to right, right to
    left; back into English, left to right again."""
    from odf import opendocument, style, text
    from odf.namespaces import STYLENS

    from transformer_mt.translate.language_tags import relabel_odf

    document = opendocument.OpenDocumentText()
    document.styles.addElement(style.DefaultStyle(family="paragraph"))
    ltr = style.Style(name="Body", family="paragraph")
    ltr.addElement(style.ParagraphProperties(writingmode="lr-tb"))
    document.styles.addElement(ltr)
    document.text.addElement(text.P(stylename=ltr, text="Hello."))
    for lang, target, mode in (("en", "ar", "rl-tb"), ("ar", "en", "lr-tb")):
        relabel_odf(document, lang, target)
        read = opendocument.load(io.BytesIO(saved(document.write)))
        assert [p.getAttrNS(STYLENS, "writing-mode") for p in
                read.getElementsByType(style.ParagraphProperties)] == [mode, mode]

