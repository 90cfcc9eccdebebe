"""What beam search decides at a step, from the next-token log-probabilities of its hypotheses:
which candidates end, which sentences are done, which hypotheses continue and with what token.

:func:`choose` is these decisions as tensor operations only (no Python between them, no value
read back), so that ``decode/compiled.py`` can also compile them as they are into one function;
:func:`~transformer_mt.decode.search.beam_search` asks the decoding state for them
(:class:`StepByStep`: this function) and keeps the books: the finished hypotheses, the
prefixes, the decoding state.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID

NEVER_IDS = slice(PAD_ID, BOS_ID + 1)  # <pad> and <bos>, ids 1 and 2


def candidate_logits(logits: Tensor, at_limit: Tensor | None = None) -> Tensor:
    """(N, V) next-token logits as fp32, as search chooses from them: padding and <bos> set to
    -inf (never produced); rows in ``at_limit`` (N,) bool, if given, may only produce <eos>
    (a sentence at its length limit)."""
    z = logits.float()
    z[:, NEVER_IDS] = -torch.inf
    if at_limit is not None:  # a select, not z[at_limit] = ...: a mask write waits for the GPU
        z = torch.where(at_limit[:, None], eos_only(z.size(1), z.device), z)
    return z


def never_produced(vocab: int, device: torch.device) -> Tensor:
    """(V,) 0 for the tokens search may produce, -inf for the others: added to logits, what
    :func:`candidate_logits` writes (a compiled step's loops read a vector faster than they
    compare indices: ``decode/graphs.py``)."""
    bias = torch.zeros(vocab, device=device)
    bias[NEVER_IDS] = -torch.inf
    return bias


def eos_only(vocab: int, device: torch.device) -> Tensor:
    """(V,) logits that allow <eos> alone: 0 for it, -inf for every other token."""
    return torch.where(torch.arange(vocab, device=device) == EOS_ID, 0.0, -torch.inf)


class Choice(NamedTuple):
    """A step's decisions for N sentences of K hypotheses (each (N, ...) unless said)."""

    flags: Tensor  # (2,) bool: whether any candidate ends, whether any sentence is done
    ends: Tensor  # (N, K) bool: the candidate of this rank ends (it is <eos>, and possible)
    done: Tensor  # (N,) bool: K finished, at the length limit, or nothing left to continue
    n_finished: Tensor  # (N,) the finished hypotheses of each sentence, these included
    top_scores: Tensor  # (N, 2K) the 2K best candidates' scores, best first
    top_beam: Tensor  # (N, 2K) the hypothesis each of them extends
    scores: Tensor  # (N, K) the scores of the K hypotheses that continue
    tokens: Tensor  # (N, K) their tokens
    rows: Tensor  # (N*K,) the row of the hypothesis each extends


def choose(z: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor, step: int | Tensor,
           barred: Tensor | None = None) -> Choice:
    """Beam search's step: of the 2K best candidates of each sentence (by the log-probabilities
    :func:`step_logprobs` makes of ``z`` (N*K, V), its K hypotheses' next-token logits as
    :func:`candidate_logits` gives them, and ``barred``; the hypotheses' scores are ``scores``
    (N, K)), those ending in ``<eos>`` among the first K are finished; the first K others
    continue. ``n_finished`` (N,) counts the finished hypotheses so far, ``limits`` (N,) the
    length limits; ``step``: this step. ``barred`` may also be (N*K, V), a row each: what
    would repeat an n-gram of the hypothesis too (``decode/repeats.py``)."""
    # The 2K best of all K*V candidates are among the 2K best of each beam: take those first
    # (a small top-k per row), then the best 2K of the K*2K.
    if barred is not None and barred.size(0) != scores.size(0):  # a row each
        logprobs = z.log_softmax(dim=-1) + barred  # (N*K, V)
    else:
        logprobs = step_logprobs(z, scores.size(1), barred)  # (N*K, V)
    row_best = logprobs.topk(2 * scores.size(1), dim=-1)  # (N*K, 2K) log-probs and tokens
    return choose_among(row_best, scores, n_finished, limits, step)


