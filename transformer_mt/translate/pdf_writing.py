"""Drawing a PDF's translated paragraphs (``pdf.py`` reads them): the page's own text and its
figures' taken out of their drawing (pypdf), each paragraph's translation drawn where it stood
(ReportLab, on a page laid over it) in PDF's standard Helvetica, or an installed font that has
its letters (``pdf_fonts.py``), at its size and line spacing, wrapped to its width (at spaces,
and between the letters of Chinese and Japanese), smaller where it needs more lines (down to
:data:`SMALLEST`), each run in its look (bold, oblique, colour)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transformer_mt.errors import MTError
from transformer_mt.translate.language_tags import direction
from transformer_mt.translate.pdf_fonts import Face, faces
from transformer_mt.translate.pdf_shaping import actual_text, right_to_left, shaped, visual

SMALLEST = 0.6  # of a box's size, where its translation needs more lines than the box has
SHOW_TEXT = {b"Tj", b"TJ", b"'", b'"'}  # the operators that draw text
SLANT = 0.21  # of a slanted face's height, as its top leans right (12 degrees)
# where a line may end though no space stands: after each of these letters (CJK ideographs,
# kana, hangul, full-width forms), a closing mark after one staying with it
BETWEEN_LETTERS = re.compile(r"([\u2e80-\u2fff\u3040-\u9fff\uac00-\ud7af\uf900-\ufaff"
                             r"\uff01-\uffef][\u3000-\u303f\uff01\uff0c\uff0e\uff1a\uff1b"
                             r"\uff1f]*)")


# how a run of letters looks: (bold, oblique, its fill colour as pdfminer.six reads it, the
# link annotation it lies under: its place in the page's /Annots, where the link follows it)
Look = tuple[bool, bool, Any, int | None]
Rect = tuple[float, float, float, float]  # (left, bottom, right, top)


@dataclass
class Box:
    """A paragraph of a page's text box (its lines of one style that run on into each other):
    its text in runs that look alike (a bold word, a link's colour) and how each looks, where
    its first line's baseline begins (PDF points, from the page's lower left corner), how
    many lines it had and how far apart, its first letter's size, how wide its translation
    may be, and where its widest line ended (a translation read from the right ends there)."""

    pieces: list[str]
    looks: list[Look]
    look: Look  # the paragraph's own (its text outside markup)
    left: float
    baseline: float
    lines: int
    leading: float
    size: float
    width: float
    right: float


def drawn(name: str, data: bytes, pages: list[list[tuple[Box, list[str]]]],
          target: str | None, figures: bool = True) -> bytes:
    """The PDF with its pages' text (and its figures', where ``figures``) taken out and each
    box's translation drawn in its place, saying it is in ``target``."""
    from pypdf import PdfReader, PdfWriter, Transformation
    from pypdf.generic import NameObject, TextStringObject

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    if target:
        writer.root_object[NameObject("/Lang")] = TextStringObject(target)
    with faces(name, "".join(t for boxes in pages for _, text in boxes for t in text),
               target) as looks:
        rtl = direction(target) == "rtl" if target else None
        seen: set[Any] = set()  # (the figures already without their text)
        for number, (page, boxes) in enumerate(zip(writer.pages, pages, strict=True), start=1):
            content = page.get_contents()
            if content is None:
                continue
            content.operations = _without_text(name, number, content.operations)
            page.replace_contents(content)
            if figures:
                _figures_without_text(name, number, page, writer, seen)
            box, placed = page.mediabox, dict[int, list[Rect]]()
            over = _over(float(box.width), float(box.height), boxes, looks, rtl, placed)
            page.merge_transformed_page(PdfReader(io.BytesIO(over)).pages[0],
                                        Transformation().translate(float(box.left),
                                                                   float(box.bottom)))
            _links_moved(page, placed, float(box.left), float(box.bottom))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _over(width: float, height: float, boxes: list[tuple[Box, list[str]]],
          looks: dict[tuple[bool, bool], Face], rtl: bool | None,
          placed: dict[int, list[Rect]]) -> bytes:
    """A page of ``width`` by ``height`` points holding only each box's translation, drawn
    where the box stood (its coordinates from the page's lower left corner); where the
    translation of each link's letters is drawn, in ``placed``."""
    from reportlab.pdfgen.canvas import Canvas

    out = io.BytesIO()
    canvas = Canvas(out, pagesize=(width, height), pageCompression=1)
    for box, text in boxes:
        _draw(canvas, box, text, looks, rtl, placed)
    canvas.showPage()
    canvas.save()
    return out.getvalue()


