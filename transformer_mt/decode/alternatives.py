"""Alternatives at a position (CTranslate2's ``return_alternatives``): after a sentence's
target prefix, the ``k`` most probable next tokens, each completed by search (greedy, beam or
sampling, as the settings say) with the prefix and that token forced. The first is what search
continues with at that position when it is greedy; the others are what a translator would be
offered there."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from transformer_mt.config import DecodeConfig
from transformer_mt.data.vocab import BOS_ID
from transformer_mt.decode.forcing import Forcing, force
from transformer_mt.decode.search import (
    Decodable,
    Hypothesis,
    decode_batch,
    next_token_logprobs,
    start_decoding,
)


@dataclass
class Alternative:
    token: int  # the token at the position
    log_prob: float  # its log-probability there, given the source and the prefix
    completion: Hypothesis  # the whole output, prefix and token included


@torch.inference_mode()
def next_token_choices(model: Decodable, src: Tensor, src_mask: Tensor,
                       forcing: Forcing, k: int, use_cache: bool = True) -> list[tuple[int, float]]:
    """The ``k`` most probable tokens (and their log-probabilities) of one sentence src (1, S)
    right after its forced tokens (among ``forcing.then`` where it names some)."""
    forced = forcing.tokens[0]
    state = start_decoding(model, src, src_mask, use_cache=use_cache)
    prefix = torch.tensor([[BOS_ID, *forced]], device=src.device)  # (1, t + 1)
    for t in range(1, prefix.size(1) + 1):
        z = state.next_logits(prefix[:, :t])  # (1, V)
    log_probs = force(next_token_logprobs(z), forcing, len(forced),
                      torch.zeros(1, dtype=torch.long, device=src.device))[0]  # (V,)
    best, token = log_probs.topk(min(k, int(torch.isfinite(log_probs).sum())))
    return list(zip(token.tolist(), best.tolist(), strict=True))


def alternatives(model: Decodable, src: Tensor, src_mask: Tensor,
                 forcing: Forcing, k: int, cfg: DecodeConfig, use_cache: bool = True,
                 generator: torch.Generator | None = None) -> list[Alternative]:
    """One sentence src (1, S): the ``k`` best tokens after the forced prefix, most probable
    first, each completed by search with ``cfg``'s settings, all in one batch."""
    choices = next_token_choices(model, src, src_mask, forcing, k, use_cache)
    n = len(choices)
    branches = Forcing.of([[*forcing.tokens[0], token] for token, _ in choices])
    done = decode_batch(model, src.expand(n, -1), src_mask.expand(n, -1, -1, -1), cfg,
                        use_cache=use_cache, generator=generator, forcing=branches)
    return [Alternative(token, log_prob, hyps[0])
            for (token, log_prob), hyps in zip(choices, done, strict=True)]
