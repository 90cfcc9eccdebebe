"""What of a page's tree is read as text (``documents.split_html``): the runs of text nodes
that only inline elements separate (each one flow), the elements kept as they are inside a
sentence (inline code, ``translate="no"``, marks: a note's ``<sup>[1]</sup>``, a "↑" link),
and what a flow reads of each node."""

from __future__ import annotations

import re
from typing import Any

from transformer_mt.data.tokenize import CJK
from transformer_mt.translate.numbers import CURRENCY

# text inside these elements is not prose: kept as it is
KEEP_AS_IS = frozenset({"script", "style", "code", "pre", "kbd", "samp", "var", "textarea",
                        "noscript", "template", "math", "svg"})
# elements inside a sentence: the text around them runs on (an image, a block ends it; a <br>
# ends a line: a sentence, unless the line runs on, ``sentences.soft_breaks``)
INLINE = frozenset({"a", "abbr", "b", "bdi", "bdo", "big", "cite", "data", "del", "dfn", "em",
                    "font", "i", "ins", "label", "mark", "q", "s", "small", "span", "strong",
                    "sub", "sup", "time", "tt", "u"})
# inline elements kept as they are inside a sentence: read with it, never translated
KEPT_INLINE = frozenset({"code", "kbd", "samp", "var"})
# where a note's mark in brackets stands (:func:`_mark`)
MARKS = frozenset({"sup"})


def text_flows(soup: Any, translated: list[Any]) -> list[list[tuple[Any, bool]]]:
    """The text to translate, in runs that only inline elements and line breaks separate (a
    block, a comment, text not translated ends one): its text nodes, and the inline elements
    kept as they are inside a sentence (code, ``translate="no"``, a ``<br>``), each with
    whether it is kept; the
    elements in text translated to ``translated`` (their attributes are). The tree walked
    with a stack of its own (a page nested deeper than Python recurses is read)."""
    flows: list[list[tuple[Any, bool]]] = [[]]

    def end() -> None:
        if flows[-1]:
            flows.append([])

    stack = [(iter(soup.children), True, False)]  # children, translated, a block
    while stack:
        children, translate, block = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if block:
                end()
        else:
            kind, inner = _kind(child, translate)
            if inner and kind != "text" and kind != "break":
                translated.append(child)
            if kind in ("text", "kept"):
                flows[-1].append((child, kind == "kept"))
                continue
            if kind != "inline":
                end()
            if kind in ("inline", "block"):
                stack.append((iter(child.children), inner, kind == "block"))
    return [f for f in flows if f]


def _kind(node: Any, translate: bool) -> tuple[str, bool]:
    """What a flow makes of a node, in text ``translate``-d or not: ``text`` to translate, a
    ``break`` (a comment, text not translated), an element ``kept`` as it is inside a sentence,
    ``inline`` (the text runs on), a ``block`` or kept ``apart`` (it ends the text before it);
    and whether the text inside it is translated (an element's ``translate`` attribute, its
    keywords in any case, as HTML reads them)."""
    from bs4 import NavigableString, Tag

    if not isinstance(node, Tag):
        return "text" if translate and type(node) is NavigableString else "break", translate
    said = node.get("translate")
    inner = translate if said is None else str(said).strip().lower() != "no"
    if node.name in KEPT_INLINE or (translate and node.name == "br") or (
            node.name in INLINE and translate and (not inner or _mark(node))):
        return "kept", inner
    if node.name in INLINE:
        return "inline", inner
    return ("apart" if node.name in KEEP_AS_IS else "block"), inner


def read_node(node: Any, kept: bool) -> str:
    """What a flow reads of a node: a text node's text, a kept element's (inline code), a
    line break for a ``<br>``, and a space for a mark (:func:`_mark`), which stays where it
    was between the words around it and ends no sentence of its own ("Fahrrad.[1] Eine Frau"
    read as one sentence)."""
    if not kept:
        return str(node)
    if node.name == "br":
        return "\n"
    return " " if _mark(node) else node.get_text()  # (the words around it stay apart)


def _mark(node: Any) -> bool:
    """Whether an inline element is a mark, not words: its text has no letter or digit ("↑",
    "[", "*"), or it is a superscript note's, of no letter ("1") or in brackets ("[1]",
    "[a]", Wikipedia's "[note 2]"), or a note's reference as EPUB 3 and DPUB-ARIA name one
    (``epub:type="noteref"``, ``role="doc-noteref"``). (A number in a sentence is read as
    ever: "kostet <b>42</b> Euro".)"""
    text = node.get_text().strip()
    if node.name not in INLINE or not text:
        return False
    said = " ".join(str(node.get(name, "")) for name in ("epub:type", "type", "role")).split()
    if {"noteref", "doc-noteref"} & set(said):  # (XML reads epub:type as type)
        return True
    if node.name in MARKS:  # a note's: "1", "*", "[1]", "[a]"
        bracketed = text[:1] == "[" and text[-1:] == "]" and len(text) <= 20
        return bracketed or not any(c.isalpha() for c in text)
    return not any(c.isalnum() for c in text) and not _a_numbers_sign(node, text)


def _text(node: Any) -> str:
    """A node's text ("" for none)."""
    return "" if node is None else str(node.get_text() if hasattr(node, "get_text") else node)


SIGN = re.compile(f"[{CURRENCY}%\u2030]|°[CF]?")  # a number's, beside it (glossary.KEPT)


def _a_numbers_sign(node: Any, text: str) -> bool:
    """Whether ``text``, an inline element's, is a currency, percent or degree sign beside a
    number: read with it, a span kept whole ("12,50 <b>€</b>": a mark, "€" was put elsewhere,
    "12.50 on a wooden <b>€</b>structure.")."""
    if SIGN.fullmatch(text) is None:
        return False
    before, after = (_text(s) for s in (node.previous_sibling, node.next_sibling))
    return re.search(r"\d[ \u00a0\u202f]?$", before) is not None or \
        re.match(r"[ \u00a0\u202f]?\d", after) is not None


# a line break between Chinese or Japanese characters (their marks too), with the spaces
# around it: what a page's source wraps, not a space between words
WRAPPED = re.compile(f"(?<=[{CJK}\u3000-\u303f\uff01-\uff60])[ \t\r]*\n[ \t\r\n]*"
                     f"(?=[{CJK}\u3000-\u303f\uff01-\uff60])")


def unwrapped(sentence: str) -> str:
    """A page's ``sentence`` as the model reads it: a line break that wraps Chinese or
    Japanese as zero-width spaces (which the tokenizers drop; the offsets stay those of the
    page's text), not as a space inside a word the model never saw."""
    return WRAPPED.sub(lambda m: "\u200b" * len(m.group()), sentence)

