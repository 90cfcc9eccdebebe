"""Office documents' text wherever their applications keep it (translate/office.py): Word's
content controls, text boxes, footnotes, a first page's header, comments, links and fields
inside a sentence; a presentation's charts and SmartArt. Read back as XML from the written
zip, not through the code under test."""

from __future__ import annotations

import io

import pytest

docx = pytest.importorskip("docx")

from docx.opc.constants import CONTENT_TYPE, RELATIONSHIP_TYPE  # noqa: E402
from docx.opc.packuri import PackURI  # noqa: E402
from docx.opc.part import XmlPart  # noqa: E402
from docx.oxml import parse_xml  # noqa: E402
from docx.oxml.ns import nsdecls  # noqa: E402
from lxml import etree  # noqa: E402

from tests.helpers import saved  # noqa: E402
from tests.helpers import zipped_parts as parts  # noqa: E402
from transformer_mt.translate.files import translate_file  # noqa: E402

W = nsdecls("w")
NS = {"w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
      "a": "http://schemas.openxmlformats.org/drawingml/2006/main"}


def run(text: str, extra: str = "") -> str:
    return f'<w:r {W}><w:t xml:space="preserve">{text}</w:t>{extra}</w:r>'


def field(instruction: str, result: str) -> list[str]:
    """A complex field's runs: begin, instruction, separate, result, end."""
    char = '<w:r {}><w:fldChar w:fldCharType="{}"/></w:r>'
    return [char.format(W, "begin"), f'<w:r {W}><w:instrText>{instruction}</w:instrText></w:r>',
            char.format(W, "separate"), run(result), char.format(W, "end")]


def hidden_places() -> bytes:
    """A sentence in each place python-docx's paragraphs do not reach, and inside sentences
    what its runs leave out."""
    document = docx.Document()
    body = document.element.body
    block = parse_xml(f'<w:sdt {W}><w:sdtPr><w:alias w:val="Titel"/></w:sdtPr><w:sdtContent>'
                      f'<w:p>{run("Eine Frau liest ein Buch.")}</w:p></w:sdtContent></w:sdt>')
    box = parse_xml(f'<w:p {W}>{run("Ein Mann fährt Fahrrad.")}<w:r><w:pict><v:shape '
                    'xmlns:v="urn:schemas-microsoft-com:vml"><v:textbox><w:txbxContent><w:p>'
                    f'{run("Zwei Hunde spielen im Schnee.")}</w:p></w:txbxContent></v:textbox>'
                    '</v:shape></w:pict></w:r></w:p>')
    inline = parse_xml(f'<w:p {W}>{run("Ein Hund ")}<w:sdt><w:sdtContent>{run("läuft")}'
                       f'</w:sdtContent></w:sdt>{run(" über die Wiese.")}</w:p>')
    reference = '<w:footnoteReference w:id="1"/>'
    noted = parse_xml(f'<w:p {W}>{run("Ein Mädchen singt.", reference)}</w:p>')
    linked = "".join(field(' HYPERLINK "https://x.org" ', "einen Vogel"))
    link = parse_xml(f'<w:p {W}>{run("Ein Kind sieht ")}{linked}{run(".")}</w:p>')
    toc = "".join(field(' TOC \\o "1-3" ', "Hunde im Schnee"))
    contents = parse_xml(f"<w:p {W}>{toc}</w:p>")
    for element in (block, box, inline, noted, link, contents):
        body.insert(len(body) - 1, element)  # before the section's properties
    notes = (f'<w:footnotes {W}><w:footnote w:id="1"><w:p><w:r><w:footnoteRef/></w:r>'
             f'{run(" Ein Junge springt ins Wasser.")}</w:p></w:footnote></w:footnotes>')
    document.part.relate_to(XmlPart(PackURI("/word/footnotes.xml"), CONTENT_TYPE.WML_FOOTNOTES,
                                    parse_xml(notes), document.part.package),
                            RELATIONSHIP_TYPE.FOOTNOTES)
    section = document.sections[0]
    section.different_first_page_header_footer = True
    section.first_page_header.paragraphs[0].text = "Ein Hund schläft."
    footer = section.footer.paragraphs[0]._p  # "Page {PAGE} of ten pages."
    for xml in [run("Seite "), *field(" PAGE ", "3"), run(" von zehn Seiten.")]:
        footer.append(parse_xml(xml))
    commented = document.add_paragraph("Der Himmel ist blau.").runs
    document.add_comment(commented, text="Ein Mann schläft.", author="T")
    return saved(document.save)


