"""The runs of OpenDocument files' paragraphs (``files.py``'s texts, presentations and
spreadsheets), grouped as Word's (``office.py``): text nodes inside the same spans together,
spacing elements and fields each a group of their own, what marks a place (a note, a
bookmark, a tracked change) kept between the texts around it; a spreadsheet's cells whose
value is not text left as they are."""

from __future__ import annotations

import functools
from typing import Any

from transformer_mt.packages import imported
from transformer_mt.translate.office import APART, Group, Held, grouped


def odf_runs(document: Any) -> list[list[Group]]:
    """An OpenDocument text's or presentation's paragraphs and headings (each found on its own,
    wherever it is: a table, a frame, a slide, its notes, a note, a header), and a
    presentation's header and footer texts: their text nodes (and spacing elements) in groups
    of neighbours inside the same spans."""
    text = imported("odf.text", ODF_FILES)
    slides = imported("odf.presentation", ODF_FILES)
    paragraphs: list[list[Group]] = []
    for paragraph in [p for kind in (text.P, text.H, slides.HeaderDecl, slides.FooterDecl)
                      for p in document.getElementsByType(kind) if _worded(p)]:
        runs: list[tuple[object, Any]] = []
        _odf_runs(paragraph, (), runs)
        paragraphs.append(grouped(runs, "data"))
    return paragraphs


ODF_FILES = "an OpenDocument file (.odt, .odp, .ods)"
ODF_NS = "urn:oasis:names:tc:opendocument:xmlns:{}:1.0"


def _worded(paragraph: Any) -> bool:
    """Whether an ODF paragraph is text: not what a table's cell shows of its value where that
    is a number, a date, a truth value or a formula's result (written from the value); a
    comment in such a cell is."""
    node = paragraph.parentNode
    while getattr(node, "tagName", None) not in (None, "office:annotation"):
        if node.tagName in ("table:table-cell", "table:covered-table-cell"):
            cell, office = node.attributes, ODF_NS.format("office")
            if cell.get((office, "value-type"), "string") != "string" or (
                    ODF_NS.format("table"), "formula") in cell:
                return False
            cell.pop((office, "string-value"), None)  # its value: its paragraphs' text
            return True
        node = node.parentNode
    return True


ODF_SPACING = {"text:line-break": "\n", "text:tab": "\t", "text:s": " "}
# fields whose text the application writes (a date, a page number): kept as they are
ODF_FIELDS = {"text:date", "text:time", "text:page-number", "text:page-count", "text:chapter",
              "text:file-name", "text:sequence", "text:variable-get", "text:user-field-get"}


def teletype(element: Any) -> str:
    """The text inside an ODF element."""
    return "".join(str(n) if n.nodeType == n.TEXT_NODE else teletype(n)
                   for n in element.childNodes)


def _odf_replace(element: Any, text: str) -> None:
    """An ODF element in a paragraph replaced by a text node holding ``text``."""
    if text:
        node = imported("odf.element", ODF_FILES).Text(text)
        element.parentNode.insertBefore(node, element)
    element.parentNode.removeChild(element)


# what holds paragraphs of its own (found on their own) or no text to translate
ODF_APART = {"text:p", "text:h", "draw:frame", "text:note", "office:annotation",
             "text:tracked-changes", "text:bookmark-ref", "text:sequence-ref"}


def _odf_runs(element: Any, style: tuple[str, ...], out: list[tuple[object, Any]]) -> None:
    """The text nodes inside ``element``, each with the spans it is in (their names and
    attributes: its formatting), and its spacing elements, in order."""
    for child in element.childNodes:
        if child.nodeType == child.TEXT_NODE:
            out.append((style, child))
        elif child.tagName in ODF_SPACING:
            spaces = int(child.getAttribute("c") or 1) if child.tagName == "text:s" else 1
            out.append((style, Held(ODF_SPACING[child.tagName] * spaces,
                                     functools.partial(_odf_replace, child))))
        elif child.tagName in ODF_FIELDS:
            out.append((style, Held(teletype(child))))
        elif child.tagName in ODF_APART:
            out.append((style, APART))
        else:
            attributes = sorted((str(k), str(v)) for k, v in child.attributes.items())
            _odf_runs(child, (*style, f"{child.tagName}{attributes}"), out)
            if not child.childNodes:  # a bookmark, a tracked change's mark: where it was
                out.append((style, APART))
