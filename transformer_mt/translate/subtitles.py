"""Subtitles: SubRip (``.srt``), WebVTT (``.vtt``) and (Advanced) SubStation Alpha (``.ass``,
``.ssa``) files, read as cues whose texts are translated and written back with everything
else as it was (``files.py``).

A cue's lines are read as one text and its translation wrapped on as many lines again; its
tags (SubRip's ``<i>``, ``<b>``, ``<font>``, ``{\\an8}``; WebVTT's ``<i>``, ``<c.yellow>``,
``<v Anna>``, ``<00:00:01.500>``; SubStation Alpha's ``{\\i1}``, ``{\\pos(10,20)}``) are kept
around their words; a cue of two speakers (a line after the first begins with a dash:
"- Wohin?" / "- Nach Hause.") keeps its lines, each line's sentences translated apart after
its dash. A cue whose words end no sentence runs on into the next (up to :data:`MOST_JOINED`,
at most :data:`LONGEST_PAUSE_S` apart): the sentence is translated whole and shared out among
them along attention (:func:`split_tagged`), each showing a part of it, rather than each
fragment guessed alone.

SubRip files are read and written by the ``srt`` package (the ``files`` extra). The others are
read as lines, and only the lines (WebVTT) or the field (SubStation Alpha) of a cue's text are
replaced: a WebVTT file's header, cue identifiers, timings and settings (``align:start``),
``NOTE``, ``STYLE`` and ``REGION`` blocks, a SubStation Alpha file's sections, styles,
comments, drawings and every event's other fields, and the line endings, stay byte for byte
(a library that reads and writes them, ``pysubs2``, writes its own header and drops what it
does not model). WebVTT's text between tags is unescaped (``&amp;``) to be translated and
escaped again.
"""

from __future__ import annotations

import html
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from transformer_mt.data.tokenize import CJK_CHARACTER
from transformer_mt.errors import MTError
from transformer_mt.packages import imported
from transformer_mt.translate.documents import (
    Document,
    Links,
    split_flow,
)
from transformer_mt.translate.sentences import run_together, spacer


@dataclass
class Cues:
    """A subtitle file's cues: each one's text (its lines joined by a space; a dialogue's by
    line breaks, :func:`_cue_text`), the pauses between them (seconds; infinite where another
    speaker's cue follows), whether the text between tags is escaped (WebVTT's ``&amp;``),
    and how to write the file with each cue's text replaced (wrapped on as many lines)."""

    texts: list[str]
    pauses: list[float]
    escaped: bool
    write: Callable[[list[str]], str]


def read_srt(name: str, text: str) -> Cues:
    """A SubRip file's cues; a one-line :class:`MTError` for one the ``srt`` package cannot
    read."""
    srt = imported("srt", "subtitles (.srt)")
    try:
        subtitles = list(srt.parse(text))
    except (srt.SRTParseError, ValueError) as exc:
        raise MTError(f"'{name}' is not a SubRip (.srt) file: "
                      f"{str(exc).splitlines()[0]}") from None

    def write(texts: list[str]) -> str:
        out = [srt.Subtitle(s.index, s.start, s.end, wrap(t, s.content.count("\n") + 1),
                            s.proprietary) for s, t in zip(subtitles, texts, strict=True)]
        return str(srt.compose(out, reindex=False))

    return Cues([_cue_text(s.content.split("\n")) for s in subtitles],
                [(b.start - a.end).total_seconds() for a, b in itertools.pairwise(subtitles)],
                False, write)


# WebVTT: its signature line, a cue's timing line (its settings after it) and its timestamps
SIGNATURE = re.compile(r"WEBVTT(?:[ \t].*)?")
STAMP = r"(?:(\d+):)?([0-5]\d):([0-5]\d)\.(\d{3})"
TIMING = re.compile(rf"{STAMP}[ \t]+-->[ \t]+{STAMP}(?:[ \t].*)?")


