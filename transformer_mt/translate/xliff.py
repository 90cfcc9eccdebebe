"""XLIFF (``.xlf``, ``.xliff``), 1.2 and 2.x: the file translation tools (CAT tools) exchange
and send out for machine translation. Each unit's source (1.2: a ``trans-unit``'s; 2.x: each
``segment``'s) is translated into its target, made where there is none; a target that holds
text already (a translator's) stays as it is, and so does a unit marked ``translate="no"``.

The target is a copy of the source with its inline codes where they were (1.2: ``g``, ``x``,
``bx``, ``ex``, ``ph``, ``bpt``, ``ept``, ``it``, ``mrk``; 2.x: ``pc``, ``ph``, ``sc``, ``ec``,
``mrk``, ``sm``, ``em``), the source's text read as one flow (``documents.split_flow``: the
text inside a paired code, ``g``, ``pc``, ``mrk``, translated in its sentence and a word of the
translation left in it, or kept as it is where the code says ``translate="no"`` or
``mtype="protected"``; the native code inside ``ph``, ``bpt``, ``ept``, ``it`` is no text).
A line break in a source is a space (XML's whitespace), not the end of a sentence, unless the
source keeps its whitespace (``xml:space="preserve"``).
A target made here says it is machine translation to review (1.2: ``state="needs-review-
translation"``, ``state-qualifier="leveraged-mt"``, or ``"exact-match"`` where a memory gave
each of its sentences, ``memory.py``; 2.x: its segment's ``state="translated"`` where it had
none), and a file that named no target language names the translation's.
Read with lxml (the ``files`` extra), no entity expanded.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import Any

from transformer_mt.errors import MTError
from transformer_mt.packages import imported
from transformer_mt.translate.documents import Document, Held, gathered, remembered, split_flow
from transformer_mt.translate.glossary import PLACEHOLDER
from transformer_mt.translate.language_tags import says

V12 = "urn:oasis:names:tc:xliff:document:1.2"
V2 = "urn:oasis:names:tc:xliff:document:2."  # 2.0, 2.1, 2.2: the same core
PAIRED = frozenset({"g", "pc", "mrk"})  # inline codes whose content is text
HELD = re.compile(f"({PLACEHOLDER})")  # a program's placeholder in the text: kept
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
Slot = tuple[Any, str]  # where text stands: an element and "text" (inside it) or "tail"


def read_xliff(name: str, data: bytes, lang: str, target: str | None, held: Held = None
               ) -> tuple[list[Document[list[str]]], Callable[[list[list[str]]], bytes]]:
    """The sources to translate of an XLIFF file (one :class:`Document` each, whose pieces
    are its text slots), and the function that writes the file with their targets."""
    imported("lxml", "an XLIFF file (.xlf, .xliff)")
    from lxml import etree

    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False,
                                                      no_network=True))
    except etree.XMLSyntaxError as exc:
        raise MTError(f"'{name}' is not an XLIFF file (.xlf, .xliff): {exc}") from None
    space, _, local = str(root.tag)[1:].rpartition("}")
    if local != "xliff" or not (space == V12 or space.startswith(V2)):
        raise MTError(f"'{name}' is not an XLIFF file (.xlf, .xliff): it is not XLIFF 1.2 "
                      "or 2.x")
    _same_languages(name, root, space, lang, target)
    units = [(source, target_) for source, target_ in _units(root, space)
             if target_ is None or not "".join(target_.itertext()).strip()]
    made = [_target(source, space) for source, _ in units]
    slots = [_slots(element) for element in made]
    documents = [_flow(element, places, lang, not _preserved(source))
                 for (source, _), element, places in zip(units, made, slots, strict=True)]

    def write(translations: list[list[str]]) -> bytes:
        for (source, old), new, places, texts, doc in zip(units, made, slots, translations,
                                                          documents, strict=True):
            for (element, attribute), text in zip(places, texts, strict=True):
                setattr(element, attribute, text or None)
            _put(source, old, new, space, remembered(doc, held))
        if target:
            _name_target(root, space, target)
        return bytes(etree.tostring(root.getroottree(), xml_declaration=True,
                                    encoding="UTF-8"))

    return documents, write


def _units(root: Any, space: str) -> list[tuple[Any, Any]]:
    """Each source to translate and its target (None: none yet): a 1.2 ``trans-unit``'s (its
    ``seg-source`` where it has one: the target keeps its segments, ``mrk mtype="seg"``), a
    2.x ``segment``'s; not where it or what holds it says ``translate="no"``."""
    ns = f"{{{space}}}"
    found = [] if space == V12 else [(s.find(f"{ns}source"), s.find(f"{ns}target"))
                                     for s in root.iter(f"{ns}segment")]
    found += [(u.find(f"{ns}seg-source") if u.find(f"{ns}seg-source") is not None else
               u.find(f"{ns}source"), u.find(f"{ns}target"))
              for u in root.iter(f"{ns}trans-unit")] if space == V12 else []
    return [(source, target) for source, target in found if source is not None and not any(
        a.get("translate") == "no" for a in source.iterancestors())]


