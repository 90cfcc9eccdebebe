"""OpenDocument texts and EPUB books translated whole (translate/files.py), read back by their
own libraries (odfpy, ebooklib): the same paragraphs, spans, chapters and members, every text
translated; a PDF that cannot be read refused in one line."""

from __future__ import annotations

import html
import io
import re
import zipfile

import pytest

from tests.helpers import billion_laughs, local_client, run_cli

pytest.importorskip("fastapi")
odf = pytest.importorskip("odf")
epub = pytest.importorskip("ebooklib.epub")

from odf import opendocument, style, table, text  # noqa: E402

from transformer_mt.errors import MTError  # noqa: E402
from transformer_mt.serve.app import create_app  # noqa: E402
from transformer_mt.serve.settings import ServeOptions  # noqa: E402
from transformer_mt.translate.files import read_file, translate_file  # noqa: E402

CHAPTER = ('<h1>Ein Hund</h1><p>Ein Mann fährt <b>Fahrrad</b>. Zwei Hunde spielen.</p>'
           '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><title>Ein Bild'
           '</title></svg><p translate="no">Ein Hund.</p><ul><li>Eine Frau liest.</li></ul>')


def odt_document() -> bytes:
    """A heading, a paragraph with a bold span, a table cell, an empty paragraph."""
    doc = opendocument.OpenDocumentText()
    bold = style.Style(name="Bold", family="text")
    bold.addElement(style.TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    doc.text.addElement(text.H(outlinelevel=1, text="Ein Hund läuft."))
    p = text.P(text="Ein Mann fährt ")
    p.addElement(text.Span(stylename=bold, text="Fahrrad"))
    p.addText(". Zwei Hunde spielen im Schnee.")
    doc.text.addElement(p)
    grid = table.Table(name="T")
    grid.addElement(table.TableColumn())
    row = table.TableRow()
    cell = table.TableCell()
    cell.addElement(text.P(text="Eine Frau liest ein Buch."))
    row.addElement(cell)
    grid.addElement(row)
    doc.text.addElement(grid)
    doc.text.addElement(text.P())
    out = io.BytesIO()
    doc.write(out)
    return out.getvalue()


def odt_texts(data: bytes) -> tuple[list, list[str]]:
    """Each paragraph's and heading's kind and spans (their style), and its text, in order."""
    doc = opendocument.load(io.BytesIO(data))
    found = []
    for node in doc.text.getElementsByType(text.P) + doc.text.getElementsByType(text.H):
        spans = [str(s.getAttribute("stylename")) for s in node.getElementsByType(text.Span)]
        found.append(((node.tagName, spans), "".join(
            str(t) for t in node.childNodes if t.nodeType == t.TEXT_NODE) + "|".join(
            str(s) for s in node.getElementsByType(text.Span))))
    return [f[0] for f in found], [f[1] for f in found]


def epub_book(path) -> bytes:
    book = epub.EpubBook()
    book.set_identifier("id-1")
    book.set_title("Hunde")
    book.set_language("de")
    chapter = epub.EpubHtml(title="Kapitel 1", file_name="chap_01.xhtml", lang="de")
    chapter.content = CHAPTER
    book.add_item(chapter)
    book.add_item(epub.EpubItem(uid="css", file_name="style.css", media_type="text/css",
                                content=b"p { color: red }"))
    book.toc = (epub.Link("chap_01.xhtml", "Kapitel 1", "c1"),)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    epub.write_epub(str(path), book)
    written = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:  # SVG's viewBox as books have it (ebooklib wrote it
        for member in written.infolist():  # as HTML, lowercased)
            z.writestr(member, written.read(member).replace(b"viewbox=", b"viewBox="))
    path.write_bytes(out.getvalue())
    return out.getvalue()


def test_an_odt_keeps_its_paragraphs_and_spans_and_translates_every_text(translator):
    source = odt_document()
    out = translate_file(translator, "letter.odt", source)
    shape, texts = odt_texts(out)
    their_shape, their_texts = odt_texts(source)
    assert shape == their_shape and ("text:p", ["Bold"]) in shape
    segments = ["Ein Hund läuft.", "Ein Mann fährt Fahrrad. Zwei Hunde spielen im Schnee.",
                "Eine Frau liest ein Buch."]
    expected = translator.translate(segments, form="text")
    heading = texts[shape.index(("text:h", []))]
    assert heading == expected[0]
    # the sentence the bold span cuts translated whole, shared out around and in the span
    from odf import teletype

    paragraph = next(p for p in opendocument.load(io.BytesIO(out)).text.getElementsByType(text.P)
                     if p.getElementsByType(text.Span))
    assert teletype.extractText(paragraph) == expected[1]
    assert str(paragraph.getElementsByType(text.Span)[0]).strip()
    assert expected[2] in texts and "" in texts  # the cell; the empty paragraph stays empty
    assert not set(texts) & set(their_texts) - {""}


def test_line_breaks_tabs_and_spaces_held_as_elements_stay_where_they_were(translator):
    """An .odt paragraph's line break and tab (elements, not text) end where they were, between
    the translations of the sentences around them (they were read as nothing: the sentences
    ran together, all translated into the first text node, the breaks after them); spaces
    (``text:s``) inside a sentence read as spaces. A slide's line break (``a:br``) alike."""
    import pptx

    doc = opendocument.OpenDocumentText()
    paragraph = text.P()
    paragraph.addText("Ein Hund läuft.")
    paragraph.addElement(text.LineBreak())
    paragraph.addText("Zwei Katzen schlafen.")
    paragraph.addElement(text.Tab())
    paragraph.addText("Ein")
    paragraph.addElement(text.S(c=3))
    paragraph.addText("Mann.")
    doc.text.addElement(paragraph)
    source = io.BytesIO()
    doc.write(source)
    out = translate_file(translator, "breaks.odt", source.getvalue())
    dog, cats, man = translator.translate(["Ein Hund läuft.", "Zwei Katzen schlafen.",
                                           "Ein Mann."])
    written = opendocument.load(io.BytesIO(out)).text.getElementsByType(text.P)[0]
    kinds = [c.tagName if c.nodeType != c.TEXT_NODE else str(c) for c in written.childNodes]
    assert kinds[:4] == [dog, "text:line-break", cats, "text:tab"]
    assert "".join(kinds[4:]) == man
    presentation = pptx.Presentation()
    frame = presentation.slides.add_slide(presentation.slide_layouts[1]).placeholders[1]
    frame.text_frame.text = "Ein Hund läuft.\vZwei Katzen schlafen."  # \v: a line break
    source = io.BytesIO()
    presentation.save(source)
    out = pptx.Presentation(io.BytesIO(translate_file(translator, "b.pptx", source.getvalue())))
    assert out.slides[0].placeholders[1].text_frame.text == f"{dog}\v{cats}"


def test_a_line_break_inside_a_sentence_stays_inside_its_translation(translator):
    """A soft line break inside a sentence (a page's ``<br>``, Word's ``w:br``, a slide's
    ``a:br``, an .odt's ``text:line-break``): the sentence is translated whole (each line was
    translated alone, as a sentence of its own) and the break stays, words on each side."""
    import docx
    import pptx

    whole = translator.translate(["Ein Mädchen isst ein Eis am Strand."])[0]
    lines = ("Ein Mädchen isst ein Eis", "am Strand.")
    page = translator.translate([f"<p>{lines[0]}<br>{lines[1]}</p>"], form="html")[0]
    sides = re.sub("</?p>", "", page).split("<br/>")
    word = docx.Document()
    run = word.add_paragraph().add_run(lines[0])
    run.add_break()
    run.add_text(lines[1])
    slides = pptx.Presentation()
    slides.slides.add_slide(slides.slide_layouts[1]).placeholders[1].text_frame.text = (
        "\v".join(lines))
    doc = opendocument.OpenDocumentText()
    paragraph = text.P()
    paragraph.addText(lines[0])
    paragraph.addElement(text.LineBreak())
    paragraph.addText(lines[1])
    doc.text.addElement(paragraph)
    found = {}
    for name, made in (("a.docx", word), ("a.pptx", slides), ("a.odt", doc)):
        source = io.BytesIO()
        (made.write if name == "a.odt" else made.save)(source)
        found[name] = translate_file(translator, name, source.getvalue())
    written = docx.Document(io.BytesIO(found["a.docx"])).paragraphs[0]
    assert "<w:br/>" in written.runs[0]._r.xml
    shown = pptx.Presentation(io.BytesIO(found["a.pptx"])).slides[0].placeholders[1]
    odt = opendocument.load(io.BytesIO(found["a.odt"])).text.getElementsByType(text.P)[0]
    kinds = [c.tagName if c.nodeType != c.TEXT_NODE else str(c) for c in odt.childNodes]
    assert kinds[1] == "text:line-break" and len(kinds) == 3
    for split in (sides, written.text.split("\n"), shown.text_frame.text.split("\v"),
                  [kinds[0], kinds[2]]):
        assert len(split) == 2 and all(re.search(r"\w", side) for side in split)
        assert " ".join(" ".join(split).split()) == whole


def test_fields_inside_a_sentence_stay_where_they_were(translator):
    """A slide's field (a date), a Word footer's page number and an .odt's inside a sentence
    are read with it and kept as they are, in place (the slide's and Word's were left out:
    the sentence lost them and the field ended after its translation)."""
    import pptx
    from lxml import etree

    presentation = pptx.Presentation()
    paragraph = presentation.slides.add_slide(presentation.slide_layouts[1]).placeholders[
        1].text_frame.paragraphs[0]
    paragraph.add_run().text = "Ein Hund läuft am "
    main = "http://schemas.openxmlformats.org/drawingml/2006/main"
    field = etree.SubElement(paragraph._p, f"{{{main}}}fld", id="{B6F15528-21DE-4FAA-801E-"
                             "634DDDAF4B2B}", type="datetime1")
    etree.SubElement(field, f"{{{main}}}t").text = "Montag"
    paragraph.add_run().text = " über die Wiese."
    source = io.BytesIO()
    presentation.save(source)
    out = pptx.Presentation(io.BytesIO(translate_file(translator, "f.pptx", source.getvalue())))
    written = out.slides[0].placeholders[1].text_frame.paragraphs[0]._p
    kinds = [c.tag.rsplit("}", 1)[1] for c in written if c.tag.rsplit("}", 1)[1] != "pPr"]
    assert kinds[:3] == ["r", "fld", "r"] and written.find(f"{{{main}}}fld").text == "Montag"
    after = out.slides[0].placeholders[1].text_frame.paragraphs[0].runs[1].text
    assert after.strip()  # the sentence goes on after the field (all went before it)
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    word = docx.Document()
    footer = word.sections[0].footer.paragraphs[0]  # "Page {PAGE} of ten pages."
    footer.add_run("Seite ")
    footer._p.append(parse_xml(f'<w:fldSimple {nsdecls("w")} w:instr="PAGE"><w:r><w:t>3'
                               '</w:t></w:r></w:fldSimple>'))
    footer.add_run(" von zehn Seiten.")
    source = io.BytesIO()
    word.save(source)
    # (the page number as the model writes it: kept, "3" is pinned to its field, and the
    # toy model writes it last, its words all before the field)
    as_written = translator.with_settings(translator.settings(keep_spans=False))
    out = docx.Document(io.BytesIO(translate_file(as_written, "f.docx", source.getvalue())))
    written = out.sections[0].footer.paragraphs[0]
    kinds = [c.tag.rsplit("}", 1)[1] for c in written._p if not c.tag.endswith("}pPr")]
    assert kinds == ["r", "fldSimple", "r"] and written.runs[1].text.strip()
    doc = opendocument.OpenDocumentText()
    odt_paragraph = text.P()
    odt_paragraph.addText("Auf Seite ")
    number = text.PageNumber(selectpage="current")
    number.addText("7")
    odt_paragraph.addElement(number)
    odt_paragraph.addText(" spielen zwei Hunde.")
    doc.text.addElement(odt_paragraph)
    source = io.BytesIO()
    doc.write(source)
    out = translate_file(as_written, "p.odt", source.getvalue())
    written = opendocument.load(io.BytesIO(out)).text.getElementsByType(text.P)[0]
    kinds = [c.tagName if c.nodeType != c.TEXT_NODE else "text" for c in written.childNodes]
    assert kinds == ["text", "text:page-number", "text"] and str(
        written.getElementsByType(text.PageNumber)[0]) == "7"


def test_an_epub_keeps_its_members_and_translates_each_document(translator, tmp_path):
    source = epub_book(tmp_path / "in.epub")
    out = translate_file(translator, "book.epub", source)
    (tmp_path / "out.epub").write_bytes(out)
    ours, theirs = (epub.read_epub(str(tmp_path / n)) for n in ("out.epub", "in.epub"))
    assert [(i.get_id(), i.file_name, i.media_type) for i in ours.get_items()] == [
        (i.get_id(), i.file_name, i.media_type) for i in theirs.get_items()]
    assert ours.spine == theirs.spine and ours.get_metadata("DC", "title") == [("Hunde", {})]
    written, given = zipfile.ZipFile(io.BytesIO(out)), zipfile.ZipFile(io.BytesIO(source))
    assert written.infolist()[0].filename == "mimetype"
    assert written.infolist()[0].compress_type == zipfile.ZIP_STORED
    for member in given.namelist():
        if member.endswith(".xhtml"):  # each document as translate translates XHTML
            assert written.read(member).decode() == translator.translate(
                [given.read(member).decode()], form="xhtml")[0]
        elif member.endswith(".opf"):  # the package: its language the translation's
            package = given.read(member).decode()
            assert "<dc:language>de</dc:language>" in package
            assert written.read(member).decode() == package.replace(
                "<dc:language>de</dc:language>", "<dc:language>en</dc:language>")
        elif not member.endswith(".ncx"):
            assert written.read(member) == given.read(member)
    label = translator.translate(["Kapitel 1"])[0]  # the EPUB 2 table of contents' entry
    ncx = given.read("EPUB/toc.ncx").decode()
    assert "<text>Hunde</text>" in ncx and "<text>Kapitel 1</text>" in ncx  # title, entry
    assert written.read("EPUB/toc.ncx").decode() == ncx.replace(
        "<text>Kapitel 1</text>", f"<text>{html.escape(label, quote=False)}</text>")
    assert [link.title for link in ours.toc] == [label]
    chapter = written.read("EPUB/chap_01.xhtml").decode()
    assert '<p translate="no">Ein Hund.</p>' in chapter and "Ein Mann" not in chapter
    assert 'lang="en"' in chapter and 'lang="de"' not in chapter  # and xml:lang
    assert 'viewBox="0 0 10 10"' in chapter  # read as XML: the case of names kept
    from lxml import etree

    ops = {"epub": "http://www.idpf.org/2007/ops"}
    for member in ("EPUB/chap_01.xhtml", "EPUB/nav.xhtml"):  # XHTML still, its namespaces
        root = etree.fromstring(written.read(member))  # kept (lxml 6.2 made Beautiful Soup
        assert root.tag == "{http://www.w3.org/1999/xhtml}html"  # 4.15 drop them)
    nav = etree.fromstring(written.read("EPUB/nav.xhtml"))
    assert nav.xpath("//*[@epub:type='toc']", namespaces=ops)  # a reader's table of contents


def test_an_epubs_pages_turn_the_way_its_translation_reads():
    from transformer_mt.translate.language_tags import relabel_epub

    package = ('<package><metadata><dc:language>{}</dc:language></metadata>'
               '<spine toc="ncx"{}><itemref idref="c1"/></spine></package>')
    rtl = ' page-progression-direction="rtl"'
    assert relabel_epub(package.format("ar", rtl), "ar", "en") == package.format(
        "en", ' page-progression-direction="ltr"')
    assert relabel_epub(package.format("en", ""), "en", "ar") == package.format("ar", "").replace(
        "<spine", f"<spine{rtl}")
    assert relabel_epub(package.format("de", ""), "de", "en") == package.format("en", "")


def test_the_cli_and_the_server_take_both(trained_run, translator, tmp_path):
    (tmp_path / "letter.odt").write_bytes(odt_document())
    result = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"), "--input",
                      str(tmp_path / "letter.odt"), "--output", str(tmp_path / "out.odt")])
    assert result.returncode == 0, result.stderr
    assert odt_texts((tmp_path / "out.odt").read_bytes()) == odt_texts(
        translate_file(translator, "letter.odt", odt_document()))
    book = epub_book(tmp_path / "in.epub")
    with local_client(create_app(translator, ServeOptions())) as client:
        answer = client.post("/translate_file", data={"source": "de", "target": "en"},
                             files={"file": ("book.epub", book)})
        assert answer.status_code == 200, answer.text
        assert client.get(answer.json()["translatedFileUrl"]).content == translate_file(
            translator, "book.epub", book)
        formats = client.get("/frontend/settings").json()["supportedFilesFormat"]
        assert {".odt", ".epub", ".pdf"} <= set(formats)
        answer = client.post("/translate_file", data={"source": "de", "target": "en"},
                             files={"file": ("paper.pdf", b"%PDF-1.7\n")})
        assert answer.status_code == 400 and "is not a PDF that can be read" in \
            answer.json()["error"]


