"""Gettext catalogues (``.po``, ``.pot``): a program's messages. Each message without a translation
gets one (a plural message each of its forms: the singular's translation, then the plural's),
marked ``fuzzy``: machine translation for a translator to review, which gettext does not show
until then (not where a memory gave each of its sentences, ``memory.py``: as msgmerge takes a
compendium's exact matches). A message translated already, the header's other fields and every
comment stay; the header's ``Language`` names the target where it named none. Read and written
by polib (the ``files`` extra), which wraps long lines as GNU gettext does.

A message's placeholders (``glossary.PLACEHOLDER``: ``%s``, ``%(count)d``, ``%1$s``,
``{name}``, ``{0}``, ``${HOME}``) are read in its sentence and come back as they were, where the
translation reads them (``documents.split_flow``'s kept pieces); its HTML tags (``<b>``) are
kept around their words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from transformer_mt.errors import MTError
from transformer_mt.packages import imported
from transformer_mt.translate.documents import Document, Held, Links, remembered, split_flow
from transformer_mt.translate.glossary import PLACEHOLDER as PLACEHOLDERS
from transformer_mt.translate.language_tags import says

PLACEHOLDER = re.compile(PLACEHOLDERS)
TAG = re.compile(r"</?[a-zA-Z][^<>]*>")  # an HTML tag in a message: kept around its words


def read_po(name: str, text: str, lang: str, target: str | None, held: Held = None
            ) -> tuple[list[Document[str]], Callable[[list[str]], bytes]]:
    """The messages to translate of a catalogue (each text, singular and plural, one
    :class:`Document`), and the function that writes it with their translations."""
    polib = imported("polib", "a gettext catalogue (.po, .pot)")
    try:
        catalogue = polib.pofile(text, wrapwidth=78)
    except (OSError, ValueError) as exc:
        raise MTError(f"'{name}' is not a gettext catalogue (.po, .pot): "
                      f"{str(exc).splitlines()[0][:200]}") from None
    said = catalogue.metadata.get("Language", "")
    if said and target and not says(said, target):
        raise MTError(f"'{name}' is a catalogue of {said}; this model translates {lang} into "
                      f"{target}")
    entries = [e for e in catalogue if not e.obsolete and e.msgid and not e.msgstr
               and not any(e.msgstr_plural.values())]  # (one with a suggestion: as it is)
    texts = [(e, text) for e in entries for text in [e.msgid, e.msgid_plural] if text]
    documents = [_message(message, lang) for _, message in texts]

    def write(translations: list[str]) -> bytes:
        found, docs = iter(translations), iter(documents)
        for entry in entries:
            singular, exact = next(found), remembered(next(docs), held)
            if entry.msgid_plural:
                plural, exact = next(found), remembered(next(docs), held) and exact
                forms = sorted(entry.msgstr_plural) or [0, 1]
                entry.msgstr_plural = {n: singular if n == 0 else plural for n in forms}
            else:
                entry.msgstr = singular
            if not exact:  # (a memory's translation: none, as msgmerge's compendium's)
                entry.flags.insert(0, "fuzzy")  # (where GNU gettext writes it)
        if target and not said:
            catalogue.metadata["Language"] = target
        kind = catalogue.metadata.get("Content-Type", "")  # written as UTF-8: said so
        catalogue.metadata["Content-Type"] = re.sub(r"charset=[\w.:-]+", "charset=UTF-8", kind,
                                                    flags=re.I) or "text/plain; charset=UTF-8"
        out = str(catalogue)  # (polib writes an empty header comment as "#")
        return (out if catalogue.header or text.startswith("#") else out.removeprefix("#\n")
                ).encode("utf-8")

    return documents, write


def _message(text: str, lang: str) -> Document[str]:
    """A message's sentences, its placeholders kept pieces and its tags markup between
    pieces; rebuilding gives the message."""
    parts = TAG.split(text)  # text, tag, text, ...
    tags = TAG.findall(text)
    pieces: list[str] = []
    kept: list[bool] = []
    bare: list[bool] = []
    after: list[str] = []  # the tag after each piece ("" where none)
    depth = 0
    for n, part in enumerate(parts):
        held = PLACEHOLDER.split(part)
        found = PLACEHOLDER.findall(part)
        for m, words in enumerate(held):
            pieces += [words, *found[m:m + 1]]
            kept += [False, True][:1 + (m < len(found))]
            after += ["", ""][:1 + (m < len(found))]
        bare += [depth <= 0] * (len(pieces) - len(bare))
        after[-1] = tags[n] if n < len(tags) else ""
        depth += n < len(tags) and (-1 if tags[n].startswith("</") else not tags[n].endswith(
            "/>"))
    flow = split_flow(pieces, lang, kept, bare)

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> str:
        return "".join(piece + tag for piece, tag in zip(
            flow.rebuild_with(translations, links), after, strict=True))

    return Document(flow.sentences, flow.cuts, rebuild)
