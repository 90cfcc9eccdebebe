"""Texts that hold more than one sentence: paragraphs, several lines, HTML.

The model translates one sentence at a time. A :class:`Document` is a text cut into the
sentences to translate and everything around them (spaces, line breaks, markup), which
:meth:`Document.rebuild` puts back around the translations, so that nothing is lost:

    doc = split_document("Ein Mann fährt Fahrrad. Zwei Hunde spielen.\\nEine Frau liest.", "de")
    doc.sentences      # ['Ein Mann fährt Fahrrad.', 'Zwei Hunde spielen.', 'Eine Frau liest.']
    doc.rebuild(["A man rides a bike.", "Two dogs play.", "A woman reads."])
                       # 'A man rides a bike. Two dogs play.\\nA woman reads.'

Sentences are found by spaCy's rule-based ``sentencizer`` on the language's blank pipeline
(its tokenizer knows the language's abbreviations: "Dr.", "z.B.", "3. Mai" do not end a
sentence); no model is downloaded. HTML is parsed by Beautiful Soup: each text node is split
and translated, tags, attributes, comments, scripts, styles and code are kept as they are.
A sentence cut by inline markup ("Ein <b>Hund</b> läuft.") is translated in its pieces.
"""

from __future__ import annotations

import functools
import re
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from transformer_mt.data.tokenize import spacy_pipeline
from transformer_mt.errors import DataError

# text inside these elements is not prose: kept as it is
KEEP_AS_IS = frozenset({"script", "style", "code", "pre", "kbd", "samp", "var", "textarea",
                        "noscript", "template", "math", "svg"})


@dataclass
class Document:
    """The sentences of a text, and how to put their translations back in its place."""

    sentences: list[str]
    rebuild: Callable[[Sequence[str]], str]  # one translation per sentence -> the text


@functools.lru_cache(maxsize=8)
def _sentencizer(lang: str) -> Any:
    try:
        nlp = spacy_pipeline(lang)  # the word tokenizer's: one vocabulary
    except DataError:  # a language spaCy has no rules for
        nlp = spacy_pipeline("xx")
    if "sentencizer" not in nlp.pipe_names:
        nlp.add_pipe("sentencizer")
    return nlp


# a list item's marker at the start of a line ("- ", "* ", "• ", "1. ", "2) "): kept as it is
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
LIST_MARKER = re.compile(f"[ \t{ZERO_WIDTH}]*(?:[-*•–]|\\d{{1,3}}[.)])[ \t]+(?=\\S)")


def _blank(c: str) -> bool:
    """Whitespace, or a character of no width: around a sentence, never part of it."""
    return c.isspace() or c in ZERO_WIDTH


def sentence_spans(text: str, lang: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the sentences of ``text``: a line break always ends
    a sentence, surrounding whitespace (and zero-width characters) and a line's list marker
    are not part of one, and a span without a letter or a digit (punctuation between inline
    tags, a line of dashes) is no sentence: it is kept."""
    nlp = _sentencizer(lang)
    spans: list[tuple[int, int]] = []
    line_start = 0
    for line in text.split("\n"):
        marker = LIST_MARKER.match(line)
        skip = marker.end() if marker else 0
        if line[skip:].strip():
            for sent in nlp(line[skip:]).sents:
                start = line_start + skip + sent.start_char
                end = line_start + skip + sent.end_char
                while start < end and _blank(text[start]):
                    start += 1
                while end > start and _blank(text[end - 1]):
                    end -= 1
                if any(c.isalnum() for c in text[start:end]):  # not punctuation alone
                    spans.append((start, end))
        line_start += len(line) + 1
    return spans


def split_text(text: str, lang: str) -> Document:
    """A plain text: its sentences, and the spacing between them kept on rebuilding."""
    parts: list[str] = []
    slots: list[int] = []  # which parts are sentences
    at = 0
    for start, end in sentence_spans(text, lang):
        parts.append(text[at:start])
        slots.append(len(parts))
        parts.append(text[start:end])
        at = end
    parts.append(text[at:])

    def rebuild(translations: Sequence[str]) -> str:
        out = list(parts)
        for slot, translation in zip(slots, translations, strict=True):
            out[slot] = translation
        return "".join(out)

    return Document([parts[i] for i in slots], rebuild)


def _translated(node: Any) -> bool:
    """Whether a text node is to be translated: not inside an element kept as it is (code,
    script, ...), and the nearest ``translate`` attribute around it (its keywords in any
    case, as HTML reads them) is not "no"."""
    parents = [p for p in node.parents if p.name]
    if any(p.name in KEEP_AS_IS for p in parents):
        return False
    said = [str(p["translate"]).strip().lower() for p in parents if p.has_attr("translate")]
    return not said or said[0] != "no"


def split_html(text: str, lang: str, xml: bool = False) -> Document:
    """An HTML document or fragment (``xml``: an XHTML document, read as XML: the case of its
    names kept, SVG's ``viewBox`` say): the sentences of its text nodes; rebuilding puts the
    translations into the same markup (entities re-escaped where needed)."""
    from bs4 import BeautifulSoup, NavigableString

    # an attribute given twice: the first holds, as in browsers (html.parser keeps the last)
    soup = BeautifulSoup(text, "xml") if xml else BeautifulSoup(
        text, "html.parser", on_duplicate_attribute="ignore")
    nodes: list[Any] = []
    pieces: list[Document] = []
    for node in soup.find_all(string=True):
        if type(node) is not NavigableString:  # comments, doctype, CDATA, script strings
            continue
        if not _translated(node):
            continue
        piece = split_text(str(node), lang)
        if piece.sentences:
            nodes.append(node)
            pieces.append(piece)

    def rebuild(translations: Sequence[str]) -> str:
        if len(translations) != sum(len(p.sentences) for p in pieces):
            raise ValueError("one translation per sentence")
        at = 0
        for i, piece in enumerate(pieces):
            n = len(piece.sentences)
            new = NavigableString(piece.rebuild(translations[at:at + n]))
            nodes[i].replace_with(new)
            nodes[i] = new
            at += n
        return soup.decode(formatter="minimal")

    return Document([s for p in pieces for s in p.sentences], rebuild)


TextForm = Literal["text", "html", "xhtml"]  # what a text holding several sentences may be
FORMS: tuple[TextForm, ...] = typing.get_args(TextForm)


def split_document(text: str, lang: str, form: TextForm = "text") -> Document:
    """``text`` (``form``: plain text, HTML, or XHTML read as XML) as a :class:`Document`."""
    return split_text(text, lang) if form == "text" else split_html(text, lang, form == "xhtml")


def translate_documents(texts: Sequence[str], lang: str, form: TextForm,
                        translate: Callable[[list[str]], list[str]]) -> list[str]:
    """Each text translated whole: all their sentences in one call of ``translate`` (one
    batch), put back in place."""
    docs = [split_document(t, lang, form) for t in texts]
    translations = iter(translate([s for d in docs for s in d.sentences]))
    return [d.rebuild([next(translations) for _ in d.sentences]) for d in docs]
