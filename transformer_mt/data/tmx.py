"""Translation memories (TMX) as a parallel corpus: ``{tmx: FILE}``.

TMX, the Translation Memory eXchange format (1.1 to 1.4b), is what translation tools (Trados,
memoQ, OmegaT, Phrase) export a memory as, and one of the forms OPUS's corpora come in. It holds
translation units (``<tu>``), each a segment (``<seg>``) in each of its languages (``<tuv
xml:lang="de-DE">``; ``lang=`` before 1.4). A pair is a unit's segment in ``data.src_lang``
and its segment in ``data.tgt_lang``: a regional tag ("de-DE", "en_US") stands for its
language ("de"), a tag that is the language exactly first ("zh-TW" for ``zh-TW``). A unit
without both, or with either segment empty (a memory's untranslated units), is no pair.

Inline codes (``<bpt>``, ``<ept>``, ``<it>``, ``<ph>``, ``<ut>``: the markup of the document the
segment came from, "<b>", "{1}") are left out and the text round them kept, as is a
highlight's (``<hi>``); a segment's line breaks and runs of spaces are one space (a corpus is a
pair a line), a no-break space stays. The file (gzipped too) is read as a stream, a unit at a
time, never whole; expat refuses entity bombs and reads no external entity.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO, cast
from xml.etree import ElementTree

from transformer_mt.errors import DataError

VERSION = 1  # of how a unit is read: in the token cache's key
LANG = "{http://www.w3.org/XML/1998/namespace}lang"
CODES = frozenset({"bpt", "ept", "it", "ph", "ut"})  # inline codes: markup, left out
UNITS = frozenset({"tu"})
SPACES = re.compile(r"[ \t\r\n]+")  # (not a no-break space)


def is_tmx(path: str | Path) -> bool:
    """Whether ``path`` is a translation memory (by its name: ``.tmx``, ``.tmx.gz``)."""
    return str(path).lower().endswith((".tmx", ".tmx.gz"))


@contextlib.contextmanager
def opened(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened as bytes, gunzipped where it is gzipped."""
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
        f.seek(0)
        with gzip.GzipFile(fileobj=f) if gzipped else contextlib.nullcontext(f) as stream:
            yield cast(BinaryIO, stream)


def tmx_pairs(path: Path, src: str, tgt: str, key: str, counts: Counter[str] | None = None,
              named: str = "data.src_lang and data.tgt_lang name the two to read"
              ) -> Iterator[tuple[str, str]]:
    """Each translation unit's (``src`` segment, ``tgt`` segment) in ``path``, in file order
    (``counts``, given: the units, and those passed over by why); a one-line error, ``key``
    first, where the file is no TMX (where expat stopped) or holds no pair (the languages it
    holds; ``named``: what names the two read)."""
    seen: set[str] = set()
    found = 0
    counts = Counter() if counts is None else counts
    try:
        with opened(path) as stream:
            for unit in units(stream, UNITS):
                counts["units"] += 1
                pair = _pair(unit, src, tgt, seen)
                if isinstance(pair, str):
                    counts[pair] += 1
                    continue
                found += 1
                yield pair
    except ElementTree.ParseError as exc:
        raise DataError(f"{key}: '{path}' is not a TMX file (its XML: {exc})") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{key}: cannot read '{path}': {exc}") from exc
    if not found:
        held = ", ".join(sorted(seen)[:20]) or "none"
        raise DataError(f"{key}: '{path}' holds no translation unit with a segment in both "
                        f"{src} and {tgt} (its languages: {held}); {named}")


def units(stream: IO[bytes], names: frozenset[str]) -> Iterator[ElementTree.Element]:
    """The elements of an XML stream whose (local) name is one of ``names`` (a TMX file's
    ``<tu>``), each dropped from memory once read."""
    parents: list[ElementTree.Element] = []
    for event, element in ElementTree.iterparse(stream, events=("start", "end")):
        if event == "start":
            parents.append(element)
            continue
        parents.pop()
        if local(element.tag) in names:
            yield element
            element.clear()
            if parents:  # (the body keeps no emptied unit either)
                parents[-1].clear()


def _pair(unit: ElementTree.Element, src: str, tgt: str, seen: set[str]
          ) -> tuple[str, str] | str:
    """A unit's segments in ``src`` and ``tgt`` (each tag seen added to ``seen``), or why it
    holds no pair."""
    segments: list[tuple[str, str]] = []
    for tuv in unit:
        if local(tuv.tag) != "tuv":
            continue
        tag = (tuv.get(LANG) or tuv.get("lang") or "").replace("_", "-").casefold()
        seen.add(tag)
        seg = next((s for s in tuv if local(s.tag) == "seg"), None)
        if seg is not None:
            segments.append((tag, SPACES.sub(" ", _text(seg)).strip()))
    a, b = _segment(segments, src), _segment(segments, tgt)
    if a is None or b is None:
        return f"no {src if a is None else tgt} segment"
    return (a, b) if a and b else "an empty segment"


def _segment(segments: list[tuple[str, str]], language: str) -> str | None:
    """The segment in ``language`` (:func:`matches`)."""
    tag = matches([tag for tag, _ in segments], language)
    return next((text for t, text in segments if t == tag), None)


def matches(tags: list[str], language: str) -> str | None:
    """Of language ``tags`` (lower case, "-" between their parts), the one for ``language``:
    the tag that is it exactly, else the first of its region's ("de-de" for "de")."""
    wanted = language.replace("_", "-").casefold()
    near = [tag for tag in tags if tag.split("-")[0] == wanted.split("-")[0]]
    return wanted if wanted in tags else next(iter(near), None)


def _text(element: ElementTree.Element) -> str:
    """An element's text, its inline codes' left out (their tails kept)."""
    parts = [element.text or ""]
    for child in element:
        if local(child.tag) not in CODES:
            parts.append(_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def local(tag: object) -> str:
    """A tag's name without its namespace (a comment's or a processing instruction's: "")."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
