"""What a translated document says its language is: tags that said the source language say the
target's (a page still marked German misleads screen readers, spell checkers and search
engines): an HTML element's ``lang`` (``documents.py`` asks, where the text is translated), a
Word run's or style's ``w:lang``, a slide run's ``lang`` and ``altLang``, an OpenDocument style's
``fo:language`` (its country dropped), and each document's properties' language."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from transformer_mt.packages import imported


def says(tag: object, lang: str) -> bool:
    """Whether a language ``tag`` ("de", "de-DE", "DE_at") is the language ``lang``."""
    return isinstance(tag, str) and re.split(r"[-_]", tag.strip().lower())[0] == lang.lower()


# the languages written right to left (of spaCy's, and a few more)
RIGHT_TO_LEFT = frozenset({"ar", "arc", "ckb", "dv", "fa", "he", "ps", "sd", "syr", "ug", "ur",
                           "yi"})


def direction(lang: str) -> str:
    """HTML's ``dir`` of a language: ``rtl`` or ``ltr``."""
    return "rtl" if re.split(r"[-_]", lang.strip().lower())[0] in RIGHT_TO_LEFT else "ltr"


def relabel_html(tag: Any, lang: str, target: str) -> None:
    """An HTML element's language (``lang``, ``xml:lang``) said to be ``target`` where it was
    ``lang`` (its region dropped: "de-DE" becomes "en"), and its direction (``dir``) the
    target's where the two are written in different directions (Arabic into English: an
    element said ``rtl``, or said Arabic, is ``ltr``)."""
    relabelled = False
    for name in ("lang", "xml:lang"):
        if says(tag.get(name), lang):
            tag[name], relabelled = target, True
    was, now = direction(lang), direction(target)
    if was != now and (relabelled or str(tag.get("dir", "")).strip().lower() == was):
        tag["dir"] = now


# a WebVTT header's language (YouTube's "Language: de"): the header is what comes before the
# first empty line
VTT_HEADER = re.compile(r"(?s)\A.*?(?:(?:\r\n|\r(?!\n)|\n){2}|\Z)")
VTT_LANGUAGE = re.compile(r"(?m)^(Language:[ \t]*)(\S+)")


def relabel_vtt(text: str, lang: str, target: str) -> str:
    """A WebVTT file whose header's ``Language:`` is ``target`` where it was ``lang``."""
    header = VTT_HEADER.match(text)
    assert header is not None  # (it matches anything)
    return VTT_LANGUAGE.sub(lambda m: m[1] + target if says(m[2], lang) else m[0],
                            header[0]) + text[header.end():]


# an EPUB package's language: its primary subtag (group 2)
LANGUAGE = re.compile(r"(<dc:language\b[^>]*>\s*)([A-Za-z]+)([-_][\w-]*)?(\s*</dc:language>)")


# the spine's page progression (EPUB 3), where it says one
PROGRESSION = re.compile(r"""(<spine\b[^>]*?\bpage-progression-direction=["'])(ltr|rtl)""")


def relabel_epub(package: str, lang: str, target: str) -> str:
    """An EPUB package file whose ``dc:language`` is ``target`` where it was ``lang``, and
    whose pages turn the target's way where they turned the source's (Arabic into English:
    ``page-progression-direction="rtl"`` is ``ltr``; into Arabic, ``rtl`` where none was
    said)."""
    if direction(lang) != direction(target):
        package = PROGRESSION.sub(lambda m: m.group(1) + direction(target) if m.group(2) ==
                                  direction(lang) else m.group(0), package)
        if direction(target) == "rtl" and not PROGRESSION.search(package):
            package = re.sub(r"<spine\b", '<spine page-progression-direction="rtl"', package,
                             count=1)
    return LANGUAGE.sub(lambda m: m.group(1) + target + m.group(4) if says(m.group(2), lang)
                        else m.group(0), package)


def relabel_word(document: Any, parts: tuple[str, ...], lang: str, target: str) -> None:
    """A Word document's ``w:lang`` (in its runs and styles: the parts whose content type ends
    with one of ``parts``) and its properties' language; its direction the target's
    (:func:`_redirect_word`)."""
    from docx.oxml.ns import qn

    for part in document.part.package.iter_parts():
        if part.content_type.endswith((*parts, "styles+xml")) and hasattr(part, "element"):
            for element in part.element.iter(qn("w:lang")):
                _relabel_attributes(element, (qn("w:val"), qn("w:eastAsia"), qn("w:bidi")),
                                    lang, target)
            if direction(lang) != direction(target):
                _redirect_word(part.element, direction(target) == "rtl", qn)
    _relabel_properties(document, lang, target)


