"""A Markdown file's lines written with the translations of its texts (``markdown.py`` reads
them): each text's translation at its places, each part of it (up to a hard line break) wrapped
on the lines of its source's part, fewer where it is shorter, no line beginning a block (a list
item, a heading, a quote, an HTML block) of its own."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from transformer_mt.packages import imported
from transformer_mt.translate.documents import Document
from transformer_mt.translate.subtitles import wrap

Place = tuple[int, int, int]  # where a text stands: its line, its first and past its last column

# what would begin a block at a paragraph line's start: a list item, a heading, a quote, a
# setext heading's underline, a fence, a thematic break (escaped there)
BLOCK_START = re.compile(r"(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)|#{1,6}(?:[ \t]|$)|>|=+[ \t]*$|~~~"
                         r"|(?:[-*_][ \t]*){3,}$")
# a word, where lines may break around it: tags, destinations and code spans within; never
# before a tag (a line that begins with "</details>" would begin an HTML block)
WORD = re.compile(r"(?:<[^<>]*>|\]\([^()]*\)|`[^`]*`|\S|[ \t]+(?=<))+")
# a line's first tags (after its indentation) and the word after them
LEADING_TAGS = re.compile(r"( {0,3})((?:<[^<>]*>[ \t]*)+)(\S+)")


def writer(lines: list[str], ends: list[str],
            texts: list[tuple[Document[str], list[list[Place]], str]]
            ) -> Callable[[list[str]], bytes]:
    """The function that writes the file with each text's translation at its places, each
    part of it (up to a hard line break) on the lines of its source's part (``_edit``)."""
    def write(translations: list[str]) -> bytes:
        edits: dict[int, list[tuple[int, int, str]]] = {}
        gone: set[int] = set()
        for translation, (_, parts, kind) in zip(translations, texts, strict=True):
            shown = translation.split("\n") if len(parts) > 1 else [translation]
            if len(shown) != len(parts):  # (a hard break lost: all on the lines of the first)
                shown, parts = [" ".join(shown)], [[place for part in parts for place in part]]
            for part, places in zip(shown, parts, strict=True):
                _edit(lines, ends, _shown(part, [lines[n][:a] for n, a, _ in places], kind),
                      places, edits, gone)
        out = []
        for number, (line, end) in enumerate(zip(lines, ends, strict=True)):
            for a, b, new in sorted(edits.get(number, []), reverse=True):
                line = line[:a] + new + line[b:]
            out.append("" if number in gone else line + end)
        return "".join(out).encode("utf-8")

    return write


def _edit(lines: list[str], ends: list[str], shown: list[str], places: list[Place],
          edits: dict[int, list[tuple[int, int, str]]], gone: set[int]) -> None:
    """A text's lines ``shown`` at its ``places``: where it takes fewer lines than the
    source's, the lines after it go and its last line ends as the source's last did (a hard
    break's marker)."""
    if len(shown) < len(places):
        number, a, _ = places[len(shown) - 1]
        shown[-1] += lines[places[-1][0]][places[-1][2]:]
        gone.update(place[0] for place in places[len(shown):])
        places = [*places[:len(shown) - 1], (number, a, len(lines[number]))]
    elif len(shown) > len(places):  # (an HTML block's translation: more lines)
        shown = [*shown[:len(places) - 1], ends[places[-1][0]].join(shown[len(places) - 1:])]
    for (number, a, b), new in zip(places, shown, strict=True):
        edits.setdefault(number, []).append((a, b, new))


def _shown(translation: str, prefixes: list[str], kind: str) -> list[str]:
    """A text's translation on the lines it takes (what stands before it on each of its
    source's lines: ``prefixes``): a table cell's and an ATX heading's (``# Title``) on its
    line, an HTML block's as it is, a paragraph's (or setext heading's) wrapped on as many
    lines as its source's at most, none beginning a block."""
    if kind == "html":
        return translation.split("\n")
    if kind == "cell":
        return [translation]
    if kind == "atx":  # (a closing sequence of #s would end it)
        return [re.sub(r"(^|[ \t])(#+[ \t]*)$", r"\1\\\2", translation)]
    # (between Chinese characters a line break would show as a space: none there)
    shown = wrap(translation, len(prefixes), WORD, characters=False).split("\n")
    return [_safe(line, prefix) for line, prefix in zip(shown, prefixes, strict=False)]


def _safe(line: str, prefix: str) -> str:
    """A line of a paragraph's translation that begins no block (a list item, a heading, a
    quote, ...): its first character escaped where it would (``1\\.`` for a number); where,
    after ``prefix`` (its indentation, a list's or quote's marker), it would begin an HTML
    block (a tag of a block's name first, e.g. where the words before it in the source
    became part of a word after it), its first tags after its first word."""
    tags = LEADING_TAGS.match(line)
    if tags and _begins_html_block(prefix + line):
        line = tags[1] + tags[3] + tags[2].rstrip() + line[tags.end():]
    if not BLOCK_START.match(line):
        return line
    digits = len(line) - len(line.lstrip("0123456789"))
    return line[:digits] + "\\" + line[digits:]


@functools.cache
def _parser() -> Any:
    return imported("markdown_it", "Markdown (.md)").MarkdownIt("commonmark")


def _begins_html_block(line: str) -> bool:
    """Whether ``line`` would begin an HTML block where a paragraph could (CommonMark's
    seven kinds, as markdown-it reads them; in a list item or a quote too)."""
    return any(token.type == "html_block" for token in _parser().parse(line))
