"""Drawing a PDF's translated paragraphs (``pdf.py`` reads them): the page's own text taken
out of its drawing (pypdf), each paragraph's translation drawn where it stood in PDF's
standard Helvetica at its size and line spacing, wrapped to its width, smaller where it needs
more lines (down to :data:`SMALLEST`), each run in its look (bold, oblique, colour); a
translation with a letter the standard fonts lack (outside Windows-1252: Greek, Cyrillic,
Chinese) refused in one line: translate the document the PDF was made from."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from transformer_mt.errors import MTError

SMALLEST = 0.6  # of a box's size, where its translation needs more lines than the box has
SHOW_TEXT = {b"Tj", b"TJ", b"'", b'"'}  # the operators that draw text
FONTS = {(False, False): "Helvetica", (True, False): "Helvetica-Bold",
         (False, True): "Helvetica-Oblique", (True, True): "Helvetica-BoldOblique"}


# how a run of letters looks: (bold, oblique, its fill colour as pdfminer.six reads it)
Look = tuple[bool, bool, Any]


@dataclass
class Box:
    """A paragraph of a page's text box (its lines of one style that run on into each other):
    its text in runs that look alike (a bold word, a link's colour) and how each looks, where
    its first line's baseline begins (PDF points, from the page's lower left corner), how
    many lines it had and how far apart, its first letter's size, and how wide its
    translation may be."""

    pieces: list[str]
    looks: list[Look]
    look: Look  # the paragraph's own (its text outside markup)
    left: float
    baseline: float
    lines: int
    leading: float
    size: float
    width: float


def drawn(name: str, data: bytes, pages: list[list[tuple[Box, list[str]]]],
           target: str | None) -> bytes:
    """The PDF with its pages' text taken out and each box's translation drawn in its place,
    saying it is in ``target``."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import DictionaryObject, NameObject, TextStringObject

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    if target:
        writer.root_object[NameObject("/Lang")] = TextStringObject(target)
    for number, (page, boxes) in enumerate(zip(writer.pages, pages, strict=True), start=1):
        content = page.get_contents()
        if content is None:
            continue
        content.operations = _without_text(name, number, content.operations)
        content.isolate_graphics_state()
        x0, y0 = float(page.mediabox.left), float(page.mediabox.bottom)
        drawn = b"".join(_drawing(name, box, text, x0, y0) for box, text in boxes)
        content.set_data(content.get_data() + b"\n" + drawn)
        page.replace_contents(content)
        resources = page.setdefault(NameObject("/Resources"), DictionaryObject()).get_object()
        fonts = resources.setdefault(NameObject("/Font"), DictionaryObject()).get_object()
        for n, font in enumerate(FONTS.values()):
            fonts[NameObject(f"/MTF{n}")] = DictionaryObject({
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject(f"/{font}"),
                NameObject("/Encoding"): NameObject("/WinAnsiEncoding")})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


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


def _drawing(name: str, box: Box, pieces: list[str], x0: float, y0: float) -> bytes:
    """The drawing of ``pieces`` (each looking as the box's piece it translates) in ``box``'s
    place: wrapped to its width, at the largest size down to :data:`SMALLEST` of the box's at
    which it takes no more lines than the box had."""
    for scale in (1.0, 0.9, 0.8, 0.7, SMALLEST):
        lines = _wrapped(list(zip(pieces, box.looks, strict=True)), box.size * scale, box.width)
        if len(lines) * scale <= box.lines + 0.25:
            break
    ops = [f"BT {box.leading * scale:.2f} TL {box.left + x0:.2f} {box.baseline + y0:.2f} Td"]
    now: Look | None = None
    for i, line in enumerate(lines):
        ops.append("T*" if i else "")
        for text, look in line:
            if look != now:
                ops.append(f"/MTF{list(FONTS).index(look[:2])} {box.size * scale:.2f} Tf "
                           f"{_colour(look[2])}")
                now = look
            ops.append(f"({_literal(name, text)}) Tj")
    return (" ".join(op for op in ops if op) + " ET\n").encode("latin-1")


def _wrapped(runs: list[tuple[str, Look]], size: float, width: float
             ) -> list[list[tuple[str, Look]]]:
    """``runs`` of text wrapped at spaces to ``width`` points, each line in runs (a word
    whose letters look otherwise in part is not cut; a space looks as the letter before)."""
    from pdfminer.fontmetrics import FONT_METRICS

    words: list[list[tuple[str, Look]]] = [[]]
    for text, look in runs:
        for part in re.split(r"(\s+)", text):
            if part.isspace() and words[-1]:
                words.append([])
            elif part and not part.isspace():
                words[-1].append((part, look))
    words = [word for word in words if word]

    def points(word: list[tuple[str, Look]]) -> float:
        return sum(FONT_METRICS[FONTS[look[:2]]][1].get(c, 556) for text, look in word
                   for c in text) * size / 1000

    lines: list[list[list[tuple[str, Look]]]] = [[]]
    used = 0.0
    for word in words:
        wide = points(word) + (points([(" ", word[0][1])]) if lines[-1] else 0)
        if lines[-1] and used + wide > width:
            lines.append([])
            wide, used = points(word), 0.0
        lines[-1].append(word)
        used += wide
    return [merged([part for n, word in enumerate(line) for part in
                     ([(" ", line[n - 1][-1][1])] if n else []) + word]) for line in lines]


def merged(runs: list[tuple[str, Look]]) -> list[tuple[str, Look]]:
    """``runs`` with each run that looks as the one before joined to it."""
    out: list[tuple[str, Look]] = []
    for text, look in runs:
        if out and out[-1][1] == look:
            out[-1] = (out[-1][0] + text, look)
        else:
            out.append((text, look))
    return out


def _colour(colour: Any) -> str:
    """A fill colour's operator: grey, RGB or CMYK, as the box's first letter had it."""
    values = list(colour) if isinstance(colour, (list, tuple)) else [colour]
    if all(isinstance(v, (int, float)) for v in values) and len(values) in (1, 3, 4):
        return " ".join(f"{float(v):.3f}" for v in values) + {1: " g", 3: " rg", 4: " k"}[
            len(values)]
    return "0 g"


def _literal(name: str, line: str) -> str:
    """``line`` as a PDF string's text in Windows-1252 (WinAnsi), or a one-line error."""
    try:
        line.encode("cp1252")
    except UnicodeEncodeError as exc:
        raise MTError(f"'{name}': the translation holds {line[exc.start]!r}, which PDF's "
                      "standard fonts cannot show; translate the document the PDF was made "
                      "from") from None
    raw = line.encode("cp1252").decode("latin-1")
    return raw.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