def texts(element: etree._Element, path: str) -> list[str]:
    """The text of each paragraph at ``path``."""
    return ["".join(p.itertext()) for p in element.xpath(path, namespaces=NS)]


PLACES = [  # (part, paragraphs), each holding one German sentence
    ("word/document.xml", "//w:sdt[w:sdtPr]/w:sdtContent/w:p"),
    ("word/document.xml", "//w:txbxContent/w:p"),
    ("word/footnotes.xml", "//w:footnote/w:p"),
    ("word/comments.xml", "//w:comment/w:p"),
]


def test_every_place_word_keeps_text_in_is_translated(translator):
    source = hidden_places()
    before, after = parts(source), parts(translate_file(translator, "notes.docx", source))
    for name, path in PLACES:
        old, new = texts(before[name], path), texts(after[name], path)
        assert len(new) == len(old) == 1 and new[0].strip() and new[0] != old[0], (name, path)
    headers = [n for n in after if n.startswith("word/header")]
    assert any("Ein Hund schläft." in texts(before[n], "//w:p") for n in headers)
    assert not any("Ein Hund schläft." in texts(after[n], "//w:p") for n in headers)
    body = after["word/document.xml"]
    assert texts(body, "//w:body/w:p[1]//w:t/..")[0] != "Ein Mann fährt Fahrrad."
    written = "".join(body.itertext()) + "".join(after["word/footnotes.xml"].itertext())
    for german in ("läuft", "Mädchen", "einen Vogel", "Junge", "Kind"):
        assert german not in written


def test_what_a_sentence_holds_stays_in_place(translator):
    """A footnote's reference stays after its run's new text; a page number's field keeps
    its instruction and result between translated words; a content control inside a
    sentence and a link's field get their share of its translation, a table of contents'
    entry is translated."""
    # (the page number as the model writes it: kept, "3" is pinned to its field, and the
    # toy model writes it last, its words all before the field)
    as_written = translator.with_settings(translator.settings(keep_spans=False))
    after = parts(translate_file(as_written, "notes.docx", hidden_places()))
    body = after["word/document.xml"]
    noted = body.xpath("//w:r[w:footnoteReference]", namespaces=NS)[0]
    assert [etree.QName(c).localname for c in noted] == ["t", "footnoteReference"]
    assert noted[0].text.strip()
    inline = body.xpath("//w:p[w:sdt]", namespaces=NS)[0]
    assert "".join(inline.xpath("w:sdt//w:t/text()", namespaces=NS)).strip()
    link = body.xpath("//w:p[.//w:instrText]", namespaces=NS)[0]
    shown = link.xpath("w:r[preceding-sibling::w:r/w:fldChar[@w:fldCharType='separate'] and "
                       "following-sibling::w:r/w:fldChar[@w:fldCharType='end']]//w:t/text()",
                       namespaces=NS)
    assert "".join(shown).strip() and "Vogel" not in "".join(shown)
    entry = body.xpath("//w:p[.//w:instrText[contains(., 'TOC')]]//w:t/text()", namespaces=NS)
    assert "".join(entry).strip() and "Schnee" not in "".join(entry)  # a table of contents'

    footer = next(after[n] for n in after if n.startswith("word/footer")
                  and after[n].xpath("//w:instrText", namespaces=NS))
    kinds = [etree.QName(c[-1]).localname + (c[-1].text or "") for c in footer.xpath(
        "//w:p/w:r", namespaces=NS)]
    assert kinds[1:5] == ["fldChar", "instrText PAGE ", "fldChar", "t3"]
    words = footer.xpath("//w:p/w:r/w:t/text()", namespaces=NS)
    assert words[0] != "Seite " and words[-1] != " von zehn Seiten." and words[-1].strip()


