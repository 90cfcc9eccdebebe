"""What a sentence's translation must hold: a glossary's terms (a source term -> the target
term the output must have) and, with ``keep_spans``, what is never translated (URLs, e-mail
addresses, ``{placeholders}`` and ``%s``, numbers), kept exactly.

Each such span of the source becomes a constraint on the output (``decode/constraints.py``:
the required text's target tokens must appear), and the output's tokens there are written as
the required text itself (``Tokenizer.detokenize_keeping``), so that a URL a word model cannot
spell, or a term whose tokens detokenize with other spacing, still comes out exactly.

A term the target vocabulary lacks (a word model's: SentencePiece spells any word) can be
written only as ``<unk>``, which the model writes where the source has a word it does not know
(a name). So the model reads that term's source as the term itself (:func:`steered`), a word
unknown to it, and writes ``<unk>`` where the term stands: "Ein Mann fährt Fahrrad auf der
avenue." → "A man is riding a bike on the avenue.". Given the source as it was, the search put
the ``<unk>`` where the model left room for it, beside its own translation of the source term:
"A man avenue on the street.".

A term the model would not write (a synonym of its own word) is placed by the search where it
costs least, often beside the model's word or at the end: "A woman in a hat is sitting in the
parkland fedora.". An entry may name words to avoid (negative constraints): with ``Hut →
fedora, avoid hat`` the search cannot write "hat" and puts the term where "hat" would be.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from transformer_mt.data.tokenize import CJK, SOUTHEAST_ASIAN, normalized
from transformer_mt.data.vocab import UNK_ID
from transformer_mt.errors import MTError
from transformer_mt.translate.numbers import CURRENCY, SPACES, Writer, writer, written
from transformer_mt.translate.pieces import continuing_ids, digit_ids
from transformer_mt.translate.results import Required
from transformer_mt.translate.spelling import either_way
from transformer_mt.translate.tbx import is_tbx, read_tbx
from transformer_mt.translate.user_files import tsv_rows

if TYPE_CHECKING:
    from transformer_mt.config import DecodeConfig
    from transformer_mt.decode.forcing import Forcing
    from transformer_mt.decode.search import Hypothesis
    from transformer_mt.translate import Translator
    from transformer_mt.translate.engines import TorchEngine

# a program's placeholders: Symfony's (%name%), printf's (%s, %(count)d, %1$s, %.2f), Python's
# and templates' ({name}, {0}, {{ name }}), the shell's (${HOME})
PLACEHOLDER = (r"%[A-Za-z_]\w+%|%(?:\d+\$|\(\w+\))?[-+#0]*(?:\d+|\*)?(?:\.\d+)?[hlLqjzt]*"
               r"[diouxXeEfFgGcrsa%]|\{\{[^{}]+\}\}|\{[^{}\s]*\}|\$\{[^{}\s]+\}")
# a letter or digit of a script that spaces its words: a word's edge (Chinese, Japanese, Thai
# run their words, and a Latin one, together)
LETTER = f"[^\\W{CJK}{SOUTHEAST_ASIAN}]"
MARKS = "\u3000-\u303f\uff01-\uff60"  # Chinese and Japanese punctuation, full-width forms
WIDE = f"{CJK}{MARKS}"
QUOTES = "\u2018-\u201f\u00ab\u00bb\u2039\u203a"  # ‘’‚‛“”„‟«»‹›: round a URL, not in it
# units after a number, written on or spaced ("10km", "0,5l", "30 km/h"), in lower case where
# they are
UNITS = ("km/h|km²|km|cm|mm|m²|m³|m|kg|mg|g|ml|cl|l|kWh|kW|W|V|GB|MB|TB|kB|KB|GHz|MHz|kHz|Hz|h"
         "|min|s|ms|mph|ft|lb|oz|mi")
# what is kept as it is, most specific first (an e-mail address is not read as a URL)
KEPT = re.compile("|".join([
    rf"(?:{LETTER}|[.+-])+@(?:{LETTER}|-)+(?:\.(?:{LETTER}|-)+)+",  # e-mail addresses
    # a URL: after a space, to the next (Chinese in its path too, https://zh.x.org/wiki/中国);
    # run on from Chinese text, up to its first Chinese character or mark
    rf"(?<![{WIDE}])(?:(?:https?|ftp)://|www\.)[^\s<>\"'{QUOTES}]+[^\s<>\"'.,;:!?)\]{MARKS}{QUOTES}]",
    rf"(?:(?:https?|ftp)://|www\.)[^\s<>\"'{WIDE}{QUOTES}]+[^\s<>\"'.,;:!?)\]{WIDE}{QUOTES}]",
    PLACEHOLDER,
    # a telephone number in international notation, whole (E.123: "+49 30 1234567")
    rf"(?<![\w+])\+(?=[\d{SPACES}]{{9}})\d{{1,3}}(?:[{SPACES}]\d{{2,}})+(?!\d)",
    # numbers, times, dates, whole or not at all ("0" of "0,5l" was one; a digit in a word is
    # none: "3D", "MP3"); with a currency's sign before or after ("$5", "12,50 €"), a
    # percentage's, degrees ("50 %", "30 °C", "50%ige"), a unit ("10km", "0,5l", "30 km/h"):
    # a model of captions wrote "12,50" alone, left "10km" out, wrote "30 km/h" "30-km km km";
    # a number's sign before it ("#19": the model left "#" out); a range or a score whole
    # ("5-6": "5 people ... the 6 Müller"); its sign where it starts a word ("-5 °C", "−12",
    # "–3", "+49", "-$5": the model wrote "5 °C", "12"); its thousands in groups of three after
    # a space ("1 250 000", SI's and French's, with no-break spaces too: "250 1 of 000")
    rf"(?:(?<![\w.,+\-\u2212–])[-+\u2212–](?=[{CURRENCY}]))?"
    rf"(?:[{CURRENCY}][{SPACES}]?|#)?(?:(?<![\w.,+\-\u2212–])[-+\u2212–](?=\d))?"
    rf"(?<!{LETTER})(?<![.,])(?=(?P<number>(?:\d{{1,3}}(?:[{SPACES}]\d{{3}})+(?!\d)|\d+)"
    rf"(?:[.,:/–-]\d+)*))"
    rf"(?P=number)(?:%(?={LETTER})|[{SPACES}]?(?:{UNITS})(?!{LETTER})|(?!{LETTER})"
    rf"(?:[{SPACES}]?(?:[{CURRENCY}%\u2030]|°[CF]?)(?!{LETTER}))?)",
]))
LONGEST_TERM = 200  # characters of a glossary term
# (the constrained search is a beam search: a sampled sentence would be searched instead)
SAMPLED = ("sampling (sample_topk, top_p) and a glossary (or kept spans) cannot be given "
           "together")
PREFIXED = "a prefix and a glossary (or kept spans) cannot be given together"
EXPORTED = ("a glossary and kept spans need a PyTorch checkpoint (.pt): CTranslate2 cannot "
            "constrain its search")


@dataclass
class Glossary:
    """Source terms with the target term each requires, matched as whole words and ignoring
    case, in the text as the tokenizers read it (NFC, no soft hyphens: ``normalized``);
    ``keep_spans``: URLs, e-mail addresses, placeholders and numbers kept exactly; ``avoid``:
    a source term's words its translation must not hold (the model's own word for it, which
    would stand beside the term: ``{"Hund": ["dog"]}`` with ``{"Hund": "hound"}``)."""

    terms: Mapping[str, str] = field(default_factory=dict)
    keep_spans: bool = False
    avoid: Mapping[str, Sequence[str]] = field(default_factory=dict)
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _target: dict[str, str] = field(init=False, repr=False, default_factory=dict)
    _term: dict[str, str] = field(init=False, repr=False, default_factory=dict)
    _avoid: dict[str, tuple[str, ...]] = field(init=False, repr=False, default_factory=dict)
    _keeping: Glossary | None = field(init=False, repr=False, default=None)  # (extended)

    def __post_init__(self) -> None:
        for source, target in self.terms.items():
            for what, text in (("source", source), ("target", target)):
                if not isinstance(text, str) or not text.strip():
                    raise MTError(f"glossary entry '{source}': its {what} term is empty")
                if len(text) > LONGEST_TERM:
                    raise MTError(f"glossary entry '{source[:40]}': its {what} term is over "
                                  f"{LONGEST_TERM} characters")
        read = {_read(source).strip(): target.strip() for source, target in self.terms.items()}
        # each term typed with its letters or without ("Straße", "Strasse": spelling.py), in
        # a sentence as typed or as read; a term given in both spellings: each its own
        spelt = {v: t.casefold() for t in read for v in either_way(t)} | {
            t: t.casefold() for t in read}
        self._term = {v.casefold(): t for v, t in spelt.items()}
        pattern = rf"(?<!{LETTER}){_trie(spelt)}(?!{LETTER})"  # the longest term first
        self._pattern = re.compile(pattern, re.IGNORECASE) if read else None
        self._target = {t.casefold(): v for t, v in read.items()}
        self._avoid = {key: words for key, words in map(self._avoided, self.avoid.items())}

    def _avoided(self, entry: tuple[str, Sequence[str]]) -> tuple[str, tuple[str, ...]]:
        """An ``avoid`` entry checked: (its source term as matched, its words)."""
        source, words = entry
        key = _read(source).strip().casefold() if isinstance(source, str) else ""
        if key not in self._target:
            raise MTError(f"glossary: words to avoid are given for '{str(source)[:40]}', which "
                          "is not one of its source terms")
        if isinstance(words, str) or not all(isinstance(w, str) and w.strip() for w in words):
            raise MTError(f"glossary entry '{source[:40]}': its words to avoid are a list of "
                          "words, none empty")
        for word in words:
            if len(word) > LONGEST_TERM:
                raise MTError(f"glossary entry '{source[:40]}': a word to avoid is over "
                              f"{LONGEST_TERM} characters")
            if word.strip().casefold() == self._target[key].casefold():
                raise MTError(f"glossary entry '{source[:40]}': it asks for "
                              f"'{self._target[key]}' and avoids '{word.strip()}'")
        return key, tuple(w.strip() for w in words)

    def __bool__(self) -> bool:
        return bool(self.terms) or self.keep_spans

    @classmethod
    def read(cls, path: str | Path, keep_spans: bool = False,
             languages: tuple[str, str] = ("", "")) -> Glossary:
        """A glossary from a TSV file: ``source term<TAB>target term`` a line, then the words
        not to write where the source term is (``Hund<TAB>hound<TAB>dog``: ``avoid``); blank
        and ``#`` lines skipped. A termbase (``.tbx``) read in ``languages``' way: tbx.py."""
        if is_tbx(path):
            found = read_tbx(path, *languages)
            return cls(found[0], keep_spans, found[1])
        terms: dict[str, str] = {}
        avoid: dict[str, list[str]] = {}
        for n, row in tsv_rows(path, "glossary"):
            if len(row) < 2:
                raise MTError(f"{path}, line {n}: a glossary line is 'source term<TAB>target "
                              "term[<TAB>word to avoid...]', not 1 field")
            terms[row[0]] = row[1]  # (a term given again: its last line)
            avoid[row[0]] = [w for w in row[2:] if w.strip()]
        return cls(terms, keep_spans, {t: words for t, words in avoid.items() if words})

    def extended(self, terms: Mapping[str, str], keep_spans: bool = False,
                 avoid: Mapping[str, Sequence[str]] | None = None) -> Glossary:
        """This glossary with ``terms`` over its own (a source term in both: the given one,
        with the given words to avoid or none), spans kept where either keeps them."""
        if not terms and not avoid:  # (a server's thousands of terms not read again)
            if keep_spans <= self.keep_spans:
                return self
            if self._keeping is None:  # (each request's: made once)
                self._keeping = dataclasses.replace(self, keep_spans=True)
            return self._keeping
        given = {_read(t).strip().casefold() for t in terms if isinstance(t, str)}
        mine = {t: v for t, v in self.terms.items() if _read(t).strip().casefold() not in given}
        return Glossary({**mine, **terms}, self.keep_spans or keep_spans,
                        {**{t: w for t, w in self.avoid.items() if t in mine}, **(avoid or {})})

    def required(self, sentence: str, numbers: Writer | None = None) -> list[str]:
        """The texts the translation of ``sentence`` must hold, in the source's order: the
        target term of each glossary term found, and each span kept (a number in it as
        ``numbers`` writes it: ``numbers.writer``)."""
        return [text for _, _, text, _ in self._spans(_read(sentence), numbers)]

    def avoided(self, sentence: str) -> list[tuple[str, ...]]:
        """The words the translation of ``sentence`` must not hold, for each text of
        :meth:`required` (none for a span kept)."""
        return [words for _, _, _, words in self._spans(_read(sentence))]

    def numbers_kept(self, sentence: str) -> bool:
        """Whether spans are kept and every digit of ``sentence`` stands in one (a number, a
        URL): none in a word ("3D", "MP3"). Its translation then writes a number only as
        the source has it (:func:`steered`): "Ein Kind mit der Nummer 93" came out as "the
        number 93 9 #8" with 93 kept, "Nummer 15" as "15 5"."""
        read = _read(sentence)
        kept = {i for m in KEPT.finditer(read) for i in range(*m.span())}
        return self.keep_spans and all(i in kept for i, c in enumerate(read) if c.isdigit())

    def marked(self, sentence: str, targets: Collection[str]) -> str:
        """``sentence`` with the source of each glossary term whose target term is one of
        ``targets`` written as its target term (the sentence as it is where it holds none)."""
        read = _read(sentence)
        terms = [(start, stop, text) for start, stop, text, _ in self._spans(read)
                 if text in targets and read[start:stop] != text]
        for start, stop, text in reversed(terms):
            read = read[:start] + text + read[stop:]
        return read if terms else sentence

    def _spans(self, sentence: str, numbers: Writer | None = None
               ) -> list[tuple[int, int, str, tuple[str, ...]]]:
        """Where each required text's source stands in ``sentence`` (as the tokenizers read
        it), the text (a kept number as ``numbers`` writes it), and the words to avoid."""
        found: list[tuple[int, int, str, tuple[str, ...]]] = []
        if self._pattern is not None:
            found += [(m.start(), m.end(), self._target[key], self._avoid.get(key, ()))
                      for m in self._pattern.finditer(sentence)
                      for key in [self._term[m.group().casefold()]]]
        if self.keep_spans:
            found += [(m.start(), m.end(), written(m, numbers), ())
                      for m in KEPT.finditer(sentence)]
        kept, end = [], -1
        for span in sorted(found, key=lambda f: (f[0], -f[1])):
            if span[0] >= end:  # a span inside one already found is that one
                kept.append(span)
                end = span[1]
        return kept


