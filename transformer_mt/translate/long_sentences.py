"""Sentences longer than the model takes (``decode.max_input_tokens``), cut into parts it takes.

A text is translated whole or not at all: a sentence past the limit (a list run on with commas,
a text without full stops, a line of several sentences) is cut where a translator would cut it
(after a sentence's end, then a clause's ``;`` or ``:``, then a comma, a closing bracket or
before a dash, then at a space; in a script without spaces, after its own marks, else
anywhere), near its middle, again until each part fits; the parts are translated as
sentences and their translations joined (with a space where the source has one or a script
without spaces is cut, but next to such a script). Inline markup across a cut is shared out
as in any sentence: each part's links into its source (``inline.py``), moved to where the
part stands in the sentence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from transformer_mt.data.tokenize import CJK, SOUTHEAST_ASIAN
from transformer_mt.data.vocab import UNK_ID
from transformer_mt.translate.documents import Document, Links, translate_split
from transformer_mt.translate.glossary import KEPT
from transformer_mt.translate.inline import UNIT, attention_links
from transformer_mt.translate.marks import apart, lost_marks, marked, unread_marks
from transformer_mt.translate.quotation import in_style

if TYPE_CHECKING:
    from transformer_mt.config import DecodeConfig
    from transformer_mt.translate import Translator
    from transformer_mt.translate.glossary import Glossary

T = TypeVar("T")
Fits = Callable[[Sequence[str]], list[bool]]  # whether the model takes each text whole

# where a sentence is cut, strongest first (a match is the gap between two parts)
BREAKS = [re.compile(p) for p in (
    r"(?<=[.!?…])\s+|(?<=[。！？])\s*",  # after a sentence's end
    r"(?<=[;:])\s+|(?<=[；：])\s*",  # after a clause's mark
    r"(?<=[,)\]])\s+|(?<=[，、）」』])\s*|\s+(?=[–—(\[]|-\s)",  # a comma, a bracket, a dash
    r"\s+",  # a space
)]
# a cut in a run of this much of the middle of a too-long span at least, else a weaker one
REACH = 0.8
# scripts written without spaces between words (Thai, Lao, Myanmar, Khmer; CJK's marks, kana
# and ideographs, full-width forms): no space joins a part's translation to one of them
UNSPACED = re.compile(f"[{SOUTHEAST_ASIAN}{CJK}\u3000-\u303f\uff00-\uffef]")


def clause_spans(text: str, fits: Fits) -> list[tuple[int, int]]:
    """(start, end) offsets of the parts of ``text`` (its surrounding whitespace left out)
    that each fit (``fits``), in order: ``text`` itself where it fits."""
    start, end = len(text) - len(text.lstrip()), len(text.rstrip())
    return _cut(text, start, end, fits) if start < end else []


def _cut(text: str, start: int, end: int, fits: Fits) -> list[tuple[int, int]]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end - start < 2 or fits([text[start:end]])[0]:
        return [(start, end)]
    margin = (end - start) * (1 - REACH) / 2
    middle = (start + end) / 2
    # never inside a span kept as it is ("12,50 €", "{{ name }}", a URL: glossary.KEPT)
    kept = [m.span() for m in KEPT.finditer(text) if m.start() < end and start < m.end()]
    for pattern in BREAKS:
        gaps = [m.span() for m in pattern.finditer(text, start, end)
                if start + margin <= m.start() and m.end() <= end - margin
                and not any(s < m.start() < e for s, e in kept)]
        if gaps:
            a, b = min(gaps, key=lambda gap: abs(sum(gap) / 2 - middle))
            break
    else:  # no space near the middle (a script without spaces, a word too long): at it,
        # or at the edge of the kept span it falls in (a span too long alone: in it)
        a = b = int(middle)
        for s, e in kept:
            if s < a < e:
                a = b = min((edge for edge in (s, e) if start < edge < end),
                            key=lambda edge: abs(edge - middle), default=a)
    return _cut(text, start, a, fits) + _cut(text, b, end, fits)


def readable(translator: Translator, docs: Sequence[Document[T]],
             cfg: DecodeConfig | None = None) -> list[Document[T]]:
    """``docs`` as ``translator``'s model reads them: sentences too long for it (``cfg``'s)
    in parts (:func:`fitted`), marks it reads only as bytes kept apart (``marks.py``); but
    the sentences its memory holds, whole (``memory.py``)."""
    memory, unread = translator.memory, unread_marks(translator)
    held = None if memory is None else memory.holds
    langs = translator.config.data.src_lang, translator.config.data.tgt_lang
    docs = fitted(docs, lambda sentences: translator.fits(sentences, cfg), writer(translator),
                  held, langs)
    return marked(docs, langs, unread if held is None else (
        lambda sentence: [] if held(sentence) else unread(sentence)))


def fitted(docs: Sequence[Document[T]], fits: Fits, writes: Callable[[str], bool] | None = None,
           held: Callable[[str], bool] | None = None, langs: tuple[str, str] | None = None
           ) -> list[Document[T]]:
    """``docs`` with each sentence the model does not take whole (``fits``) cut into parts
    that it takes (:func:`clause_spans`): the parts are the documents' sentences, and
    rebuilding joins their translations into the sentence's (a part that goes on a sentence
    begins in lower case where the model ``writes`` its first word so: :func:`continued`,
    :func:`writer`). A sentence without a letter (a
    number, a date, a price: "3,5", "12.04.2026", "—") is no part, kept as it is: a model
    writes such a sentence again and again ("3,5 3,5 3,5."). A sentence in quotes is read
    without them and its translation put back in them (:func:`quoted`; as the target language
    writes them, ``langs``: source, target: ``quotation.py``); a sentence ``held`` is read
    whole as it is. Documents whose sentences all fit, have letters and stand in no
    quotes are returned as they are."""
    sentences = [s for d in docs for s in d.sentences]
    ok = iter(fits(sentences))
    kept = held or (lambda sentence: False)
    out = []
    for doc in docs:
        inner = [(0, len(s)) if cut or kept(s) else quoted(s)
                 for s, cut in zip(doc.sentences, doc.cuts, strict=True)]
        whole = [(next(ok) and worded(s) and (a, b) == (0, len(s))) or kept(s)
                 for s, (a, b) in zip(doc.sentences, inner, strict=True)]
        out.append(doc if all(whole) else _parted(doc, [
            [(a, b)] if fit else [] if not worded(s) else
            [(a + x, a + y) for x, y in clause_spans(s[a:b], fits)]
            for s, fit, (a, b) in zip(doc.sentences, whole, inner, strict=True)],
            writes or (lambda word: False), langs))
    return out


# a quotation's opening marks and the marks that close each
QUOTES = {"„": "“”", "‚": "‘’", "“": "”", "‘": "’", "«": "»", "»": "«", '"': '"', "「": "」",
          "『": "』"}


def quoted(sentence: str) -> tuple[int, int]:
    """Where the words of ``sentence`` stand inside the quotes around it ("„Ein Hund
    läuft.“": a model trained without such marks writes "A dog runs.", and its translation
    is put back in them), else the whole sentence."""
    inside = sentence[1:-1]
    if len(sentence) < 3 or sentence[-1] not in QUOTES.get(sentence[0], "") or not worded(
            inside) or any(c in QUOTES for c in inside):
        return 0, len(sentence)
    return 1 + len(inside) - len(inside.lstrip()), len(sentence) - 1 - (
        len(inside) - len(inside.rstrip()))


def worded(sentence: str) -> bool:
    """Whether ``sentence`` holds a letter (of any script), that is a word to translate."""
    return any(c.isalpha() for c in sentence)


def _parted(doc: Document[T], spans: list[list[tuple[int, int]]],
            writes: Callable[[str], bool], langs: tuple[str, str] | None) -> Document[T]:
    """``doc`` with sentence i read as its parts ``spans[i]`` (offsets in it; none: kept),
    what stands before the first and after the last (a quotation's marks, as the target
    language writes them: ``langs``) around their translations (``writes``:
    :func:`continued`'s)."""
    parts = [s[a:b] for s, found in zip(doc.sentences, spans, strict=True) for a, b in found]
    cuts = [[c - a for c in cut if a < c < b] if cut else []
            for cut, found in zip(doc.cuts, spans, strict=True) for a, b in found]

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> T:
        joined, linked, at = [], [], 0
        for sentence, found, cut in zip(doc.sentences, spans, doc.cuts, strict=True):
            n = len(found)
            written = [continued(t, writes) if a and sentence[a:a + 1].islower() else t
                       for (a, _), t in zip(found, translations[at:at + n], strict=True)]
            text, read = _joined(sentence, found, written, links[at:at + n])
            around = in_style(sentence, [*range(found[0][0]), *range(found[-1][1], len(
                sentence))], *langs) if found and langs else sentence
            joined.append(around[:found[0][0]].lstrip() + text + around[
                found[-1][1]:].rstrip() if found else sentence)  # (no part: kept as it is)
            linked.append(read if cut and found else None)
            at += n
        return doc.rebuild_with(joined, linked)

    return Document(parts, cuts, rebuild)


def continued(translation: str, writes: Callable[[str], bool]) -> str:
    """The translation of a part that goes on its sentence (its source begins in lower case:
    "..., zwei Hunde spielen"), which the model began as a sentence ("Two dogs are playing"),
    its first word in lower case where the model ``writes`` that word so, as one token of its
    own ("two dogs are playing"); a name, a German noun ("Hunde": "hunde" is no word of its)
    and "I" are left as they are."""
    first = re.match(r"[^\W\d_]+", translation)
    if first is None or not first[0].istitle() or first[0] == "I" or len(
            first[0][0].lower()) != 1 or not writes(first[0].lower()):
        return translation
    return translation[0].lower() + translation[1:]


def writer(translator: Translator) -> Callable[[str], bool]:
    """Whether ``translator``'s model writes a word as one token of its own."""
    tokenizer, vocab = translator.tokenizers[1], translator.tgt_vocab

    def writes(word: str) -> bool:
        [tokens] = tokenizer.tokenize([word])
        return len(tokens) == 1 and vocab.stoi.get(tokens[0], UNK_ID) != UNK_ID

    return writes


def _joined(sentence: str, spans: Sequence[tuple[int, int]], translations: Sequence[str],
            links: Sequence[Links]) -> tuple[str, list[tuple[int, int]]]:
    """One sentence's translation from its parts' (a space between two where the source has
    one, or a script written without spaces is cut, but next to such a script), and where it
    reads in the sentence: each part's links (by relative position in the part where it has
    none) moved to where the part stands."""
    text, read, end = "", [], 0
    for (a, b), translation, link in zip(spans, translations, links, strict=True):
        if text and translation and (end < a or UNSPACED.match(sentence[a - 1])) and not (
                UNSPACED.match(text[-1]) or UNSPACED.match(translation[0])):
            text += " "
        if link is None:  # each unit of the translation read at its relative place
            scale = (b - a) / max(len(translation), 1)
            link = [(o, int(o * scale)) for m in UNIT.finditer(translation)
                    for o in range(*m.span())]
        read += [(o + len(text), s + a) for o, s in link]
        text, end = text + translation, b
    return text, read


def translate_documents(translator: Translator, docs: Sequence[Document[T]],
                        cfg: DecodeConfig | None = None, glossary: Glossary | None = None,
                        progress: bool = False) -> list[T]:
    """Documents translated by ``translator`` (``cfg``, ``glossary``: as for
    :meth:`Translator.translate`): their sentences in one batch, each translated once however
    often they hold it (a subtitle's "Yes.", a sheet's repeated cells; a sentence's sampled
    translation is its own seed's draw, the same in any place), those too long for the model
    in parts (:func:`fitted`), those ``translator.memory`` holds as it translates them
    (``memory.py``), those whose translation lost the brackets or quotation marks the model
    read again with them kept apart (``marks.lost_marks``), put back in place
    (``documents.translate_split``)."""

    memory, lost = translator.memory, lost_marks(translator)

    def translate(sentences: list[str]) -> list[str]:
        once = list(dict.fromkeys(sentences))
        held = {s: t for s in once if memory is not None and (t := memory.get(s)) is not None}
        todo = [s for s in once if s not in held]
        found = [h[0].text for h in translator.translate(
            todo, cfg, nbest=1, scores=False, glossary=glossary, progress=progress)]
        translated = held | dict(zip(todo, found, strict=True))
        # those whose translation lost the brackets or quotes the model read: again, apart
        again = [s for s in todo if lost(s, translated[s])]
        if again:
            translated |= dict(zip(again, translate_documents(
                translator, apart(translator, again), cfg, glossary), strict=True))
        return [translated[s] for s in sentences]

    return translate_split(
        readable(translator, docs, cfg), translate,
        lambda sources, translations: attention_links(translator, sources, translations))