def slides_with_graphics() -> bytes:
    """A slide with a chart (its title, its categories' and its series' names) and a SmartArt
    graphic (its text and its drawing)."""
    pptx = pytest.importorskip("pptx")
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.opc.constants import CONTENT_TYPE as CT
    from pptx.opc.constants import RELATIONSHIP_TYPE as RT
    from pptx.opc.package import XmlPart as SlideXmlPart
    from pptx.opc.packuri import PackURI as SlideURI
    from pptx.oxml import parse_xml as parse_slide_xml
    from pptx.util import Inches

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    data = CategoryChartData()
    data.categories = ["Zwei Hunde", "Eine Katze"]
    data.add_series("Tiere im Schnee", (1, 2))
    chart = slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, 0, 0, Inches(4), Inches(3),
                                   data).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Zwei Hunde spielen im Schnee."
    a = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
    smart = {  # the graphic's text, and the drawing PowerPoint shows of it
        (CT.DML_DIAGRAM_DATA, RT.DIAGRAM_DATA, "data1"): (
            '<dgm:dataModel xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram"'
            f' {a}><dgm:ptLst><dgm:pt modelId="1"><dgm:t><a:bodyPr/><a:p><a:r><a:t>Ein Mann '
            'fährt Fahrrad.</a:t></a:r></a:p></dgm:t></dgm:pt></dgm:ptLst></dgm:dataModel>'),
        (CT.DML_DIAGRAM_DRAWING, "http://schemas.microsoft.com/office/2007/relationships/"
         "diagramDrawing", "drawing1"): (
            '<dsp:drawing xmlns:dsp="http://schemas.microsoft.com/office/drawing/2008/diagram" '
            f'{a}><dsp:spTree><dsp:sp><dsp:txBody><a:p><a:r><a:t>Ein Mann fährt Fahrrad.'
            '</a:t></a:r></a:p></dsp:txBody></dsp:sp></dsp:spTree></dsp:drawing>')}
    for (content_type, relation, name), xml in smart.items():
        part = SlideXmlPart(SlideURI(f"/ppt/diagrams/{name}.xml"), content_type,
                            presentation.part.package, parse_slide_xml(xml))
        slide.part.relate_to(part, relation)
    return saved(presentation.save)


def test_a_presentations_charts_and_smartart_are_translated(translator):
    """A chart's title and its categories' and series' names, and a SmartArt graphic's text,
    in its data and in the drawing shown, are translated (python-pptx's shapes do not reach
    them: they stayed in German); its numbers stay as they are."""
    source = slides_with_graphics()
    before, after = (parts(data, "ppt/") for data in (
        source, translate_file(translator, "talk.pptx", source)))
    found = 0
    for name in before:
        if name.startswith(("ppt/charts/chart", "ppt/diagrams/")):
            old, new = (texts(x[name], "//a:p[.//a:t]") for x in (before, after))
            assert len(new) == len(old) == 1 and new[0].strip() and new[0] != old[0], name
            found += 1
    assert found == 3
    (names, numbers), (translated, kept) = (chart_labels(x["ppt/charts/chart1.xml"])
                                            for x in (before, after))
    assert names == ["Tiere im Schnee", "Zwei Hunde", "Eine Katze"]  # series, categories
    assert len(translated) == 3 and all(n.strip() and n != o
                                        for o, n in zip(names, translated, strict=True))
    assert numbers == kept == ["1", "2"]  # the data: not text


CHART_NS = {"c": "http://schemas.openxmlformats.org/drawingml/2006/chart"}


