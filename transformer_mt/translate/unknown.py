"""Unknown words copied from the source (``decode.replace_unk``; Luong et al., 2015).

A model whose vocabulary is words writes ``<unk>`` where the word it would write is not in its
target vocabulary: most often a name, a number or a rare word it cannot translate, which a
translation keeps as it is ("Ein Mann aus Tübingen" → "A man from <unk>"). Each ``<unk>`` is
written as the source word that output token attends to most (the last decoder layer, its heads
averaged: what ``mt translate --align`` reads), chosen among the source's own unknown words where
it has some (a word the model knows is one it could have written itself), else among its words
(never a full stop); a source without a word leaves the ``<unk>``.

The model's output is not changed: its ids keep ``<unk>``; the text and the tokens carry the
word. So the words go in after the server's cache, which is keyed by ids (two sources with
different unknown names are the same ids). A SentencePiece model spells every character it never
saw in bytes and writes ``<unk>`` hardly ever; where it does, the same holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from transformer_mt.data.tokenize import WORD_START
from transformer_mt.data.vocab import UNK, UNK_ID
from transformer_mt.translate.numbers import SEPARATOR, bare_number

if TYPE_CHECKING:
    from torch import Tensor

    from transformer_mt.translate import Translation, Translator


def copied_from(weights: Tensor, out_ids: Sequence[int], src_ids: Sequence[int],
                words: Sequence[str]) -> list[int]:
    """The source position each ``<unk>`` of ``out_ids`` copies, in output order: among the
    source's unknown words, else among its words (a letter or a digit in them: never a full
    stop); none where the source has no word.

    weights: (T_out + 1, S) cross-attention of the output tokens and ``<eos>`` (rows) over the
    source tokens and ``<eos>`` (columns; ``src_ids`` ends in ``<eos>``); ``words``: the source
    tokens' text.
    """
    rows = [k for k, i in enumerate(out_ids) if i == UNK_ID]
    worded = [j for j, w in enumerate(words) if any(c.isalnum() for c in w)]
    columns = [j for j in worded if src_ids[j] == UNK_ID] or worded
    if not rows or not columns:
        return []
    best = weights[rows][:, columns].argmax(dim=-1)  # (U,)
    return [columns[j] for j in best.tolist()]


def copy_unknown(translator: Translator, sources: Sequence[str] | Sequence[Sequence[str]],
                 found: Sequence[Sequence[Translation]],
                 terms: bool = False) -> list[list[Translation]]:
    """The translations ``found`` (a list of hypotheses per source of ``sources``: a sentence,
    or its tokens as the source tokenizer made them) with each ``<unk>`` written as the source
    word it attends to most: its token, and its text as the target tokenizer writes a span
    kept as it is (``Tokenizer.detokenize_keeping``, as a glossary's terms). ``terms``: the
    sources hold a glossary's terms as the model read them (``glossary.steered``); each is
    written once (:func:`_placed`; an ``<unk>`` that copies one the translation holds is written
    as nothing). One batched pass of the model over those that hold one; new objects (the
    server's cache keeps the ones it was given)."""
    out = [list(hyps) for hyps in found]
    wanted = [(i, n) for i, hyps in enumerate(out) for n, h in enumerate(hyps)
              if UNK_ID in h.ids]
    if not wanted:
        return out
    words = _source_tokens(translator, sources, sorted({i for i, _ in wanted}))
    src_ids = {i: translator.src_vocab.encode(t) for i, t in words.items()}
    weights = translator.engine.cross_attention([src_ids[i] for i, _ in wanted],
                                                [out[i][n].ids for i, n in wanted])
    subword = translator.tokenizers[0].subword  # a piece's text: without its "▁"
    for (i, n), w in zip(wanted, weights, strict=True):
        h = out[i][n]
        kept = [(start, end, text) for start, end, text in h.kept]  # (from JSON: lists)
        places = [k for k, t in enumerate(h.ids) if t == UNK_ID]
        # a copy of a word in quotes whose words the model all lacks: the quoted text whole
        # (:func:`_phrases`; not with a glossary's term in it, which is written apart)
        runs_at = _phrases(words[i], src_ids[i], {t for *_, t in kept} if terms else set())
        spans = [runs_at.get(j, (j, j + 1)) for j in copied_from(w, h.ids, src_ids[i], words[i])]
        copies = [a for a, _ in spans]  # []: the source has no word
        written = [_stopped(translator.tokenizers[0].detokenize(words[i][a:b]).strip()
                            if b > a + 1 else words[i][a].replace(WORD_START, " ").strip()
                            if subword else words[i][a], h.tokens[k + 1:k + 2])
                   for k, (a, b) in zip(places, spans, strict=False)]
        if terms:
            kept = _placed(kept, dict(zip(places, written, strict=False)))
        taken = {k for start, end, _ in kept for k in range(start, end)}
        held = {text for _, _, text in kept} if terms else set()
        inside = _inside(words[i], held)
        runs = [(start, end, "" if word in held else word) for start, end, word in _runs(
            [(k, j, "" if j in inside else word)
             for k, j, word in zip(places, copies, written, strict=False) if k not in taken])]
        kept += [*runs, *_bare_marks(h.tokens, runs, taken)]
        tokens = shown(h.tokens, h.ids, kept)
        for start, end, word in runs:  # each <unk> of a run shows the word (written once)
            tokens[start:end] = [word or UNK] * (end - start)
        out[i][n] = replace(h, tokens=tokens, kept=kept,
                            text=translator.tokenizers[1].detokenize_keeping(h.tokens, kept))
    return out


QUOTES = frozenset("\"'„“”«»")
SOURCE_QUOTES = frozenset("\"„“”«»")  # (a lone "'" is an apostrophe as often)


def _bare_marks(tokens: Sequence[str], runs: Sequence[tuple[int, int, str]],
                taken: set[int]) -> list[tuple[int, int, str]]:
    """The marks a copy written as nothing leaves round nothing, written as nothing too: the
    second of a comma, a semicolon or a colon on both its sides (", ,"), and quotation marks
    round nothing (a model that loops on a quoted name: 'says "Memoria Justicia Sin Olvido"
    "" "', 'with "" Asian Pacific'): round such a copy or none, the output's marks read in
    pairs, a last one left without its pair beside such a copy too."""
    empty = {k for start, end, word in runs if not word for k in range(start, end)}
    doubled = [(end, end + 1, "") for start, end, word in runs if not word and start > 0
               and end < len(tokens) and tokens[start - 1] == tokens[end] in (",", ";", ":")
               and end not in taken]
    marks = [k for k, token in enumerate(tokens) if token in QUOTES and k not in taken]
    pairs = [(k, marks[n + 1]) for n, k in enumerate(marks[:-1]) if n % 2 == 0]
    bare = [k for start, end in pairs if set(range(start + 1, end)) <= empty for k in (start, end)]
    if len(marks) % 2 and {marks[-1] - 1, marks[-1] + 1} & empty:
        bare.append(marks[-1])
    return doubled + [(k, k + 1, "") for k in bare]


def _phrases(words: Sequence[str], src_ids: Sequence[int], apart: set[str]
             ) -> dict[int, tuple[int, int]]:
    """Each unknown source token inside quotation marks that hold no word the model knows,
    and the quoted text's tokens (start, end): a name or a phrase in another language
    („Memoria Justicia Sin Olvido“), which a model that cannot write it writes as fewer
    ``<unk>`` than its words ('says "Memoria" "" "'), copied whole; not with a glossary's
    term (``apart``) in it."""
    runs: dict[int, tuple[int, int]] = {}
    marks = [j for j, word in enumerate(words) if word in SOURCE_QUOTES]
    for start, end in zip(marks[::2], marks[1::2], strict=False):
        inner = range(start + 1, end)
        if any(src_ids[j] == UNK_ID for j in inner) and not any(
                words[j] in apart or (src_ids[j] != UNK_ID and any(c.isalpha() for c in words[j]))
                for j in inner):
            runs.update({j: (start + 1, end) for j in inner if src_ids[j] == UNK_ID})
    return runs


def _inside(words: Sequence[str], texts: Iterable[str]) -> set[int]:
    """The positions of a source's tokens ``words`` inside an occurrence of one of ``texts``
    (a span or a term the translation holds already, whose words an ``<unk>`` copies as
    nothing: "12,50 €" kept, and "12,50" copied twice more): the tokens side by side whose
    text is the text's, spaces aside, a number's separators either language's ("1 250 000"
    written "1,250,000"), its currency's sign on either side ("€12.50": ``numbers.py``)."""
    keys = {bare_number(_squeezed(t)) for t in texts} - {""}
    longest = max(map(len, keys), default=0)
    bare = [_squeezed(_ordinal(w)) for w in words]
    found: set[int] = set()
    for at in range(len(words)):
        joined = ""
        for end in range(at, len(words)):
            joined += bare[end]
            if len(joined) > longest:
                break
            if bare_number(joined) in keys:
                found.update(range(at, end + 1))
    return found


def _squeezed(text: str) -> str:
    """``text`` without its spaces (and a piece's word-start marks) and its numbers'
    separators (:data:`numbers.SEPARATOR`); :func:`numbers.bare_number` of it puts a
    currency's sign where either language writes it ("€1250" and "1250€")."""
    return re.sub(rf"[\s{WORD_START}]", "", SEPARATOR.sub("", text))


def _ordinal(word: str) -> str:
    """A number's token without the full stop spaCy reads into a German ordinal ("3." in "am
    3. Mai": the span kept is "3")."""
    return word[:-1] if len(word) > 1 and word.endswith(".") and word[-2].isdigit() else word


def _runs(copied: Sequence[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The ``<unk>`` copies (output position, source position, word as written), in output
    order, as spans (start, end, word): those side by side that copy the same source word
    one span, written once (a model that cannot write a word often writes an ``<unk>`` for
    each of its parts: "A Luftaufnahme Luftaufnahme with ..."), as the last writes it (a
    full stop after it: :func:`_stopped`); a source word copied already, by a span before,
    written as nothing (the source holds it once: "Holzkarren, Holzkarren on a platform")."""
    spans: list[tuple[int, int, str]] = []
    seen: set[int] = set()
    for n, (k, j, word) in enumerate(copied):
        if n and copied[n - 1][:2] == (k - 1, j):  # right after one copying the same word
            spans[-1] = (spans[-1][0], k + 1, spans[-1][2] and word)
        else:
            spans.append((k, k + 1, "" if j in seen else word))
        seen.add(j)
    return spans


def _stopped(word: str, after: Sequence[str]) -> str:
    """A source ``word`` as copied before the output tokens ``after``: without its full stop
    where a full stop follows it (a German ordinal, "Startnummer 42.", one token: "the 42..")."""
    return word[:-1] if after == ["."] and len(word) > 1 and word.endswith(".") else word


def _placed(kept: list[tuple[int, int, str]],
            copies: dict[int, str]) -> list[tuple[int, int, str]]:
    """``kept`` with the terms written at one ``<unk>`` each (a glossary's terms that the model
    read as themselves, ``glossary.steered``, where its vocabulary lacks them) each at the
    ``<unk>`` that copies it (``copies``: each ``<unk>``'s copy, by position), where one does:
    the constraint search met each term with the first ``<unk>`` it wrote, and two terms may
    have each other's. The others stay where they were, in the places left."""
    single = {start: text for start, end, text in kept if end == start + 1 and start in copies}
    if not single:
        return kept
    left, out = list(single.values()), []
    for place, word in copies.items():  # (in the output's order)
        if word in left and not any(s <= place < e for s, e, _ in kept if s not in single):
            left.remove(word)
            out.append((place, place + 1, word))
    spots = [start for start in single if start not in {s for s, _, _ in out}]
    out += [(start, start + 1, text) for start, text in zip(spots, left, strict=False)]
    return sorted([k for k in kept if k[0] not in single] + out)


def _source_tokens(translator: Translator, sources: Sequence[str] | Sequence[Sequence[str]],
                   at: Sequence[int]) -> dict[int, list[str]]:
    """The tokens the model reads of each source ``at`` (tokenized here where it is text)."""
    texts = [i for i in at if isinstance(sources[i], str)]
    tokens = dict(zip(texts, translator.tokenizers[0].tokenize([str(sources[i]) for i in texts]),
                      strict=True))
    return {i: list(tokens.get(i, sources[i]))[:translator.max_source_tokens] for i in at}


def unwritable(translator: Translator, source: str, tokens: Sequence[str], ids: Sequence[int],
               copies: bool = True) -> list[str]:
    """The ``tokens`` of an output for ``source`` (read as ``ids``) that the model cannot have
    written: words its target vocabulary lacks (read as ``<unk>``), but for the source's own
    words where it copies them (``copies``: ``decode.replace_unk``)."""
    unknown = [t for t, i in zip(tokens, ids, strict=True) if i == UNK_ID and t != UNK]
    if unknown and copies:
        words = set(next(iter(translator.tokenizers[0].tokenize([source]))))
        read = translator.tokenizers[0].tokenize  # (a quoted text copied whole: its words)
        unknown = [t for t in unknown if t not in words and not set(next(iter(read([t])))) <= words]
    return unknown


def shown(tokens: Sequence[str], ids: Sequence[int],
          kept: Sequence[tuple[int, int, str]]) -> list[str]:
    """``tokens`` with each ``<unk>`` that a span of its own writes as a word (copied here, a
    prefix's or a glossary's) shown as that word."""
    out = list(tokens)
    for start, end, text in kept:
        if end == start + 1 and ids[start] == UNK_ID and text:
            out[start] = text
    return out
