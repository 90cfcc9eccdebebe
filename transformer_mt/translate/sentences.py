"""Where a text's sentences begin and end (``documents.py`` reads texts with them), and what
goes between sentences read as one.

Sentences are found by spaCy's rule-based ``sentencizer`` on the language's blank pipeline
(its tokenizer knows the language's abbreviations: "Dr.", "z.B.", "3. Mai" do not end a
sentence); no model is downloaded. A line break ends a sentence, but one inside a sentence
(:func:`soft_breaks`: a line that runs on into the next, as a page's ``<br>`` or a document's
soft line break may cut one); a line of no mark that may end one is one sentence, read
without loading spaCy."""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from transformer_mt.data.tokenize import CJK, CJK_CHARACTER
from transformer_mt.data.words import spacy_pipeline
from transformer_mt.errors import DataError


@functools.lru_cache(maxsize=8)
def _sentencizer(lang: str) -> Any:
    try:
        nlp = spacy_pipeline(lang)  # the word tokenizer's: one vocabulary
    except DataError:  # a language spaCy has no rules for
        nlp = spacy_pipeline("xx")
    if "sentencizer" not in nlp.pipe_names:
        nlp.add_pipe("sentencizer")
    return nlp


# a list item's marker at the start of a line ("- ", "* ", "• ", "1. ", "2) ", "(3) ", "[4] ",
# "a) ", "(b) ", "(iv) ": a German law's paragraph "(1) Die Würde ..."): kept as it is
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
LIST_MARKER = re.compile(rf"[ \t{ZERO_WIDTH}]*(?:[-*•–]|\d{{1,3}}[.)]|\(\d{{1,3}}\)|\[\d{{1,3}}\]"
                         r"|\(?(?:[a-zA-Z]|[ivxIVX]{2,4})\))[ \t]+(?=\S)")


def _blank(c: str) -> bool:
    """Whitespace, or a character of no width: around a sentence, never part of it."""
    return c.isspace() or c in ZERO_WIDTH


# the marks spaCy's sentencizer ends a sentence at (its default_punct_chars, spaCy 3.8:
# tests/unit/test_long_sentences.py compares them): a line without one before other text is
# one sentence, read without loading spaCy (a second)
SENTENCE_ENDS = frozenset(
    "!.?։؟۔܀܁܂߹।॥၊။።፧፨᙮᜵᜶᠃᠉᥄᥅᪨᪩᪪᪫᭚᭛᭞᭟᰻᰼᱾᱿‼‽⁇⁈⁉⸮⸼꓿꘎꘏꛳꛷"
    "꡶꡷꣎꣏꤯꧈꧉꩝꩞꩟꫰꫱꯫﹒﹖﹗！．？𐩖𐩗𑁇𑁈𑂾𑂿𑃀𑃁𑅁𑅂𑅃𑇅𑇆𑇍𑇞𑇟𑈸𑈹𑈻𑈼𑊩𑑋𑑌𑗂𑗃𑗉𑗊𑗋𑗌"
    "𑗍𑗎𑗏𑗐𑗑𑗒𑗓𑗔𑗕𑗖𑗗𑙁𑙂𑜼𑜽𑜾𑩂𑩃𑪛𑪜𑱁𑱂𖩮𖩯𖫵𖬷𖬸𖭄𛲟𝪈｡。")


def _one_sentence(line: str) -> bool:
    """Whether ``line`` has no mark that may end a sentence with more after it (marks alone
    may follow it, without a space: after spaces spaCy's tokens begin a sentence)."""
    first = next((i for i, c in enumerate(line) if c in SENTENCE_ENDS), len(line))
    return all(c in SENTENCE_ENDS for c in line[first:].rstrip())