# what follows w:bidi in a paragraph's properties (ECMA-376's order, which Word holds to)
AFTER_BIDI = ("adjustRightInd", "snapToGrid", "spacing", "ind", "contextualSpacing",
              "mirrorIndents", "suppressOverlap", "jc", "textDirection", "textAlignment",
              "textboxTightWrap", "outlineLvl", "divId", "cnfStyle", "rPr", "sectPr",
              "pPrChange")


def _redirect_word(element: Any, rtl: bool, qn: Callable[[str], str]) -> None:
    """A Word part written the other way: its paragraphs', runs', sections' and tables'
    direction (``w:bidi``, ``w:rtl``, ``w:bidiVisual``) switched; into a right-to-left
    language, the styles' default paragraph made right to left (what a paragraph inherits)."""
    for name in ("w:bidi", "w:rtl", "w:bidiVisual"):
        for switch in element.iter(qn(name)):
            switch.set(qn("w:val"), "1" if rtl else "0")
    for document_defaults in element.iter(qn("w:docDefaults")) if rtl else ():
        defaults = _child(document_defaults, qn("w:pPrDefault"))  # (after w:rPrDefault)
        properties = _child(defaults, qn("w:pPr"))
        if properties.find(qn("w:bidi")) is None:
            after = [c for c in properties if c.tag in {qn(f"w:{n}") for n in AFTER_BIDI}]
            bidi = properties.makeelement(qn("w:bidi"), {})
            if after:
                after[0].addprevious(bidi)
            else:
                properties.append(bidi)


def relabel_slides(presentation: Any, parts: tuple[str, ...], lang: str, target: str) -> None:
    """A presentation's runs' ``lang`` and ``altLang`` (in the parts whose content type ends
    with one of ``parts``) and its properties' language; between directions, each
    paragraph's (``a:pPr``'s ``rtl``) the target's."""
    from pptx.oxml.ns import qn

    for part in presentation.part.package.iter_parts():
        if part.content_type.endswith(parts) and hasattr(part, "_element"):
            for element in part._element.iter():
                _relabel_attributes(element, ("lang", "altLang"), lang, target)
            if direction(lang) != direction(target):
                for paragraph in part._element.iter(qn("a:p")):
                    paragraph.get_or_add_pPr().set("rtl", "1" if direction(target) == "rtl"
                                                   else "0")
    _relabel_properties(presentation, lang, target)


def relabel_odf(document: Any, lang: str, target: str) -> None:
    """An OpenDocument file's styles' ``fo:language`` (their ``fo:country`` dropped: it was
    the source's) and its metadata's ``dc:language``."""
    style = imported("odf.style", "an OpenDocument file (.odt, .odp, .ods)")
    dc = imported("odf.dc", "an OpenDocument file (.odt, .odp, .ods)")
    fo = "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
    for properties in document.getElementsByType(style.TextProperties):
        if says(properties.getAttrNS(fo, "language"), lang):
            properties.setAttrNS(fo, "language", target)
            if properties.getAttrNS(fo, "country") is not None:
                properties.removeAttrNS(fo, "country")
    if direction(lang) != direction(target):
        _redirect_odf(document, direction(target) == "rtl", style)
    for language in document.getElementsByType(dc.Language):
        if says(str(language), lang):
            for child in list(language.childNodes):
                language.removeChild(child)
            language.addText(target)


def _redirect_odf(document: Any, rtl: bool, style: Any) -> None:
    """An OpenDocument file written the other way: each paragraph style's writing mode that
    was the source's the target's; into a right-to-left language, the default paragraph's
    too (what a paragraph inherits)."""
    mode = ("urn:oasis:names:tc:opendocument:xmlns:style:1.0", "writing-mode")
    flip = {"lr-tb": "rl-tb", "lr": "rl"} if rtl else {"rl-tb": "lr-tb", "rl": "lr"}
    for properties in document.getElementsByType(style.ParagraphProperties):
        if properties.getAttrNS(*mode) in flip:
            properties.setAttrNS(*mode, flip[properties.getAttrNS(*mode)])
    for default in document.getElementsByType(style.DefaultStyle) if rtl else ():
        if default.getAttribute("family") == "paragraph":
            found = default.getElementsByType(style.ParagraphProperties)
            properties = found[0] if found else style.ParagraphProperties()
            properties.setAttrNS(*mode, "rl-tb")
            if not found:
                default.addElement(properties)


def _child(element: Any, tag: str) -> Any:
    """``element``'s child ``tag``, added last where it has none."""
    child = element.find(tag)
    if child is None:
        child = element.makeelement(tag, {})
        element.append(child)
    return child


def _relabel_attributes(element: Any, names: tuple[str, ...], lang: str, target: str) -> None:
    for name in names:
        if says(element.get(name), lang):
            element.set(name, target)


def _relabel_properties(document: Any, lang: str, target: str) -> None:
    if says(document.core_properties.language, lang):
        document.core_properties.language = target