def steered(translator: Translator, sentences: Sequence[str], glossary: Glossary,
            ids: Sequence[Sequence[int]] | None = None, cfg: DecodeConfig | None = None,
            ) -> tuple[list[str], list[list[int]], list[list[Required]]]:
    """What each translation of ``sentences`` must hold with ``glossary``: each text with its
    target ids, the constraint search places (a kept number as the target language writes it
    where ``cfg.localize_numbers``); and each sentence as the model reads it (what its unknown
    words are copied from), there and as ids (``ids``: the sentences' own, kept where it reads
    them as they are): a term the target vocabulary lacks (a word model's ``<unk>``) is read
    in the source as itself, :meth:`Glossary.marked`."""
    required = []
    digits = tuple((i,) for i in digit_ids(translator.tgt_vocab)) if glossary.keep_spans \
        else ()
    data = translator.config.data
    numbers = writer(data.src_lang, data.tgt_lang) if cfg is None or cfg.localize_numbers \
        else None
    for s in sentences:
        texts, avoided = glossary.required(s, numbers), glossary.avoided(s)
        pieces = translator.tokenizers[1].tokenize(texts)
        others = digits if texts and glossary.numbers_kept(s) else ()  # no number but those
        required.append([Required(text, translator.tgt_vocab.encode(p, eos=False),
                                  (_spellings(translator, words) if words else ()) + others)
                         for text, p, words in zip(texts, pieces, avoided, strict=True)])
    marked = [glossary.marked(s, {r.text for r in req if UNK_ID in r.ids})
              for s, req in zip(sentences, required, strict=True)]
    changed = [i for i, (m, s) in enumerate(zip(marked, sentences, strict=True))
                      if m != s or ids is None]
    out = [list(i) for i in ids] if ids is not None else [[] for _ in sentences]
    for i, read in zip(changed, translator.encode([marked[i] for i in changed]), strict=True):
        out[i] = read
    return marked, out, required


