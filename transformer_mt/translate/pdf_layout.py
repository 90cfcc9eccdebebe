"""A PDF's pages as pdfminer.six lays them out (``pdf.py`` reads their paragraphs), with what
its own ``extract_pages`` does not do: which letters lie under a link (their translation
is where the link goes: ``pdf_writing.py``), what a marked-content sequence's
``ActualText`` says its glyphs are (LibreOffice's Devanagari conjuncts, this project's own
shaped words: their glyphs alone read as "र्क" for "क", or as private-use codes), and a page
that holds letters written right to left laid out line by line from the left (LibreOffice
and Word draw such a line a direction's run at a time, a number inside it after the words
on either side, and pdfminer.six makes lines of letters drawn one after the other).

Only pdfminer.six's public, composable API (an aggregator without layout, its ``begin_tag``
and ``end_tag`` hooks, ``LTPage.analyze``)."""

from __future__ import annotations

import io
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from pdfminer.converter import PDFPageAggregator
from pdfminer.layout import LAParams, LTChar, LTFigure, LTPage
from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager, PDFStackT
from pdfminer.pdfpage import PDFPage
from pdfminer.pdftypes import list_value, resolve1
from pdfminer.psparser import PSLiteral
from pdfminer.utils import decode_text

from transformer_mt.translate.pdf_shaping import RIGHT_TO_LEFT


class _Aggregator(PDFPageAggregator):
    """pdfminer.six's aggregator, keeping what each ``ActualText`` says its letters are: the
    first letter drawn inside it says all of it, the others nothing (by ``id``)."""

    def __init__(self, resources: PDFResourceManager) -> None:
        super().__init__(resources, laparams=None)  # (laid out by :func:`laid_out`)
        self.said: dict[int, str] = {}
        self.open: list[tuple[str | None, Any, int]] = []

    def begin_tag(self, tag: PSLiteral, props: PDFStackT | None = None) -> None:
        text = props.get("ActualText") if isinstance(props, dict) else None
        said = decode_text(text) if isinstance(text, bytes) else text
        self.open.append((said if isinstance(said, str) else None, self.cur_item,
                          len(self.cur_item)))
        super().begin_tag(tag, props)

    def end_tag(self) -> None:
        said, item, start = self.open.pop() if self.open else (None, (), 0)
        if said is not None:  # (a tagged PDF marks every paragraph: most say nothing)
            letters = [c for c in list(item)[start:] if isinstance(c, LTChar)]
            if letters:
                self.said.update(dict.fromkeys((id(c) for c in letters[1:]), ""))
                self.said[id(letters[0])] = said
        super().end_tag()


@dataclass
class Marks:
    """What a page's letters are beyond their glyphs (by ``id``): what an ``ActualText``
    says they are, where it says otherwise, and the link annotation they lie under (its
    place in its page's ``/Annots``)."""

    said: dict[int, str] = field(default_factory=dict)
    link: dict[int, int] = field(default_factory=dict)


def laid_out(data: bytes) -> tuple[list[LTPage], Marks]:
    """Each page's letters in lines and text boxes (the text inside figures too), and what
    they are beyond their glyphs (the module's docstring)."""
    resources = PDFResourceManager()
    device = _Aggregator(resources)
    interpreter = PDFPageInterpreter(resources, device)
    out, marks = [], Marks(device.said)
    for page in PDFPage.get_pages(io.BytesIO(data)):
        interpreter.process_page(page)
        drawn = device.get_result()
        marks.link.update(_linked(page, drawn))
        letters = "".join(c.get_text() for c in drawn if isinstance(c, LTChar))
        if RIGHT_TO_LEFT.search(letters):
            drawn = _from_the_left(drawn, marks.said)
        drawn.analyze(LAParams(all_texts=True))  # (the text inside figures in boxes too)
        out.append(drawn)
    return out, marks


def _from_the_left(drawn: LTPage, said: dict[int, str]) -> LTPage:
    """A page's letters line by line from the left (by baseline, then where each begins),
    each vowel sign or other mark (Arabic's harakat, Hebrew's points: of no width) said as
    part of the letter it is drawn on, not laid out itself (between two letters drawn from
    the left, pdfminer.six would begin a new line or word after it): the letter drawn next
    (a cluster written right to left is drawn from the left mark first, as HarfBuzz orders
    it), else the one before, where the mark stands over it; a letter's marks in Unicode's
    canonical order."""
    items: list[Any] = list(drawn)
    following: list[Any] = [None] * len(items)  # (each item's next one that is no mark)
    for i in range(len(items) - 2, -1, -1):
        following[i] = following[i + 1] if _mark(items[i + 1]) else items[i + 1]
    kept: list[Any] = []
    for item, after in zip(items, following, strict=True):
        near = [c for c in (after, kept[-1] if kept else None)
                if _mark(item) and isinstance(c, LTChar) and not _mark(c) and _over(item, c)]
        if near:
            letters = said.get(id(near[0]), near[0].get_text()) + said.get(id(item),
                                                                          item.get_text())
            said[id(near[0])] = unicodedata.normalize("NFC", letters)
        else:
            kept.append(item)
    ordered = LTPage(drawn.pageid, drawn.bbox, drawn.rotate)
    for item in sorted(kept, key=lambda o: (-round(o.matrix[5], 1), o.x0)
                       if isinstance(o, LTChar) else (float("-inf"), 0.0)):
        ordered.add(item)
    return ordered


def _over(mark: Any, letter: LTChar) -> bool:
    """Whether ``mark`` (a letter) stands over ``letter``: on its baseline, within its width
    (a fifth of its size either side)."""
    slack = 0.2 * letter.size
    return (abs(letter.matrix[5] - mark.matrix[5]) < 1
            and letter.x0 - slack <= mark.x0 <= letter.x1 + slack)


def _mark(item: Any) -> bool:
    """Whether ``item`` is a letter that is a mark drawn on another (a vowel sign, a point)."""
    text = str(item.get_text()) if isinstance(item, LTChar) else ""
    return len(text) == 1 and unicodedata.category(text) in ("Mn", "Me")


def _linked(page: PDFPage, drawn: Any) -> dict[int, int]:
    """The letters of a page (and of its figures) under one of its link annotations, each
    with the annotation's place in ``/Annots`` (its rectangle in the page's coordinates, as
    pdfminer.six's: from the media box's corner)."""
    rects = []
    for i, annot in enumerate(list_value(resolve1(page.annots)) if page.annots else []):
        annot = resolve1(annot)
        rect = resolve1(annot.get("Rect")) if isinstance(annot, dict) else None
        if getattr(resolve1(annot.get("Subtype")) if isinstance(annot, dict) else None,
                   "name", None) == "Link" and isinstance(rect, list) and len(rect) == 4:
            x0, y0, x1, y1 = (float(resolve1(v)) for v in rect)
            left, bottom = page.mediabox[0], page.mediabox[1]
            rects.append((i, min(x0, x1) - left, min(y0, y1) - bottom, max(x0, x1) - left,
                          max(y0, y1) - bottom))
    out: dict[int, int] = {}
    stack = list(drawn) if rects else []
    while stack:
        item = stack.pop()
        if isinstance(item, LTChar):
            x, y = (item.x0 + item.x1) / 2, (item.y0 + item.y1) / 2
            found = next((i for i, *r in rects if r[0] - 1 <= x <= r[2] + 1
                          and r[1] - 1 <= y <= r[3] + 1), None)
            if found is not None:
                out[id(item)] = found
        elif isinstance(item, LTFigure):
            stack += list(item)
    return out