def chart_labels(chart: etree._Element) -> tuple[list[str], list[str]]:
    """A chart's names from its data (its series', its categories') and its numbers."""
    return tuple(chart.xpath(f"//c:{cache}//c:v/text()", namespaces=CHART_NS)
                 for cache in ("strCache", "numCache"))


def test_a_word_documents_charts_are_translated(translator):
    """A chart in a Word document (python-docx keeps it as bytes): its title and its
    categories' and series' names translated, its numbers as they were."""
    document = docx.Document()
    document.add_paragraph("Ein Mann fährt Fahrrad.")
    a = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
    cache = "".join(f'<c:pt idx="{i}"><c:v>{v}</c:v></c:pt>' for i, v in enumerate(
        ["Zwei Hunde", "Eine Katze"]))
    xml = (f'<c:chartSpace xmlns:c="{CHART_NS["c"]}" {a}><c:chart><c:title><c:tx><c:rich>'
           '<a:bodyPr/><a:p><a:r><a:rPr lang="de-DE"/><a:t>Zwei Hunde spielen im Schnee.</a:t>'
           '</a:r></a:p></c:rich></c:tx></c:title><c:plotArea><c:barChart><c:ser><c:tx>'
           '<c:strRef><c:strCache><c:pt idx="0"><c:v>Tiere im Schnee</c:v></c:pt></c:strCache>'
           f'</c:strRef></c:tx><c:cat><c:strRef><c:strCache>{cache}</c:strCache></c:strRef>'
           '</c:cat><c:val><c:numRef><c:numCache><c:pt idx="0"><c:v>1</c:v></c:pt><c:pt idx="1">'
           '<c:v>2</c:v></c:pt></c:numCache></c:numRef></c:val></c:ser></c:barChart></c:plotArea>'
           '</c:chart></c:chartSpace>')
    document.part.relate_to(XmlPart(PackURI("/word/charts/chart1.xml"), CONTENT_TYPE.DML_CHART,
                                    parse_xml(xml), document.part.package),
                            RELATIONSHIP_TYPE.CHART)
    source = io.BytesIO()
    document.save(source)
    before, after = (parts(data)["word/charts/chart1.xml"] for data in (
        source.getvalue(), translate_file(translator, "report.docx", source.getvalue())))
    old, new = (texts(x, "//a:p[.//a:t]") for x in (before, after))
    assert len(new) == 1 and new[0].strip() and new[0] != old[0]
    (names, numbers), (translated, kept) = chart_labels(before), chart_labels(after)
    assert names == ["Tiere im Schnee", "Zwei Hunde", "Eine Katze"]
    assert len(translated) == 3 and all(n.strip() and n != o
                                        for o, n in zip(names, translated, strict=True))
    assert numbers == kept == ["1", "2"]


