"""Quotation marks that we place, written as the target language writes them.

Where the model does not write a quotation's marks itself, we put them back: a mark its source
side reads only as bytes (``marks.py``: kept apart, placed by attention) and the quotes around a
quoted sentence (``long_sentences.quoted``). They came back as the source wrote them, German's
„…“ in an English translation ("„A dog runs.“"). So each is written as the target language
writes a mark of its role, opening or closing, of a quotation or of one inside it: CLDR's
delimiters (``quotation_marks.json``, read from ICU by ``scripts/quotation_marks.py``):
German's „…“ and ‚…‘ in English are “…” and ‘…’, in French «…». A mark's role is the one the
source language gives it, or, where that does not say (a mark it does not use, Swedish's ”
that both opens and closes), where it stands: after a space or at the start, before a word,
it opens. Straight quotes (" and ') are any language's, and stay; so do all marks where either
language is not in the table.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path

# opening before closing, a quotation's before those of one inside it
OPEN, CLOSE, INNER_OPEN, INNER_CLOSE = range(4)
INNER = frozenset("‘’‚‛‹›『』")  # marks of a quotation inside one, where a language says none
OPENERS = frozenset("([{<«‹“‘„‚「『")  # (after these a mark opens, as after a space)


@functools.cache
def _table() -> dict[str, str]:
    """Each language's four marks (OPEN, CLOSE, INNER_OPEN, INNER_CLOSE) by its ISO code."""
    path = Path(__file__).with_name("quotation_marks.json")
    return {k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items()
            if len(v) == 4}


MARKS = frozenset(c for marks in _table().values() for c in marks) | INNER


def delimiters(language: str) -> str | None:
    """``language``'s four quotation marks (``de``: „“‚‘), or None where CLDR has none
    (a region's code is read as its language's: ``de-CH``, ``pt_BR``)."""
    return _table().get(language.replace("_", "-").split("-")[0].lower())


def in_style(text: str, at: Iterable[int], source: str, target: str) -> str:
    """``text`` (in the ``source`` language) with each quotation mark at the offsets ``at``
    written as the ``target`` language writes a mark of its role; the same length."""
    theirs, ours = delimiters(source), delimiters(target)
    if ours is None or theirs is None or theirs == ours:
        return text
    out = list(text)
    for i in at:
        if text[i] in MARKS:
            out[i] = ours[_role(text, i, theirs)]
    return "".join(out)


def _role(text: str, i: int, theirs: str) -> int:
    """The role of the mark ``text[i]`` in a language whose marks are ``theirs``."""
    mark = text[i]
    roles = [role for role, m in enumerate(theirs) if m == mark]
    opening = {role % 2 == 0 for role in roles}
    opens = opening.pop() if len(opening) == 1 else (
        (i == 0 or text[i - 1].isspace() or text[i - 1] in OPENERS)
        and i + 1 < len(text) and not text[i + 1].isspace())
    inner = min((role // 2 for role in roles if (role % 2 == 0) == opens),
                default=int(mark in INNER))
    return 2 * inner + (OPEN if opens else CLOSE)
