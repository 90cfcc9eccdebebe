"""Sampling: a token drawn from the model's distribution instead of the best one (top-k, the
nucleus, a temperature), each sentence's draws from a seeded stream of its own, so that a
sentence draws the same alone or among others; an n-best of samples draws each sentence
several times (:func:`draw_seed`). Greedy search (``search.py``) picks its tokens here.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

Generators = torch.Generator | Sequence[torch.Generator] | None  # for a batch, or a row each


def of_rows(generator: Generators, rows: list[int]) -> Generators:
    """The generators of the sentences ``rows`` (one a sentence), or the batch's one."""
    return generator if generator is None or isinstance(generator, torch.Generator) else [
        generator[r] for r in rows]


def pick(z: Tensor, topk: int, temperature: float, generator: Generators,
         top_p: float = 1.0) -> Tensor:
    """The chosen token (N,) of each row of logits z (N, V): the best, or a sample (of the
    top ``topk``, 0: of all; of their nucleus with ``top_p`` < 1), drawn with ``generator``
    (or each row with its own)."""
    if topk <= 0 and top_p >= 1.0:
        return z.max(dim=-1).indices  # (N,)
    k = z.size(1) if topk <= 0 else min(topk, z.size(1))
    top_z, top_token = z.topk(k, dim=-1)  # (N, k), most probable first
    probs = (top_z / temperature).softmax(dim=-1)  # (N, k); -inf (not allowed) gets 0
    if top_p < 1.0:  # the nucleus: each token whose more probable ones add up to < top_p
        probs = probs * ((probs.cumsum(dim=-1) - probs) < top_p)  # (N, k), unnormalised
    if generator is None or isinstance(generator, torch.Generator):
        choice = torch.multinomial(probs, 1, generator=generator)  # (N, 1)
    else:  # each row from its own stream: what it draws does not depend on the other rows
        choice = torch.stack([torch.multinomial(p, 1, generator=g)
                              for p, g in zip(probs, generator, strict=True)])  # (N, 1)
    return top_token.gather(1, choice).squeeze(1)


def draw_seed(seed: int, draw: int) -> int:
    """The seed of a sentence's ``draw``-th sample: the first's ``seed`` itself (one draw is
    what ``sample_seed`` always gave), the others spread over its range (a step of the
    golden ratio's fraction of it), so that two seeds' draws do not coincide (seed 1's first
    draws are not seed 0's later ones); each a seed ``sample_seed`` takes, to draw it alone."""
    return (seed + draw * 0x4F1BBCDCBFA53E0B) % 2**63