def _preserved(source: Any) -> bool:
    """Whether the source's whitespace is its text (``xml:space="preserve"`` on it or the
    nearest element above that says): a line break then ends a sentence, as in a plain text
    file; by default (XML's) it is a space, as where a tool wrapped the source's long lines."""
    for element in (source, *source.iterancestors()):
        if (space := element.get(XML_SPACE)) is not None:
            return bool(space == "preserve")
    return False


def _target(source: Any, space: str) -> Any:
    """A copy of ``source`` as a target (its codes, its text to be replaced)."""
    made = copy.deepcopy(source)
    made.tag = f"{{{space}}}target"
    made.tail = None
    return made


def _local(element: Any) -> str:
    return str(element.tag).rpartition("}")[2] if isinstance(element.tag, str) else ""


def _slots(element: Any) -> list[Slot]:
    """The places text stands in an element, in order: its own text, the text inside each
    paired code (``PAIRED``) and after each code (its tail); not inside other codes (native
    code: ``ph``, ``bpt``, ...) nor comments."""
    places: list[Slot] = [(element, "text")]
    for child in element:
        if _local(child) in PAIRED:
            places += _slots(child)
        places.append((child, "tail"))
    return places


def _flow(root: Any, places: Sequence[Slot], lang: str,
          collapsed: bool) -> Document[list[str]]:
    """The text of a target's slots as one flow (:func:`split_flow`): a placeholder in it
    (``glossary.PLACEHOLDER``: ``%name%``, ``{count}``, ``%s``) a kept piece, as the text of a
    code marked not to translate; rebuilding gives each slot its text. ``collapsed``: a line
    break is a space (:func:`_preserved`)."""
    pieces: list[str] = []
    kept: list[bool] = []
    bare: list[bool] = []
    owner: list[int] = []  # the slot each piece is of
    for n, ((element, attribute), outside) in enumerate(zip(places, _bare(root, places),
                                                            strict=True)):
        keep = _kept(root, element, attribute)
        for m, part in enumerate(HELD.split(getattr(element, attribute) or "")):
            pieces.append(part)
            kept.append(keep or m % 2 == 1)
            bare.append(outside)
            owner.append(n)
    return gathered(split_flow(pieces, lang, kept, bare, collapsed=collapsed), owner,
                    len(places))


def _kept(root: Any, element: Any, attribute: str) -> bool:
    """Whether a slot's text is kept as it is: inside a code marked ``translate="no"`` (2.x)
    or ``mtype="protected"`` (1.2), read in its sentence."""
    inside = element if attribute == "text" else element.getparent()
    while inside is not None and inside is not root:
        if inside.get("translate") == "no" or inside.get("mtype") == "protected":
            return True
        inside = inside.getparent()
    return False


def _bare(element: Any, places: Sequence[Slot]) -> list[bool]:
    """Whether each slot stands outside any paired code (the text formatted as the rest)."""
    return [(e is element and a == "text") or (a == "tail" and e.getparent() is element)
            for e, a in places]


def _put(source: Any, old: Any, new: Any, space: str, exact: bool = False) -> None:
    """``new`` in place of the empty target ``old``, or after ``source`` (a 1.2 ``source``'s
    ``seg-source`` where it has one), marked as machine translation to review (1.2: an
    ``exact`` match of a translation memory where each of its sentences is one)."""
    if old is not None:
        for key, value in old.attrib.items():
            new.set(key, value)
        new.tail = old.tail
        old.getparent().replace(old, new)
    else:
        after = source.getnext() if source.getnext() is not None and _local(
            source.getnext()) == "seg-source" else source
        before = after.getprevious()  # the indentation it stands at, where it has one
        indent = after.getparent().text if before is None else before.tail
        new.tail, after.tail = after.tail, indent if (indent or "x").isspace() else after.tail
        after.addnext(new)
    if space == V12:
        new.set("state", "needs-review-translation")
        new.set("state-qualifier", "exact-match" if exact else "leveraged-mt")
    elif source.getparent().get("state") in (None, "initial"):
        source.getparent().set("state", "translated")


def _same_languages(name: str, root: Any, space: str, lang: str, target: str | None) -> None:
    """A one-line :class:`MTError` where the file asks for another pair of languages than
    the model's (``source-language``/``target-language`` of a 1.2 ``file``, ``srcLang``/
    ``trgLang`` of 2.x): its targets would hold the wrong language."""
    files = [root] if space != V12 else list(root.iter(f"{{{space}}}file"))
    names = ("srcLang", "trgLang") if space != V12 else ("source-language", "target-language")
    for file in files:
        for asked, ours in zip(names, (lang, target), strict=True):
            said = file.get(asked)
            if said and ours and not says(said, ours):
                raise MTError(f"'{name}' asks for {asked}=\"{said}\"; this model translates "
                              f"{lang} into {target}")


def _name_target(root: Any, space: str, target: str) -> None:
    """The target language where the file names none (1.2: each ``file``; 2.x: the root)."""
    if space != V12:
        if not root.get("trgLang"):
            root.set("trgLang", target)
        return
    for file in root.iter(f"{{{space}}}file"):
        if not file.get("target-language"):
            file.set("target-language", target)