def read_vtt(name: str, text: str) -> Cues:
    """A WebVTT file's cues (a cue: a block whose first or second line holds ``-->``, its
    text the lines after that; a ``NOTE``, ``STYLE`` or ``REGION`` block is none); writing
    replaces their text's lines alone. A cue does not run on into one another voice speaks
    (``<v Anna>``, ``<v Ben>``). A one-line :class:`MTError` for a file that does not
    begin with ``WEBVTT`` or a cue whose timing is not WebVTT's."""
    parts = re.split(r"(\r\n|\r|\n)", text)  # its line endings as they are
    lines, ends = parts[0::2], [*parts[1::2], ""]
    if not SIGNATURE.fullmatch(lines[0]):
        raise MTError(f"'{name}' is not a WebVTT (.vtt) file: it does not begin with WEBVTT")
    cues: list[tuple[int, int]] = []  # the lines of each cue's text: (first, past the last)
    times: list[tuple[float, float]] = []
    for a, b in _blocks(lines)[1:]:  # (the first: the header)
        timing = next((n for n in range(a, min(a + 2, b)) if "-->" in lines[n]), None)
        if timing is None or timing + 1 == b or (timing == a and lines[a].startswith("NOTE")):
            continue  # no cue (a comment, a style, a region), or one without text: as it is
        found = TIMING.fullmatch(lines[timing])
        if found is None:
            raise MTError(f"'{name}' is not a WebVTT (.vtt) file: line {timing + 1} "
                          f"({lines[timing][:60]!r}) is not a cue's timing")
        stamps = [int(g or 0) for g in found.groups()]
        times.append((_seconds(stamps[:4]), _seconds(stamps[4:])))
        cues.append((timing + 1, b))

    def write(texts: list[str]) -> str:
        out, at = [], 0
        for (a, b), translation in zip(cues, texts, strict=True):
            out += [line + end for line, end in zip(lines[at:a], ends[at:a], strict=True)]
            out.append(ends[a].join(wrap(translation, b - a).split("\n")) + ends[b - 1])
            at = b
        out += [line + end for line, end in zip(lines[at:], ends[at:], strict=True)]
        return "".join(out)

    texts = [_cue_text(lines[a:b]) for a, b in cues]
    voices = [VOICE.match(text) for text in texts]  # who speaks, where a cue says
    return Cues(texts, [b[0] - a[1] if not (v and w and v[1] != w[1]) else float("inf")
                        for (a, b), (v, w) in zip(itertools.pairwise(times),
                                                  itertools.pairwise(voices), strict=True)],
                True, write)


VOICE = re.compile(r"<v(?:\.[^\s>]*)?[ \t]+([^>]*)>")  # WebVTT's voice span: its speaker


def _blocks(lines: list[str]) -> list[tuple[int, int]]:
    """The blocks of lines, (first, past the last), as a browser reads them: a block ends at
    an empty line, or before a line holding ``-->`` that is not its timing (its first line,
    or its second after one without ``-->``; the header, the first block, has none)."""
    out: list[tuple[int, int]] = []
    start, arrow = -1, False  # the block's first line (-1: between blocks), a "-->" seen
    for n, line in enumerate(lines):
        if not line:
            out += [(start, n)] * (start >= 0)
            start = -1
        elif start < 0:
            start, arrow = n, "-->" in line
        elif "-->" in line:
            if start == 0 or arrow or n - start > 1:  # the next cue begins
                out.append((start, n))
                start = n
            arrow = True
    return out + [(start, len(lines))] * (start >= 0)


def _seconds(stamp: list[int]) -> float:
    """(hours, minutes, seconds, milliseconds) -> seconds."""
    hours, minutes, seconds, millis = stamp
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


# SubStation Alpha: a section's header, a time (hours:minutes:seconds.centiseconds), a vector
# drawing (an override block that turns drawing on: its "text" is shapes, not words)
SECTION = re.compile(r"\s*\[(.+)\]\s*")
CLOCK = re.compile(r"\s*(\d+):([0-5]\d):([0-5]\d)\.(\d{2})\s*")
DRAWING = re.compile(r"\{[^{}]*\\p[1-9]")


def read_ass(name: str, text: str) -> Cues:
    """An Advanced SubStation Alpha (``.ass``) or SubStation Alpha (``.ssa``) file's
    dialogue events in order (their text the ``Format`` line's last field; ``\\N`` breaks
    its lines, ``\\n`` and ``\\h`` read as spaces); writing replaces their text alone.
    Comments, drawings, styles and every other line stay as they were; an event runs on only
    into the next of its style and speaker.
    A one-line :class:`MTError` for a file without ``[Script Info]`` first or an event that
    is not as its ``Format`` line says."""
    kind = "an Advanced SubStation Alpha (.ass)" if name.lower().endswith(".ass") else \
        "a SubStation Alpha (.ssa)"
    parts = re.split(r"(\r\n|\r|\n)", text)
    lines, ends = parts[0::2], [*parts[1::2], ""]
    if lines[0].strip().lower() != "[script info]":
        raise MTError(f"'{name}' is not {kind} file: it does not begin with [Script Info]")
    fields, events = _events(lines, f"'{name}' is not {kind} file")

    def write(texts: list[str]) -> str:
        out = {n: ",".join(values[:-1]) + "," + "\\N".join(
            wrap(t, values[-1].count("\\N") + 1).split("\n"))
            for (n, values), t in zip(events, texts, strict=True)}
        return "".join((line[:line.index(":") + 1] + out[n] if n in out else line) + end
                       for n, (line, end) in enumerate(zip(lines, ends, strict=True)))

    def who(values: list[str]) -> list[str]:  # who says it, and how it is shown
        return [values[fields.index(k)].strip() for k in ("style", "name", "actor", "layer")
                if k in fields]

    return Cues(
        [_cue_text(re.sub(r"\\[nh]", " ", v[-1]).split("\\N")) for _, v in events],
        [_clock(b[fields.index("start")]) - _clock(a[fields.index("end")])
         if who(a) == who(b) else float("inf") for (_, a), (_, b) in itertools.pairwise(events)],
        False, write)


