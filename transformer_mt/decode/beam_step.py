"""What beam search decides at a step, from the next-token log-probabilities of its hypotheses:
which candidates end, which sentences are done, which hypotheses continue and with what token.

:func:`choose` is these decisions as tensor operations only (no Python between them, no value
read back), so that ``decode/compiled.py`` can compile them as they are into one function (a
lone sentence's beam of 5: ~115 us a step in ~25 operations, ~55 us compiled);
:func:`~transformer_mt.decode.search.beam_search` calls it (or that compiled copy) and keeps
the books: the finished hypotheses, the prefixes, the decoding state.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from transformer_mt.data.vocab import EOS_ID


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


def choose(logprobs: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor,
           step: int | Tensor, widest: int | None = None) -> Choice:
    """Beam search's step: of the 2K best candidates of each sentence (``logprobs`` (N*K, V)
    of its K hypotheses, whose scores are ``scores`` (N, K)), those ending in ``<eos>`` among
    the first K are finished; the first K others continue. ``n_finished`` (N,) counts the
    finished hypotheses so far, ``limits`` (N,) the length limits; ``step``: this step;
    ``widest``: the widest K it may be called for (a compiled copy's; default: K)."""
    n, k = scores.shape
    top_scores, top_beam, top_token = _best_candidates(logprobs, scores,
                                                       widest or k)  # (N, 2K) each
    is_eos = top_token == EOS_ID
    possible = top_scores > -torch.inf  # (N, 2K) (scores are log-probabilities: <= 0)
    ends = is_eos[:, :k] & possible[:, :k]  # (N, K)
    n_finished = n_finished + ends.sum(dim=1)
    # done: K finished, at the limit, or (forced to end) no hypothesis left to continue
    done = (n_finished >= k) | (step >= limits) | ~(possible & ~is_eos).any(dim=1)  # (N,)
    # the K best candidates that do not end continue: ranks (distinct), ending ones last
    order = torch.add(torch.arange(2 * k, device=scores.device), is_eos, alpha=2 * k)
    chosen = order.argsort(dim=-1)[:, :k]  # (N, K)
    beams = top_beam.gather(1, chosen)  # (N, K)
    rows = (torch.arange(n, device=scores.device)[:, None] * k + beams).flatten()  # (N*K,)
    return Choice(torch.stack([ends.any(), done.any()]), ends, done, n_finished, top_scores,
                  top_beam, top_scores.gather(1, chosen), top_token.gather(1, chosen), rows)


def _best_candidates(logprobs: Tensor, scores: Tensor,
                     widest: int) -> tuple[Tensor, Tensor, Tensor]:
    """The 2K best continuations of N sentences' K hypotheses, best first, from their
    next-token log-probabilities (N*K, V) and scores (N, K): their scores, the hypothesis each
    extends and its token, (N, 2K) each. ``widest``: the widest K this may be called for."""
    n, k = scores.shape
    # The 2K best of all K*V candidates are among the 2K best of each beam: take those first
    # (a small top-k per row), then the best 2K of the K*2K.
    row_lp, row_token = _row_best(logprobs, 2 * k, 2 * widest)  # (N*K, 2K)
    candidates = scores.view(-1, 1) + row_lp  # (N*K, 2K) log-probabilities
    top_scores, top_index = candidates.view(n, -1).topk(2 * k, dim=-1)  # (N, 2K)
    return top_scores, top_index // (2 * k), row_token.view(n, -1).gather(1, top_index)


BLOCK = 64  # tokens a block of a row in :func:`_row_best`


def _row_best(logprobs: Tensor, count: int, most: int) -> tuple[Tensor, Tensor]:
    """``logprobs.topk(count, dim=-1)`` of (R, V) log-probabilities: the ``count`` best of
    each row, best first, and their tokens (R, count) each; ``most``: the largest ``count``
    it may be called for.

    Read as blocks of ``BLOCK`` tokens where a row has at least ``most`` of them: a token
    among the ``count`` best lies in one of the ``count`` blocks with the highest maxima (else
    ``count`` blocks would each hold a better token), or in the tail after the last whole
    block; so the top-k of those ``count * BLOCK`` candidates is the row's (equal values
    aside, which either order ranks alike). The maxima are one pass over the row, and the
    top-k of V tokens was the slow part: beam search's choices took 29 against 54 us a step
    of a lone beam of 5 compiled, 0.29 against 0.70 ms for 32 sentences' beams (V = 6,190).
    """
    rows, vocab = logprobs.shape
    whole = vocab // BLOCK * BLOCK
    if whole // BLOCK < most:  # too few blocks to choose from
        return logprobs.topk(count, dim=-1)
    blocks = logprobs[:, :whole].view(rows, -1, BLOCK)  # (R, V // BLOCK, BLOCK) a view
    best = blocks.amax(dim=-1).topk(count, dim=-1).indices  # (R, count) the best blocks
    values = blocks.gather(1, best[..., None].expand(-1, -1, BLOCK)).flatten(1)
    offsets = torch.arange(BLOCK, device=logprobs.device)
    tokens = (best[..., None] * BLOCK + offsets).flatten(1)  # (R, count * BLOCK) each
    if whole < vocab:  # and the tail's tokens
        values = torch.cat([values, logprobs[:, whole:]], dim=1)
        tail = torch.arange(whole, vocab, device=logprobs.device).expand(rows, -1)
        tokens = torch.cat([tokens, tail], dim=1)
    top, at = values.topk(count, dim=-1)  # (R, count)
    return top, tokens.gather(1, at)