def _spellings(translator: Translator, words: Sequence[str]) -> tuple[tuple[int, ...], ...]:
    """The target ids of ``words`` as the model could write them: each as given, and with its
    first letter in the other case (a sentence's start); with subword pieces, in any of their
    segmentations (:data:`SPELLINGS` a form: a model trained on sampled ones writes them
    too); those it can write only as ``<unk>`` left out (an ``<unk>`` stands for any word)."""
    forms = list(dict.fromkeys(f for w in words for f in (
        w, w[:1].upper() + w[1:], w[:1].lower() + w[1:])))
    tokenizer, vocab = translator.tokenizers[1], translator.tgt_vocab
    pieces = list(tokenizer.tokenize(forms))
    ids = [tuple(vocab.encode(p, eos=False)) for p in pieces]
    if tokenizer.subword:
        ids += [s for p in pieces for s in _segmentations("".join(p), vocab.stoi)]
    return tuple(dict.fromkeys(i for i in ids if i and UNK_ID not in i))


SPELLINGS = 16  # segmentations of a word avoided, fewest pieces first


def _segmentations(text: str, pieces: Mapping[str, int]) -> list[tuple[int, ...]]:
    """The ways to spell ``text`` in ``pieces`` (piece -> id), fewest pieces first, at most
    :data:`SPELLINGS`."""
    ways: list[list[tuple[int, ...]]] = [[] for _ in text] + [[()]]  # from each position on
    for i in reversed(range(len(text))):
        found = [(pieces[text[i:j]], *rest) for j in range(i + 1, len(text) + 1)
                 if text[i:j] in pieces for rest in ways[j]]
        ways[i] = sorted(found, key=len)[:SPELLINGS]
    return ways[0]