def forms(holder: Any) -> list[tuple[Any, Any]]:
    """The figures (form XObjects) a page or figure draws: (their object number, the form)."""
    resources = holder.get("/Resources")
    xobjects = resources.get_object().get("/XObject") if resources is not None else None
    found = xobjects.get_object().values() if xobjects is not None else []
    return [(getattr(x, "idnum", None), x.get_object()) for x in found
            if x.get_object().get("/Subtype") == "/Form"]


def _figures_without_text(name: str, number: int, holder: Any, writer: Any,
                          seen: set[Any]) -> None:
    """The text taken out of the figures ``holder`` draws, and of theirs (their text is read
    and drawn as the page's), each figure once."""
    from pypdf.generic import ContentStream, NameObject

    for key, form in forms(holder):
        if key is not None and key in seen:
            continue
        seen.add(key)
        content = ContentStream(form, writer)  # (read through its filters)
        content.operations = _without_text(name, number, content.operations)
        if "/Filter" in form:  # written back deflated (pypdf encodes with no other filter)
            form[NameObject("/Filter")] = NameObject("/FlateDecode")
            form.pop("/DecodeParms", None)
        form.set_data(content.get_data())
        _figures_without_text(name, number, form, writer, seen)


def _without_text(name: str, number: int, operations: list[Any]) -> list[Any]:
    """A page's drawing without its text; a one-line :class:`MTError` where text is drawn
    invisible (render mode 3: a scan's OCR layer) or as a clip (7)."""
    mode, saved, kept = 0, [], []  # (the render mode is the graphics state's: q saves it)
    for operands, operator in operations:
        if operator == b"Tr":
            mode = int(operands[0])
        elif operator == b"q":
            saved.append(mode)
        elif operator == b"Q" and saved:
            mode = saved.pop()
        if operator in SHOW_TEXT:
            if mode in (3, 7):
                raise MTError(f"'{name}': page {number} holds invisible text (a scan's OCR "
                              "layer, say); not translated here")
            continue
        kept.append((operands, operator))
    return kept


def _draw(canvas: Any, box: Box, pieces: list[str], looks: dict[tuple[bool, bool], Face],
          rtl: bool | None, placed: dict[int, list[Rect]]) -> None:
    """``pieces`` (each looking as the box's piece it translates) drawn in ``box``'s place:
    wrapped to its width, at the largest size down to :data:`SMALLEST` of the box's at which
    it takes no more lines than the box had; from the right where ``rtl`` (None: where its
    first letter with a direction reads so), each line in the order it is seen."""
    if rtl is None:
        rtl = right_to_left("".join(pieces))

    def points(text: str, look: Look, size: float) -> float:
        return shaped(text, False, looks[look[:2]].name, size)[1]

    for scale in (1.0, 0.9, 0.8, 0.7, SMALLEST):
        size = box.size * scale
        lines = _wrapped(list(zip(pieces, box.looks, strict=True)), size, box.width, points)
        if len(lines) * scale <= box.lines + 0.25:
            break
    for i, line in enumerate(lines):
        y = box.baseline - i * box.leading * scale
        drawn = [(text, look, backwards, shaped(text, backwards, looks[look[:2]].name, size))
                 for text, look, backwards in visual(line, rtl)]
        x = max(box.left, box.right - sum(d[3][1] for d in drawn)) if rtl else box.left
        for text, look, backwards, (glyphs, wide, unread) in drawn:
            if unread:  # (what the glyphs read as, for copying and searching)
                canvas.addLiteral(actual_text(text))
            _piece(canvas, x, y, glyphs, looks[look[:2]], size, look[2])
            if unread:
                canvas.addLiteral("EMC")
            if look[3] is not None and text.strip():  # (a link's: from descenders to capitals)
                space = shaped(" ", False, looks[look[:2]].name, size)[1]
                lead, trail = len(text) - len(text.lstrip()), len(text) - len(text.rstrip())
                lead, trail = (trail, lead) if backwards else (lead, trail)
                placed.setdefault(look[3], []).append((x + lead * space, y - 0.25 * size,
                                                       x + wide - trail * space,
                                                       y + 0.8 * size))
            x += wide