def step_logprobs(z: Tensor, group: int, barred: Tensor | None = None) -> Tensor:
    """The log-probabilities (N*G, V) of logits ``z`` (N*G, V) (N sentences' G hypotheses
    each), with ``barred`` (N, V), if given, added to each sentence's rows: -inf for the
    tokens a forced prefix bars there, 0 for the others (normalised first, so a forced token
    scores what the model gives it: ``decode/forcing.py``)."""
    logprobs = z.log_softmax(dim=-1)
    if barred is None:
        return logprobs
    return (logprobs.unflatten(0, (-1, group)) + barred[:, None]).flatten(0, 1)


def choose_among(row_best: tuple[Tensor, Tensor], scores: Tensor, n_finished: Tensor,
                 limits: Tensor, step: int | Tensor) -> Choice:
    """:func:`choose` from each hypothesis's 2K best next tokens: ``row_best``, their
    log-probabilities and tokens (N*K, 2K) each, best first, as ``topk`` gives them
    (``decode/graphs.py`` reads them otherwise, faster)."""
    n, k = scores.shape
    top_scores, top_beam, top_token = _best_candidates(*row_best, scores)  # (N, 2K) each
    is_eos = top_token == EOS_ID
    possible = top_scores > -torch.inf  # (N, 2K) (scores are log-probabilities: <= 0)
    ends = is_eos[:, :k] & possible[:, :k]  # (N, K)
    n_finished = n_finished + ends.sum(dim=1)
    # done: K finished, at the limit, or (forced to end) no hypothesis left to continue
    done = (n_finished >= k) | (step >= limits) | ~(possible & ~is_eos).any(dim=1)  # (N,)
    # the K best candidates that do not end continue: ranks (distinct), ending ones last
    order = torch.add(torch.arange(2 * k, device=scores.device), is_eos, alpha=2 * k)
    chosen = order.topk(k, dim=-1, largest=False).indices  # (N, K) (distinct: as argsort)
    beams = top_beam.gather(1, chosen)  # (N, K)
    rows = (torch.arange(n, device=scores.device)[:, None] * k + beams).flatten()  # (N*K,)
    return Choice(torch.stack([ends.any(), done.any()]), ends, done, n_finished, top_scores,
                  top_beam, top_scores.gather(1, chosen), top_token.gather(1, chosen), rows)


def _best_candidates(row_lp: Tensor, row_token: Tensor,
                     scores: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The 2K best continuations of N sentences' K hypotheses, best first, from the 2K best
    next tokens of each hypothesis (``row_lp`` their log-probabilities, ``row_token`` the
    tokens, (N*K, 2K) each) and the hypotheses' scores (N, K): their scores, the hypothesis
    each extends and its token, (N, 2K) each."""
    n, k = scores.shape
    candidates = scores.view(-1, 1) + row_lp  # (N*K, 2K) log-probabilities
    top_scores, top_index = candidates.view(n, -1).topk(2 * k, dim=-1)  # (N, 2K)
    return top_scores, top_index // (2 * k), row_token.view(n, -1).gather(1, top_index)


class StepByStep:
    """What a decoding state that decodes a step at a time offers search beside its logits:
    beam search's choice made by :func:`choose`, and no step run together with its choice
    (``fused`` False: search never asks for one). The compiled state
    (``decode/compiled_state.py``) has both compiled."""

    fused = False

    def choose(self, z: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor,
               step: int | Tensor, barred: Tensor | None = None) -> Choice:
        return choose(z, scores, n_finished, limits, step, barred)

    def pick_next(self, prefix: Tensor, limits: Tensor,
                  barred: Tensor | None) -> tuple[Tensor, Tensor] | None:
        return None

    def choose_next(self, prefix: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor,
                    barred: Tensor | None) -> tuple[Choice, Tensor] | None:
        return None
