"""Excel workbooks (``.xlsx``, ``files.py``): the text of every cell that holds a string (the
workbook's shared strings, a cell's inline string), of every comment, chart and text box, read
and written as the workbook's XML with lxml (the ``files`` extra). A string's runs of
rich text are a paragraph's (``office.grouped``: a bold word in a sentence translated with it).
Numbers, dates, formulas and their cached results, styles, sheet names, charts' numbers and
every other part stay byte for byte."""

from __future__ import annotations

import re
from typing import Any

from transformer_mt.translate.office import (
    CHARTS,
    DRAWING,
    Group,
    chart_runs,
    drawing_groups,
    grouped,
)

MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
# the parts that hold strings to translate, by the end of their content type: shared strings,
# worksheets (their cells' inline strings), comments, charts, drawings (text boxes)
PARTS = ("spreadsheetml.sharedStrings+xml", "spreadsheetml.worksheet+xml",
         "spreadsheetml.comments+xml", "drawingml.chart+xml", "drawing+xml")
TYPES = '{http://schemas.openxmlformats.org/package/2006/content-types}Override'
SPACE = "{http://www.w3.org/XML/1998/namespace}space"


class _Text:
    """A string's text element (``t``) whose text is replaced where it is."""

    def __init__(self, t: Any) -> None:
        self.t = t

    @property
    def text(self) -> str:
        return str(self.t.text or "")

    @text.setter
    def text(self, value: str) -> None:  # a control character XML cannot hold as Excel writes it
        self.t.text = re.sub(r"[\x00-\x08\x0b-\x1f]", lambda c: f"_x{ord(c[0]):04X}_", value)
        if value != value.strip():
            self.t.set(SPACE, "preserve")


def parse_parts(read: Any) -> dict[str, Any]:
    """The workbook's parts that hold strings (``PARTS``, as its ``[Content_Types].xml``
    names them), parsed as XML that expands no entity and reads nothing from elsewhere
    (``read``: a member's bytes, by its name)."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    types = etree.fromstring(read("[Content_Types].xml"), parser)
    names = [o.get("PartName", "").lstrip("/") for o in types.iter(TYPES)
             if o.get("ContentType", "").endswith(PARTS)]
    return {name: etree.fromstring(read(name), parser) for name in names}


def sheet_runs(parts: dict[str, Any]) -> list[list[Group]]:
    """Each string's (``si``, a shared string; ``is``, a cell's own; a comment's ``text``) runs
    in groups formatted alike: a plain string is one run, rich text a run each (its
    formatting, ``rPr``, told apart); phonetic readings (``rPh``) are not text. Then charts'
    titles and names and text boxes' paragraphs, as a presentation's (``office.py``)."""
    from lxml import etree

    strings: list[list[Group]] = []
    for root in parts.values():
        for string in root.iter(f"{MAIN}si", f"{MAIN}is", f"{MAIN}text"):
            runs: list[tuple[object, Any]] = []
            for child in string:
                t = child if child.tag == f"{MAIN}t" else child.find(f"{MAIN}t") \
                    if child.tag == f"{MAIN}r" else None
                if t is not None:
                    style = child.find(f"{MAIN}rPr") if child is not t else None
                    runs.append(("" if style is None else etree.tostring(style), _Text(t)))
            strings.append(grouped(runs, "text"))
    return strings + chart_runs([root for root in parts.values() if root.tag == f"{CHARTS}"
                                 "chartSpace"]) + [
        drawing_groups(p) for root in parts.values() if root.tag.endswith("}wsDr")
        for p in root.iter(f"{DRAWING}p")]


def written(parts: dict[str, Any]) -> dict[str, bytes]:
    """Each part as XML again, declared as Excel declares it."""
    from lxml import etree

    return {name: etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)
            for name, root in parts.items()}
