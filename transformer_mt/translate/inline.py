"""Inline markup carried across a translation.

Formatting may cut a sentence into pieces: "Ein Mann fährt <b>Fahrrad</b>." is three text nodes
in HTML, three runs in a Word document. Each piece translated on its own gives three
translations of fragments ("Ein Mann fährt" alone is not a sentence); so the sentence is
translated whole, and its translation cut into as many pieces again, each written where its
source piece was: "A man is riding a <b>bike</b>."

Which output words go into which piece: each output token is linked to a position in the source
(the source token it attends to most, read off cross-attention as ``decode/align.py`` does, or,
without attention weights, the same relative position), and each word to the piece most of its
tokens are linked into. The pieces keep their order (a word the model moved is placed as well as
order allows: rather moved across markup, between pieces of text outside it, than put into
markup or out of it), every piece that holds a word in the source gets one in the output (but
the text after the last markup, whose words the translation may all have moved before it), and
nothing is added or lost: the pieces joined are the translation.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from transformer_mt.data.tokenize import CJK
from transformer_mt.data.vocab import UNK
from transformer_mt.decode.align import token_links
from transformer_mt.errors import MTError
from transformer_mt.translate.glossary import KEPT
from transformer_mt.translate.numbers import bare_number

if TYPE_CHECKING:
    from transformer_mt.translate import Translator

Link = tuple[int, int]  # an output character offset, and the source character offset it reads
# never cut: what is kept as it is (a URL, an address, a placeholder, a number: glossary.KEPT,
# "www.hund.de", "{name}", "1.000"), a word ("middle-aged"), the unknown word a model writes
# ("<unk>"), a Chinese character or a kana (their scripts run words together: each may go to
# a piece of its own), or a mark
UNIT = re.compile(rf"{KEPT.pattern}|{re.escape(UNK)}|[{CJK}]|[^\W{CJK}]+(?:['’-][^\W{CJK}]+)*"
                  r"|[^\w\s]")

INF = float("inf")
LEFT = 1000.0  # a piece left without a word, or one given a word besides its kept spans


def share(source: str, cuts: Sequence[int], translation: str,
          links: Sequence[Link] | None = None, kept: Sequence[bool] = (),
          bare: Sequence[bool] = (), closed: bool = False) -> list[str]:
    """``translation`` cut into ``len(cuts) + 1`` pieces, the pieces ``source`` is cut into at
    the character offsets ``cuts`` (increasing, inside it), in the same order; ``links``: where
    in the source the output reads (None: at the same relative position); ``kept`` pieces
    (which the caller keeps as they were) get the words that read them and no others; a word
    moved between two ``bare`` pieces (text outside markup) costs half what a word put into
    markup, or out of it, does; a last piece that is ``bare`` may go without a word, unless
    ``closed`` (subtitles: every one that holds a word in the source shows one); a span kept as
    it is (a number, an address, a placeholder) that the translation holds as often as the
    source goes where the source has it (:func:`_pinned`; laid out as the source's where the
    source's markup cuts it: :func:`_as_cut`), unless ``closed``."""
    if not closed:
        translation, links = _as_cut(source, cuts, translation, links)
    units = [m.span() for m in UNIT.finditer(translation)]
    if not units:
        return [translation] + [""] * len(cuts)
    if not closed:
        units = _split_kept(source, cuts, translation, units)
    prefer = _preferences(source, cuts, translation, units, links)
    sources = [source[a:b] for a, b in itertools.pairwise([0, *cuts, len(source)])]
    keep = [bool(kept and kept[i]) for i in range(len(sources))]
    loose = [bool(bare and bare[i]) for i in range(len(sources))]
    worded = [any(c.isalnum() for c in text) and not k
              for text, k in zip(sources, keep, strict=True)]
    words = [any(c.isalnum() for c in translation[a:b]) for a, b in units]
    if sum(worded) > sum(words):  # too few words to give each piece one
        worded = [False] * len(worded)
    # the text after the last markup may go without a word, not after a kept piece (a field
    # is placed by the words around it alone)
    open_end = not closed and loose[-1] and not (len(sources) > 1 and keep[-2])
    # a kept piece of no text (a line break, a note's mark) takes no word: it would be lost
    shut = [k and not text.strip() for text, k in zip(sources, keep, strict=True)]
    # (subtitles: every one shows a word before any span holds its place)
    pinned, alone = _pinned(source, cuts, translation, units) if not closed else (
        [None] * len(units), [False] * len(sources))
    # a piece needs a word; where a span kept as it is holds its place, it may go without one
    # (at a price no misplaced word reaches) rather than the span leave it
    need = INF if all(p is None for p in pinned) else LEFT
    skip = [(1.0 if p == len(sources) - 1 and open_end else need) if worded[p] else 0.0
            for p in range(len(sources))]
    # what each unit costs in each piece: a pinned one nowhere else; no word beside a piece's
    # kept spans, no unit in a kept piece it does not read (the caller keeps the piece as it
    # was: its text would be lost)
    place = [[(0.0 if p == pin else INF) if pin is not None else _miss(want, p, loose)
              + LEFT * ((alone[p] and word) or (keep[p] and p not in want))
              for p in range(len(sources))]
             for want, pin, word in zip(prefer, pinned, words, strict=True)]
    pieces = _in_order(place, words, skip, shut)
    return _cut(translation, units, _lines_kept(translation, units, pieces, sources), sources,
                loose)


def _preferences(source: str, cuts: Sequence[int], translation: str,
                 units: list[tuple[int, int]], links: Sequence[Link] | None
                 ) -> list[dict[int, float]]:
    """Each unit's preference: the share of its links that read from each piece (without
    ``links``, at the same relative position; punctuation and kept spans where the source
    has them: :func:`_marks`)."""
    if links is None:
        scale = len(source) / max(len(translation), 1)
        links = [(o, int(o * scale)) for start, end in units for o in range(start, end)]
    links = sorted([*_marks(source, translation), *links])
    outs = [o for o, _ in links]
    prefer: list[dict[int, float]] = []
    for start, end in units:
        reads = [bisect.bisect_right(cuts, s) for _, s in
                 links[bisect.bisect_left(outs, start):bisect.bisect_left(outs, end)]]
        prefer.append({p: reads.count(p) / len(reads) for p in set(reads)})
    return prefer


def _pinned(source: str, cuts: Sequence[int], translation: str,
            units: list[tuple[int, int]]) -> tuple[list[int | None], list[bool]]:
    """The piece each unit must go to: a span kept as it is (``glossary.KEPT``: a number, an
    address, a placeholder; verbatim in the translation with ``--keep-spans``) that the
    translation holds as often as the source, the k-th into the piece of the source's k-th
    (one the source's markup cuts, "<b>12,50</b> €", each part into its piece: ``units`` cut
    so, :func:`_kept_parts`); and the pieces whose words are all such spans, which take no
    other word ("(10:30)", not "(10:30 white)"). None pinned where they would go out of
    order."""
    pinned: list[int | None] = [None] * len(units)
    held: list[list[tuple[int, int]]] = [[] for _ in range(len(cuts) + 1)]
    unit = {span: k for k, span in enumerate(units)}
    for mine, (start, end) in _kept_pairs(source, translation):
        for part, (a, b) in _kept_parts(translation, mine, start, end, cuts):
            if part in unit:
                piece = bisect.bisect_right(cuts, a)
                pinned[unit[part]] = piece
                held[piece].append((a, b))
    order = [p for p in pinned if p is not None]
    if order != sorted(order):  # the translation moved one past another
        return [None] * len(units), [False] * len(held)
    bounds = list(itertools.pairwise([0, *cuts, len(source)]))
    alone = [bool(spans) and not any(source[i].isalnum() for i in range(a, b)
                                     if not any(s <= i < e for s, e in spans))
             for (a, b), spans in zip(bounds, held, strict=True)]
    return pinned, alone


def _kept_pairs(source: str, translation: str,
                ) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Each span kept as it is that the translation holds as often as the source, the k-th of
    the translation's with the source's k-th: (its place in the translation, in the source)."""
    theirs = _kept_spans(source)
    return [pair for text, mine in _kept_spans(translation).items()
            if len(mine) == len(theirs.get(text, []))
            for pair in zip(mine, theirs[text], strict=True)]


def _as_cut(source: str, cuts: Sequence[int], translation: str,
            links: Sequence[Link] | None) -> tuple[str, Sequence[Link] | None]:
    """``translation`` with each kept span that the source's markup cuts ("<b>12,50</b> €")
    laid out as the source's, its number as the translation writes it ("12.50 €", not the
    target language's "€12.50": ``numbers.py``), so that each part goes where the source's
    is; ``links`` moved with the text after it."""
    for (a, b), (start, end) in sorted(_kept_pairs(source, translation), reverse=True):
        theirs, mine = KEPT.fullmatch(source, start, end), KEPT.fullmatch(translation, a, b)
        if not any(start < c < end for c in cuts) or theirs is None or mine is None \
                or theirs["number"] is None or mine["number"] is None:
            continue
        laid = source[start:theirs.start("number")] + mine["number"] + source[
            theirs.end("number"):end]
        shift = len(laid) - (b - a)
        translation = translation[:a] + laid + translation[b:]
        if links is not None and shift:
            links = [(o if o < a else min(o, a + len(laid) - 1) if o < b else o + shift, s)
                     for o, s in links]
    return translation, links


def _kept_parts(translation: str, mine: tuple[int, int], start: int, end: int,
                cuts: Sequence[int]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The parts of the kept span ``mine`` of the translation as the source's ``cuts`` cut
    its own (``start``, ``end``): each part's place in the translation (spaces round it left
    out) and in the source; the span whole where no cut falls in it (its sign where the
    target language puts it: "€12.50" for "12,50 €")."""
    bounds = [start, *[c for c in cuts if start < c < end], end]
    if len(bounds) == 2:
        return [(mine, (start, end))]
    parts = []
    for a, b in itertools.pairwise(bounds):
        text = translation[mine[0] + a - start:mine[0] + b - start]
        lead = len(text) - len(text.lstrip())
        if text.strip():
            parts.append(((mine[0] + a - start + lead,
                           mine[0] + a - start + lead + len(text.strip())), (a, b)))
    return parts


def _split_kept(source: str, cuts: Sequence[int], translation: str,
                units: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``units`` with each kept span of the translation that the source's markup cuts
    ("<b>12,50</b> €") cut into its parts (:func:`_kept_parts`), which :func:`_pinned` pins
    each into its piece."""
    parts = {mine: [part for part, _ in _kept_parts(translation, mine, start, end, cuts)]
             for mine, (start, end) in _kept_pairs(source, translation)}
    return [part for span in units for part in parts.get(span, [span])]


def _kept_spans(text: str) -> dict[str, list[tuple[int, int]]]:
    """Where each span kept as it is (``glossary.KEPT``) stands in ``text``, by its text (a
    number's separators either language's: ``numbers.py``, "12,50 €" is "12.50 €")."""
    out: dict[str, list[tuple[int, int]]] = {}
    for m in KEPT.finditer(text):
        out.setdefault(bare_number(m.group()), []).append(m.span())
    return out


def _lines_kept(translation: str, units: list[tuple[int, int]], pieces: list[int],
                sources: list[str]) -> list[int]:
    """``pieces`` with each mark written against a word (no space between them) on the
    word's side of a line break between them: no line begins with a comma ("a beard,\n
    glasses", not "a beard\n, glasses") or ends with an opening bracket."""
    out = list(pieces)
    for k in range(1, len(units)):
        a, b = out[k - 1], out[k]
        if a == b or not any("\n" in sources[r] for r in range(a + 1, b)):
            continue
        if units[k][0] == units[k - 1][1] and not translation[units[k][0]].isalnum():
            out[k] = a  # a closing mark: with the word before it
        elif units[k][0] == units[k - 1][1] and not translation[units[k - 1][0]].isalnum():
            out[k - 1] = b  # an opening one: with the word after it
    return out


def _marks(source: str, translation: str) -> list[Link]:
    """Punctuation, and what is kept as it is (a number, a URL, a placeholder), read where the
    source has it: the k-th of a mark or span the translation holds as often as the source
    linked to the source's k-th (attention, at a full stop, often looks at the last word; a
    kept span's constraint tokens look anywhere), counted four times over; a mark that ends
    both, the one that ends the translation to the one that ends the source ("(ca. 2 m)
    hoch." and "up 2.": the full stop after the bracket)."""
    out: list[Link] = []
    marks = {c for c in translation if not (c.isalnum() or c.isspace() or c == "_")}
    for text in marks | {m.group() for m in KEPT.finditer(translation)}:
        mine = [i for i in range(len(translation)) if translation.startswith(text, i)]
        theirs = [i for i in range(len(source)) if source.startswith(text, i)]
        if len(mine) == len(theirs):
            out += [(o + k, s + k) for o, s in zip(mine, theirs, strict=True)
                    for k in range(len(text)) for _ in range(4)]
        elif len(text) == 1 and translation.rstrip()[-1:] == text == source.rstrip()[-1:]:
            out += [(len(translation.rstrip()) - 1, len(source.rstrip()) - 1)] * 4
    return out


def _in_order(place: list[list[float]], words: list[bool], skip: list[float],
              shut: list[bool]) -> list[int]:
    """The piece of each unit: in order (never decreasing), at the least cost of ``place``
    (what putting each unit in each piece costs: :func:`_miss`, a span kept as it is held
    where the source has it) and ``skip`` (what leaving each piece without a unit that is a
    word, ``words``, costs: infinite where it needs one; the words after the last markup may
    all have moved before it: "vor einem <b>Gebäude</b> stehen." gives "standing in front of
    a <b>building</b>."; any other worded piece needs one: attention often reads a word
    ahead, "A" reads "<b>Mann</b>", "man" the word after; freeing them too placed worse),
    none in a ``shut`` piece: a dynamic programme over the units, its states a piece and
    whether it has a word yet."""
    m, inf = len(skip), float("inf")
    between = _skipping(skip)

    cost = [[inf, inf] for _ in range(m)]  # [piece][has a word]
    for p in range(m):
        if between(-1, p) < inf and not shut[p]:
            cost[p][words[0]] = between(-1, p) + place[0][p]
    back: list[list[list[tuple[int, int]]]] = [[[(-1, -1)] * 2 for _ in range(m)]]
    for k in range(1, len(place)):
        new = [[inf, inf] for _ in range(m)]
        arrows = [[(-1, -1)] * 2 for _ in range(m)]
        for q, w in ((q, w) for q in range(m) for w in (0, 1) if cost[q][w] < inf):
            for p in (p for p in range(q, m) if not shut[p]):
                leave = 0.0 if p == q or w else skip[q]
                step = leave + between(q, p)
                if step == inf:
                    continue
                state = w or words[k] if p == q else words[k]
                total = cost[q][w] + step + place[k][p]
                if total < new[p][state]:
                    new[p][state], arrows[p][state] = total, (q, w)
        cost = new
        back.append(arrows)
    _, p, w = min((total, p, w) for p in range(m) for w in (0, 1) if (
        total := cost[p][w] + (0.0 if w else skip[p]) + between(p, m)) < inf)
    out = [p]
    for k in range(len(place) - 1, 0, -1):
        p, w = back[k][p][w]
        out.append(p)
    return out[::-1]


def _skipping(skip: list[float]) -> Callable[[int, int], float]:
    """What leaving the pieces strictly between two pieces without a word costs, each
    ``skip``-ping one costing its own (infinite: it needs a word)."""
    inf = float("inf")
    hard = [0, *itertools.accumulate(c == inf for c in skip)]  # pieces that need a word
    soft = [0.0, *itertools.accumulate(c if c < inf else 0.0 for c in skip)]

    def between(q: int, p: int) -> float:
        if p <= q + 1:
            return 0.0
        return inf if hard[p] > hard[q + 1] else soft[p] - soft[q + 1]

    return between


def _miss(want: dict[int, float], piece: int, bare: list[bool]) -> float:
    """What putting a unit in ``piece`` costs: the share of its links that read elsewhere,
    twice where that piece or this one is markup (not ``bare``)."""
    return sum(share * (1 if bare[piece] and bare[read] else 2)
               for read, share in want.items() if read != piece)


def _cut(translation: str, units: list[tuple[int, int]], pieces: list[int],
         sources: list[str], bare: list[bool]) -> list[str]:
    """The translation's text given to the pieces its units went to; the spaces between two
    pieces go where the source had them: to the earlier piece if it ended with a space, else
    to a piece of spaces alone between them, else to the later one, but where the source had
    none there (Chinese; a word cut by markup) outside markup (``bare``)."""
    out = [""] * len(sources)
    start = 0
    for k in range(1, len(units)):
        p, q = pieces[k - 1], pieces[k]
        if p == q:
            continue
        end, gap_end = units[k - 1][1], units[k][0]
        spaces = [r for r in range(p + 1, q) if sources[r].isspace()]
        none = not spaces and not sources[q][:1].isspace() and bare[p] and not bare[q]
        home = p if sources[p][-1:].isspace() or none else spaces[0] if spaces else q
        out[p] += translation[start:end]
        if home == q:
            start = end
        else:
            out[home] += translation[end:gap_end]
            start = gap_end
    out[pieces[-1]] += translation[start:]
    return out


def attention_links(translator: Translator, sources: list[str],
                    translations: list[str]) -> list[list[Link]] | None:
    """Where each translation reads in its source: each output token's characters linked to
    the middle of the source token it attends to most (the last decoder layer, its heads
    averaged, as ``mt translate --align``), the translation tokenized again; None where the
    engine gives no attention weights (an ensemble's is its members' mean; a CTranslate2
    export gives the same as ours: ``exported.py``)."""
    src_tok, out_tok = translator.tokenizers
    tokens = [t[:translator.max_source_tokens] for t in src_tok.tokenize(sources)]
    most = translator.config.model.max_output_tokens  # (tokenized again, it may be longer)
    written = [w[:most] for w in out_tok.tokenize(translations)]
    try:
        weights = translator.engine.cross_attention(
            [translator.src_vocab.encode(t) for t in tokens],
            [translator.tgt_vocab.encode(w, eos=False) for w in written])
    except MTError:
        return None
    out = []
    for source, translation, src, out_tokens, weight in zip(sources, translations, tokens,
                                                             written, weights, strict=True):
        src_spans = _located(source, [src_tok.detokenize([t]).strip() for t in src])
        out_spans = _located(translation, [out_tok.detokenize([t]).strip() for t in out_tokens])
        out.append([(o, (src_spans[i][0] + src_spans[i][1]) // 2)
                    for (start, end), i in zip(out_spans, token_links(weight), strict=True)
                    for o in range(start, max(end, start + 1))])
    return out


def _located(text: str, surfaces: Sequence[str]) -> list[tuple[int, int]]:
    """The character span of each token (its text ``surfaces``, in order) in ``text``: found
    from where the last one ended, or, where it is not found near (text normalised by the
    tokenizer), an empty span there."""
    spans, at = [], 0
    for surface in surfaces:
        found = text.find(surface, at, at + len(surface) + 8) if surface else -1
        if found < 0:
            spans.append((at, at))
            continue
        spans.append((found, found + len(surface)))
        at = found + len(surface)
    return spans
