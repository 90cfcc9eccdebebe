"""Lexically constrained search: outputs that must contain given token sequences (a glossary's
required terms, spans kept as they are), by dynamic beam allocation (Post & Vilar, 2018).

A hypothesis's progress is how many constraint tokens it has written: the tokens of the
constraints it has met, and those of the one it is writing (a constraint begun is written to
its end, as Sockeye's constraints are: one token a step, no other allowed). Every step, each
hypothesis proposes its best tokens *and* the first tokens of the constraints it lacks; the
beam is then shared among the progress levels ("banks"), the best of each level kept, so that
hypotheses that placed more of the constraints are not crowded out by fluent ones that placed
none. ``<eos>`` is allowed only once every constraint is met. The beam holds at least one
hypothesis a level (``constraint tokens + 1``, up to :data:`MOST_BANKS`), whatever the beam
asked; at the length limit (raised by the constraint tokens) an unfinished hypothesis gets its
missing constraints appended, so that every output holds every constraint.

A sentence may also have sequences to *avoid* (a glossary's words not to write: negative
constraints, as Sockeye's avoid lists): a token that would complete one is never chosen, except
inside a constraint being written.

Sentences are searched in batches, as the plain search does (``decode/search.py``), with a
different choice of hypotheses, made on the host, a sentence at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor

from transformer_mt.config import DecodeConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_mt.decode.repeats import barred_tokens
from transformer_mt.decode.search import (
    Hypothesis,
    length_penalty,
    max_output_lengths,
    next_token_logprobs,
    start_decoding,
)
from transformer_mt.decode.state import Decodable
from transformer_mt.precision import autocast, for_decoding, resolve_precision

MOST_BANKS = 48  # the widest beam a sentence's constraints widen its search to


@dataclass
class Placed(Hypothesis):
    """A hypothesis with where its constraints lie: (constraint, start, end) token spans."""

    spans: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class _Hyp:
    tokens: tuple[int, ...]
    score: float  # log-probability
    met: tuple[bool, ...]  # per constraint
    going: tuple[int, int] | None = None  # (constraint, its tokens written) while writing one
    spans: tuple[tuple[int, int, int], ...] = ()
    progress: int = 0  # constraint tokens written: of those met and of the one being written

    def complete(self) -> bool:
        return all(self.met) and self.going is None

    def then(self, token: int, score: float, constraints: Sequence[Sequence[int]],
             start: int = -1) -> _Hyp:
        """This hypothesis continued by ``token`` (its new score ``score``), which begins the
        constraint ``start`` (-1: none) or continues the one begun."""
        met, going, spans, at = list(self.met), self.going, self.spans, len(self.tokens)
        if going is not None:  # (search lets only the constraint's next token come here)
            going = (going[0], going[1] + 1)
        elif start >= 0:
            going = (start, 1)
        progress = self.progress + (going is not None)
        if going is not None and going[1] == len(constraints[going[0]]):
            j, written = going
            met[j], going, spans = True, None, (*spans, (j, at + 1 - written, at + 1))
        return _Hyp((*self.tokens, token), score, tuple(met), going, spans, progress)

    def finished(self, constraints: Sequence[Sequence[int]]) -> _Hyp:
        """This hypothesis with its missing constraints appended (the length limit's end)."""
        h = self
        if h.going is not None:  # finish the constraint it is writing
            j, written = h.going
            for token in constraints[j][written:]:
                h = h.then(token, h.score, constraints)
        for j, c in enumerate(constraints):
            if not h.met[j]:
                h = h.then(c[0], h.score, constraints, start=j)
                for token in c[1:]:
                    h = h.then(token, h.score, constraints)
        return h


def _barred(h: _Hyp, avoid: Sequence[Sequence[int]]) -> list[int]:
    """The tokens that would complete a sequence of ``avoid`` after ``h``'s."""
    return [a[-1] for a in avoid if 0 < len(a) <= len(h.tokens) + 1
            and h.tokens[len(h.tokens) + 1 - len(a):] == tuple(a[:-1])]


Candidate = tuple[float, int, int, int]  # (score, row, token, the constraint it begins or -1)


def _ends_a_span(h: _Hyp | None) -> bool:
    """Whether ``h``'s last token ends a constraint (the next may not go on with its word)."""
    return h is not None and bool(h.spans) and h.spans[-1][2] == len(h.tokens)


def _proposals(beam: list[_Hyp | None], top: Sequence[Sequence[int]],
               barred: Sequence[set[int]], constraints: Sequence[Sequence[int]],
               at_limit: bool, glued: frozenset[int]) -> list[Candidate]:
    """Every continuation worth a place, with its row's score (the token's log-probability
    not added yet): each live row's ``top`` tokens, and the first token of each constraint
    it lacks (a token may be both: the output may hold it before it holds the constraint);
    ``<eos>`` only where all are met, and nothing else ``at_limit``; no token of ``glued``
    right after a constraint, none of the row's ``barred`` (those completing a sequence to
    avoid; but a constraint may begin with one: "parkland" where "park" is avoided)."""
    out: list[Candidate] = []
    for row, h in enumerate(beam):
        if h is None:
            continue
        if at_limit:  # <eos> forced (as search forces it: at no cost)
            out += [(h.score, row, EOS_ID, -1)] if h.complete() else []
            continue
        if h.going is not None:  # a constraint begun is written to its end
            tokens = [(constraints[h.going[0]][h.going[1]], -1)]
        else:
            bars = barred[row] | (glued if _ends_a_span(h) else frozenset())
            tokens = [(t, -1) for t in top[row]
                      if (t != EOS_ID or h.complete()) and t not in bars]
            tokens += [(c[0], j) for j, c in enumerate(constraints) if not h.met[j]]
        out += [(h.score, row, t, j) for t, j in tokens]
    return out


def _scored(proposed: Sequence[list[Candidate]], logp: Tensor, k: int,
            at_limit: Sequence[bool]) -> list[list[Candidate]]:
    """Each sentence's proposals with their token's log-probability added (none at its length
    limit: ``<eos>`` is free there), best first. logp: (N*K, V) fp32 on the host, sentence
    ``n``'s rows from ``n * k``; its values read at once (one gather a step)."""
    where = [(n * k + row, t) for n, cands in enumerate(proposed) if not at_limit[n]
             for _, row, t, _ in cands]
    rows, tokens = zip(*where, strict=True) if where else ((), ())
    gained = iter(logp[list(rows), list(tokens)].tolist())
    return [sorted(cands if at_limit[n] else [(score + next(gained), row, t, j)
                                              for score, row, t, j in cands], reverse=True)
            for n, cands in enumerate(proposed)]


def _top(logp: Tensor, n: int, barred: Sequence[set[int]], glued: Tensor,
         ending: Sequence[bool]) -> list[list[int]]:
    """The ``n`` most probable tokens of each row of ``logp`` (K, V), those of its
    ``barred`` left out, and where the row has just written a constraint (``ending``) those
    ``glued`` (V,) marks (drawn without them: a row whose best tokens all went on with the
    constraint's word, "5kg" -> "5kgs", was left with no continuation and the search with
    no hypothesis that ends: "wearing ####Ens................... 5kg")."""
    top = logp.topk(n, dim=-1).indices.tolist()  # (K, n)
    rows = [row for row, (bar, end) in enumerate(zip(barred, ending, strict=True))
            if bar or end]
    if rows:
        some = logp[rows]  # (R, V), a copy
        for j, row in enumerate(rows):
            if barred[row]:
                some[j, list(barred[row])] = float("-inf")
            if ending[row]:
                some[j].masked_fill_(glued, float("-inf"))
        for row, tokens in zip(rows, some.topk(n, dim=-1).indices.tolist(), strict=True):
            top[row] = tokens
    return top


def _choose(beam: list[_Hyp | None], candidates: list[Candidate],
            constraints: Sequence[Sequence[int]], k: int,
            ) -> tuple[list[_Hyp], list[tuple[_Hyp, int]]]:
    """A step's decisions from the ``candidates`` (best first): the hypotheses that end
    (their ``<eos>`` among the ``k`` kept of all candidates), and the ``k`` that continue
    (of the others), each with its row."""
    live = cast("list[_Hyp]", beam)  # (a dead row, None, proposes nothing)
    ranked: list[Ranked] = []  # best first
    for candidate in candidates:
        h, token, start = live[candidate[1]], candidate[2], candidate[3]
        ranked.append((h.progress + (token != EOS_ID and (h.going is not None or start >= 0)),
                       candidate))
    banks = min(sum(len(c) for c in constraints) + 1, k)
    ends = [dataclasses.replace(live[row], score=score)
            for _, (score, row, token, _) in _allocate(ranked, k, banks) if token == EOS_ID]
    kept = _allocate([r for r in ranked if r[1][2] != EOS_ID], k, banks)
    return ends, [(live[row].then(token, score, constraints, start), row)
                  for _, (score, row, token, start) in kept]


Ranked = tuple[int, Candidate]  # a candidate and its progress level


def _allocate(ranked: list[Ranked], k: int, banks: int) -> list[Ranked]:
    """The ``k`` candidates kept of ``ranked`` (best first): the best of each progress level
    (``k // banks`` a level), then the best of the rest."""
    per_bank = k // banks
    kept: list[Ranked] = []
    taken: dict[int, int] = {}
    rest = []
    for r in ranked:
        if taken.get(r[0], 0) < per_bank:
            taken[r[0]] = taken.get(r[0], 0) + 1
            kept.append(r)
        else:
            rest.append(r)
    return (kept + rest)[:k]


@dataclass
class _Sentence:
    """One sentence's search: its constraints, its length limit, its beam (``k`` slots, None
    for a dead one) and what ended, (written whole, score to rank by, the hypothesis); the
    sequences it avoids."""

    constraints: Sequence[Sequence[int]]
    limit: int
    k: int
    avoid: Sequence[Sequence[int]] = ()
    beam: list[_Hyp | None] = field(default_factory=list)
    finished: list[tuple[bool, float, _Hyp]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.beam = [_Hyp((), 0.0, (False,) * len(self.constraints))] + [None] * (self.k - 1)

    def barred(self) -> list[set[int]]:
        """The tokens each of its rows may not write next: those completing a sequence it
        avoids (none inside a constraint being written)."""
        return [set(_barred(h, self.avoid)) if h is not None and h.going is None and self.avoid
                else set() for h in self.beam]

    def propose(self, top: Sequence[Sequence[int]], barred: Sequence[set[int]], step: int,
                glued: frozenset[int]) -> list[Candidate]:
        """Its rows' continuations worth a place (:func:`_proposals`), from the most probable
        tokens of each row (at least ``k + 1``: the ``k + 1`` first taken)."""
        return _proposals(self.beam, [t[:self.k + 1] for t in top], barred, self.constraints,
                          step == self.limit, glued)

    def advance(self, candidates: list[Candidate], step: int, alpha: float) -> list[int] | None:
        """A step, from its scored ``candidates`` (best first): the row each of its next
        hypotheses extends (``k``, 0 for a dead one), or None once it is done."""
        ends, kept = _choose(self.beam, candidates, self.constraints, self.k)
        penalty = float(length_penalty(step + 1, alpha))
        self.finished += [(True, h.score / penalty, h) for h in ends]
        if len(self.finished) >= self.k or not kept:
            return None
        self.beam = [h for h, _ in kept] + [None] * (self.k - len(kept))
        return [row for _, row in kept] + [0] * (self.k - len(kept))

    def best(self, nbest: int, alpha: float) -> list[Placed]:
        """Its ``nbest`` best outputs, best first: those that ended, then (at the length limit)
        the live ones with their missing constraints appended."""
        if len(self.finished) < nbest:
            for h in (h for h in self.beam if h is not None and not h.complete()):
                done = h.finished(self.constraints)
                self.finished.append((False, done.score / float(
                    length_penalty(len(done.tokens), alpha)), done))
        best = sorted(self.finished, key=lambda f: (not f[0], -f[1]))[:nbest]
        return [Placed(list(h.tokens), score, list(h.spans)) for _, score, h in best]


def _width(constraints: Sequence[Sequence[int]], beam_size: int, nbest: int) -> int:
    """The hypotheses a sentence of ``constraints`` searches: the beam, widened to the
    ``nbest`` asked and to a hypothesis a progress level (at most :data:`MOST_BANKS`)."""
    return max(beam_size, nbest, min(sum(map(len, constraints)) + 1, MOST_BANKS))


@torch.inference_mode()
def constrained_search(model: Decodable, src: Tensor, src_mask: Tensor,
                       constraints: Sequence[Sequence[Sequence[int]]], beam_size: int = 5,
                       alpha: float = 0.6, max_len_a: float = 1.5, max_len_b: int = 10,
                       nbest: int = 1, use_cache: bool = False,
                       glued: frozenset[int] = frozenset(),
                       avoid: Sequence[Sequence[Sequence[int]]] | None = None,
                       no_repeat: int = 0) -> list[list[Placed]]:
    """The ``nbest`` best outputs of each source (src (B, S), src_mask (B, 1, 1, S)) that
    contain every one of its constraints (sequences of target ids), best first. A sentence
    searches ``max(beam_size, nbest, its constraint tokens + 1)`` hypotheses (at most
    :data:`MOST_BANKS` for its constraints), whatever the others in the batch. ``glued``: the
    tokens that would go on with the word a constraint ends (subword pieces), never next to
    one. ``avoid``: per source, the sequences its outputs do not hold (outside constraints);
    ``no_repeat`` > 0: nor an n-gram of that size twice (``decode/repeats.py``)."""
    cap = model.cfg.max_output_tokens
    sentences = [_Sentence(c, min(int(n) + sum(map(len, c)), cap), _width(c, beam_size, nbest),
                           avoid[i] if avoid else ())
                 for i, (c, n) in enumerate(zip(constraints, max_output_lengths(
                     src_mask, max_len_a, max_len_b).tolist(), strict=True))]
    k = max(s.k for s in sentences)  # rows a sentence in the batch (beyond its own k: dead)
    glue = torch.zeros(model.tgt_vocab_size, dtype=torch.bool)  # (V,) glued's tokens
    glue[list(glued)] = True
    state = start_decoding(model, src, src_mask, k, use_cache)
    alive, step = list(range(len(sentences))), 0
    while alive:
        searched = [sentences[i] for i in alive]
        prefix = torch.tensor([[BOS_ID, *(h or s.beam[0]).tokens]  # type: ignore[union-attr]
                               for s in searched for h in s.beam + [None] * (k - s.k)],
                              device=src.device)  # (N*K, t + 1)
        logp = next_token_logprobs(state.next_logits(prefix)).cpu()  # (N*K, V)
        barred = [s.barred() + [set()] * (k - s.k) for s in searched]
        if no_repeat > 0:  # (a constraint is written whole, a repeat or not: _proposals)
            again = barred_tokens(prefix, no_repeat, logp.size(1))  # a set a row (N*K)
            barred = [[b | again[n * k + row] for row, b in enumerate(bars)]
                      for n, bars in enumerate(barred)]
        top = _top(logp, min(k + 1, logp.size(1)), [b for bars in barred for b in bars],
                   glue, [_ends_a_span(h) for s in searched for h in s.beam + [None] * (k - s.k)])
        scored = _scored([s.propose(top[n * k:n * k + s.k], barred[n], step, glued)
                          for n, s in enumerate(searched)], logp, k,
                         [step == s.limit for s in searched])
        rows, kept = [], []  # the rows continued (N'*K), the sentences still searched (N')
        for n, s in enumerate(searched):
            chosen = s.advance(scored[n], step, alpha)
            if chosen is not None:
                rows += [n * k + row for row in chosen] + [n * k] * (k - s.k)
                kept.append(n)
        if not kept:
            break
        state.select(torch.tensor(rows, device=src.device),
                     torch.tensor(kept, device=src.device) if len(kept) < len(alive) else None)
        alive, step = [alive[n] for n in kept], step + 1
    return [s.best(nbest, alpha) for s in sentences]


def decode_constrained(model: Decodable, src_ids: Sequence[Sequence[int]],
                       constraints: Sequence[Sequence[Sequence[int]]], cfg: DecodeConfig,
                       device: torch.device, nbest: int = 1,
                       glued: frozenset[int] = frozenset(),
                       avoid: Sequence[Sequence[Sequence[int]]] | None = None,
                       ) -> list[list[Placed]]:
    """The ``nbest`` best outputs of each source (ids) holding its constraints, in batches
    of ``cfg.batch_size`` sorted by length, at ``cfg``'s beam, length limits and precision
    (``glued``, ``avoid``: as :func:`constrained_search`'s)."""
    precision = resolve_precision(cfg.precision, device)
    model = for_decoding(model, precision, device)
    # batches of sentences that search as many hypotheses (a sentence's rows beyond its own
    # are dead, but computed) and are about as long
    order = sorted(range(len(src_ids)), key=lambda i: (
        _width(constraints[i], cfg.beam_size, nbest), len(src_ids[i])))
    out: list[list[Placed]] = [[] for _ in src_ids]
    for start in range(0, len(order), cfg.batch_size):
        chunk = order[start:start + cfg.batch_size]
        src = torch.nn.utils.rnn.pad_sequence(
            [torch.tensor(src_ids[i], dtype=torch.long) for i in chunk], batch_first=True,
            padding_value=PAD_ID).to(device)  # (B, S)
        with autocast(device, precision):
            found = constrained_search(model, src, source_mask(src),
                                       [constraints[i] for i in chunk], cfg.beam_size,
                                       cfg.alpha, cfg.max_len_a, cfg.max_len_b, nbest, True,
                                       glued, [avoid[i] for i in chunk] if avoid else None,
                                       cfg.no_repeat_ngram_size)
        for i, placed in zip(chunk, found, strict=True):
            out[i] = placed
    return out
