"""Scoring given translations: the log-probability the model gives each token (and ``<eos>``) of
outputs it may not have chosen, teacher-forced through the same decoding state search uses (and
its ``<pad>``/``<bos>``-free normalisation), so that a translation's score here is the one beam
search reports for it once divided by the same length penalty
(``tests/integration/test_decoding.py``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_mt.decode.search import next_token_logprobs, start_decoding
from transformer_mt.decode.state import Decodable


@torch.inference_mode()
def score_outputs(model: Decodable, src: Tensor, src_mask: Tensor,
                  outputs: Sequence[Sequence[int]], use_cache: bool = False) -> list[list[float]]:
    """Per-token log-probabilities of ``outputs`` (ids without ``<bos>``/``<eos>``), one list per
    sentence of the batch src (B, S): each token's and then ``<eos>``'s."""
    b, device = src.size(0), src.device
    longest = max((len(o) for o in outputs), default=0) + 1  # the tokens and <eos>
    gold = torch.full((b, longest), PAD_ID, dtype=torch.long)  # (B, T)
    for i, output in enumerate(outputs):
        gold[i, :len(output)] = torch.tensor(list(output), dtype=torch.long)
        gold[i, len(output)] = EOS_ID
    gold = gold.to(device)
    state = start_decoding(model, src, src_mask, use_cache=use_cache)
    prefix = torch.full((b, 1), BOS_ID, dtype=torch.long, device=device)  # (B, t)
    log_probs = []
    for t in range(longest):
        step = next_token_logprobs(state.next_logits(prefix))  # (B, V)
        log_probs.append(step.gather(1, gold[:, t:t + 1]))  # (B, 1)
        prefix = torch.cat([prefix, gold[:, t:t + 1]], dim=1)  # (B, t + 1)
    table = torch.cat(log_probs, dim=1).cpu()  # (B, T)
    return [table[i, :len(o) + 1].tolist() for i, o in enumerate(outputs)]
