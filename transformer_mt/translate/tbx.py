"""A termbase (TBX) as a glossary: ``--glossary terms.tbx``.

TBX, the TermBase eXchange format (ISO 30042: TBX-Basic and the 2008 ``<martif>``, and the 2019
``<tbx>``), is what terminology tools (MultiTerm, memoQ, Phrase, Termweb) export a termbase as.
It holds concepts (``<termEntry>``, ``<conceptEntry>``), each its terms in each language
(``<langSet xml:lang="de">``, ``<langSec>``), a term in a ``<tig>``, ``<ntig>`` or
``<termSec>`` with notes on it. Of a concept, each term in the model's source language is a
source term, its target term the concept's first term in the target language that is not
marked deprecated (``administrativeStatus`` "deprecatedTerm-admn-sts", "supersededTerm-admn-sts",
TBX 2019's "deprecated" or "superseded"), a preferred one ("preferredTerm-admn-sts",
"preferred") before the others; and its deprecated target terms are the words the translation
must not hold where the source term is (a TSV glossary's further fields; but a deprecated
spelling of the term itself, "Hounds" beside "hounds"). A concept without
both languages, or without a target term that is not deprecated, gives no entry. A language
tag names its language or a region of it ("de-DE" for "de"), as a translation memory's
(``data/tmx.py``). Read as a stream with the stdlib's expat, which expands no entity bomb and
fetches no DTD.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

from transformer_mt.data.tmx import LANG, local, matches, opened, units
from transformer_mt.errors import MTError

CONCEPTS = frozenset({"termEntry", "conceptEntry"})
LANGUAGES = frozenset({"langSet", "langSec"})
TERMS = frozenset({"tig", "ntig", "termSec"})


def is_tbx(path: str | Path) -> bool:
    """Whether ``path`` is a termbase (by its name: ``.tbx``, ``.tbx.gz``)."""
    name = str(path).lower()
    return name.endswith((".tbx", ".tbx.gz"))


def read_tbx(path: str | Path, src: str, tgt: str) -> tuple[dict[str, str],
                                                           dict[str, list[str]]]:
    """The glossary of the termbase at ``path`` from ``src`` to ``tgt``: (source term ->
    target term, source term -> its target words to avoid); a one-line error where it is no
    XML or holds no concept in both languages."""
    if not (src and tgt):
        raise MTError(f"the glossary {path} is a termbase: read it for a language pair, "
                      "Glossary.read(path, languages=(source, target))")
    terms: dict[str, str] = {}
    avoid: dict[str, list[str]] = {}
    try:
        with opened(Path(path)) as stream:
            for concept in units(stream, CONCEPTS):
                sources, targets = (_terms(concept, language) for language in (src, tgt))
                usable = [t for t, deprecated in targets if not deprecated]
                for term in (t for t, _ in sources) if usable else ():
                    terms[term] = usable[0]  # (a deprecated spelling of it is no other word)
                    avoid[term] = [t for t, deprecated in targets if deprecated
                                   and t.casefold() != usable[0].casefold()]
    except ElementTree.ParseError as exc:
        raise MTError(f"the glossary {path} is not a TBX file (its XML: {exc})") from None
    except (OSError, EOFError) as exc:
        raise MTError(f"cannot read the glossary {path}: {exc}") from None
    if not terms:
        raise MTError(f"the glossary {path} holds no concept with a term in both {src} and "
                      f"{tgt} (one not deprecated in {tgt})")
    return terms, {t: words for t, words in avoid.items() if words}


def _terms(concept: ElementTree.Element, language: str) -> list[tuple[str, bool]]:
    """A concept's terms in ``language`` (its exact tag's, else its region's), each with
    whether it is deprecated; a preferred one first."""
    found: dict[str, list[tuple[str, bool, bool]]] = {}
    for section in concept:
        if local(section.tag) not in LANGUAGES:
            continue
        tag = (section.get(LANG) or section.get("lang") or "").replace("_", "-").casefold()
        for group in section.iter():
            term = next((e for e in group.iter() if local(e.tag) == "term"), None)
            if local(group.tag) not in TERMS or term is None or not "".join(
                    term.itertext()).strip():
                continue
            status = " ".join((e.text or "").casefold() for e in group.iter()
                              if local(e.tag) in ("termNote", "descrip")
                              and e.get("type") in ("administrativeStatus",
                                                    "normativeAuthorization"))
            found.setdefault(tag, []).append((" ".join("".join(term.itertext()).split()),
                                              "deprecated" in status or "superseded" in status,
                                              "preferred" in status))
    chosen = matches(list(found), language)
    listed = found.get(chosen, []) if chosen is not None else []
    return [(t, deprecated) for t, deprecated, _ in sorted(listed, key=lambda x: not x[2])]
