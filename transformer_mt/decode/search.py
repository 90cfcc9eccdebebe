"""Greedy and beam search as plain functions over a trained model, for a batch of sources or a
whole corpus (:func:`decode_corpus`: batches sorted by length, results in input order).

Search asks a decoding state for the next-token logits of its prefixes (``next_logits``) and
tells it which hypotheses it keeps (``select``). The reference, :class:`PrefixState`, re-runs
the decoder over the whole prefix at every step, as the seed tutorials do, and is what
:func:`greedy` and :func:`beam_search` use unless told otherwise. ``use_cache=True``, which
:func:`decode_batch` and :func:`decode_corpus` pass (every command decodes through them),
uses the incremental decoder of ``decode/incremental.py`` instead: the encoder's keys and values
are projected once per sentence and each step feeds one token; it gives the same translations,
faster (``tests/unit/test_decoding_equivalence.py``, ``bench/decode_speed.py``).
Finished sentences leave the batch, so the remaining ones run on a smaller batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor
from tqdm.auto import tqdm

from transformer_mt.config import DecodeConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_mt.decode import incremental
from transformer_mt.decode.beam_step import StepByStep, candidate_logits
from transformer_mt.decode.ensemble import Ensemble, EnsembleState
from transformer_mt.decode.forcing import Forcing, barred, force, raise_limits
from transformer_mt.decode.repeats import unforced_repeats, with_repeats
from transformer_mt.decode.sampling import Generators, draw_seed, of_rows, pick
from transformer_mt.decode.state import Decodable, DecodingState
from transformer_mt.errors import MTError
from transformer_mt.model.transformer import Transformer
from transformer_mt.precision import autocast, for_decoding, resolve_precision


@dataclass
class Hypothesis:
    tokens: list[int]  # output ids, without <bos> and <eos>
    score: float  # log-probability (beam search: divided by the length penalty)


def max_output_lengths(src_mask: Tensor, a: float, b: int,
                       cap: int | None = None) -> Tensor:
    """(B,) longest output (in tokens, <eos> excluded) per sentence: ``a * source length + b``,
    at most ``cap`` (the model's ``max_output_tokens``)."""
    src_len = src_mask.reshape(src_mask.size(0), -1).sum(-1)  # (B,)
    limits = (src_len.float() * a).floor().long() + b
    return limits if cap is None else limits.clamp(max=cap)


def _cap(model: Decodable) -> int:
    return model.cfg.max_output_tokens


@dataclass
class PrefixState(StepByStep):
    """The reference decoding state: every step runs the decoder over the whole prefix.

    ``memory`` (N, S, D) and ``src_mask`` (N, 1, 1, S) have one row per prefix (a sentence's
    G hypotheses each get a copy).
    """

    model: Transformer
    memory: Tensor
    src_mask: Tensor

    def next_logits(self, prefix: Tensor) -> Tensor:
        """Next-token logits (N, V) of the prefixes (N, t), recomputing every position."""
        return self.model.decode(prefix, self.memory, self.src_mask)[:, -1]

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep (and reorder) prefixes: row ``i`` becomes old row ``rows[i]``."""
        self.memory, self.src_mask = self.memory[rows], self.src_mask[rows]


def start_decoding(model: Decodable, src: Tensor, src_mask: Tensor,
                   group: int = 1, use_cache: bool = False) -> DecodingState:
    """The decoding state of a batch of sources (B, S), ``group`` hypotheses per sentence:
    incremental (``use_cache``) or the reference :class:`PrefixState`."""
    if isinstance(model, Ensemble):
        return EnsembleState([start_decoding(m, src, src_mask, group, use_cache)
                              for m in model.members])
    if not isinstance(model, Transformer):  # a model that brings its own decoding state
        return model.start_decoding(src, src_mask, group)
    if use_cache:
        return incremental.start_decoding(model, src, src_mask, group)
    memory = model.encode(src, src_mask)  # (B, S, D)
    return PrefixState(model, memory.repeat_interleave(group, dim=0),
                       src_mask.repeat_interleave(group, dim=0))


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty ``((5 + length) / 6) ** alpha`` (Wu et al., 2016)."""
    return ((5.0 + length) / 6.0) ** alpha


def _next_scores(state: DecodingState, prefix: Tensor, at_limit: Tensor | None) -> Tensor:
    """Next-token logits (N, V) in fp32 for each prefix (N, t), as search chooses from them
    (:func:`~transformer_mt.decode.beam_step.candidate_logits`: padding and <bos> never
    produced; rows in ``at_limit`` (N,) bool, if given, may only produce <eos>).

    Their ``log_softmax`` gives the log-probabilities.
    """
    return candidate_logits(state.next_logits(prefix), at_limit)


def next_token_logprobs(logits: Tensor) -> Tensor:
    """(N, V) logits -> (N, V) fp32 log-probabilities of the tokens search may produce."""
    return candidate_logits(logits).log_softmax(dim=-1)


def _at_limit(step: int, limits: Tensor, shortest: int, k: int = 1) -> Tensor | None:
    """(N*K,) rows whose output reached its length limit (``limits`` (N,): the sentences',
    each the limit of its ``k`` rows); None (no work) before any can."""
    if step < shortest:
        return None
    return step >= limits if k == 1 else (step >= limits).repeat_interleave(k)


@torch.inference_mode()
def greedy(model: Decodable, src: Tensor, src_mask: Tensor, max_len_a: float = 1.5,
           max_len_b: int = 10, use_cache: bool = False, sample_topk: int = 0,
           temperature: float = 1.0, generator: Generators = None,
           scores: bool = True, top_p: float = 1.0,
           forcing: Forcing | None = None, no_repeat: int = 0) -> list[Hypothesis]:
    """Pick the most probable next token until ``<eos>`` or the length limit, for a batch.

    With ``sample_topk`` > 0, draw the token instead from the ``sample_topk`` most probable,
    with probabilities ``softmax(logits / temperature)`` among them (``generator`` seeds it,
    or one generator a sentence: its draws are then the same alone or among others);
    with ``top_p`` < 1, from the nucleus: the fewest most probable tokens whose probabilities
    (after the temperature) add up to ``top_p`` (both: the nucleus of the top ``k``).
    The score is the model's log-probability of what was chosen either way; ``scores=False``
    leaves it NaN and saves normalising every step's logits.
    ``forcing``: how outputs must begin (``decode/forcing.py``); their tokens are scored too.
    ``no_repeat`` > 0: no output holds an n-gram of that size twice (``decode/repeats.py``).
    src: (B, S) ids, src_mask: (B, 1, 1, S). Returns one :class:`Hypothesis` per sentence.
    """
    b, device = src.size(0), src.device
    limits = raise_limits(max_output_lengths(src_mask, max_len_a, max_len_b, _cap(model)),
                          forcing)  # (B,)
    state = start_decoding(model, src, src_mask, use_cache=use_cache)
    prefix = torch.full((b, 1), BOS_ID, dtype=torch.long, device=device)  # (N, t)
    alive = torch.arange(b, device=device)  # original row of each decoded row
    alive_ids = list(range(b))  # the same, on the host
    live_limits = limits  # (N,) the length limit of each decoded row
    total = torch.full((b,), 0.0 if scores else torch.nan, device=device)  # (N,)
    results: list[Hypothesis | None] = [None] * b
    step = 0
    shortest = int(limits.min())
    # the step with its pick
    fused = state.fused and sample_topk <= 0 and top_p >= 1 and no_repeat <= 0
    while alive_ids:
        both = None if not fused else state.pick_next(
            prefix, live_limits, barred(forcing, step, model.tgt_vocab_size, alive))
        if both is None:
            z = _next_scores(state, prefix, _at_limit(step, live_limits, shortest))  # (N, V)
            bars = unforced_repeats(prefix, no_repeat, z.size(1), forcing, step, alive)
            token = pick(force(z if bars is None else z + bars, forcing, step, alive),
                         sample_topk, temperature, of_rows(generator, alive_ids), top_p)  # (N,)
            if scores:
                total = total + z.log_softmax(dim=-1).gather(1, token[:, None]).squeeze(1)
        else:  # (N,) each
            token = both[0]
            if scores:
                total = total + both[1]
        prefix = torch.cat([prefix, token[:, None]], dim=1)  # (N, t + 1)
        done = (token == EOS_ID).cpu()  # (N,) the step's one wait for the device
        if done.any():  # more transfers only at the steps where sentences end
            alive_ids, keep = _record_ended(done, prefix, total, alive_ids, results)
            if not alive_ids:  # (nothing left to keep)
                break
            alive, prefix, total = alive[keep], prefix[keep], total[keep]
            live_limits = live_limits[keep]
            state.select(keep, keep)
        step += 1
    return [r for r in results if r is not None]


def _record_ended(done: Tensor, prefix: Tensor, total: Tensor, alive_ids: list[int],
                  results: list[Hypothesis | None]) -> tuple[list[int], Tensor]:
    """Greedy's rows that produced ``<eos>`` (``done`` (N,), on the host) become hypotheses
    in ``results``: their prefix (N, t + 1) without ``<bos>`` and ``<eos>``, and ``total``
    (N,). Returns the sentences still decoded and their rows (on the device)."""
    rows, device = done.nonzero().flatten(), prefix.device
    ended = prefix[rows.to(device), 1:-1].tolist()  # E lists of t - 1 tokens
    ended_scores = total[rows.to(device)].tolist()
    for i, row in enumerate(rows.tolist()):
        results[alive_ids[row]] = Hypothesis(ended[i], ended_scores[i])
    keep_rows = (~done).nonzero().flatten()
    return [alive_ids[r] for r in keep_rows.tolist()], keep_rows.to(device)


@torch.inference_mode()
def beam_search(model: Decodable, src: Tensor, src_mask: Tensor, beam_size: int = 5,
                alpha: float = 0.6, max_len_a: float = 1.5, max_len_b: int = 10,
                nbest: int = 1, use_cache: bool = False,
                on_step: Callable[[list[int], Tensor, Tensor], None] | None = None,
                forcing: Forcing | None = None, no_repeat: int = 0) -> list[list[Hypothesis]]:
    """Beam search over a batch of sentences, ``beam_size`` hypotheses each.

    At every step each sentence's ``K`` hypotheses propose their best continuations; of the top
    ``2K`` candidates, those ending in ``<eos>`` among the first ``K`` are finished (scored by
    log-probability divided by the GNMT length penalty) and never extended again, and the first
    ``K`` others form the next beam. A sentence is done once it has ``K`` finished hypotheses or
    reaches its length limit, where ``<eos>`` is forced. Returns the ``nbest`` best per sentence.
    ``on_step`` sees the beams kept at each step: the sentences still searched, the prefixes
    (N*K, t + 1) and their scores (N, K). ``forcing``: how outputs must begin (forcing.py);
    ``no_repeat`` > 0: no hypothesis holds an n-gram of that size twice (repeats.py)."""
    b, k, device = src.size(0), beam_size, src.device
    limits = raise_limits(max_output_lengths(src_mask, max_len_a, max_len_b, _cap(model)),
                          forcing)  # (B,)
    state = start_decoding(model, src, src_mask, k, use_cache)  # K beams share their sentence
    prefix, scores = _start_beams(b, k, device)  # (N*K, t), (N, K)
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    # each sentence still searched (N,): its id (device, host), len(finished[id]), its limit
    alive, alive_ids = torch.arange(b, device=device), list(range(b))
    n_finished, live_limits = torch.zeros(b, dtype=torch.long, device=device), limits
    step, shortest = 0, int(limits.min())
    while alive_ids:
        # (N, V): -inf for what a forced prefix bars (after normalising), 0 for the rest
        bars = None if forcing is None else barred(forcing, step, model.tgt_vocab_size, alive)
        if no_repeat > 0:  # (N*K, V), a hypothesis each: and what would repeat an n-gram
            bars = with_repeats(bars, prefix, no_repeat, model.tgt_vocab_size, forcing, step,
                                alive)
        both = None if not state.fused or no_repeat > 0 else state.choose_next(
            prefix, scores, n_finished, live_limits, bars)
        if both is None:  # (N*K, V) next scores; the rows at their length limit end there
            z = _next_scores(state, prefix, _at_limit(step, live_limits, shortest, k))
            choice = state.choose(z, scores, n_finished, live_limits, step, bars)
        else:
            choice = both[0]
        any_ends, any_done = choice.flags.tolist()  # the step's one wait for the device
        if any_ends:
            for row, hyp in _ended(choice.ends, choice.top_beam, choice.top_scores, prefix, k,
                                   float(length_penalty(step + 1, alpha))):
                finished[alive_ids[row]].append(hyp)
        scores, n_finished = choice.scores, choice.n_finished  # (N, K), (N,)
        if both is None:
            prefix = torch.cat([prefix[choice.rows], choice.tokens.reshape(-1, 1)], dim=1)
            state.select(choice.rows)
        else:  # the state reordered nothing: its hypotheses' pasts are read through ancestors
            prefix = both[1]
        if on_step is not None:
            on_step(alive_ids, prefix, scores)
        if any_done:
            alive_ids, keep, keep_hyps = _rows_kept(choice.done, alive_ids, k)
            if not alive_ids:  # (nothing left to keep)
                break
            alive, scores, prefix = alive[keep], scores[keep], prefix[keep_hyps]
            n_finished, live_limits = n_finished[keep], live_limits[keep]
            state.select(keep_hyps, keep)
        step += 1
    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]


