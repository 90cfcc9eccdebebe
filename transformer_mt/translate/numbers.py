"""Kept numbers written as the target language writes them (``decode.localize_numbers``).

A number kept as it is (``glossary.KEPT``) came out with the source language's separators:
German's "1,75 m" and "1.000 Menschen" in English as "1,75 m" and "1.000 people", which an
English reader reads as 175 and as one. So a kept number's decimal and thousands separators
are the target language's (CLDR's, through Babel, for Latin digits: "1.75 m", "1,000 people";
French's thousands a narrow no-break space): the source's number read by the source language's
rules (German "1.000" is a thousand, "1,000" one), written by the target's. What those rules do
not read (a time "14:30", a date "3.5.2021", an address "192.168.0.1", digits grouped in other
than threes) stays as it is, as does a number without separators ("2021"); a range's ends each
("5,5-6,5" -> "5.5-6.5"). Where either language is unknown to Babel, nothing changes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

SPACES = " \u00a0\u202f"  # digits grouped by a space are grouped in any language (SI's)


@functools.cache
def separators(language: str) -> tuple[str, str] | None:
    """(decimal, group) separators of ``language`` (an ISO code) for Latin digits, or None
    where Babel does not know it."""
    from babel import Locale, UnknownLocaleError
    from babel.numbers import get_decimal_symbol, get_group_symbol

    try:
        locale = Locale.parse(language)
    except (UnknownLocaleError, ValueError):
        return None
    return (get_decimal_symbol(locale, numbering_system="latn"),
            get_group_symbol(locale, numbering_system="latn"))


@functools.cache
def writer(source: str, target: str) -> Callable[[str], str] | None:
    """A function that writes a kept number of ``source`` as ``target`` writes it, or None
    where both write numbers alike (or either is unknown)."""
    ours, theirs = separators(source), separators(target)
    if ours is None or theirs is None or ours == theirs:
        return None
    decimal, group = (re.escape(s) for s in ours)
    spaces = f"[{SPACES}]"
    read = re.compile(  # a number by the source's rules: (integer part, fraction or None)
        rf"(\d{{1,3}}(?:(?:{group}|{spaces})\d{{3}})+|\d+)(?:{decimal}(\d+))?")

    def piece(text: str) -> str:
        m = read.fullmatch(text)
        if m is None or (m.group(2) is None and not re.search(rf"{group}|{spaces}", text)):
            return text
        whole = re.sub(rf"{group}|{spaces}", theirs[1], m.group(1))
        return whole if m.group(2) is None else f"{whole}{theirs[0]}{m.group(2)}"

    def write(number: str) -> str:
        if ":" in number or "/" in number:  # a time, a date, a fraction
            return number
        return re.sub(r"[^-–]+", lambda m: piece(m.group()), number)

    return write


def written(kept: re.Match[str], numbers: Callable[[str], str] | None) -> str:
    """A span kept (a match of ``glossary.KEPT``), its number (its group ``number``) as
    ``numbers`` writes it."""
    if numbers is None or kept.group("number") is None:
        return kept.group()
    start, end = (at - kept.start() for at in kept.span("number"))
    text = kept.group()
    return text[:start] + numbers(text[start:end]) + text[end:]


SEPARATOR = re.compile(rf"(?<=\d)[.,{SPACES}](?=\d)")


def bare_number(text: str) -> str:
    """``text`` with each separator between digits one mark: a number as either language
    writes it ("12,50 €" and "12.50 €"), for finding a kept span in a translation."""
    return SEPARATOR.sub("·", text)
