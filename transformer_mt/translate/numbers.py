"""Kept numbers written as the target language writes them (``decode.localize_numbers``).

A number kept as it is (``glossary.KEPT``) came out with the source language's separators:
German's "1,75 m" and "1.000 Menschen" in English as "1,75 m" and "1.000 people", which an
English reader reads as 175 and as one. So a kept number's decimal and thousands separators
are the target language's (CLDR's, through Babel, for Latin digits: "1.75 m", "1,000 people";
French's thousands a narrow no-break space): the source's number read by the source language's
rules (German "1.000" is a thousand, "1,000" one), written by the target's. What those rules do
not read (a time "14:30", a date "3.5.2021", an address "192.168.0.1", digits grouped in other
than threes) stays as it is, as does a number without separators ("2021"); a range's ends each
("5,5-6,5" -> "5.5-6.5"). A currency's sign and a percent sign go where the target's
pattern puts them, with its space or none: German's "12,50 €" and "50 %" in English are
"€12.50" and "50%", English's "-$5" in German "-5 $", French's "50 %" in Turkish "%50".
Where either language is unknown to Babel, nothing changes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from babel import Locale

SPACES = " \u00a0\u202f"  # digits grouped by a space are grouped in any language (SI's)
# a currency's sign (Unicode's Sc: $, ¢, £, ¥, €, ₹, ...)
CURRENCY = ("$\u00a2-\u00a5\u058f\u060b\u07fe\u07ff\u09f2\u09f3\u09fb\u0af1\u0bf9\u0e3f"
            "\u17db\u20a0-\u20c0\ua838\ufdfc\ufe69\uff04\uffe0\uffe1\uffe5\uffe6")
MINUS = "-+\u2212\u2013"  # a number's sign where it starts a word: -, +, −, –
# what stands before a kept span's number (a currency's sign, a space, its sign) and after it
BEFORE = re.compile(rf"(?P<minus>[{MINUS}]?)(?:(?P<sign>[{CURRENCY}])(?P<space>[{SPACES}]?))?"
                    rf"(?P<after>[{MINUS}]?)")
AFTER = re.compile(rf"(?P<space>[{SPACES}]?)(?P<sign>[{CURRENCY}%])")
BIDI = "\u200e\u200f\u061c"  # (Arabic's patterns mark their direction)
Affixes = dict[str, tuple[tuple[str, str], ...]]
Writer = Callable[[re.Match[str]], str]  # a kept span (a match of glossary.KEPT) as written


@functools.cache
def separators(language: str) -> tuple[str, str] | None:
    """(decimal, group) separators of ``language`` (an ISO code) for Latin digits, or None
    where Babel does not know it."""
    from babel.numbers import get_decimal_symbol, get_group_symbol

    locale = _locale(language)
    if locale is None:
        return None
    return (get_decimal_symbol(locale, numbering_system="latn"),
            get_group_symbol(locale, numbering_system="latn"))


@functools.cache
def affixes(language: str) -> Affixes | None:
    """What stands before and after a number with a currency's sign ("¤") and with a percent
    sign in ``language`` (CLDR's patterns' (prefix, suffix), a positive number's and a
    negative's: English's "¤" and "-¤" before, German's " ¤" after), or None where Babel does
    not know it."""
    locale = _locale(language)
    if locale is None:
        return None
    return {sign: tuple((before.strip(BIDI), after.strip(BIDI))
                        for before, after in zip(pattern.prefix, pattern.suffix, strict=True))
            for sign, pattern in (("¤", locale.currency_formats["standard"]),
                                  ("%", locale.percent_formats[None]))}


def _locale(language: str) -> Locale | None:
    from babel import Locale, UnknownLocaleError

    try:
        return Locale.parse(language)
    except (UnknownLocaleError, ValueError):
        return None


@functools.cache
def writer(source: str, target: str) -> Writer | None:
    """A function that writes a span kept in ``source`` (a match of ``glossary.KEPT``) as
    ``target`` writes it, or None where both write numbers alike (or either is unknown)."""
    ours, theirs = separators(source), separators(target)
    places = affixes(target)
    if ours is None or theirs is None or places is None or (
            ours == theirs and affixes(source) == places):
        return None
    number = _number_writer(ours, theirs)

    def write(kept: re.Match[str]) -> str:
        text = kept.group()
        if kept.group("number") is None:
            return text
        start, end = (at - kept.start() for at in kept.span("number"))
        followed = kept.string[kept.end():kept.end() + 1]
        return placed(text[:start], number(text[start:end]), text[end:], followed, places)

    return write


def _number_writer(ours: tuple[str, str], theirs: tuple[str, str]) -> Callable[[str], str]:
    """A function that writes a number read by the separators ``ours`` with ``theirs``."""
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


def placed(before: str, number: str, after: str, followed: str, places: Affixes) -> str:
    """A kept number with what stood ``before`` and ``after`` it (``followed`` by that
    character), its currency's or percent sign where ``places`` (:func:`affixes`) puts it,
    spaced where the pattern spaces it (with the source's space, else a plain one); as it was
    where it has neither sign, or one on both sides ("$5 €"), a percent sign on a word
    ("50%ige"), two signs of its own ("-€-5"), or a pattern with no minus for it."""
    lead, tail = BEFORE.fullmatch(before), AFTER.fullmatch(after)
    if lead is None or (after and tail is None) or bool(lead["sign"]) == bool(tail) or (
            tail and tail["sign"] == "%" and followed.isalpha()) or (
            lead["minus"] and lead["after"]):
        return before + number + after
    sign, space = (lead["sign"], lead["space"]) if tail is None else (tail["sign"],
                                                                     tail["space"])
    minus = lead["minus"] or lead["after"]
    affix = places["%" if sign == "%" else "¤"][bool(minus)]
    if minus and "-" not in "".join(affix):
        return before + number + after

    def filled(text: str) -> str:
        text = text.replace("¤", sign).replace("%", sign).replace("-", minus)
        return re.sub(f"[{SPACES}]", space or " ", text)

    return filled(affix[0]) + number + filled(affix[1])


def written(kept: re.Match[str], write: Writer | None) -> str:
    """A span kept (a match of ``glossary.KEPT``) as ``write`` (:func:`writer`) writes it."""
    return kept.group() if write is None else write(kept)


SEPARATOR = re.compile(rf"(?<=\d)[.,{SPACES}](?=\d)")


SIGN_FIRST = re.compile(rf"([{MINUS}]?)([{CURRENCY}%])[{SPACES}]?([{MINUS}]?)(?=\d)")
SIGN_LAST = re.compile(rf"(?<=\d)[{SPACES}]([{CURRENCY}%])$")


def bare_number(text: str) -> str:
    """``text`` with each separator between digits one mark, a currency's or percent sign
    before it after it, a space beside it none: a number as either language writes it
    ("12,50 €", "12.50 €" and "€12.50"), for finding a kept span in a translation."""
    text = SEPARATOR.sub("·", text)
    first = SIGN_FIRST.match(text)
    if first is not None and AFTER.fullmatch(text[-1]) is None:  # (not "$5 €")
        text = first[1] + first[3] + text[first.end():] + first[2]
    return SIGN_LAST.sub(r"\1", text)