def sentence_spans(text: str, lang: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the sentences of ``text``: a line break always ends
    a sentence, surrounding whitespace (and zero-width characters) and a line's list marker
    are not part of one, and a span without a letter or a digit (punctuation between inline
    tags, a line of dashes) is no sentence: it is kept."""
    spans: list[tuple[int, int]] = []
    line_start = 0
    for line in text.split("\n"):
        marker = LIST_MARKER.match(line)
        skip = marker.end() if marker else 0
        for at, part in _separated(line, skip):
            found = [(0, len(part))] if _one_sentence(part) else _cjk_cut(part, _opened(
                part, [(s.start_char, s.end_char) for s in _sentencizer(lang)(part).sents]))
            for sent_start, sent_end in found:
                start = line_start + at + sent_start
                end = line_start + at + sent_end
                while start < end and _blank(text[start]):
                    start += 1
                while end > start and _blank(text[end - 1]):
                    end -= 1
                if any(c.isalnum() for c in text[start:end]):  # not punctuation alone
                    spans.append((start, end))
        line_start += len(line) + 1
    return spans


# a line break, the spaces around it on its lines; a line that ends a sentence (quoted too)
LINE_BREAK = re.compile(r"[^\S\n]*\n[^\S\n]*")
ENDED = re.compile(f"[{re.escape(''.join(SENTENCE_ENDS))}]['\"’”»)\\]」』）]*$")


class Break(NamedTuple):
    """A line break inside a sentence: ``text[start:end]``, the break and the spaces around it
    on its lines; ``joined``: it cuts a word ("Fahr-\nrad", "Baden-\nWürttemberg"), read as
    one word, and a hyphen that only cut it ("Fahr-") is part of the break."""

    start: int
    end: int
    joined: bool = False


# what joins pictographs into one (a family, a flag, a skin tone, a keycap: ZWJ, variation
# selectors, emoji modifiers, tags) beside the symbols themselves (Unicode's "So")
SYMBOL_JOINERS = re.compile("[\u200d\ufe0e\ufe0f\u20e3\U0001f3fb-\U0001f3ff"
                            "\U000e0020-\U000e007f]")


def symbols(text: str) -> list[Break]:
    """The runs of symbols in ``text`` (emoji, pictographs, ©, ™: Unicode's "other symbols"
    with what joins them), each kept in place as it is and read as spaces: a model trained
    on sentences has hardly seen them (a SentencePiece model reads an emoji as four rarely
    seen bytes: "Ein Hund 🐶 läuft über die Wiese." gave "A dog is sumping sumping across
    the grassy field.")."""
    out: list[Break] = []
    for i, ch in enumerate(text):
        if unicodedata.category(ch) == "So" or (out and out[-1].end == i
                                                 and SYMBOL_JOINERS.match(ch)):
            if out and out[-1].end == i:
                out[-1] = Break(out[-1].start, i + 1)
            else:
                out.append(Break(i, i + 1))
    return out


def soft_breaks(text: str, lang: str) -> list[Break]:
    """The line breaks of ``text`` inside a sentence: where the line before ends in a word or
    a comma, not a mark that may end a sentence, and the line after begins with a word in
    lower case ("fährt\nmit dem Fahrrad"), or, where the sentence ends on the line after (or
    runs on from it), the word before is in lower case (or of a script without case: Arabic,
    Hebrew) and rarely ends one (the language's stop words, spaCy's: "with the\nBBC.",
    "مع\nالدراجة."; in German any, ``NOUNS_IN_CAPITALS``: "mit einem blauen\nHelm."); never a
    blank line, a list item's marker, nor a line after a name or a noun in capitals (headings,
    addresses: "Max Muster\nHauptstraße 5"), nor lines that end no sentence ("Datei
    öffnen\nDatei speichern", "Contact us\nAbout"). A line that ends in a word and a hyphen
    (text from a PDF, hyphenated) runs on into the word it cuts (:func:`_hyphen`); Chinese
    and Japanese as :func:`_runs_on` says, read with no space."""
    out: list[Break] = []
    written = _hyphenated(text)
    for m in reversed(list(LINE_BREAK.finditer(text))):  # (from the last: whether it runs on)
        before = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        after_end = text.find("\n", m.end())
        after = text[m.end():len(text) if after_end < 0 else after_end]
        ends = bool(ENDED.search(after.rstrip())) or bool(
            out and out[0].start <= after_end < out[0].end)
        hyphen = _hyphen(written, before, after, lang)
        if hyphen is not None:
            out.insert(0, Break(m.start() - hyphen, m.end(), True))
        elif _runs_on(before, after, lang, ends):
            out.insert(0, Break(*m.span(), spacer(before, after) == ""))  # (Chinese: none)
    return out


# the words that may follow a hyphen that stands for a word's other part ("Ein- und Ausgang",
# "pre- and post-war"): after one, a line break is a space
CONJUNCTIONS = {"de": {"und", "oder", "bis", "sowie", "bzw", "als", "noch", "wie"},
                "en": {"and", "or", "to", "nor"}, "nl": {"en", "of", "tot"},
                "sv": {"och", "eller", "till"}, "da": {"og", "eller", "til"},
                "nb": {"og", "eller", "til"}, "fr": {"et", "ou"}}


def _hyphenated(text: str) -> set[str]:
    """The pairs of words ``text`` writes joined by a hyphen ("long-term"), in lower case."""
    return {f"{a}-{b}".lower() for m in re.finditer(r"\w+(?:-\w+)+", text)
            for a, b in itertools.pairwise(m[0].split("-"))}


def _hyphen(written: set[str], before: str, after: str, lang: str) -> int | None:
    """Where the line ``before`` ends in a word and a hyphen, and ``after`` begins with a
    word, the two are one word: 1 where the hyphen only cut it (in lower case after:
    "Fahr-\nrad", "Fahrrad"), 0 where it is the word's ("Baden-\nWürttemberg", "COVID-\n19",
    or one the text writes with a hyphen elsewhere, in ``written``: "long-\nterm" where it has
    "long-term"); None where the word after is a conjunction ("Ein-\nund Ausgang": read with
    a space) or the line is not such."""
    first, last = re.match(r"\w+", after), re.search(r"(\w+)-$", before)
    if last is None or first is None or LIST_MARKER.match(after):
        return None
    if not first[0][0].islower() or f"{last[1]}-{first[0]}".lower() in written:
        return 0
    return None if first[0] in CONJUNCTIONS.get(re.split("[-_]", lang)[0].lower(), ()) else 1


def _runs_on(before: str, after: str, lang: str, ends: bool) -> bool:
    """Whether the line ``before`` runs on into the line ``after`` (:func:`soft_breaks`;
    ``ends``: the sentence ends on the line after, or runs on from it)."""
    last, first = before.rstrip()[-1:], after.lstrip()[:1]
    if not (last.isalnum() or last in tuple(",-–—，、")) or not first.isalnum() \
            or LIST_MARKER.match(after):
        return False
    if CJK_CHARACTER.match(last) or CJK_CHARACTER.match(first) or last in tuple("，、"):
        # Chinese, Japanese: no case, no spaces; a line wrapped at a width is as long as the
        # next, a heading shorter ("第一章\n他走了。")
        return last in tuple("，、") or (ends and len(before) >= len(after))
    if first.islower():
        return True
    word = re.search(r"\w+$", before.rstrip())
    small = word is not None and (word[0].islower() or (  # (or of a script without case)
        word[0].isalpha() and word[0].lower() == word[0].upper()))
    return ends and word is not None and small and (
        re.split("[-_]", lang)[0].lower() in NOUNS_IN_CAPITALS or word[0] in _stop_words(lang))


# languages that write their nouns with a capital: a line that ends in a word in lower case
# (an article, an adjective: "mit einem blauen\nHelm") may run on into one
NOUNS_IN_CAPITALS = frozenset({"de", "lb"})


@functools.lru_cache(maxsize=8)
def _stop_words(lang: str) -> frozenset[str]:
    return frozenset(_sentencizer(lang).Defaults.stop_words)


# a Chinese or Japanese sentence's end, not in a quotation ("「すごい！」と彼は言った。" is one),
# even where spaCy reads the line as one token (Japanese without SudachiPy: cut at spaces)
CJK_END = re.compile("[。！？]+(?![」』）〕】”’\"')" + re.escape("".join(SENTENCE_ENDS)) + "])")


def _opened(part: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """spaCy's sentences of ``part`` with the marks that open one moved to it: the sentencizer
    ends a sentence after every mark that follows its full stop, so "Er lief. (Eine Katze
    schläft.)" gave "Er lief. (" and "Eine Katze schläft.)", and "Ein Hund. {name} läuft."
    cut the placeholder. Marks after a space that touch the next sentence open it."""
    out = list(spans)
    for k in range(len(out) - 1):
        (start, end), (after, stop) = out[k], out[k + 1]
        mark = end
        while mark > start and not (part[mark - 1].isalnum() or _blank(part[mark - 1])):
            mark -= 1
        if start < mark < end == after and _blank(part[mark - 1]):
            out[k], out[k + 1] = (start, mark), (mark, stop)
    return out


def _cjk_cut(part: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` of ``part`` cut after each Chinese or Japanese sentence end inside them."""
    out = []
    for a, b in spans:
        bounds = [a, *(m.end() for m in CJK_END.finditer(part, a, b) if m.end() < b), b]
        out += list(itertools.pairwise(bounds))
    return out


# what parts a line of items ("Von Anna · 4. Dezember · 3 Min.", "Start | Hilfe"): a spaced
# middle dot, bar or bullet
SEPARATOR = re.compile(r"[ \t\u00a0]+[·|•][ \t\u00a0]+")


def _separated(line: str, start: int) -> list[tuple[int, str]]:
    """The parts of ``line`` from ``start`` that hold text, between its separators: (where
    each begins, its text)."""
    ends = [(m.start(), m.end()) for m in SEPARATOR.finditer(line, start)]
    bounds = zip([start, *[b for _, b in ends]], [*[a for a, _ in ends], len(line)],
                 strict=True)
    return [(a, line[a:b]) for a, b in bounds if line[a:b].strip()]


# the scripts written without a space between sentences: Chinese, Japanese (their marks,
# full-width forms; Thai spaces its sentences, not its words: long_sentences.UNSPACED)
UNSPACED_SENTENCES = re.compile(f"[{CJK}\u2e80-\u303f\u3100-\u312f\u31f0-\u31ff"
                                "\uff01-\uff60]")


def spacer(before: str, after: str) -> str:
    """What goes between two texts read as one (subtitles that run on): a space, but none
    between Chinese or Japanese characters."""
    unspaced = UNSPACED_SENTENCES.match
    return "" if unspaced(before[-1:] or " ") and unspaced(after[:1] or " ") else " "


def run_together(texts: Sequence[str], shown: Callable[[str], str] = str) -> str:
    """``texts`` read as one (a paragraph's lines, a subtitle's), each :func:`spacer` apart
    (``shown``: what of a text shows, its tags left out)."""
    return "".join(texts[:1]) + "".join(spacer(shown(a), shown(b)) + b
                                        for a, b in itertools.pairwise(texts))