def _links_moved(page: Any, placed: dict[int, list[Rect]], left: float, bottom: float
                 ) -> None:
    """Each link annotation of ``page`` whose letters' translation was drawn (``placed``,
    from the media box's corner at ``left``, ``bottom``) over it: its rectangle around it
    all, each line's part a quadrilateral of its own (``/QuadPoints``)."""
    from pypdf.generic import ArrayObject, FloatObject, NameObject

    annots = page.get("/Annots")
    annots = annots.get_object() if annots is not None else []
    for index, rects in placed.items():
        if index >= len(annots):
            continue
        annot = annots[index].get_object()
        parts = [(x0 + left, y0 + bottom, x1 + left, y1 + bottom) for x0, y0, x1, y1 in rects]
        around = (min(p[0] for p in parts), min(p[1] for p in parts),
                  max(p[2] for p in parts), max(p[3] for p in parts))
        annot[NameObject("/Rect")] = ArrayObject(FloatObject(round(v, 3)) for v in around)
        annot[NameObject("/QuadPoints")] = ArrayObject(
            FloatObject(round(v, 3)) for x0, y0, x1, y1 in parts
            for v in (x0, y1, x1, y1, x0, y0, x1, y0))


def _piece(canvas: Any, x: float, y: float, glyphs: str, face: Face, size: float,
           colour: Any) -> None:
    """A piece of a line drawn from ``x`` on the baseline ``y`` in ``face``, its colour."""
    canvas.saveState()
    _colour(canvas, colour)
    if face.slanted:  # leaning right about the baseline
        canvas.transform(1, 0, SLANT, 1, -SLANT * y, 0)
    drawing = canvas.beginText(x, y)
    drawing.setFont(face.name, size)
    if face.thicker:  # filled and outlined
        canvas.setLineWidth(size * 0.03)
        drawing.setTextRenderMode(2)
    drawing.textOut(glyphs)
    canvas.drawText(drawing)
    canvas.restoreState()


def _wrapped(runs: list[tuple[str, Look]], size: float, width: float,
             points: Callable[[str, Look, float], float]) -> list[list[tuple[str, Look]]]:
    """``runs`` of text wrapped to ``width`` points (``points``: how wide a text is) at
    spaces and between CJK letters, each line in runs (a word whose letters look otherwise in
    part is not cut; a space looks as the letter before)."""
    words: list[tuple[list[tuple[str, Look]], bool]] = []  # and whether a space stood before
    space, joins = False, False
    for text, look in runs:
        for part in BETWEEN_LETTERS.split(text):
            for bit in re.split(r"(\s+)", part):
                if bit.isspace():
                    space = True
                elif bit:
                    alone = bool(BETWEEN_LETTERS.fullmatch(bit))
                    if words and joins and not space and not alone:
                        words[-1][0].append((bit, look))
                    else:
                        words.append(([(bit, look)], space and bool(words)))
                    space, joins = False, not alone
    lines: list[list[tuple[str, Look]]] = [[]]
    used = 0.0
    for word, spaced in words:
        gap = [(" ", lines[-1][-1][1])] if spaced and lines[-1] else []
        wide = sum(points(t, lk, size) for t, lk in gap + word)
        if lines[-1] and used + wide > width:
            lines.append([])
            gap, wide = [], sum(points(t, lk, size) for t, lk in word)
            used = 0.0
        lines[-1] += gap + word
        used += wide
    return [merged(line) for line in lines]


def merged(runs: list[tuple[str, Look]]) -> list[tuple[str, Look]]:
    """``runs`` with each run that looks as the one before joined to it."""
    out: list[tuple[str, Look]] = []
    for text, look in runs:
        if out and out[-1][1] == look:
            out[-1] = (out[-1][0] + text, look)
        else:
            out.append((text, look))
    return out


def _colour(canvas: Any, colour: Any) -> None:
    """The fill (and outline) colour the box's first letter had: grey, RGB or CMYK."""
    values = list(colour) if isinstance(colour, (list, tuple)) else [colour]
    if not (all(isinstance(v, (int, float)) for v in values) and len(values) in (1, 3, 4)):
        values = [0.0]
    if len(values) == 1:
        canvas.setFillGray(values[0])
        canvas.setStrokeGray(values[0])
    elif len(values) == 3:
        canvas.setFillColorRGB(*values)
        canvas.setStrokeColorRGB(*values)
    else:
        canvas.setFillColorCMYK(*values)
        canvas.setStrokeColorCMYK(*values)
