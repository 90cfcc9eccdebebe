"""The runs of office documents' paragraphs (``files.py``'s Word and PowerPoint documents;
OpenDocument's: ``opendocument.py``): each paragraph's runs with text, in groups of neighbours
formatted alike, which ``documents.split_flow`` reads as one flow (a sentence across groups, a
bold word in it, is translated whole and shared out among them). Spacing a paragraph holds as
an element (a line break, a tab, ODF's spaces) is a group of its own, kept where it was: a line
break ends a sentence in the file as in a text; what marks a place between texts (a footnote's
mark, a picture, a bookmark) stays between them."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from transformer_mt.packages import imported


def word_runs(document: Any) -> list[list[Group]]:
    """A Word document's paragraphs (``_paragraphs``) and its charts' (``chart_runs``) as
    groups of runs."""
    return [grouped(_word_inner(paragraph), "text") for paragraph in _paragraphs(document)
            ] + chart_runs([part.element for part in document.part.package.iter_parts()
                             if part.content_type.endswith(CHART) and hasattr(part, "element")])


def slide_runs(presentation: Any) -> list[list[Group]]:
    """A presentation's paragraphs (``_slide_paragraphs``) and its charts' (``chart_runs``)
    as groups of runs."""
    charts = [part._element for part in presentation.part.package.iter_parts()
              if part.content_type.endswith(CHART) and hasattr(part, "_element")]
    return [drawing_groups(paragraph) for paragraph in _slide_paragraphs(presentation)
            ] + chart_runs(charts)


class Held:
    """What a paragraph holds as an element, read as its text: spacing (a line break, a tab,
    ODF's ``text:s``) which, given another text (spaces inside a sentence get a share of its
    translation), gives way to it (``replace``); or a field (a date, a page number; no
    ``replace``), ``kept`` as it is (``documents.split_flow`` reads it in its sentence)."""

    def __init__(self, text: str, replace: Callable[[str], None] | None = None) -> None:
        self.held, self._replace, self.kept = text, replace, replace is None

    @property
    def text(self) -> str:
        return self.held

    @text.setter
    def text(self, value: str) -> None:
        if self._replace is not None and value != self.held:
            self._replace(value)
            self.held = value

    data = text  # what ODF's text nodes call it


APART = Held("")  # what stands between a paragraph's texts, holding none


class Group(list[Any]):
    """Neighbouring runs formatted alike; ``bare`` where formatted as most of its paragraph's
    text is (the text outside its markup: ``documents.split_flow``)."""

    bare = False


def grouped(runs: list[tuple[object, Any]], attribute: str) -> list[Group]:
    """A paragraph's runs with text (each with its formatting, its text ``attribute``) in
    groups of neighbours formatted alike, spacing held as an element each a group of its own;
    none for a paragraph without text."""
    groups: list[tuple[object, Group]] = []
    last: object = None
    for style, run in runs:
        if not getattr(run, attribute):  # a footnote's mark, a picture, a bookmark: it stays
            last = APART  # between the texts around it (the first run gets a group's text)
            continue
        if groups and style == last and not isinstance(run, Held):
            groups[-1][1].append(run)
        else:
            groups.append((None if isinstance(run, Held) else style, Group([run])))
        last = None if isinstance(run, Held) else style
    if not "".join(getattr(r, attribute) for _, g in groups for r in g).strip():
        return []
    chars: list[tuple[object, int]] = []  # each formatting (unhashable: XML), its characters
    for style, group in groups:
        n = sum(len(getattr(r, attribute)) for r in group)
        chars += [(style, n + sum(c for s, c in chars if s == style))] if style is not None else []
    most = max(chars, key=lambda c: c[1])[0] if chars else None
    for style, group in groups:
        group.bare = style is not None and style == most
    return [group for _, group in groups]


# a presentation's parts that hold text to translate (not its masters' and layouts')
SLIDE_PARTS = ("presentationml.slide+xml", "presentationml.notesSlide+xml",
               "drawingml.chart+xml", "drawingml.diagramData+xml", "drawingml.diagramDrawing+xml")


def open_slides(stream: Any) -> Any:
    """A PowerPoint presentation (python-pptx's ``Presentation``), its SmartArt graphics' text
    and drawing read as XML parts too (python-pptx keeps them as bytes)."""
    pptx = imported("pptx", "a PowerPoint presentation (.pptx)")
    from pptx.opc.constants import CONTENT_TYPE
    from pptx.opc.package import PartFactory, XmlPart

    for content_type in (CONTENT_TYPE.DML_DIAGRAM_DATA, CONTENT_TYPE.DML_DIAGRAM_DRAWING):
        PartFactory.part_type_for.setdefault(content_type, XmlPart)
    return pptx.Presentation(stream)


def _slide_paragraphs(presentation: Any) -> list[Any]:
    """Every paragraph (``a:p``) of a presentation's slides wherever it is (shapes, groups,
    tables), of its speaker notes and SmartArt graphics (its charts': ``chart_runs``)."""
    from pptx.oxml.ns import qn

    return [p for part in presentation.part.package.iter_parts()
            if part.content_type.endswith(SLIDE_PARTS) and not part.content_type.endswith(CHART)
            and hasattr(part, "_element")
            for p in part._element.iter(qn("a:p"))]


CHART = "drawingml.chart+xml"  # a chart's part, by the end of its content type
DRAWING = "{http://schemas.openxmlformats.org/drawingml/2006/main}"  # DrawingML's namespace
CHARTS = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"


def chart_runs(charts: list[Any]) -> list[list[Group]]:
    """Charts' paragraphs (their titles: ``a:p``) and the names they show from their data, their
    categories' and their series' (each a ``c:v`` of a string cache: ``c:strCache``,
    ``c:multiLvlStrCache`` for categories on several levels; each a paragraph of its own), not
    their numbers. A chart's workbook keeps its own copy of its data: edited there, the chart
    takes the workbook's names back."""
    return [drawing_groups(p) for chart in charts for p in chart.iter(f"{DRAWING}p")] + [
        grouped([(None, value)], "text") for chart in charts
        for cache in chart.iter(f"{CHARTS}strCache", f"{CHARTS}multiLvlStrCache")
        for value in cache.iter(f"{CHARTS}v")]


# Word's parts that hold text to translate, by the end of their content type
WORD_PARTS = ("document.main+xml", "header+xml", "footer+xml", "footnotes+xml",
              "endnotes+xml", "comments+xml")


def open_word(stream: Any) -> Any:
    """A Word document (python-docx's ``Document``), its footnotes, endnotes and charts read as
    XML parts too (python-docx keeps them as bytes)."""
    docx = imported("docx", "a Word document (.docx)")
    from docx.opc.constants import CONTENT_TYPE
    from docx.opc.part import PartFactory, XmlPart

    for content_type in (CONTENT_TYPE.WML_FOOTNOTES, CONTENT_TYPE.WML_ENDNOTES,
                         CONTENT_TYPE.DML_CHART):
        PartFactory.part_type_for.setdefault(content_type, XmlPart)
    return docx.Document(stream)


def _paragraphs(document: Any) -> list[Any]:
    """Every paragraph (``w:p``) of a Word document wherever it is: in its body (tables,
    content controls, text boxes), in every header and footer, in its footnotes, endnotes and
    comments, in order."""
    from docx.oxml.ns import qn

    return [p for part in document.part.package.iter_parts()
            if part.content_type.endswith(WORD_PARTS) and hasattr(part, "element")
            for p in part.element.iter(qn("w:p"))]


def drawing_groups(paragraph: Any) -> list[Group]:
    """A DrawingML paragraph's (``a:p``: a slide's, a chart's) runs with text, line breaks and
    fields (``_drawing_inner``), in groups of neighbours formatted alike (``grouped``)."""
    runs: list[tuple[object, Any]] = []
    for run in _drawing_inner(paragraph):
        properties = None if isinstance(run, Held) else run.r.find(f"{DRAWING}rPr")
        runs.append(("" if properties is None else _xml(properties), run))
    return grouped(runs, "text")


def _xml(element: Any) -> str:
    from lxml import etree

    return str(etree.tostring(element, encoding="unicode"))


class _DrawingRun:
    """A DrawingML run (``a:r``) whose text (its ``a:t``) is replaced where it is."""

    def __init__(self, r: Any) -> None:
        self.r = r

    @property
    def text(self) -> str:
        t = self.r.find(f"{DRAWING}t")
        return "" if t is None or t.text is None else str(t.text)

    @text.setter
    def text(self, value: str) -> None:
        t = self.r.find(f"{DRAWING}t")
        if t is not None:  # a control character XML cannot hold written as Office writes it
            t.text = re.sub(r"[\x00-\x08\x0b-\x1f]", lambda c: f"_x{ord(c[0]):04X}_", value)


def _drawing_inner(paragraph: Any) -> list[Any]:
    """A DrawingML paragraph's runs, line breaks and fields (``a:r``, ``a:br``, ``a:fld``), in
    order."""

    def gone(br: Any, text: str) -> None:  # a line break ends a sentence: never shared
        br.getparent().remove(br)

    return [_DrawingRun(child) if child.tag == f"{DRAWING}r" else
            Held("\n", functools.partial(gone, child)) if child.tag == f"{DRAWING}br" else
            Held(child.text or "")  # a field (a date, the slide's number): kept
            for child in paragraph if child.tag in (f"{DRAWING}r", f"{DRAWING}br",
                                                    f"{DRAWING}fld")]


# what holds a Word paragraph's runs inside it (a link, a content control, a tracked insertion)
WORD_INSIDE = {"hyperlink", "sdt", "sdtContent", "ins", "moveTo", "smartTag", "customXml",
               "dir", "bdo"}
# what marks a place in a paragraph: kept between the words around it
WORD_ANCHORS = {"bookmarkStart", "bookmarkEnd", "commentRangeStart", "commentRangeEnd", "del",
                "moveFrom"}
# a run's elements that are its text (python-docx's ``Run.text``), a line break's alone
WORD_TEXT = {"t", "tab", "cr", "noBreakHyphen", "ptab"}


def _name(element: Any) -> str:
    return str(element.tag).rpartition("}")[2]


class _WordRun:
    """A Word run whose text is replaced where it is: what else it holds (a footnote's
    reference, a picture, a page break) stays (python-docx's ``Run.text`` drops it)."""

    kept = False

    def __init__(self, r: Any) -> None:
        self.r = r

    @property
    def text(self) -> str:
        return str(self.r.text)

    @text.setter
    def text(self, value: str) -> None:
        from docx.oxml.ns import qn
        from docx.oxml.parser import OxmlElement

        texts = [e for e in self.r if _name(e) in WORD_TEXT or (_name(e) == "br" and
                 e.get(qn("w:type")) in (None, "textWrapping"))]
        place = self.r.index(texts[0]) if texts else len(self.r)
        for element in texts:
            self.r.remove(element)
        made = OxmlElement("w:r")
        made.text = value
        for offset, element in enumerate(list(made)):
            self.r.insert(place + offset, element)


# Word's fields whose result the application computes (a page number, a date, a count): kept
# as they are; any other's (a link's, a table of contents', a cross-reference's) is text
COMPUTED = frozenset({"PAGE", "NUMPAGES", "SECTIONPAGES", "SECTION", "PAGEREF", "NOTEREF",
                      "SEQ", "DATE", "TIME", "CREATEDATE", "SAVEDATE", "PRINTDATE", "EDITTIME",
                      "FILENAME", "FILESIZE", "NUMWORDS", "NUMCHARS", "REVNUM", "AUTONUM",
                      "AUTONUMLGL", "AUTONUMOUT", "LISTNUM", "BARCODE", "SYMBOL"})


def _computed(instruction: str) -> bool:
    """Whether a field's ``instruction`` computes its result (``COMPUTED``, a formula)."""
    name = (instruction.split() or [""])[0].upper()
    return name in COMPUTED or name.startswith("=")


class _Fields:
    """The complex fields a paragraph's runs are in, as Word writes them: ``begin``, the
    instruction, ``separate``, its result's runs, ``end``."""

    def __init__(self) -> None:
        self.open: list[list[Any]] = []  # [instruction, shown, serial] each
        self.made = 0

    def run(self, r: Any) -> tuple[tuple[int, ...], Any]:
        """The fields ``r`` is in (a link's), and ``r``: its text kept (``Held``) where it
        shows a computed field's result (a page number, a date; not a link's, nor a table of
        contents' entries: ``COMPUTED``), else ``_WordRun``."""
        from docx.oxml.ns import qn

        for element in r:
            kind = element.get(qn("w:fldCharType")) if _name(element) == "fldChar" else None
            if kind == "begin":
                self.made += 1
                self.open.append(["", False, self.made])
            elif self.open and _name(element) == "instrText":
                self.open[-1][0] += element.text or ""
            elif self.open and kind == "separate":
                self.open[-1][1] = True
            elif self.open and kind == "end":
                self.open.pop()
        where = tuple(serial for _, _, serial in self.open)
        if self.open and self.open[-1][1] and _computed(self.open[-1][0]):
            return where, Held(str(r.text))
        return where, _WordRun(r)


def _word_inner(paragraph: Any) -> list[tuple[object, Any]]:
    """A Word paragraph's (``w:p``) runs (inside links, content controls and tracked
    insertions too), each with what it is in and its formatting, and its fields, kept as they
    are where computed (``COMPUTED``): a simple one's (``w:fldSimple``, a page number, which
    python-docx's runs leave out) and a complex one's result (``_Fields``); a link's, a table
    of contents', a cross-reference's translated."""
    found: list[tuple[object, Any]] = []
    fields = _Fields()

    def walk(element: Any, where: tuple[Any, ...]) -> None:
        for child in element:
            name = _name(child)
            if name == "fldSimple" and _computed(child.get(child.tag[:-9] + "instr", "")):
                found.append((where, Held("".join(t.text or "" for t in child.iter(
                    "{*}t")))))
            elif name in WORD_INSIDE or name == "fldSimple":
                walk(child, (*where, child))
            elif name in WORD_ANCHORS:  # where it was, between the texts around it
                found.append((where, APART))
            elif name == "r":
                inside, run = fields.run(child)
                properties = child.rPr
                found.append(((*where, inside, "" if properties is None else properties.xml),
                              run))

    walk(paragraph, ())
    return found
