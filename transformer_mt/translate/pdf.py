"""PDF documents (``.pdf``): each paragraph of each page (pdfminer.six's text boxes, cut
between lines that share no style, a heading and its paragraph, or where a line ends short of
the width and does not run on: a table's cells, a list's items) read as one text, its lines run
together where a sentence or a word runs on across them (``sentences.soft_breaks``:
"Fahr-\nrad" is "Fahrrad"), a line written right to left in the order it is read
(``pdf_shaping.logical``), glyphs as their ``ActualText`` says (``pdf_layout.py``), its
runs that look otherwise (a bold word, a link's coloured text) as Word's runs are
(``documents.split_flow``); the text inside figures (form XObjects)
read as the page's, each place a figure is drawn. Its translation is drawn where it stood
(``pdf_writing.py``: the page's own text and its figures' taken out, everything else as it
was: pictures, lines, fills, links).

Refused in one line, before anything is translated: a PDF that cannot be read or is
encrypted, one whose drawings unpack past :data:`MOST_UNPACKED`, a page turned or text
turned on it, invisible text (a scan's OCR layer, drawn under the picture it was read from),
a PDF that holds no text (a scan), a translation into a language written right to left
where the libraries that draw it are missing (``pdf_shaping.py``).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from transformer_mt.errors import MTError
from transformer_mt.packages import imported
from transformer_mt.translate.documents import Document, Held, split_flow
from transformer_mt.translate.language_tags import direction
from transformer_mt.translate.pdf_shaping import RIGHT_TO_LEFT, libraries, logical
from transformer_mt.translate.pdf_writing import Box, Look, drawn, forms, merged
from transformer_mt.translate.sentences import LIST_MARKER, soft_breaks

if TYPE_CHECKING:
    from transformer_mt.translate.pdf_layout import Marks

log = logging.getLogger(__name__)


def read_pdf(name: str, data: bytes, lang: str, target: str | None = None, held: Held = None
             ) -> tuple[list[Document[list[str]]], Callable[[list[list[str]]], bytes]]:
    """The texts of a PDF's paragraphs, each split into sentences, and how to write the PDF
    with their translations drawn in their places (the module's docstring), its language
    (the catalogue's ``/Lang``) ``target`` (where a memory gave them, ``held``: not said)."""
    for module in ("pdfminer", "pypdf", "reportlab", "fontTools"):
        imported(module, "PDF documents (.pdf)")
    if target and direction(target) == "rtl":  # (refused before translating, not after)
        libraries()
    with _quiet():
        _unpacked(name, data)
        pages, figures = _pages(name, data, lang)
    docs = [split_flow(box.pieces, lang, bare=[look == box.look for look in box.looks])
            for boxes in pages for box in boxes]

    def write(out: list[list[str]]) -> bytes:
        found = iter(out)
        with _quiet():
            try:
                return drawn(name, data, [[(box, next(found)) for box in boxes]
                                           for boxes in pages], target, figures)
            except MTError:
                raise
            except Exception as exc:  # (an object pypdf reads only to write it)
                raise _unread(name, exc) from None

    return docs, write


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """pypdf's and pdfminer.six's warnings (a header not at the start, a broken cross-reference
    table they mend) not shown: what cannot be read is said in one line."""
    loggers = [logging.getLogger(name) for name in ("pypdf", "pdfminer")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


MOST_UNPACKED = 200 * 2**20  # bytes the drawings of a PDF's pages and figures unpack to


def _unpacked(name: str, data: bytes) -> int:
    """How many bytes the drawings of the PDF's pages and their figures unpack to (pypdf's
    decoders stop a stream past 75 MB); a one-line :class:`MTError` past
    :data:`MOST_UNPACKED` (a bomb: refused before pdfminer.six, which sets no limit, reads
    it), for an encrypted PDF, or one pypdf cannot read."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise MTError(f"'{name}' is encrypted; not translated here")
        total, seen = 0, set[Any]()
        streams = [(None, page.get_contents()) for page in reader.pages]
        streams += [form for page in reader.pages for form in forms(page)]
        while streams:
            key, stream = streams.pop()
            if stream is None or (key is not None and key in seen):
                continue
            seen.add(key)
            total += len(stream.get_data())
            if total > MOST_UNPACKED:
                raise MTError(f"'{name}' unpacks to more than {MOST_UNPACKED >> 20} MB; not "
                              "translated here")
            streams += forms(stream)
    except MTError:
        raise
    except Exception as exc:  # (the parser's many errors: a file not read)
        raise _unread(name, exc) from None
    return total


def _unread(name: str, exc: Exception) -> MTError:
    why = " ".join(str(exc).split())[:200] or type(exc).__name__
    return MTError(f"'{name}' is not a PDF that can be read ({why})")


def _pages(name: str, data: bytes, lang: str) -> tuple[list[list[Box]], bool]:
    """Each page's paragraphs, and whether its figures' text is among them (not where a
    figure holds turned text: a watermark, say; then every figure keeps its text, said in a
    warning); a one-line :class:`MTError` for what is not translated here."""
    from transformer_mt.translate.pdf_layout import laid_out

    try:
        pages, marks = laid_out(data)
    except Exception as exc:  # (the parser's many errors: a file not read)
        raise _unread(name, exc) from None
    found = [_text_boxes(page) for page in pages]
    figures = all(_upright(box) for boxes in found for box, inside in boxes if inside)
    if not figures:
        log.warning("'%s': a figure (form XObject) holds turned text (a watermark?): the "
                    "text of its figures is kept as it was, not translated", name)
    out = []
    for number, (page, boxes) in enumerate(zip(pages, found, strict=True), start=1):
        kept = [box for box, inside in boxes if figures or not inside]
        lines = [line for item in kept for line in item if line.get_text().strip()]
        if not all(_upright(box) for box in kept):
            raise MTError(f"'{name}': page {number} is turned, or holds turned text; not "
                          "translated here")
        paragraphs = [box for item in kept
                      for box in _paragraphs([li for li in item if li.get_text().strip()],
                                             lang, _edges(lines, item), marks)]
        out.append(_widened(paragraphs, lines, page.bbox[2] - page.bbox[0]))
    if not any(out):
        raise MTError(f"'{name}' holds no text (pages scanned as pictures?): nothing to "
                      "translate")
    return out, figures


def _text_boxes(container: Any, inside: bool = False) -> list[tuple[Any, bool]]:
    """The text boxes of a page, and of the figures (form XObjects) it draws, in order, each
    with whether it lies in a figure."""
    from pdfminer.layout import LTFigure, LTTextBoxHorizontal

    return [found for item in container for found in (
        [(item, inside)] if isinstance(item, LTTextBoxHorizontal) else
        _text_boxes(item, True) if isinstance(item, LTFigure) else [])]


def _upright(box: Any) -> bool:
    """Whether every letter of a text box stands upright, unturned."""
    from pdfminer.layout import LTChar

    return all(c.upright and abs(c.matrix[1]) < 1e-6 for line in box for c in line
               if isinstance(c, LTChar))


# glyphs as text has them: bullets drawn in a symbol font (Word's, LibreOffice's: private-use
# characters), and ligatures (LaTeX's, typesetters': "ﬁnden" is "finden" to the model)
GLYPHS = str.maketrans({**dict.fromkeys("\uf0b7\uf0a7\uf06c\uf0a8\uf076\uf0d8", "•"),
                        "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi",
                        "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st"})


def _edges(lines: list[Any], box: Any) -> tuple[float, float]:
    """Where the page's lines above and below ``box`` (beside none of it) begin and end."""
    beside = [line for line in lines if line.x0 < box.x1 and line.x1 > box.x0]
    return min(line.x0 for line in beside), max(line.x1 for line in beside)


def _paragraphs(lines: list[Any], lang: str, edges: tuple[float, float],
                marks: Marks) -> list[Box]:
    """A text box's lines as paragraphs: lines that have a style in common (a font, size and
    colour some of their letters have) and run on into each other
    (``sentences.soft_breaks``, or :func:`_full` against ``edges``, where the page's text
    beside the box begins and ends), read as one text; lines in a language written right to
    left read so; letters as ``marks`` say (``pdf_layout.laid_out``)."""
    rtl = direction(lang) == "rtl"
    runs = [_runs(line, rtl, marks) for line in lines]
    texts = ["".join(text for text, _ in run) for run in runs]
    whole = "\n".join(texts)
    soft = {whole.find("\n", b.start): b for b in soft_breaks(whole, lang)}
    ends = list(itertools.accumulate(len(t) + 1 for t in texts))  # (each line break, + 1)
    joins = [("" if _full(lines, i, edges, rtl) and not LIST_MARKER.match(texts[i + 1])
              else None)
             if e - 1 not in soft else "" if not soft[e - 1].joined else
             "-" if whole[soft[e - 1].start] == "-" else "+" for i, e in enumerate(ends[:-1])]
    styles = [_style(line) for line in lines]
    out: list[Box] = []
    first = 0
    for i in range(len(lines)):
        if (i + 1 == len(lines) or joins[i] is None
                or not styles[i + 1][1] & styles[i][1]):
            out.append(_box(lines[first:i + 1], runs[first:i + 1], joins[first:i],
                            styles[first][0], rtl))
            first = i + 1
    return out


def _runs(line: Any, rtl: bool, marks: Marks) -> list[tuple[str, Look]]:
    """A line's text in runs of letters that look alike and lie under the same link (a space
    looks as the letter before it), in the order it is read (``pdf_shaping.logical``:
    letters written right to left, drawn from the left), its end's spaces left out; letters
    as an ``ActualText`` says them (``marks``), Word's symbol-font bullets as "•", ligatures
    as their letters (:data:`GLYPHS`)."""
    from pdfminer.layout import LTChar

    out: list[tuple[str, Look]] = []
    look: Look | None = None
    for c in _spaced(list(line)):
        look = (_look(c.fontname, c.graphicstate.ncolor, marks.link.get(id(c)))
                if isinstance(c, LTChar) else look)
        text = marks.said.get(id(c), c.get_text()).translate(GLYPHS)
        if len(text) > 1 and RIGHT_TO_LEFT.search(text):  # (a glyph of letters read from
            text = text[::-1]  # the right, as lam-alef's: turned around with the line, whole)
        if out and out[-1][1] == look:
            out[-1] = (out[-1][0] + text, out[-1][1])
        elif look is not None:
            out.append((text, look))
    xs = [c.x0 for c in line if isinstance(c, LTChar)]
    if sum(b > a for a, b in itertools.pairwise(xs)) >= sum(b < a for a, b in
                                                            itertools.pairwise(xs)):
        out = logical(_stripped(out), rtl)  # (drawn from the left, as most PDFs are)
    return _stripped(out)


def _spaced(items: list[Any]) -> list[Any]:
    """A line's letters and the spaces pdfminer.six put between them, but for a space after
    a letter of no width (a vowel sign or an accent drawn on the letter before it, as
    LibreOffice draws Devanagari's) where the next letter begins no further from the
    letters before it than a word's margin (LAParams' 0.1 of a letter's size)."""
    from pdfminer.layout import LTChar

    out, right = [], float("-inf")
    for i, item in enumerate(items):
        after = next((c for c in items[i + 1:] if isinstance(c, LTChar)), None)
        if (not isinstance(item, LTChar) and item.get_text() == " " and after is not None
                and after.x0 - right <= 0.1 * max(after.width, after.height)):
            continue
        out.append(item)
        right = max(right, item.x1) if isinstance(item, LTChar) else right
    return out


def _stripped(runs: list[tuple[str, Look]]) -> list[tuple[str, Look]]:
    """``runs`` without the spaces and line break at their end."""
    while runs and not runs[-1][0].rstrip():
        runs.pop()
    return [*runs[:-1], (runs[-1][0].rstrip(), runs[-1][1])] if runs else runs


def _look(font: str, colour: Any, link: int | None = None) -> Look:
    return (re.search(r"(?i)(bold|black|heavy)", font) is not None,
            re.search(r"(?i)(italic|oblique)", font) is not None, colour, link)


def _full(lines: list[Any], i: int, edges: tuple[float, float], rtl: bool) -> bool:
    """Whether line ``i`` was ended by the width (the next line's first word would not have
    fit after it before ``edges``' end, where the page's text ends, or its beginning where
    it is read from the right: typeset text runs on), not by its paragraph's end: a line of
    4 words or more (of fewer, a table's cell or a list's)."""
    if len(lines[i].get_text().split()) < 4:
        return False
    after = lines[i + 1]
    spaces = [c for c in after if c.get_text().isspace() and hasattr(c, "x0")]
    if rtl:
        word = after.x1 - (spaces[-1].x1 if spaces else after.x0)
        return lines[i].x0 - word - 0.5 * after.height <= edges[0]
    word = (spaces[0].x0 if spaces else after.x1) - after.x0
    return lines[i].x1 + word + 0.5 * after.height >= edges[1]


def _style(line: Any) -> tuple[tuple[float, Look], set[str]]:
    """How most of a line's letters look, and their size (the first's, where as many look
    otherwise), and each look and size its letters have (as they read: a colour may be a
    list), of which a paragraph's lines share one: a bold word or a link that begins a line
    begins no paragraph."""
    from pdfminer.layout import LTChar

    chars = [c for c in line if isinstance(c, LTChar)]
    styles = [(round(c.size, 1), _look(c.fontname, c.graphicstate.ncolor))
              for c in [c for c in chars if c.get_text().isalnum()] or chars]
    seen = [repr((size, (*look[:2], _seen(look[2])))) for size, look in styles]
    counts: dict[str, int] = {}
    for key in seen:
        counts[key] = counts.get(key, 0) + 1
    return styles[max(range(len(styles)), key=lambda i: counts[seen[i]])], set(counts)


def _seen(colour: Any) -> Any:
    """A fill colour as it is seen, in RGB to two places: grey and CMYK as the RGB they
    look like (the same black written ``0 g``, ``0 0 0 rg`` or ``0 0 0 1 k``), anything
    else (a pattern's) as it is."""
    values = list(colour) if isinstance(colour, (list, tuple)) else [colour]
    if not all(isinstance(v, (int, float)) for v in values) or len(values) not in (1, 3, 4):
        return colour
    if len(values) == 4:  # (CMYK, without a colour profile)
        values = [(1 - v) * (1 - values[3]) for v in values[:3]]
    return tuple(round(float(v), 2) for v in (values * 3 if len(values) == 1 else values))


def _box(lines: list[Any], runs: list[list[tuple[str, Look]]], joins: list[str | None],
         style: tuple[float, Look], rtl: bool) -> Box:
    """The paragraph of ``lines`` (their ``runs``), each line break between them a space
    (``joins`` ""), none ("+"), or none and the hyphen before it gone ("-"); its own look
    and size ``style``'s (its first letter's: the text outside markup, a bold word, say);
    beginning where its first line begins, or (``rtl``: lines that end on the left) where
    its leftmost line does."""
    from pdfminer.layout import LTChar

    pieces = [text for text, _ in runs[0]]
    looks = [look for _, look in runs[0]]
    for run, join in zip(runs[1:], joins, strict=True):
        pieces[-1] = (pieces[-1][:-1] if join == "-" else pieces[-1]) + ("" if join else " ")
        start = [(text.lstrip() if i == 0 else text, look) for i, (text, look) in
                 enumerate(run)]
        pieces += [text for text, _ in start]
        looks += [look for _, look in start]
    kept = merged([(p, lk) for p, lk in zip(pieces, looks, strict=True) if p])  # (lines')
    first = next(c for c in lines[0] if isinstance(c, LTChar))
    leading = ((lines[0].y1 - lines[-1].y1) / (len(lines) - 1) if len(lines) > 1
               else style[0] * 1.2)
    left = min(line.x0 for line in lines)
    width = max(line.x1 for line in lines) - left
    return Box([p for p, _ in kept], [lk for _, lk in kept], style[1],
               left if rtl else first.matrix[4],
               first.matrix[5], len(lines), leading, style[0], width,
               max(line.x1 for line in lines))


def _widened(boxes: list[Box], lines: list[Any], page_width: float) -> list[Box]:
    """``boxes``, a paragraph of one line (a heading, a caption, a table's cell) as wide as
    its translation may go: to the nearest line to its right beside it, or the page's right
    margin (as wide as its left one); a paragraph of more lines as wide as it was."""
    margin = min((line.x0 for line in lines), default=0.0)
    for box in boxes:
        if box.lines > 1:
            continue
        right = box.left + box.width
        beside = [line.x0 for line in lines if line.x0 >= right - 1 and
                  line.y0 < box.baseline + box.size and line.y1 > box.baseline]
        box.width = max(right, min(beside, default=page_width - margin) - box.size) - box.left
    return boxes


