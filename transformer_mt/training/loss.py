"""Label-smoothed cross-entropy of the output projection, a chunk of tokens at a time.

The loss is exactly ``F.cross_entropy(hidden @ weight.T, target, ignore_index=pad,
label_smoothing=eps, reduction="sum")`` (a test proves it, values and gradients), but the
``(tokens, vocab)`` logits are never held whole: they are the biggest tensors of a training step
(4k tokens x 6k words x 4 bytes = 100 MB per copy, and the library call makes several copies in
its backward). Instead the projection and the loss are one autograd function that goes over the
tokens ``chunk_size`` rows at a time and, while a chunk's logits are at hand, also computes its
gradients with the closed form ``softmax(z) - (1 - eps) * onehot(y) - eps / V`` (per real token).
The backward then only scales the stored gradients. Same FLOPs, a fraction of the memory.

Training calls it through :class:`ModelLoss`, the model and this loss as one module (what DDP and
``torch.compile`` wrap); ``tests/unit/test_equivalence.py`` proves it equal to the reference
``Transformer.forward(..., tgt_out)``.

Per token, with ``lse = logsumexp(z)``::

    loss = (1 - eps) * (lse - z_y) + eps * mean_j (lse - z_j)
         = lse - (1 - eps) * z_y - eps * mean(z)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

if TYPE_CHECKING:
    from transformer_mt.model.transformer import Transformer


class _StoredGradients(torch.autograd.Function):
    """A loss of ``hidden @ weight.T`` whose forward computes the gradients of ``hidden`` and
    ``weight`` (its first two inputs) as it goes: the backward only scales them."""

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        grad_hidden, grad_weight = ctx.saved_tensors
        if grad_hidden is None:
            raise RuntimeError("this loss was computed without gradients")
        return (grad_hidden * grad.to(grad_hidden.dtype), grad_weight * grad,
                *[None] * ctx.other_inputs)


class _ProjectedLabelSmoothedCE(_StoredGradients):
    @staticmethod
    def forward(ctx: Any, hidden: Tensor, weight: Tensor, target: Tensor, eps: float,
                ignore_index: int, dtype: torch.dtype, chunk_size: int,
                need_grad: bool) -> Tensor:
        w = weight.to(dtype)  # (V, D)
        n, vocab = hidden.size(0), w.size(0)
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_hidden = torch.empty_like(hidden) if need_grad else None  # (N, D)
        grad_weight = torch.zeros_like(weight) if need_grad else None  # (V, D)
        # Two (C, V) buffers serve every chunk: all the work on the logits is done in place. In
        # fp32 they are one (the copies between them are then no-ops: ~1 % of a CPU step).
        rows = min(chunk_size, n)
        z_buf = torch.empty(rows, vocab, dtype=torch.float32, device=hidden.device)
        low = z_buf if dtype == torch.float32 else torch.empty_like(z_buf, dtype=dtype)
        for start in range(0, n, chunk_size):
            h = hidden[start:start + chunk_size].to(dtype)  # (C, D)
            c = h.size(0)
            y = target[start:start + chunk_size]  # (C,)
            keep = y != ignore_index  # (C,)
            y = y.clamp(min=0)[:, None]  # (C, 1)
            z = z_buf[:c].copy_(torch.mm(h, w.T, out=low[:c]))  # (C, V) fp32 logits
            z_y, z_mean = z.gather(1, y).squeeze(1), z.mean(dim=-1)  # (C,), (C,)
            z_max = z.amax(dim=-1)  # (C,)
            p = z.sub_(z_max[:, None]).exp_()  # (C, V) unnormalised probabilities
            total_p = p.sum(dim=-1)  # (C,)
            lse = z_max + total_p.log()  # (C,)
            per_token = lse - (1.0 - eps) * z_y - eps * z_mean  # (C,)
            total += (per_token * keep).sum()
            if not need_grad:
                continue
            assert grad_hidden is not None and grad_weight is not None
            g = p.div_(total_p[:, None]).sub_(eps / vocab)  # softmax(z) - eps / V
            g.scatter_add_(1, y, torch.full_like(y, eps - 1.0, dtype=g.dtype))
            g = low[:c].copy_(g.mul_(keep[:, None]))  # (C, V) in the matmul dtype
            grad_hidden[start:start + c] = g @ w  # (C, D)
            grad_weight += g.T @ h  # (V, D)
        ctx.other_inputs = 6
        ctx.save_for_backward(grad_hidden, grad_weight)
        return total


def label_smoothed_cross_entropy(hidden: Tensor, weight: Tensor, target: Tensor,
                                 eps: float = 0.1, ignore_index: int = -100,
                                 dtype: torch.dtype | None = None,
                                 chunk_size: int = 1024) -> Tensor:
    """Summed label-smoothed cross-entropy of the logits ``hidden @ weight.T`` (fp32 scalar).

    hidden: (N, D) final decoder states; weight: (V, D) the output projection; target: (N,).
    ``dtype`` is the dtype the projection is computed in (the autocast dtype under mixed
    precision; by default ``hidden``'s); softmax and loss are always fp32.
    """
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    return _ProjectedLabelSmoothedCE.apply(hidden, weight, target, eps, ignore_index,
                                           dtype or hidden.dtype, chunk_size, need_grad)


def loss_chunk_size(device_type: str, vocab_size: int) -> int:
    """Tokens per chunk of the loss: 1,024 on the CPU (less memory, as fast); on a GPU as many
    as keep the chunk's two (tokens x vocab) buffers within 1 GiB, usually the whole batch."""
    if device_type == "cpu":
        return 1024
    return max(1024, 2**30 // (6 * vocab_size))  # bytes per logit: a bf16/fp32 and an fp32 copy


class _ProjectedRDropLoss(_StoredGradients):
    """R-Drop's loss of two passes' states side by side, ``hidden`` = (first N; second N): the
    mean of their label-smoothed cross-entropies plus ``alpha`` x the symmetric KL between
    their distributions, in one pass over the chunks: each chunk's logits serve both terms and
    their gradients (closed forms, as above; with d = log p1 - log p2, the KL term
    (KL(p1||p2) + KL(p2||p1)) / 2 has the gradient (p1 * (d - KL(p1||p2)) + p1 - p2) / 2
    in z1, and the same with the passes swapped in z2)."""

    @staticmethod
    def forward(ctx: Any, hidden: Tensor, weight: Tensor, target: Tensor, eps: float,
                alpha: float, ignore_index: int, dtype: torch.dtype, chunk_size: int,
                need_grad: bool) -> Tensor:
        w = weight.to(dtype)  # (V, D)
        n, vocab = hidden.size(0) // 2, w.size(0)
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_hidden = torch.empty_like(hidden) if need_grad else None  # (2N, D)
        grad_weight = torch.zeros_like(weight) if need_grad else None  # (V, D)
        # two (C, V) buffers serve every chunk: logits, then d; logits, then gradients
        rows = min(chunk_size, n)
        low = torch.empty(rows, vocab, dtype=dtype, device=hidden.device)
        z_buf = torch.empty(rows, vocab, dtype=torch.float32, device=hidden.device)
        for start in range(0, n, chunk_size):
            halves = [slice(start, min(start + chunk_size, n)),
                      slice(n + start, n + min(start + chunk_size, n))]
            y = target[halves[0]]  # (C,): the same targets for both passes
            c = y.size(0)
            keep = (y != ignore_index).float()[:, None]  # (C, 1)
            y = y.clamp(min=0)[:, None]  # (C, 1)
            hs = [hidden[r].to(dtype) for r in halves]  # 2 x (C, D)
            log_p = []
            for h in hs:  # (C, V) fp32 log-probabilities of each pass
                z = torch.mm(h, w.T, out=low[:c])  # (C, V)
                log_p.append(torch.log_softmax(z if z.dtype == torch.float32
                                               else z_buf[:c].copy_(z), dim=-1))
                ce = -(1.0 - eps) * log_p[-1].gather(1, y) \
                    - eps * log_p[-1].mean(dim=-1, keepdim=True)  # (C, 1)
                total += (ce * keep).sum() / 2
            d = torch.sub(log_p[0], log_p[1], out=z_buf[:c])  # (C, V)
            p1, p2 = log_p[0].exp_(), log_p[1].exp_()  # (C, V) probabilities, in place
            kl12 = torch.linalg.vecdot(p1, d)[:, None]  # (C, 1) KL(p1 || p2)
            kl21 = -torch.linalg.vecdot(p2, d)[:, None]  # (C, 1) KL(p2 || p1)
            total += alpha * ((kl12 + kl21) * keep).sum() / 2
            if not need_grad:
                continue
            assert grad_hidden is not None and grad_weight is not None
            for sign, kl, p, q, h, r in ((1.0, kl12, p1, p2, hs[0], halves[0]),
                                         (-1.0, kl21, p2, p1, hs[1], halves[1])):
                g = _rdrop_gradient(d, sign, kl, p, q, y, keep, eps, alpha, out=low[:c])
                grad_hidden[r] = g @ w  # (C, D)
                grad_weight += g.T @ h  # (V, D)
        ctx.other_inputs = 7
        ctx.save_for_backward(grad_hidden, grad_weight)
        return total


def _rdrop_gradient(d: Tensor, sign: float, kl: Tensor, p: Tensor, q: Tensor, y: Tensor,
                    keep: Tensor, eps: float, alpha: float, out: Tensor) -> Tensor:
    """One pass's gradient (C, V) of R-Drop's loss in its logits, written to ``out`` (in the
    product's dtype): alpha x the KL term's, p * (sign * d - kl) + p - q, plus the cross-
    entropy's, p - eps / V - (1 - eps) at the target, each row x keep / 2. In six passes over
    (C, V): p * (alpha * sign * d + alpha * (1 - kl) + 1) - alpha * q, then the rest."""
    g = torch.add(alpha * (1.0 - kl) + 1.0, d, alpha=sign * alpha).mul_(p).sub_(q, alpha=alpha)
    g.scatter_add_(1, y, torch.full_like(y, eps - 1.0, dtype=g.dtype))
    # (in place, then copied: ~2.5x faster here than one call writing another dtype)
    return out.copy_(g.sub_(eps / d.size(1)).mul_(keep / 2))


def rdrop_loss(hidden: Tensor, weight: Tensor, target: Tensor, eps: float, alpha: float,
               ignore_index: int, dtype: torch.dtype, chunk_size: int) -> Tensor:
    """R-Drop's loss (fp32 scalar): hidden (2N, D) the final decoder states of two passes of
    the same batch, one after the other; target (N,) their targets. The (2N, V) logits are never
    held whole: a quarter of :func:`loss_chunk_size`'s rows of each pass at a time (the KL
    keeps several (C, V) tensors at once)."""
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    return _ProjectedRDropLoss.apply(hidden, weight, target, eps, alpha, ignore_index, dtype,
                                     max(1, chunk_size // 4), need_grad)


class ModelLoss(nn.Module):
    """The model and the chunked loss as one module: ``(src, tgt_in, src_mask, tgt_out,
    label_smoothing) -> summed loss``, what training and validation call.

    Under mixed precision the projection runs in the autocast dtype; the softmax and the loss in
    fp32. The loss manages its dtypes itself, so autocast is off inside it. With
    ``train.compile`` the trainer wraps ``loss_fn`` in ``torch.compiler.disable`` (a Python loop
    over chunks runs as it is).
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = label_smoothed_cross_entropy
        self.row_multiple = 1  # tokens padded to a multiple of it (training/row_buckets.py)

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor, tgt_out: Tensor,
                label_smoothing: float = 0.0, rdrop_alpha: float = 0.0) -> Tensor:
        """src (B, S), tgt_in and tgt_out (B, T), src_mask (B, 1, 1, S) -> fp32 scalar.

        ``rdrop_alpha`` > 0 (training only): the batch goes through twice, side by side (two
        dropout masks); the loss is the mean of the two passes' and ``rdrop_alpha`` x the
        symmetric KL between their distributions, per token summed (R-Drop)."""
        model = self.model
        twice = rdrop_alpha > 0 and model.training
        if twice:  # (2B, ...): one pass of both copies
            src, tgt_in, src_mask, tgt_out = (torch.cat([x, x]) for x in
                                              (src, tgt_in, src_mask, tgt_out))
        memory = model.encode(src, src_mask)  # (B, S, D)
        states = model.decoder(tgt_in, memory, src_mask)  # (B, T, D)
        device = states.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
        weight = model.decoder.project.weight  # (V, D)
        chunk = loss_chunk_size(device, weight.size(0))
        # (passes, N, D), (N,): each pass's tokens, padded with ignored ones (row_multiple)
        hidden, target = _padded(states.flatten(0, 1).unflatten(0, (2 if twice else 1, -1)),
                                 tgt_out.flatten()[:tgt_out.numel() // (2 if twice else 1)],
                                 self.row_multiple, model.pad_id)
        hidden = hidden.flatten(0, 1)  # (passes * N, D)
        with torch.autocast(device, enabled=False):
            if twice:
                return rdrop_loss(hidden, weight, target, label_smoothing, rdrop_alpha,
                                  model.pad_id, dtype or hidden.dtype, chunk)
            return self.loss_fn(hidden, weight, target, label_smoothing, model.pad_id, dtype,
                                chunk)


def _padded(hidden: Tensor, target: Tensor, multiple: int, pad_id: int) -> tuple[Tensor, Tensor]:
    """hidden (P, N, D) and target (N,) with N padded to a multiple of ``multiple``: zero states
    and ``pad_id`` targets, which the loss ignores (no loss, no gradient)."""
    extra = -target.numel() % multiple
    if extra == 0:
        return hidden, target
    return F.pad(hidden, (0, 0, 0, extra)), F.pad(target, (0, extra), value=pad_id)
