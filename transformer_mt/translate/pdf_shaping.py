"""Letters a PDF's translation cannot draw one by one (``pdf_writing.py``): scripts whose
letters join or change shape by their neighbours (Arabic, Devanagari and the other Indic
scripts) shaped by HarfBuzz, and each line that holds letters written right to left drawn in
the order it is seen, by Unicode's bidirectional algorithm: an Arabic or a Hebrew paragraph
from the right, a number or a Latin name inside it from the left, its brackets mirrored.

This module is the adapter to what it uses of two libraries beyond their documented calls:
ReportLab's ``shapeStr`` (HarfBuzz through uharfbuzz; a shaped text's glyph advances) and the
levels python-bidi's compiled algorithm resolves, as it says them for debugging (checked
against its reordering; tested with ReportLab 4.4 and 5.1, uharfbuzz 0.57, python-bidi 0.6).
Where they are missing or have changed, such a translation is refused in one line, as are
scripts written without spaces between words (Thai, Lao, Khmer, Myanmar, Tibetan: where
their lines may break is not known here)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import cache
from itertools import groupby
from typing import Any, TypeVar

from transformer_mt.errors import MTError
from transformer_mt.packages import imported

T = TypeVar("T")
# Hebrew, Arabic, Syriac, Thaana, N'Ko and the Arabic presentation forms: written right to left
RIGHT_TO_LEFT = re.compile(r"[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufeff]")
# and the Indic scripts (Devanagari to Sinhala): letters HarfBuzz shapes
SHAPED = re.compile(r"[\u0590-\u08ff\u0900-\u0dff\ufb1d-\ufdff\ufe70-\ufeff]")
UNBROKEN = [(0x0E00, 0x0EFF, "Thai or Lao"), (0x0F00, 0x0FFF, "Tibetan"),
            (0x1000, 0x109F, "Myanmar"), (0x1780, 0x17FF, "Khmer")]
PRIVATE = re.compile(r"[\ue000-\uf8ff]")  # (a glyph ReportLab gave no letter of its own)
EXPLICIT = re.compile(r"[\u202a-\u202e\u2066-\u2069]")  # (embeddings, overrides, isolates)
PRESENTATION = re.compile(r"[\ufb1d-\ufdff\ufe70-\ufeff]+")  # (letters' joined forms)


def check(name: str, text: str) -> None:
    """A one-line :class:`MTError` where ``text`` cannot be drawn: a script written without
    spaces between words, or letters to shape without the libraries that shape them."""
    for letter in text:
        for low, high, what in UNBROKEN:
            if low <= ord(letter) <= high:
                raise MTError(f"'{name}': the translation holds {letter!r} ({what}), written "
                              "without spaces between words: where its lines may break is "
                              "not known here; translate the document the PDF was made from")
    if SHAPED.search(text):
        libraries()


def libraries() -> None:
    """The libraries shaping needs, or a one-line error naming what to install."""
    what = "PDFs in scripts whose letters are shaped or written right to left"
    imported("uharfbuzz", what)
    imported("bidi", what)
    from reportlab.pdfbase import ttfonts

    if not hasattr(ttfonts, "shapeStr"):
        raise MTError(f"{what} need ReportLab 4.4 or later: pip install 'reportlab>=4.4'")


def right_to_left(text: str) -> bool:
    """Whether a paragraph reads from the right: its first letter that has a direction."""
    if not RIGHT_TO_LEFT.search(text):
        return False
    from bidi import get_base_level

    return bool(get_base_level(text))


def visual(runs: Sequence[tuple[str, T]], rtl: bool) -> list[tuple[str, T, bool]]:
    """A line's ``runs`` (text, and how it looks; in the order they are read) in the order
    they are drawn, from the left, cut where the direction changes: each with whether it
    reads from the right (drawn by :func:`shaped` with its letters turned around); the
    explicit embeddings, overrides and isolates left out (not followed)."""
    runs = [(EXPLICIT.sub("", t), look) for t, look in runs]  # (drawn as nothing anyway)
    text = "".join(t for t, _ in runs)
    if not rtl and not RIGHT_TO_LEFT.search(text):
        return [(t, look, False) for t, look in runs]
    levels, pieces, at = _levels(text, rtl), [], 0
    for t, look in runs:
        for level, group in groupby(zip(t, levels[at:at + len(t)], strict=True),
                                    key=lambda pair: pair[1]):
            pieces.append((("".join(c for c, _ in group), look), level))
        at += len(t)
    out = []
    for (t, look), level in _turned(pieces):
        # (a bracket read from the right a piece of its own: drawn mirrored, said as it is)
        parts = [t] if level % 2 == 0 else [p for p in _mirrored().split(t) if p][::-1]
        out += [(part, look, level % 2 == 1) for part in parts]
    return out


@cache
def _mirrored() -> re.Pattern[str]:
    """The letters drawn mirrored where they are read from the right (brackets, « »)."""
    from bidi.mirror import MIRRORED

    return re.compile("([" + re.escape("".join(MIRRORED)) + "])")


def _turned(items: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
    """Items with their levels in the order they are seen (rule L2): from the highest level
    down to the lowest odd one, every stretch at that level or above turned around."""
    levels = [level for _, level in items]
    for level in range(max(levels, default=0), (min(levels, default=0) | 1) - 1, -1):
        out: list[tuple[Any, int]] = []
        stretch: list[tuple[Any, int]] = []
        for item in items:
            if item[1] >= level:
                stretch.append(item)
            else:
                out += [*stretch[::-1], item]
                stretch = []
        items = out + stretch[::-1]
    return items


def _levels(text: str, rtl: bool) -> list[int]:
    """Each letter's embedding level (even: left to right) as python-bidi's compiled
    algorithm (Unicode 15's, brackets paired) resolves them: what it says of the text it
    reorders (``debug``: a level a byte), checked against its reordering."""
    from bidi import get_display

    base = "R" if rtl else "L"
    said = re.search(r"levels: \[(.*?)\]", str(get_display(text, base_dir=base, debug=True)),
                     re.DOTALL)
    per_byte = [int(n) for n in re.findall(r"Level\(\s*(\d+),?\s*\)", said.group(1))
                ] if said else []
    levels, at = [], 0
    for letter in text:
        levels.append(per_byte[at] if at < len(per_byte) else -1)
        at += len(letter.encode())
    ends = len(text) - len(text.rstrip())  # (rule L1: a line's trailing spaces)
    levels[len(text) - ends:] = [int(rtl)] * ends
    if (len(per_byte) != at or "".join(c for c, _ in _turned(list(zip(text, levels,
                                                                       strict=True))))
            != get_display(text, base_dir=base)):
        raise MTError("python-bidi does not say its levels as 0.6 did: "
                      "pip install 'python-bidi>=0.6,<0.7'")
    return levels


def logical(runs: list[tuple[str, T]], rtl: bool) -> list[tuple[str, T]]:
    """A line's ``runs`` as a PDF draws them, from the left, in the order they are read:
    :func:`visual` undone (the levels resolved on the drawn order are those of the text for
    a line of one direction and the numbers and names inside it), the pieces read from the
    right turned around (a bracket's glyph says the bracket it is where it is read, as
    LibreOffice and Word write it and :func:`actual_text` says it); Arabic's joined forms
    (presentation forms) as the letters they are."""
    if not RIGHT_TO_LEFT.search("".join(t for t, _ in runs)):
        return runs
    libraries()
    return [(PRESENTATION.sub(lambda m: unicodedata.normalize("NFKC", m.group()),
                              text[::-1] if back else text), look)
            for text, look, back in visual(runs, rtl)]


def _turned_around(text: str) -> str:
    """``text`` read from the other end, its brackets mirrored (rule L4)."""
    from bidi.mirror import MIRRORED

    return "".join(MIRRORED.get(c, c) for c in reversed(text))


def shaped(text: str, backwards: bool, font: str, size: float) -> tuple[Any, float, bool]:
    """A piece of a line as it is drawn in ``font`` at ``size``: HarfBuzz's glyphs where it
    holds letters to shape (in the order they are seen), else its letters (turned around and
    mirrored where ``backwards``); how wide it is; and whether its glyphs do not read back
    as its text (a conjunct, a vowel sign drawn before its consonant, a mirrored bracket:
    the text is said beside them)."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    if SHAPED.search(text):
        from reportlab.pdfbase.ttfonts import ShapedStr, shapeStr

        glyphs = shapeStr(text, font, size)
        if isinstance(glyphs, ShapedStr):
            wide = sum(g.x_advance for g in glyphs.__shapeData__) * size / 1000
            return glyphs, wide, bool(PRIVATE.search(glyphs)) or (
                not backwards and str(glyphs) != text)
        return glyphs, float(stringWidth(glyphs, font, size)), False
    drawn = _turned_around(text) if backwards else text
    return drawn, float(stringWidth(drawn, font, size)), drawn != (text[::-1] if backwards
                                                                   else text)


def actual_text(text: str) -> str:
    """The marked content that says ``text`` is what the glyphs drawn inside it read as."""
    return f"/Span <</ActualText <FEFF{text.encode('utf-16-be').hex().upper()}>>> BDC"