def _events(lines: list[str], wrong: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The ``[Events]`` section's fields (its ``Format`` line's, lower case) and its dialogue
    events but drawings: each one's line and its fields' values; ``wrong`` begins the one-line
    :class:`MTError` for an event that is not as the fields say."""
    section, fields = "", [""]
    events: list[tuple[int, list[str]]] = []
    for n, line in enumerate(lines):
        header = SECTION.fullmatch(line)
        key, _, value = line.partition(":")
        key = key.strip()
        if header or section != "events" or key not in ("Format", "Dialogue"):
            section = header.group(1).lower() if header else section
        elif key == "Format":
            fields = [field.strip().lower() for field in value.split(",")]
        elif fields[-1] != "text" or not {"start", "end"} <= set(fields):
            raise MTError(f"{wrong}: line {n + 1}: no Format line with Start, End and Text "
                          "last before its first event")
        else:
            values = value.split(",", len(fields) - 1)
            if len(values) != len(fields) or not all(
                    CLOCK.fullmatch(values[fields.index(k)]) for k in ("start", "end")):
                raise MTError(f"{wrong}: line {n + 1} is not an event as its Format line says "
                              f"({', '.join(fields)})")
            if not DRAWING.search(values[-1]):
                events.append((n, values))
    return fields, events


def _clock(time: str) -> float:
    """SubStation Alpha's H:MM:SS.cc -> seconds."""
    found = CLOCK.fullmatch(time)
    assert found is not None  # (checked when read)
    hours, minutes, seconds, centis = map(int, found.groups())
    return _seconds([hours, minutes, seconds, centis * 10])


READERS = {"srt": read_srt, "vtt": read_vtt, "ass": read_ass}  # by FORMATS' kind (files.py)


def _cue_text(lines: Sequence[str]) -> str:
    """A cue's lines as one text: joined by spaces, or, where a line after the first begins
    with a dash (two speakers, "- Wohin?" / "- Nach Hause."), each line apart: its sentences
    are translated apart and shown on the lines they were on."""
    lines = [text for text in (" ".join(line.split()) for line in lines) if text]
    if any(DASH.match(line) for line in lines[1:]):  # a dialogue
        return "\n".join(lines)
    return run_together(lines, lambda text: TAG.sub("", text))


# a subtitle's markup: HTML-like tags (<i>, <b>, <u>, <font color="...">, WebVTT's <c.name>,
# <v Anna>), WebVTT's timestamps (<00:00:01.500>) and override blocks ({\an8}; SubStation
# Alpha's {\i1}, {\pos(10,20)} and its comments in braces); and a speaker's dash that begins
# a line, after the tags there ("- Wohin?", "<i>-Nach Hause.</i>")
TAG = re.compile(r"(^(?:<[a-zA-Z][^<>]*>|\{[^{}]*\})*[-–—][ \t]*|</?[a-zA-Z][^<>]*>|<\d[\d:.]*>"
                 r"|\{[^{}]*\})", re.M)
DASH = re.compile(r"(?:<[a-zA-Z][^<>]*>|\{[^{}]*\})*[-–—]")  # a line that begins with a dash