def _trie(terms: Iterable[str]) -> str:
    """A pattern (ignoring case) that matches any of ``terms``, the longest where several
    do, as a trie: a sentence takes as long against 20,000 terms as against 10 (an
    alternation of each term tried them one by one: 1.5 ms a sentence, 44 s to compile 10,000
    terms with their own word edges)."""
    trie: dict[str, dict] = {}
    for term in terms:
        node = trie
        for ch in term:
            low = ch.lower()  # (one node for both cases, unless lower case is two letters)
            node = node.setdefault(low if len(low) == 1 else ch, {})
        node[""] = {}

    def pattern(node: dict[str, dict]) -> str:
        branches = [re.escape(ch) + pattern(child) for ch, child in node.items() if ch]
        if "" in node:  # a term ends here: a longer one first
            return f"(?:{'|'.join(branches)})?" if branches else ""
        return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"

    return f"(?:{pattern(trie)})"


def _read(text: str) -> str:
    """``text`` as the tokenizers read it."""
    return next(normalized([text]))




def unheld(translator: Translator, cfg: DecodeConfig, forced: bool) -> str | None:
    """Why a search with these settings (``forced``: with a prefix) cannot hold a glossary or
    keep spans, or None where it can."""
    from transformer_mt.translate.engines import TorchEngine  # (torch: not for mt --help)

    if not isinstance(translator.engine, TorchEngine):
        return EXPORTED
    return PREFIXED if forced else SAMPLED if cfg.samples else None