def _start_beams(b: int, k: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """The beams of ``b`` sentences before the first step: ``<bos>`` (B*K, 1), and scores
    (B, K) that let only each sentence's first hypothesis expand (all start identical)."""
    prefix = torch.full((b * k, 1), BOS_ID, dtype=torch.long, device=device)
    scores = torch.full((b, k), -torch.inf, device=device)
    scores[:, 0] = 0.0
    return prefix, scores


def _rows_kept(done: Tensor, alive_ids: list[int], k: int) -> tuple[list[int], Tensor, Tensor]:
    """The sentences still searched once those ``done`` (N,) are dropped: their ids, their
    rows (N',) and their hypotheses' rows (N'*K,), on the device."""
    keep_rows = (~done).nonzero().flatten().cpu()  # (N',)
    keep = keep_rows.to(done.device)
    offsets = torch.arange(k, device=done.device)
    return ([alive_ids[r] for r in keep_rows.tolist()], keep,
            (keep[:, None] * k + offsets).flatten())


def _ended(ends: Tensor, top_beam: Tensor, top_scores: Tensor, prefix: Tensor, k: int,
           penalty: float) -> list[tuple[int, Hypothesis]]:
    """The hypotheses that end at this step (``ends``: (N, K), a candidate is ``<eos>``), each
    with its row: its prefix (without ``<bos>``) and its score divided by the length penalty."""
    where = ends.nonzero()  # (E, 2): row, rank among the candidates
    beams = top_beam[where[:, 0], where[:, 1]]  # (E,)
    # E lists of t tokens, read at once (one transfer, not one a row)
    ended = prefix[where[:, 0] * k + beams, 1:].tolist()
    ended_scores = top_scores[where[:, 0], where[:, 1]].tolist()
    return [(row, Hypothesis(ended[e], ended_scores[e] / penalty))
            for e, (row, _) in enumerate(where.tolist())]


def decode_batch(model: Decodable, src: Tensor, src_mask: Tensor,
                 cfg: DecodeConfig, beam_size: int | None = None, nbest: int = 1,
                 use_cache: bool = True, generator: Generators = None,
                 scores: bool = True, forcing: Forcing | None = None) -> list[list[Hypothesis]]:
    """Greedy (or sampling) when the beam is 1 and ``nbest == 1``, else beam search; the
    n-best per sentence. ``cfg`` gives the length penalty, length limits and sampling.
    ``scores=False``: greedy leaves the scores NaN (beam search needs them and keeps them).
    ``forcing``: how each output must begin."""
    beam_size = cfg.beam_size if beam_size is None else beam_size
    if beam_size == 1 and nbest == 1:
        hyps = greedy(model, src, src_mask, cfg.max_len_a, cfg.max_len_b, use_cache,
                      cfg.sample_topk, cfg.temperature, generator, scores, cfg.top_p, forcing,
                      cfg.no_repeat_ngram_size)
        return [[h] for h in hyps]
    return beam_search(model, src, src_mask, max(beam_size, nbest), cfg.alpha, cfg.max_len_a,
                       cfg.max_len_b, nbest, use_cache, forcing=forcing,
                       no_repeat=cfg.no_repeat_ngram_size)


class Scored(Protocol):
    score: float


def best_first(hypothesis: Scored) -> float:
    """The key that sorts hypotheses (or translations) best scored first, those without a
    score (NaN) last."""
    return math.inf if math.isnan(hypothesis.score) else -hypothesis.score


def check_width(model: Decodable, beam_size: int, nbest: int) -> None:
    """A one-line error where the beam (or n-best) is wider than the vocabulary allows."""
    vocab = model.tgt_vocab_size
    widest = (vocab - 2) // 2  # beam search ranks 2K candidates of the V - 2 producible tokens
    if max(beam_size, nbest) > max(widest, 1):
        raise MTError(f"a beam of {max(beam_size, nbest)} is too wide for a target vocabulary of "
                      f"{vocab} tokens; use --beam and --nbest of at most {max(widest, 1)}")


def batches_of(src_ids: Sequence[Sequence[int]], batch_size: int) -> list[list[int]]:
    """The positions of the sources in each batch :func:`decode_corpus` decodes: sorted by
    length (shorter first; equal lengths in input order), cut every ``batch_size``."""
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    return [order[at:at + batch_size] for at in range(0, len(order), batch_size)]


def decode_corpus(model: Decodable, src_ids: Sequence[Sequence[int]],
                  cfg: DecodeConfig, device: torch.device, beam_size: int | None = None,
                  nbest: int = 1, use_cache: bool = True, progress: bool = False,
                  scores: bool = True, forcing: Forcing | None = None) -> list[list[Hypothesis]]:
    """Translate many id sequences: sorted by length into batches, results in input order.
    ``scores=False`` when only the translations are wanted (see :func:`decode_batch`);
    ``forcing``: how each output must begin (a row per sequence). Sampling draws ``nbest``
    translations of each (:func:`draw_seed`): the first draw first (one draw's translation),
    the others best scored first."""
    beam_size = cfg.beam_size if beam_size is None else beam_size
    draws = nbest if cfg.samples else 1  # (each draw a row of its own)
    check_width(model, beam_size, nbest // draws)
    precision = resolve_precision(cfg.precision, device)
    model = for_decoding(model, precision, device)
    results: list[list[Hypothesis]] = [[] for _ in src_ids]
    bar = tqdm(total=len(src_ids), desc="translate", unit="sent", disable=not progress,
               leave=False)
    was_training = model.training  # (switched only if need be: a lone sentence's call is short)
    if was_training:
        model.eval()
    try:
        for chunk in batches_of(src_ids, max(1, cfg.batch_size // draws)):
            rows = [i for i in chunk for _ in range(draws)]
            src = torch.nn.utils.rnn.pad_sequence(
                [torch.tensor(src_ids[i], dtype=torch.long) for i in rows], batch_first=True,
                padding_value=PAD_ID).to(device)  # (B * draws, S)
            # sampling: a generator a row, the sentences' j-th draws seeded alike, so that a
            # sentence draws the same alone or among others
            generators = [torch.Generator(device).manual_seed(draw_seed(cfg.sample_seed, j))
                          for _ in chunk for j in range(draws)] if cfg.samples else None
            with autocast(device, precision):
                hyps = decode_batch(model, src, source_mask(src), cfg, beam_size,
                                    nbest // draws, use_cache, generators, scores,
                                    None if forcing is None else forcing.subset(rows))
            for n, i in enumerate(chunk):
                drawn = [h for row in hyps[n * draws:(n + 1) * draws] for h in row]
                results[i] = drawn if draws == 1 else [drawn[0], *sorted(drawn[1:],
                                                                        key=best_first)]
            bar.update(len(chunk))
    finally:
        bar.close()
        if was_training:
            model.train()
    return results
