"""What a sentence's translation must hold: a glossary's terms (a source term -> the target
term the output must have) and, with ``keep_spans``, what is never translated (URLs, e-mail
addresses, ``{placeholders}`` and ``%s``, numbers), kept exactly.

Each such span of the source becomes a constraint on the output (``decode/constraints.py``:
the required text's target tokens must appear), and the output's tokens there are written as
the required text itself (``Tokenizer.detokenize_keeping``), so that a URL a word model cannot
spell, or a term whose tokens detokenize with other spacing, still comes out exactly.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from transformer_mt.data.tokenize import CJK, SOUTHEAST_ASIAN, normalized
from transformer_mt.errors import MTError

# a program's placeholders: Symfony's (%name%), printf's (%s, %(count)d, %1$s, %.2f), Python's
# and templates' ({name}, {0}, {{ name }}), the shell's (${HOME})
PLACEHOLDER = (r"%[A-Za-z_]\w+%|%(?:\d+\$|\(\w+\))?[-+#0]*(?:\d+|\*)?(?:\.\d+)?[hlLqjzt]*"
               r"[diouxXeEfFgGcrsa%]|\{\{[^{}]+\}\}|\{[^{}\s]*\}|\$\{[^{}\s]+\}")
# a letter or digit of a script that spaces its words: a word's edge (Chinese, Japanese, Thai
# run their words, and a Latin one, together)
LETTER = f"[^\\W{CJK}{SOUTHEAST_ASIAN}]"
MARKS = "\u3000-\u303f\uff01-\uff60"  # Chinese and Japanese punctuation, full-width forms
WIDE = f"{CJK}{MARKS}"
# what is kept as it is, most specific first (an e-mail address is not read as a URL)
KEPT = re.compile("|".join([
    rf"(?:{LETTER}|[.+-])+@(?:{LETTER}|-)+(?:\.(?:{LETTER}|-)+)+",  # e-mail addresses
    # a URL: after a space, to the next (Chinese in its path too, https://zh.x.org/wiki/中国);
    # run on from Chinese text, up to its first Chinese character or mark
    rf"(?<![{WIDE}])(?:(?:https?|ftp)://|www\.)[^\s<>\"']+[^\s<>\"'.,;:!?)\]{MARKS}]",
    rf"(?:(?:https?|ftp)://|www\.)[^\s<>\"'{WIDE}]+[^\s<>\"'.,;:!?)\]{WIDE}]",
    PLACEHOLDER,
    rf"(?<!{LETTER})(?<![.,])\d+(?:[.,:/]\d+)*(?!{LETTER})",  # numbers, times, dates
]))
LONGEST_TERM = 200  # characters of a glossary term


@dataclass
class Glossary:
    """Source terms with the target term each requires, matched as whole words and ignoring
    case, in the text as the tokenizers read it (NFC, no soft hyphens: ``normalized``);
    ``keep_spans``: URLs, e-mail addresses, placeholders and numbers kept exactly."""

    terms: Mapping[str, str] = field(default_factory=dict)
    keep_spans: bool = False
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _target: dict[str, str] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        for source, target in self.terms.items():
            for what, text in (("source", source), ("target", target)):
                if not isinstance(text, str) or not text.strip():
                    raise MTError(f"glossary entry '{source}': its {what} term is empty")
                if len(text) > LONGEST_TERM:
                    raise MTError(f"glossary entry '{source[:40]}': its {what} term is over "
                                  f"{LONGEST_TERM} characters")
        read = {_read(source).strip(): target.strip() for source, target in self.terms.items()}
        terms = sorted(read, key=len, reverse=True)  # the longest term first
        pattern = "|".join(rf"(?<!{LETTER}){re.escape(t)}(?!{LETTER})" for t in terms)
        self._pattern = re.compile(pattern, re.IGNORECASE) if terms else None
        self._target = {t.casefold(): v for t, v in read.items()}

    def __bool__(self) -> bool:
        return bool(self.terms) or self.keep_spans

    @classmethod
    def read(cls, path: str | Path, keep_spans: bool = False) -> Glossary:
        """A glossary from a TSV file: ``source term<TAB>target term`` a line; blank lines and
        lines starting with ``#`` are skipped."""
        terms: dict[str, str] = {}
        try:
            with open(path, encoding="utf-8-sig", newline="") as f:  # a BOM dropped
                for n, row in enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE),
                                        start=1):
                    if not row or not "".join(row).strip() or row[0].startswith("#"):
                        continue
                    if len(row) != 2:
                        raise MTError(f"{path}, line {n}: a glossary line is 'source term<TAB>"
                                      f"target term', not {len(row)} field(s)")
                    terms[row[0]] = row[1]
        except (OSError, UnicodeDecodeError) as exc:
            raise MTError(f"cannot read the glossary {path}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
        return cls(terms, keep_spans)

    def required(self, sentence: str) -> list[str]:
        """The texts the translation of ``sentence`` must hold, in the source's order: the
        target term of each glossary term found, and each span kept."""
        found: list[tuple[int, int, str]] = []
        sentence = _read(sentence)
        if self._pattern is not None:
            found += [(m.start(), m.end(), self._target[m.group().casefold()])
                      for m in self._pattern.finditer(sentence)]
        if self.keep_spans:
            found += [(m.start(), m.end(), m.group()) for m in KEPT.finditer(sentence)]
        kept, end = [], -1
        for start, stop, text in sorted(found, key=lambda f: (f[0], -f[1])):
            if start >= end:  # a span inside one already found is that one
                kept.append(text)
                end = stop
        return kept


def _read(text: str) -> str:
    """``text`` as the tokenizers read it."""
    return next(normalized([text]))