def holding(translator: Translator, glossary: Glossary | None, cfg: DecodeConfig,
            forced: bool = False) -> Glossary | None:
    """What a call's translations hold to: ``glossary``, else the translator's (``mt
    translate``'s and ``mt serve``'s ``--glossary``), with the spans kept where
    ``cfg.keep_spans`` asks it and the search can (``forced``: a prefix; a search that cannot,
    sampling's, a prefix's, CTranslate2's, translates without)."""
    glossary = translator.glossary if glossary is None else glossary
    if not cfg.keep_spans or (glossary is not None and glossary.keep_spans) or \
            unheld(translator, cfg, forced):
        return glossary
    return (glossary or KEEP).extended({}, True)


def asked(translator: Translator, glossary: Glossary | None, cfg: DecodeConfig,
          given: bool) -> Glossary | None:
    """The glossary a call gives (None: the translator's holds), with the spans kept where
    the call itself asks for them (``given``: ``cfg.keep_spans`` was; then held to as a
    glossary is, an error where the search cannot); sampling refused with either."""
    if given and cfg.keep_spans:  # (the checkpoint's: where the search can, holding)
        glossary = ((translator.glossary if glossary is None else glossary) or KEEP).extended(
            {}, True)
    if cfg.samples and (translator.glossary if glossary is None else glossary):
        raise MTError(SAMPLED)  # (whether or not a sentence holds a term)
    return glossary


def decode_required(translator: Translator, ids: Sequence[Sequence[int]], cfg: DecodeConfig,
                    nbest: int, forcing: Forcing | None, stop: Callable[[], bool] | None,
                    required: Sequence[Sequence[Required]]) -> list[list[Hypothesis]]:
    """The sentences with something required (``steered``) searched with constraints, the
    others as ever."""
    why = unheld(translator, cfg, forcing is not None)
    if why:
        raise MTError(why)
    engine = cast("TorchEngine", translator.engine)  # (unheld: it is one)
    held = [i for i, r in enumerate(required) if r]
    free = [i for i, r in enumerate(required) if not r]
    hyps: list[list[Hypothesis]] = [[] for _ in ids]
    glued = continuing_ids(translator.tgt_vocab) if translator.tokenizers[1].subword \
        else frozenset()
    found = engine.decode_constrained(
        [ids[i] for i in held], [[r.ids for r in required[i]] for i in held], cfg, nbest,
        stop, glued, [list(dict.fromkeys(a for r in required[i] for a in r.avoid)) for i in held])
    for i, placed in zip(held, found, strict=True):
        hyps[i] = list(placed)
    if free:
        for i, h in zip(free, translator.engine.decode([ids[i] for i in free], cfg, nbest,
                                                       stop=stop), strict=True):
            hyps[i] = h
    return hyps


KEEP = Glossary(keep_spans=True)  # spans kept, no terms