@pytest.mark.parametrize("name, data, message", [
    ("letter.odt", b"PK\x03\x04 not a zip", "is not an OpenDocument text (.odt)"),
    ("book.epub", b"not a zip", "is not an EPUB book (.epub)"),
    ("book.epub", None, "its mimetype is not application/epub+zip"),
    ("book.epub", b"", "its mimetype is not application/epub+zip"),
])
def test_a_file_that_is_not_what_its_name_says_is_one_line(name, data, message):
    if not data:  # a zip that is not an EPUB: another mimetype (None), or none at all (b"")
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            z.writestr("mimetype" if data is None else "a.txt", "application/zip")
        data = out.getvalue()
    with pytest.raises(MTError, match=re.escape(message)) as caught:
        read_file(name, data, "de")
    assert "\n" not in str(caught.value)


def test_an_odt_entity_bomb_is_refused_at_once():
    """Billion laughs in content.xml: odfpy's parser (defusedxml) refuses entities; one line."""
    import time

    laughs = billion_laughs(
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:'
        '1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body>'
        '<office:text><text:p>&lol9;</text:p></office:text></office:body>'
        '</office:document-content>')
    real = zipfile.ZipFile(io.BytesIO(odt_document()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for member in real.infolist():
            z.writestr(member, laughs if member.filename == "content.xml" else real.read(member))
    start = time.monotonic()
    with pytest.raises(MTError, match=r"is not an OpenDocument text \(\.odt\): Entities"):
        read_file("laughs.odt", out.getvalue(), "de")
    assert time.monotonic() - start < 10


def test_an_xhtml_entity_bomb_is_not_expanded():
    """An EPUB's documents are read as XML (lxml): billion laughs stays unexpanded, at once."""
    import time

    from transformer_mt.translate.documents import split_document

    laughs = billion_laughs('<html xmlns="http://www.w3.org/1999/xhtml"><body><p>&lol9;</p>'
                            '</body></html>').decode()
    start = time.monotonic()
    document = split_document(laughs, "de", "xhtml")
    assert all(len(s) < 1000 for s in document.sentences)
    assert time.monotonic() - start < 10
