"""The languages a config may name: the codes spaCy's tokenizers know, read from its package
without importing it, and a helpful error for a name or a typo (``German`` -> ``de``)."""

from __future__ import annotations

import difflib
import functools
import importlib.util
import re
from pathlib import Path

from transformer_mt.errors import ConfigError


@functools.lru_cache(maxsize=1)
def spacy_languages() -> tuple[str, ...]:
    """The language codes ``spacy.blank`` knows, read from spaCy's package without importing it
    (an import takes a second)."""
    spec = importlib.util.find_spec("spacy")
    if spec is None or spec.origin is None:
        return ()
    lang_dir = Path(spec.origin).parent / "lang"
    if not lang_dir.is_dir():  # not spaCy's package as it is installed: nothing to go by
        return ()
    return tuple(sorted(p.name for p in lang_dir.iterdir()
                        if p.is_dir() and (p / "__init__.py").is_file()))


def _language_names() -> dict[str, str]:
    """spaCy's language classes by lowercase name (``german`` -> ``de``), read from source."""
    spec = importlib.util.find_spec("spacy")
    names = {}
    for code in spacy_languages():
        try:
            text = (Path(str(spec and spec.origin)).parent / "lang" / code / "__init__.py"
                    ).read_text(encoding="utf-8")
        except OSError:
            continue
        match = re.search(r"^class (\w+)\(Language\)", text, re.MULTILINE)
        if match:
            names[match.group(1).lower()] = code
    return names


ISO_639 = re.compile(r"[a-z]{2,3}")  # a language's code: two letters, or three


def check_language(code: str, key: str, subwords: bool = False) -> None:
    """That ``code`` names a language spaCy's tokenizers know, or with ``subwords``
    (SentencePiece, which needs none of spaCy's rules: Swahili, Hausa, Khmer), any ISO 639
    code; else a one-line error that suggests one (``German`` -> ``de``; a name spaCy does
    not know, none)."""
    known = spacy_languages()
    if not known or code in known or (subwords and ISO_639.fullmatch(code)):
        return
    by_name, lower = _language_names(), code.lower()
    close = ([by_name[lower]] if lower in by_name else [] if subwords and not
             ISO_639.fullmatch(lower) else difflib.get_close_matches(lower, known, n=1,
                                                                     cutoff=0.0))
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ConfigError(f"config key '{key}' is {code!r}, " + (
        f"not a language's ISO 639 code (2 or 3 lowercase letters){hint}" if subwords else
        f"a language spaCy does not know{hint} (known: {', '.join(known)}; with "
        "data.tokenizer=sentencepiece, any ISO 639 code)"))


def language_name(code: str) -> str:
    """spaCy's name of a language (``de`` -> ``German``), else the code."""
    names = {c: n for n, c in _language_names().items()}
    return names[code].capitalize() if code in names else code
