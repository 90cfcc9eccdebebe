"""Texts that hold more than one sentence: paragraphs, several lines, HTML.

The model translates one sentence at a time. A :class:`Document` is a text cut into the
sentences to translate and everything around them (spaces, line breaks, markup), which
:meth:`Document.rebuild` puts back around the translations, so that nothing is lost:

    doc = split_document("Ein Mann fährt Fahrrad. Zwei Hunde spielen.\\nEine Frau liest.", "de")
    doc.sentences      # ['Ein Mann fährt Fahrrad.', 'Zwei Hunde spielen.', 'Eine Frau liest.']
    doc.rebuild(["A man rides a bike.", "Two dogs play.", "A woman reads."])
                       # 'A man rides a bike. Two dogs play.\\nA woman reads.'

Sentences are found as ``sentences.py`` finds them. HTML is parsed by Beautiful Soup: its
text and the attributes that hold text for people (an image's ``alt``, a ``title``) are split
and translated, tags, other attributes, comments, scripts, styles and code are kept as they are.
A sentence cut by inline markup ("Ein <b>Hund</b> läuft.") is translated whole, and its
translation shared out among the pieces (``inline.py``).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from transformer_mt.translate.casing import as_shouted, shouts
from transformer_mt.translate.glossary import KEPT
from transformer_mt.translate.html_text import INLINE, read_node, text_flows, unwrapped
from transformer_mt.translate.inline import Link, share
from transformer_mt.translate.language_tags import relabel_html
from transformer_mt.translate.sentences import (
    UNSPACED_SENTENCES,
    Break,
    sentence_spans,
    soft_breaks,
    symbols,
)

T = TypeVar("T")

Links = Sequence[Link] | None  # where a sentence's translation reads in it (None: unknown)
CLOSING = frozenset(".,;:!?…")  # marks written against the word before them
Held = Callable[[str], bool] | None  # whether a memory translates a sentence (memory.py)


@dataclass
class Document(Generic[T]):
    """The sentences of a text, and how to put their translations back in its place (a text;
    a flow's pieces, :func:`split_flow`). ``cuts``: for each sentence, where inline markup
    cuts it into pieces (offsets in it; mostly none), its translation shared out among them
    along ``links`` (``inline.py``)."""

    sentences: list[str]
    cuts: list[list[int]]
    rebuild_with: Callable[[Sequence[str], Sequence[Links]], T]

    def rebuild(self, translations: Sequence[str], links: Sequence[Links] | None = None) -> T:
        """The text (or pieces) with one translation per sentence in place (a sentence's in
        capitals in capitals: ``casing.py``)."""
        return self.rebuild_with([as_shouted(t) if shouts(s) else t for s, t in zip(
            self.sentences, translations, strict=True)], links or [None] * len(translations))


def split_flow(pieces: Sequence[str], lang: str, kept: Sequence[bool] = (),
               bare: Sequence[bool] = (), closed: bool = False,
               collapsed: bool = False, marks: Sequence[Break] = ()) -> Document[list[str]]:
    """Text in pieces that run on (a paragraph's text nodes or runs, formatted apart): the
    sentences of the pieces joined; rebuilding gives each piece its text again, the spacing
    between sentences kept and a sentence across pieces shared out among them. A ``kept``
    piece (inline code) is read as part of its sentence and comes back as it was, the words
    of the translation that read it left out; text in kept pieces alone is no sentence. Words
    the translation moves are moved between ``bare`` pieces (text outside any markup) rather
    than into markup or out of it (``inline.share``); ``closed``: the last piece too gets a
    word of its sentence if it holds one; ``collapsed``: a line break is a space (HTML's), but
    a kept piece that is one (a ``<br>``). A line break inside a sentence
    (``sentences.soft_breaks``: "fährt\nmit dem Fahrrad") is read as a space and kept as it
    was, between the words of the translation that read the text before it and after it; so
    is a run of symbols (emoji: ``sentences.symbols``) and each of ``marks`` (breaks in the
    text of the pieces that do not cut a word: ``marks.py``'s)."""
    keep = [bool(k) for k in kept] or [False] * len(pieces)
    loose = [bool(b) for b in bare] or [False] * len(pieces)
    lines = "".join(re.sub("[\r\n]", " ", p) if collapsed and not (k and p == "\n") else p
                    for p, k in zip(pieces, keep, strict=True))  # (HTML's: no line ends)
    # (a symbol inside a span kept as it is, "30 °C", is the span's: glossary.KEPT)
    unkept = KEPT.sub(lambda m: "x" * len(m.group()), lines)
    breaks = _joined(sorted([*soft_breaks(lines, lang), *symbols(unkept), *marks]))
    if not breaks:
        return _flow(pieces, "".join(pieces), lines, lang, keep, loose, closed, collapsed)
    bounds = sorted({b for start, end, _ in breaks for b in (start, end)})
    parts: list[tuple[int, int]] = []
    owner: list[int] = []  # the piece each part is of
    at = 0
    for i, piece in enumerate(pieces):  # each piece cut where a break begins or ends in it
        inner = bounds[bisect.bisect_right(bounds, at):bisect.bisect_left(bounds, at + len(piece))]
        cut = [at, *inner, at + len(piece)]
        parts += [(a, b) for a, b in itertools.pairwise(cut) if b > a]
        owner += [i] * (len(parts) - len(owner))
        at += len(piece)
    starts = [start for start, _, _ in breaks]  # (increasing, apart)
    of = [breaks[k] if (k := bisect.bisect_right(starts, start) - 1) >= 0
          and start < breaks[k].end else None for start, _ in parts]  # the break each is in
    inside = [b is not None for b in of]
    text = "".join(pieces)

    def spaced(read: str) -> str:  # a break inside a sentence read as spaces, in a word as none
        return "".join(read[a:e] if b is None else ("\u00ad" if b.joined else " ") * (e - a)
                       for (a, e), b in zip(parts, of, strict=True))  # (soft hyphens: none)

    # a hyphen that cut a word is a space beside its break (the translation's space between
    # the words around the break goes into it), and is gone on rebuilding
    cut_words = [text[a:e].replace("-", " ") if b and b.joined else text[a:e]
                 for (a, e), b in zip(parts, of, strict=True)]
    flow = _flow(cut_words, spaced(text), spaced(lines), lang,
                 [keep[o] or i for o, i in zip(owner, inside, strict=True)],
                 [loose[o] and not i for o, i in zip(owner, inside, strict=True)],
                 closed, collapsed)

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> list[str]:
        return [text[a:e].removeprefix("-") if b and b.joined else p for p, (a, e), b
                in zip(flow.rebuild_with(translations, links), parts, of, strict=True)]

    return gathered(Document(flow.sentences, flow.cuts, rebuild), owner, len(pieces))


def _joined(breaks: list[Break]) -> list[Break]:
    """Breaks in order, each that begins where the one before it ends (a mark after an emoji)
    or inside it one with it."""
    out: list[Break] = []
    for b in breaks:
        if out and (b.start < out[-1].end or (out[-1].end == b.start and not (
                b.joined or out[-1].joined))):
            out[-1] = Break(out[-1].start, max(b.end, out[-1].end), out[-1].joined)
        else:
            out.append(b)
    return out


def gathered(flow: Document[list[str]], owner: Sequence[int], n: int) -> Document[list[str]]:
    """A flow of parts, each of one of ``n`` places (``owner``: a text's part of its piece, an
    XLIFF slot's), rebuilt as the places, each its parts' texts joined."""

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> list[str]:
        out = [""] * n
        for o, part in zip(owner, flow.rebuild_with(translations, links), strict=True):
            out[o] += part
        return out

    return Document(flow.sentences, flow.cuts, rebuild)


def _flow(pieces: Sequence[str], read: str, lines: str, lang: str, keep: list[bool],
          loose: list[bool], closed: bool, collapsed: bool) -> Document[list[str]]:
    """:func:`split_flow` of ``pieces``, their sentences found in ``lines`` and read from
    ``read`` (the pieces' text, a line break inside a sentence a space)."""
    text = "".join(pieces)
    ends = list(itertools.accumulate(map(len, pieces)))  # where each piece ends in the text
    spans = [(a, b) for a, b in sentence_spans(lines, lang) if not all(
        keep[bisect.bisect_right(ends, a):bisect.bisect_right(ends, b - 1) + 1])]
    cuts = [[e - a for e in ends[bisect.bisect_right(ends, a):bisect.bisect_left(ends, b)]]
            for a, b in spans]

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> list[str]:
        out = [""] * len(pieces)
        at, before = 0, ""
        for (a, b), cut, translation, link in zip(spans, cuts, translations, links, strict=True):
            first = bisect.bisect_right(ends, a)  # the piece the sentence begins in
            gap = (_between(text, at, a, before, translation, collapsed) if before
                   else text[at:a])
            if gap == text[at:a]:
                _keep(gap, at, ends, out)
            else:  # outside markup where the sentence begins a piece after bare text
                out[first - 1 if first and ends[first - 1] == a and loose[first - 1]
                    else first] += gap
            before = translation or before
            around = slice(first, first + len(cut) + 1)
            shares = share(text[a:b], cut, translation, link, keep[around],
                           loose[around], closed) if cut else [translation]
            for i, part in enumerate(shares):
                out[first + i] += part
            at = b
        _keep(text[at:], at, ends, out)
        return _around_kept(pieces, out, keep)

    return Document([read[a:b] for a, b in spans], cuts, rebuild)


def _between(text: str, at: int, a: int, before: str, after: str, collapsed: bool) -> str:
    """What goes between two translated sentences on a line (``collapsed``: or across lines
    that show as one, HTML's), where ``text[at:a]`` lay between their sources: a space where
    Chinese or Japanese had none and the translations are in a script that spaces its
    sentences ("A dog. A cat." for "狗。猫。"), none where a spaced language had one and the
    translations are Chinese or Japanese ("狗。猫。" for "A dog. A cat."), else the source's."""
    gap, unspaced = text[at:a], UNSPACED_SENTENCES.match
    spaced = [not unspaced(c) for c in (before[-1:], after[:1])]
    run_on = not gap and (unspaced(text[a - 1]) or unspaced(text[a]))
    if all(spaced) and (run_on or (gap and not gap.strip("\u3000"))):  # (ideographic spaces)
        return " "
    if gap and gap.strip(" \t\r\n" if collapsed else " \t") == "" and not any(spaced) and not (
            unspaced(text[at - 1]) or unspaced(text[a])):
        return ""
    return gap


def _around_kept(pieces: Sequence[str], out: list[str], keep: list[bool]) -> list[str]:
    """Kept pieces as they were, with a space beside them wherever the source had one (the
    words that read one are left out, or the translation has none: "A woman <code>Maria</code>
    reads", not "A woman <code>Maria</code>reads"), but before a mark that closes a sentence or
    a clause: "„{name}“.", not "„{name}“ .")."""
    out = [piece if k else o for piece, o, k in zip(pieces, out, keep, strict=True)]
    for i in (i for i, k in enumerate(keep) if k):
        before = _nearest(out, i, -1)  # (a piece between left empty: the text beyond it)
        if i > 0 and not keep[i - 1] and pieces[i - 1][-1:].isspace() and before \
                and not before[-1:].isspace():
            out[i - 1] += " "
        after = _nearest(out, i, 1)
        if i + 1 < len(out) and not keep[i + 1] and pieces[i + 1][:1].isspace() and after \
                and not after[:1].isspace() and after[:1] not in CLOSING:
            out[i + 1] = " " + out[i + 1]
    return out


def _nearest(out: list[str], i: int, step: int) -> str:
    """The nearest piece of ``out`` that is not empty, before ``i`` (``step`` -1) or after it
    (1); none: empty."""
    i += step
    while 0 <= i < len(out) and not out[i]:
        i += step
    return out[i] if 0 <= i < len(out) else ""


def _keep(kept: str, at: int, ends: Sequence[int], out: list[str]) -> None:
    """Text between sentences (``kept``, from offset ``at``) back in the pieces it was in."""
    while kept:
        piece = bisect.bisect_right(ends, at)
        n = ends[piece] - at
        out[piece] += kept[:n]
        kept, at = kept[n:], at + n


def split_text(text: str, lang: str) -> Document[str]:
    """A plain text: its sentences, and the spacing between them kept on rebuilding."""
    flow = split_flow([text], lang)
    return Document(flow.sentences, flow.cuts, lambda t, links: flow.rebuild_with(t, links)[0])


def split_html(text: str, lang: str, xml: bool = False,
               target: str | None = None) -> Document[str]:
    """An HTML document or fragment (``xml``: an XHTML document, read as XML: the case of its
    names kept, SVG's ``viewBox`` say): the sentences of its text, each run of text nodes
    that only inline elements separate read as one flow (:func:`split_flow`: "Ein Mann fährt
    <b>Fahrrad</b>." is one sentence; inline code, ``translate="no"`` inline, is read in its
    sentence and kept as it is); rebuilding puts the translations into the same markup
    (entities re-escaped where needed), and, given the ``target`` language, says so where the
    source's was said (``lang="de"`` becomes ``lang="en"`` where the text is translated)."""
    from bs4 import BeautifulSoup

    # an attribute given twice: the first holds, as in browsers (html.parser keeps the last)
    soup = BeautifulSoup(text, "xml") if xml else BeautifulSoup(
        text, "html.parser", on_duplicate_attribute="ignore")
    translated: list[Any] = []  # the elements in text translated: their attributes are
    read = [(split_flow([read_node(n, k) for n, k in nodes], lang,
                        [k for _, k in nodes],
                        [not k and n.parent.name not in INLINE for n, k in nodes],
                        collapsed=True),
             functools.partial(_put_text, [n for n, _ in nodes]))
            for nodes in text_flows(soup, translated)]
    read += [(split_flow([str(tag[name])], lang, collapsed=True),
              functools.partial(_put_attribute, tag, name))
             for tag in translated for name in _translatable(tag)]
    flows = [(flow, put) for flow, put in read if flow.sentences]

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> str:
        at = 0
        for flow, put in flows:
            n = len(flow.sentences)
            put(flow.rebuild_with(translations[at:at + n], links[at:at + n]))
            at += n
        if at != len(translations):
            raise ValueError("one translation per sentence")
        for tag in translated if target else []:
            relabel_html(tag, lang, str(target))
        return with_line_ends_of(text, soup.decode(formatter=_as_written(xml)))

    return Document([unwrapped(s) for f, _ in flows for s in f.sentences],
                    [c for f, _ in flows for c in f.cuts], rebuild)


@functools.lru_cache(maxsize=2)
def _as_written(xml: bool) -> Any:
    """Beautiful Soup's "minimal" formatter (``&``, ``<``, ``>`` escaped) that writes each
    element's attributes in their order (it sorts them)."""
    from bs4.dammit import EntitySubstitution
    from bs4.formatter import HTMLFormatter, XMLFormatter

    base: Any = XMLFormatter if xml else HTMLFormatter

    class InOrder(base):
        def attributes(self, tag: Any) -> list[tuple[str, Any]]:
            return list((tag.attrs or {}).items())

    return InOrder(entity_substitution=EntitySubstitution.substitute_xml)


def _put_text(nodes: list[Any], texts: list[str]) -> None:
    """A flow's text nodes given their new texts (a kept element is no string: never
    replaced)."""
    from bs4 import NavigableString

    for i, new in enumerate(texts):
        if isinstance(nodes[i], NavigableString) and new != str(nodes[i]):
            nodes[i].replace_with(replaced := NavigableString(new))
            nodes[i] = replaced


def _put_attribute(tag: Any, name: str, texts: list[str]) -> None:
    tag[name] = texts[0]


# attributes that hold text for people (HTML's translatable attributes, and aria-label): on
# every element (None), or on these
TRANSLATABLE: dict[str, frozenset[str] | None] = {
    "title": None, "aria-label": None, "alt": frozenset({"img", "area", "input"}),
    "placeholder": frozenset({"input", "textarea"}), "abbr": frozenset({"th"}),
    "label": frozenset({"optgroup", "option", "track"})}


# a page's metadata that people read: its description, and what a link to it shows (not its
# keywords: a list, not a sentence, often longer than a sentence the model takes)
META_TEXT = frozenset({"description", "og:title", "og:description", "twitter:title",
                       "twitter:description"})


def _translatable(tag: Any) -> list[str]:
    """The attributes of ``tag`` whose text is translated: HTML's translatable attributes (a
    button's ``value``, a page's description), ``aria-label``, and the title and
    description a link to the page shows (Open Graph's, Twitter's)."""
    names = [n for n, on in TRANSLATABLE.items() if on is None or tag.name in on]
    if tag.name == "input" and str(tag.get("type", "")).lower() in ("button", "reset", "submit"):
        names.append("value")
    said = str(tag.get("name", tag.get("property", ""))).lower()
    if tag.name == "meta" and said in META_TEXT:
        names.append("content")
    return [n for n in names if isinstance(tag.get(n), str)]


TextForm = Literal["text", "html", "xhtml"]  # what a text holding several sentences may be
FORMS: tuple[TextForm, ...] = typing.get_args(TextForm)


def split_document(text: str, lang: str, form: TextForm | Literal["sentences"] = "text",
                   target: str | None = None) -> Document[str]:
    """``text`` (``form``: plain text, HTML, or XHTML read as XML; sentences, the spacing
    round them left out) as a :class:`Document`; ``target``: the language HTML's
    translation is said to be in (:func:`split_html`)."""
    if form in ("text", "sentences"):
        return split_text(text if form == "text" else text.strip(), lang)
    return split_html(text, lang, form == "xhtml", target)


def with_line_ends_of(source: str, out: str) -> str:
    """``out`` with CRLF line ends where each line of ``source`` ends so (Windows' text), as
    the parsers that write LF do not keep them (HTML's, XML's, srt's, polib's)."""
    if "\r\n" not in source or re.search("(?<!\r)\n", source):
        return out
    return re.sub("(?<!\r)\n", "\r\n", out)


LinksOf = Callable[[list[str], list[str]], "Sequence[Links] | None"]


def translate_split(docs: Sequence[Document[T]], translate: Callable[[list[str]], list[str]],
                    links: LinksOf | None = None) -> list[T]:
    """Documents translated: all their sentences in one call of ``translate`` (one batch),
    put back in place; ``links``: where each translation of a sentence that inline markup
    cuts reads in it (None: by relative position), asked once for them all."""
    sentences = [s for d in docs for s in d.sentences]
    translations = translate(sentences)
    cut = [i for i, c in enumerate(c for d in docs for c in d.cuts) if c]
    found: list[Links] = [None] * len(sentences)
    if cut and links is not None:
        for i, link in zip(cut, links([sentences[i] for i in cut],
                                      [translations[i] for i in cut]) or [None] * len(cut),
                           strict=True):
            found[i] = link
    out, at = [], 0
    for d in docs:
        n = len(d.sentences)
        out.append(d.rebuild(translations[at:at + n], found[at:at + n]))
        at += n
    return out


def remembered(doc: Document[Any], held: Held) -> bool:
    """Whether each sentence of ``doc`` (one at least) is one a memory translates (``held``):
    its translation the memory's, no machine translation's."""
    return held is not None and bool(doc.sentences) and all(map(held, doc.sentences))