def split_tagged(texts: Sequence[str], lang: str, escaped: bool = False
                 ) -> Document[list[str]]:
    """Texts with inline tags that run on (subtitles, a sentence across them; ``escaped``:
    the text between tags escaped as WebVTT's is, else an ``&`` is an ampersand): the text
    between the tags, a space between the texts, as one flow (:func:`split_flow`; the text
    outside tags ``bare``; each text that holds a word gets one of its sentence's
    translation), the tags kept as they are; rebuilding gives each text back."""
    split = [TAG.split(text) for text in texts]  # each: text, tag, text, ..., text
    pieces: list[str] = []
    bare: list[bool] = []
    for n, parts in enumerate(split):
        depth = [0, *itertools.accumulate(
            (tag[1:2].isalpha()) - (tag[:2] == "</") for tag in parts[1::2])]
        pieces += [html.unescape(part) if escaped else part for part in parts[0::2]]
        if n + 1 < len(split):  # between this text and the next
            pieces[-1] += spacer(TAG.sub("", texts[n]), TAG.sub("", texts[n + 1]))
        bare += [d <= 0 for d in depth]
    flow = split_flow(pieces, lang, bare=bare, closed=True)

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> list[str]:
        shared, out = iter(flow.rebuild_with(translations, links)), []
        for parts in split:
            parts = list(parts)
            parts[0::2] = [_escape(next(shared)) if escaped else next(shared)
                           for _ in parts[0::2]]
            out.append("".join(parts).strip(" "))  # (the space between texts; not a U+00A0)
        return out

    return Document(flow.sentences, flow.cuts, rebuild)


def _escape(text: str) -> str:
    """Text between WebVTT's tags: ``&``, ``<`` and ``>`` as character references."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’»)\]」』）]*$")  # a subtitle's last words end one
MOST_JOINED = 3  # subtitles read as one text at most (a sentence across them)
LONGEST_PAUSE_S = 2.0  # between subtitles that run on: after a longer one, another utterance


def running_on(texts: list[str], pauses: list[float]) -> list[tuple[int, int]]:
    """The subtitles that run on, (first, past the last): each with the next while its words
    end no sentence (its tags aside; one that ends "...", as a sentence breaks off, ends
    one) and the ``pauses`` between them (seconds) are :data:`LONGEST_PAUSE_S` at most (and
    they overlap by as much at most: a cue shown long before the one before it ends, or
    earlier in a file not in order of time, is another utterance), :data:`MOST_JOINED` at
    most; one without words (a "♪") on its own."""
    spans, start = [], 0
    for i, text in enumerate(texts):
        if not any(c.isalnum() for c in text):
            spans += [(start, i)] * (start < i) + [(i, i + 1)]
        elif SENTENCE_END.search(TAG.sub("", text).rstrip()) or i + 1 - start == MOST_JOINED \
                or i == len(pauses) or not abs(pauses[i]) <= LONGEST_PAUSE_S:
            spans.append((start, i + 1))
        else:
            continue
        start = i + 1
    return spans + [(start, len(texts))] * (start < len(texts))


# a word, where lines may break around it: text without spaces, tags (spaces in them) within
WORD = re.compile(rf"(?:{TAG.pattern[1:-1]}|\S)+")
PIECE = re.compile(rf"{TAG.pattern[1:-1]}|.", re.S)  # of a word: a tag, or a character


def wrap(text: str, lines: int, word: re.Pattern[str] = WORD, characters: bool = True) -> str:
    """``text`` on at most ``lines`` lines of about equal length (each as near its share as a
    word more or less makes it), broken between words (``word``: never in a tag, ``<v
    Anna>``), and where ``characters``, between Chinese or Japanese characters (before one:
    a line begins with no mark); a dialogue's text on its lines as they are
    (:func:`_cue_text`)."""
    if "\n" in text:
        return text
    units, out = _units(text, word, characters), []
    for n in range(lines, 0, -1):
        target = len(_joined(units)) / n  # each line's share of what is left
        line: list[tuple[str, bool]] = []
        while units and (not line or abs(len(_joined([*line, units[0]])) - target)
                         <= abs(len(_joined(line)) - target)):
            line.append(units.pop(0))
        out.append(_joined(line))
    return "\n".join(line for line in out if line) or text


def _units(text: str, word: re.Pattern[str], characters: bool) -> list[tuple[str, bool]]:
    """What :func:`wrap` keeps whole, each with whether a space stood before it: the words,
    and where ``characters``, each Chinese or Japanese character of them with what follows
    it up to the next."""
    units = []
    for m in word.finditer(text):
        unit, spaced = "", True
        for piece in PIECE.findall(m.group()) if characters else [m.group()]:
            if CJK_CHARACTER.fullmatch(piece) and TAG.sub("", unit):  # (after text)
                units.append((unit, spaced))
                unit, spaced = "", False
            unit += piece
        units.append((unit, spaced))
    return units


def _joined(units: Sequence[tuple[str, bool]]) -> str:
    return "".join((" " if spaced and i else "") + unit for i, (unit, spaced) in enumerate(units))
