"""Brackets and quotation marks a model cannot read, or garbles: kept where they stand, apart.

A SentencePiece vocabulary learnt on captions holds the few marks its corpus is full of (the
full stop, the comma, the hyphen, straight quotes) and spells every other one as its UTF-8
bytes (byte fallback): Multi30k's 8k vocabulary reads "(", "[", German quotes "„“" so, each
a token the model saw in a few sentences at most, and writes nonsense around them ("Ein
Mann (mit Hut) läuft." gave "A man (ith a hat, ..."); a word vocabulary may not know them at
all (``<unk>``). So brackets and quotation marks (Unicode's opening, closing, initial and
final punctuation) that the model's source side reads only as bytes or as unknown are read
as spaces and kept where they stood, between the words of the translation that read the text
around them (``documents.split_flow``'s breaks, as emoji are: ``sentences.symbols``), a
quotation mark as the target language writes it (``quotation.py``); a mark the model knows is
read and translated as it is, but where the translation does not hold as many as the
sentence (:func:`lost_marks`): then the sentence is read again with them kept apart (make
demo's word model holds "(" and "„" and wrote "A man (in a hat is walking."; with brackets
after a sentence's second word, test_2016 36.38 against 30.26 BLEU, its real sentences' as
before). (test_2016 / test_2017 with the words after the second in brackets, config/cpu.yaml's
hour at step 1,846: 37.93 / 34.01 BLEU scored without them, against 35.14 / 30.13 read as
bytes; as written 38.06 / 34.25.) Other marks stay as the model reads them: a semicolon or a
dash read as a space cost 1.0-1.6 BLEU against its bytes, and a question mark's bytes are
read as well as a space.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from transformer_mt.data.tokenize import normalized
from transformer_mt.data.vocab import UNK_ID
from transformer_mt.translate.documents import Document, Links, split_flow
from transformer_mt.translate.glossary import KEPT
from transformer_mt.translate.pieces import BYTE
from transformer_mt.translate.quotation import MARKS, in_style
from transformer_mt.translate.sentences import Break

if TYPE_CHECKING:
    from transformer_mt.translate import Translator

T = TypeVar("T")
Unread = Callable[[str], list[Break]]  # where a sentence's marks the model cannot read stand

PAIRED = frozenset({"Ps", "Pe", "Pi", "Pf"})  # Unicode's brackets and quotation marks
APOSTROPHES = frozenset("’‘ʼ")  # (typed for "'" too)
QUOTING = MARKS | {'"'}  # quotation marks: any language's, and straight ones


def unread_marks(translator: Translator, every: bool = False) -> Unread:
    """Where the brackets and quotation marks of a sentence stand that ``translator``'s source
    side reads only as bytes or as unknown (``every``: all of them; each mark asked of its
    tokenizer once; a run of them one break), but an apostrophe inside a word ("geht’s") and
    those inside a span kept as it is (a number, an address, a placeholder: ``glossary.KEPT``,
    "{name}"; one next to such a span is a mark: "(10:30)", "„{name}“", the span never cut by
    it, ``inline.UNIT``)."""
    tokenizer, vocab = translator.tokenizers[0], translator.src_vocab
    known: dict[str, bool] = {}

    def unread(sentence: str) -> list[Break]:
        marks = [c for c in dict.fromkeys(sentence) if unicodedata.category(c) in PAIRED]
        asked = [] if every else [c for c in marks if c not in known]
        for c, tokens in zip(asked, tokenizer.tokenize(asked) if asked else [], strict=True):
            read = [t for t in tokens if t.strip("\u2581")]  # (a word's start alone: none)
            known[c] = not read or any(BYTE.fullmatch(t) or vocab.stoi.get(t, UNK_ID) == UNK_ID
                                       for t in read)
        spans = [m.span() for m in KEPT.finditer(sentence)]
        inside = {i for a, b in spans for i in range(a, b)}
        at = [i for i, c in enumerate(sentence) if (every or known.get(c)) and (
            unicodedata.category(c) in PAIRED) and i not in inside and not (
            c in APOSTROPHES and sentence[i - 1:i].isalpha() and sentence[i + 1:i + 2].isalpha())]
        out: list[Break] = []
        for i in at:
            out[-1:] = [Break(out[-1].start, i + 1)] if out and out[-1].end == i else [
                *out[-1:], Break(i, i + 1)]
        return out

    return unread


def lost_marks(translator: Translator) -> Callable[[str, str], bool]:
    """Whether a translation lost or garbled the brackets and quotation marks ``translator``'s
    model read in its sentence (those it could keep apart, :func:`unread_marks`): its brackets
    are not the sentence's, each as many, or its quotation marks (any language's, straight
    ones too) not as many ("Ein Mann (mit Hut) läuft." -> "A man (in a hat is walking.", quotes
    dropped). Where the model wrote them, it read them well: make demo's word model copies a
    quoted name whole ('says "Memoria Justicia Sin Olvido"'), read apart it did not."""
    every = unread_marks(translator, every=True)

    def lost(sentence: str, translation: str) -> bool:
        return _counted(sentence) != _counted(translation) and bool(every(sentence))

    return lost


def _counted(text: str) -> tuple[int, Counter[str]]:
    """The quotation marks of ``text`` (an apostrophe inside a word is none), and each bracket."""
    quotes = sum(c in QUOTING and not (c in APOSTROPHES and text[i - 1:i].isalpha()
                                       and text[i + 1:i + 2].isalpha())
                 for i, c in enumerate(text))
    return quotes, Counter(c for c in text if c not in QUOTING
                           and unicodedata.category(c) in PAIRED)


def apart(translator: Translator, sentences: Sequence[str]) -> list[Document[str]]:
    """Each of ``sentences`` (a translation lost its marks: :func:`lost_marks`) as a document
    that reads it with all its brackets and quotation marks kept apart (:func:`marked`)."""
    data = translator.config.data
    return marked([Document([s], [[]], lambda texts, _: texts[0]) for s in sentences],
                  (data.src_lang, data.tgt_lang), unread_marks(translator, every=True))


def marked(docs: Sequence[Document[T]], langs: tuple[str, str], unread: Unread
           ) -> list[Document[T]]:
    """``docs`` with each sentence that holds marks the model reads only as bytes (``unread``)
    read without them, the marks kept where they stand (:func:`documents.split_flow` of the
    sentence with them as breaks), quotation marks as the target language writes them
    (``langs``: source, target; ``quotation.py``); in a sentence that inline markup cuts, the
    translation with the marks in place is shared out along links that read each mark where
    it stood. Documents without such a sentence are returned as they are."""
    out = []
    for doc in docs:
        subs = [_sub(s if cut else next(normalized([s])), langs, unread, bool(cut))
                for s, cut in zip(doc.sentences, doc.cuts, strict=True)]
        out.append(doc if all(sub is None for sub, _ in subs) else _read_in(doc, subs))
    return out


def _sub(sentence: str, langs: tuple[str, str], unread: Unread, cut: bool
         ) -> tuple[Document[list[str]] | None, str]:
    """``sentence`` read without its unread marks (None: it has none), and the sentence with
    its quotation marks among them in the target language's style; a sentence that inline
    markup cuts (its offsets kept: not normalized) only where it stays one sentence."""
    marks = unread(sentence)
    styled = in_style(sentence, (i for m in marks for i in range(m.start, m.end)), *langs)
    sub = split_flow([styled], langs[0], marks=marks) if marks else None
    return None if sub is None or (cut and len(sub.sentences) != 1) else sub, styled


def _read_in(doc: Document[T], subs: Sequence[tuple[Document[list[str]] | None, str]]
             ) -> Document[T]:
    """``doc`` with each sentence that has one read as its sub-document's sentences (each
    sub-document with its sentence as the marks are written in the translation)."""
    sentences = [s for s, (sub, _) in zip(doc.sentences, subs, strict=True)
                 for s in (sub.sentences if sub else [s])]
    cuts = [c for cut, (sub, _) in zip(doc.cuts, subs, strict=True)
            for c in (sub.cuts if sub else [cut])]

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> T:
        whole: list[str] = []
        read: list[Links] = []
        at = 0
        for (sub, source), cut in zip(subs, doc.cuts, strict=True):
            n = len(sub.sentences) if sub else 1
            whole.append(sub.rebuild(translations[at:at + n], links[at:at + n])[0] if sub
                         else translations[at])
            read.append(links[at] if not sub else None if not cut else relinked(
                translations[at], links[at], whole[-1], source))
            at += n
        return doc.rebuild_with(whole, read)

    return Document(sentences, cuts, rebuild)


def relinked(translation: str, links: Links, placed: str, source: str) -> Links:
    """The links of ``placed`` (``translation`` with marks of ``source`` put in) into
    ``source``: each character of the translation's as it was, each mark put in read where
    it stands in the source (the first of its kind not yet read)."""
    if links is None:
        return None
    matcher = difflib.SequenceMatcher(None, translation, placed, autojunk=False)
    to = {a + k: b + k for a, b, n in matcher.get_matching_blocks() for k in range(n)}
    out = [(to[o], s) for o, s in links if o in to]
    taken, read = set(to.values()), set()
    for j, c in enumerate(placed):
        if j in taken or unicodedata.category(c) not in PAIRED:
            continue
        at = next((i for i, m in enumerate(source) if m == c and i not in read), None)
        if at is not None:
            out.append((j, at))
            read.add(at)
    return sorted(out)