def test_marks_between_sentences_stay_between_their_translations(translator):
    """What marks a place in a paragraph (a footnote's reference in a run of its own, as
    LibreOffice writes it; a bookmark; a tracked deletion), between runs formatted alike,
    stays between the translations of the words around it, in Word and OpenDocument (each
    went to the paragraph's end: the group's text goes into its first run)."""
    from odf import text
    from odf.opendocument import OpenDocumentText

    deleted = '<w:del w:id="9" w:author="A" w:date="2026-12-01T10:00:00Z"><w:r><w:delText>' \
              'Eine Katze.</w:delText></w:r></w:del>'
    word = docx.Document()
    word.element.body.insert(0, parse_xml(
        f'<w:p {W}>{run("Ein Mann fährt Fahrrad.")}<w:r><w:footnoteReference w:id="1"/></w:r>'
        f'{run(" Eine Frau liest ein Buch. Ein Mädchen")}{deleted}{run(" lächelt.")}'
        f'<w:bookmarkStart w:id="0" w:name="m"/><w:bookmarkEnd w:id="0"/>'
        f'{run(" Ein Mann läuft.")}</w:p>'))
    body = parts(translate_file(translator, "notes.docx", saved(word.save)))["word/document.xml"]
    [paragraph] = body.xpath("//w:p[.//w:footnoteReference]", namespaces=NS)
    shown = [(etree.QName(c).localname, "".join(c.xpath(".//w:t/text()", namespaces=NS)))
             for c in paragraph]
    marks = [i for i, (name, _) in enumerate(shown) if name in ("del", "bookmarkStart") or
             paragraph[i].xpath("w:footnoteReference", namespaces=NS)]
    assert len(marks) == 3
    for i in marks:  # words on both sides of each mark
        assert any(t.strip() for _, t in shown[:i]) and any(t.strip() for _, t in shown[i + 1:])

    document = OpenDocumentText()
    paragraph = text.P(text="Ein Mann fährt Fahrrad.")
    note = text.Note(id="n1", noteclass="footnote")
    note.addElement(text.NoteCitation(text="1"))
    body_ = text.NoteBody()
    body_.addElement(text.P(text="Zwei Hunde spielen im Schnee."))
    note.addElement(body_)
    paragraph.addElement(note)
    paragraph.addText(" Eine Frau liest ein Buch.")
    paragraph.addElement(text.Bookmark(name="m"))
    paragraph.addText(" Ein Mann läuft.")
    document.text.addElement(paragraph)
    content = parts(translate_file(translator, "notes.odt", saved(document.write)),
                    "content")["content.xml"]
    odf = {"text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0"}
    [paragraph] = content.xpath("//text:p[text:note]", namespaces=odf)
    pieces = [paragraph.text, *(child.tail for child in paragraph)]  # around each mark
    assert [etree.QName(c).localname for c in paragraph] == ["note", "bookmark"]
    assert all(piece and piece.strip() for piece in pieces), pieces


def test_office_documents_say_they_are_in_the_target_language(translator):
    """Word's, PowerPoint's and OpenDocument's language tags that said German say English
    (runs, styles, properties); others as they were."""
    import pptx
    from odf import opendocument, style, text
    from odf.namespaces import FONS

    word = docx.Document()
    run = word.add_paragraph().add_run("Ein Hund läuft.")
    run._r.get_or_add_rPr().append(parse_xml(f'<w:lang {W} w:val="de-DE" w:bidi="ar-SA"/>'))
    word.styles["Normal"].element.get_or_add_rPr().append(parse_xml(
        f'<w:lang {W} w:val="de-AT"/>'))
    word.core_properties.language = "de"
    source = io.BytesIO()
    word.save(source)
    out = docx.Document(io.BytesIO(translate_file(translator, "a.docx", source.getvalue())))
    said = [(e.get(f"{{{NS['w']}}}val"), e.get(f"{{{NS['w']}}}bidi"))
            for e in out.element.iter(f"{{{NS['w']}}}lang")]
    normal = out.styles["Normal"].element.find(".//w:lang", NS).get(f"{{{NS['w']}}}val")
    assert said == [("en", "ar-SA")] and normal == "en" and out.core_properties.language == "en"
    slides = pptx.Presentation()
    frame = slides.slides.add_slide(slides.slide_layouts[1]).placeholders[1].text_frame
    frame.paragraphs[0].add_run().text = "Zwei Hunde spielen."
    frame.paragraphs[0].runs[0]._r.get_or_add_rPr().set("lang", "de-DE")
    source = io.BytesIO()
    slides.save(source)
    out = parts(translate_file(translator, "a.pptx", source.getvalue()), "ppt/slides/")
    assert [e.get("lang") for e in out["ppt/slides/slide1.xml"].iter(f"{{{NS['a']}}}rPr")] == [
        "en"]
    doc = opendocument.OpenDocumentText()
    german = style.Style(name="G", family="paragraph")
    german.addElement(style.TextProperties(language="de", country="DE"))
    doc.styles.addElement(german)
    doc.text.addElement(text.P(stylename=german, text="Eine Frau liest."))
    source = io.BytesIO()
    doc.write(source)
    out = opendocument.load(io.BytesIO(translate_file(translator, "a.odt", source.getvalue())))
    said = [(p.getAttrNS(FONS, "language"), p.getAttrNS(FONS, "country"))
            for p in out.getElementsByType(style.TextProperties)]
    assert said == [("en", None)]


