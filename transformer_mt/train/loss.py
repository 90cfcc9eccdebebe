"""Label-smoothed cross-entropy over the target vocabulary, ignoring padding.

The loss is exactly ``F.cross_entropy(logits, target, ignore_index=pad, label_smoothing=eps,
reduction="sum")`` (a test proves it, values and gradients). It is written as one autograd
function because the library call, on the CPU, makes several full passes over the
``(tokens, vocab)`` logits in its backward (a fill, a scatter, an add of two gradients, dtype
copies under bf16): with a 6k-word vocabulary that was about a third of a training step.
Here the backward is the closed form ``softmax(z) - (1 - eps) * onehot(y) - eps / V`` (per real
token), computed in fp32 in one go and returned in the logits' dtype.

Per token, with ``lse = logsumexp(z)``::

    loss = (1 - eps) * (lse - z_y) + eps * mean_j (lse - z_j)
         = lse - (1 - eps) * z_y - eps * mean(z)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class _LabelSmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, eps: float,
                ignore_index: int) -> Tensor:
        z = logits.float()  # (N, V)
        lse = torch.logsumexp(z, dim=-1)  # (N,)
        z_y = z.gather(1, target.clamp(min=0)[:, None]).squeeze(1)  # (N,)
        per_token = lse - (1.0 - eps) * z_y - eps * z.mean(dim=-1)  # (N,)
        keep = target != ignore_index  # (N,)
        ctx.save_for_backward(logits, target, lse, keep)
        ctx.eps = eps
        return (per_token * keep).sum()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        logits, target, lse, keep = ctx.saved_tensors
        eps, vocab = ctx.eps, logits.size(-1)
        g = logits.float() if logits.dtype != torch.float32 else logits.clone()  # (N, V)
        g.sub_(lse[:, None]).exp_().sub_(eps / vocab)  # softmax(z) - eps / V, in place
        g.scatter_add_(1, target.clamp(min=0)[:, None],
                       torch.full((g.size(0), 1), eps - 1.0, dtype=g.dtype, device=g.device))
        g.mul_((grad * keep).to(g.dtype)[:, None])
        return g.to(logits.dtype), None, None, None


def label_smoothed_cross_entropy(logits: Tensor, target: Tensor, eps: float = 0.1,
                                 ignore_index: int = -100) -> Tensor:
    """Summed label-smoothed cross-entropy: logits (N, V), target (N,) -> scalar (fp32)."""
    return _LabelSmoothedCrossEntropy.apply(logits, target, eps, ignore_index)