def test_a_slide_runs_text_is_written_as_python_pptx_writes_it():
    """A translation written into a DrawingML run (a slide's, a chart's): a control character,
    which XML cannot hold, escaped as Office and python-pptx escape it; tabs and newlines as
    they are."""
    pytest.importorskip("pptx")
    from pptx.oxml.text import CT_RegularTextRun

    from transformer_mt.translate.office import _DrawingRun

    text = "Ein" + "".join(map(chr, range(32))) + "Hund läuft."
    run = _DrawingRun(etree.fromstring(f'<a:r {nsdecls("a")}><a:t>x</a:t></a:r>'))
    run.text = text
    assert run.text == CT_RegularTextRun._escape_ctrl_chars(text)
    assert "\t\n" in run.text and "_x0007_" in run.text


def test_a_word_document_translated_between_directions_is_written_the_targets_way():
    """Arabic into English: each paragraph, run, section and table written right to left
    says left to right; English into Arabic: the styles' default paragraph is right to left
    (``w:bidi`` where Word's order puts it), what said left to right says right to left.
    A presentation's paragraphs alike."""
    from transformer_mt.translate.files import WORD_PARTS
    from transformer_mt.translate.language_tags import relabel_word

    arabic = docx.Document()
    paragraph = arabic.add_paragraph()
    paragraph._p.get_or_add_pPr().append(parse_xml(f"<w:bidi {W}/>"))
    paragraph.add_run("Hello.")._r.get_or_add_rPr().append(parse_xml(f"<w:rtl {W}/>"))
    arabic.add_table(1, 1)._tbl.tblPr.append(parse_xml(f"<w:bidiVisual {W}/>"))
    arabic.sections[0]._sectPr.append(parse_xml(f"<w:bidi {W}/>"))
    relabel_word(arabic, WORD_PARTS, "ar", "en")
    switches = [e.get(f"{{{NS['w']}}}val") for name in ("bidi", "rtl", "bidiVisual")
                for e in arabic.element.iter(f"{{{NS['w']}}}{name}")]
    assert switches == ["0", "0", "0", "0"]
    english = docx.Document()
    english.add_paragraph("Hello.")._p.get_or_add_pPr().append(parse_xml(
        f'<w:bidi {W} w:val="0"/>'))
    relabel_word(english, WORD_PARTS, "en", "ar")
    default = english.styles.element.find("w:docDefaults/w:pPrDefault/w:pPr", NS)
    names = [etree.QName(e).localname for e in default]
    assert "bidi" in names and names.index("bidi") < names.index("spacing")  # python-docx's
    assert english.paragraphs[0]._p.pPr.find("w:bidi", NS).get(f"{{{NS['w']}}}val") == "1"
    relabel_word(english, WORD_PARTS, "he", "ar")  # the same direction: nothing switched
    assert english.paragraphs[0]._p.pPr.find("w:bidi", NS).get(f"{{{NS['w']}}}val") == "1"
    import pptx

    from transformer_mt.translate.files import SLIDE_PARTS
    from transformer_mt.translate.language_tags import relabel_slides

    slides = pptx.Presentation()
    slide = slides.slides.add_slide(slides.slide_layouts[1])
    slide.shapes.title.text, slide.placeholders[1].text = "Hello.", "A dog."
    for lang, target, rtl in (("en", "ar", "1"), ("ar", "en", "0")):
        relabel_slides(slides, SLIDE_PARTS, lang, target)
        assert [p._p.pPr.get("rtl") for shape in slide.shapes
                for p in shape.text_frame.paragraphs] == [rtl, rtl]
