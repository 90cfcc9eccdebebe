"""Scaled dot-product attention and multi-head attention, whole sequences or one decoding step.

Masks are boolean and broadcastable to ``(B, H, T_query, T_key)``: True means "may attend".
The causal mask of decoder self-attention is :func:`causal_mask`: the plain path applies it as
written; the SDPA path passes ``is_causal=True``, which applies the same lower-triangular mask
inside the kernel (``tests/test_model.py`` proves the two equal).

Beam search keeps ``G`` hypotheses per sentence. What belongs to a hypothesis (its prefix, its
self-attention keys and values) has one row per hypothesis, ``B*G`` rows; what belongs to the
sentence (the encoder output, the source mask, the cross-attention keys and values) has one row
per sentence, ``B`` rows. Cross-attention is told ``group=G`` and attends each sentence's
``G`` query rows to that sentence's one copy of the keys and values.

Decoding feeds one position at a time (:meth:`MultiHeadAttention.self_step`,
:meth:`MultiHeadAttention.cross_step`): the keys and values of earlier positions are read from
a buffer that the decoder state keeps, and this position's are written into it; the encoder's
are projected once per sentence (:meth:`MultiHeadAttention.memory_kv`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint


def causal_mask(t_query: int, t_key: int | None = None,
                device: torch.device | None = None) -> Tensor:
    """``(Tq, Tk)`` bool, True where query ``i`` may see key ``j`` (``j <= i``)."""
    t_key = t_query if t_key is None else t_key
    return torch.ones(t_query, t_key, dtype=torch.bool, device=device).tril()


def plain_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                    is_causal: bool = False, dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """``softmax(Q K^T / sqrt(d)) V`` written out; returns the output and the weights.

    q: (B, H, Tq, Dh); k, v: (B, H, Tk, Dh); returns (B, H, Tq, Dh) and (B, H, Tq, Tk).
    This is what ``F.scaled_dot_product_attention`` computes (a test proves it); the model uses
    it when attention weights are asked for, or when ``model.attention`` is ``plain``.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    if is_causal:
        causal = causal_mask(*scores.shape[-2:], device=q.device)  # (Tq, Tk)
        mask = causal if mask is None else mask & causal
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)  # (B, H, Tq, Tk)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights  # (B, H, Tq, Dh), (B, H, Tq, Tk)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with its own projections.

    Self-attention projects queries, keys and values with one fused ``(D, 3D)`` matrix; cross-
    attention projects queries from the decoder and keys/values (fused, ``(D, 2D)``) from the
    encoder output. Heads are split as ``(B, T, D) -> (B, H, T, D/H)``.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, cross: bool = False,
                 impl: str = "sdpa") -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.cross, self.impl, self.dropout = cross, impl, dropout
        if cross:
            self.q_proj = nn.Linear(d_model, d_model)
            self.kv_proj = nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None,
                is_causal: bool = False, need_weights: bool = False,
                group: int = 1) -> tuple[Tensor, Tensor | None]:
        """Attend from ``x`` (B*G, Tq, D) to itself, or to ``memory`` (B, Tk, D) when cross.

        ``group`` (cross-attention only) is the number of consecutive query rows that share
        one row of ``memory``/``mask`` (beam search's hypotheses per sentence).
        Returns (B*G, Tq, D) and, if asked, (B*G, H, Tq, Tk) weights.
        """
        if self.cross:
            assert memory is not None, "cross-attention needs the encoder output"
            (q,) = self._split_heads(self.q_proj(x), 1)  # (B*G, H, Tq, Dh)
            k, v = self._split_heads(self.kv_proj(memory), 2)  # (B, H, Tk, Dh) each
        else:
            q, k, v = self._split_heads(self.qkv_proj(x), 3)  # (B, H, T, Dh) each
        if q.size(0) != k.size(0) * group:
            raise ValueError(f"{q.size(0)} query rows do not make groups of {group} over "
                             f"{k.size(0)} key rows")
        q = _group_queries(q, group)  # (B, H, G*Tq, Dh)
        out, weights = self._attend(q, k, v, mask, is_causal, need_weights)  # (B, H, G*Tq, Dh)
        out = _ungroup(out, group)  # (B*G, H, Tq, Dh)
        weights = _ungroup(weights, group) if weights is not None else None
        return self.out_proj(self._merge_heads(out)), weights  # (B*G, Tq, D)

    # ----------------------------------------------------------------------- one decoding step

    def self_step(self, x: Tensor, kv: Tensor, position: int,
                  need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """Self-attention of the newest position: x (N, D), its input at ``position``.

        ``kv`` (N, 2, H, capacity, Dh) holds the keys and values of the earlier positions;
        this position's are written into it. Returns (N, D) and, if asked, the (N, H, 1,
        position + 1) weights. No mask is needed: every earlier position may be seen.
        """
        n = x.size(0)
        qkv = self.qkv_proj(x).view(n, 3, self.n_heads, self.d_head)  # (N, 3, H, Dh)
        kv[:, :, :, position] = qkv[:, 1:]  # this position's keys and values, (N, 2, H, Dh)
        q = qkv[:, 0].unsqueeze(2)  # (N, H, 1, Dh)
        k, v = kv[:, 0, :, :position + 1], kv[:, 1, :, :position + 1]  # (N, H, T, Dh) views
        out, weights = self._attend(q, k, v, None, False, need_weights)  # (N, H, 1, Dh)
        return self.out_proj(out.reshape(n, self.d_model)), weights

    def cross_step(self, x: Tensor, kv: Tensor, mask: Tensor | None, group: int = 1,
                   need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """Cross-attention of the newest position: x (B*G, D) to the encoder's keys and
        values ``kv`` (B, 2, H, S, Dh) from :meth:`memory_kv`, mask (B, 1, 1, S).
        Returns (B*G, D) and, if asked, the (B*G, H, 1, S) weights."""
        n = x.size(0)
        q = self.q_proj(x).view(-1, group, self.n_heads, self.d_head).transpose(1, 2)
        out, weights = self._attend(q, kv[:, 0], kv[:, 1], mask, False,
                                    need_weights)  # (B, H, G, Dh)
        if weights is not None:
            weights = weights.transpose(1, 2).reshape(n, self.n_heads, 1, -1)  # (B*G, H, 1, S)
        return self.out_proj(out.transpose(1, 2).reshape(n, self.d_model)), weights

    def memory_kv(self, memory: Tensor) -> Tensor:
        """The encoder output's keys and values for :meth:`cross_step`: (B, S, D) ->
        (B, 2, H, S, Dh), in the dtype attention computes in (cast once, not per step)."""
        return attention_dtype(torch.stack(self._split_heads(self.kv_proj(memory), 2), dim=1))

    # ------------------------------------------------------------------------------- stages

    def _split_heads(self, x: Tensor, n: int) -> tuple[Tensor, ...]:
        """``(B, T, n*D) -> n`` tensors of ``(B, H, T, Dh)``."""
        b, t, _ = x.shape
        parts = x.view(b, t, n, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)  # (n,B,H,T,Dh)
        return tuple(parts.unbind(0))

    def _merge_heads(self, x: Tensor) -> Tensor:
        """``(B, H, T, Dh) -> (B, T, D)``."""
        b, _, t, _ = x.shape
        return x.transpose(1, 2).reshape(b, t, self.d_model)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
                need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """``softmax(QK^T/sqrt(d))V`` by the path that fits: (B, H, Tq, Dh) and the weights."""
        dropout_p = self.dropout if self.training else 0.0
        if need_weights or self.impl == "plain":
            with torch.autocast(q.device.type, enabled=False):
                out, weights = plain_attention(*map(attention_dtype, (q, k, v)), mask,
                                               is_causal, dropout_p)
            return out.to(q.dtype), weights
        if _fp32_on_cpu(q):
            # The fp32 copies are not kept for the backward (they would be a third of a step's
            # activations): it recomputes them from the bf16 q, k, v.
            args = (q, k, v, mask, dropout_p, is_causal)
            if torch.is_grad_enabled():
                return checkpoint(_fp32_attention, *args, use_reentrant=False), None
            return _fp32_attention(*args), None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                              is_causal=is_causal), None


def attention_dtype(t: Tensor) -> Tensor:
    """``t`` in the dtype attention computes in: fp32 for bf16 on the CPU, else as it is.

    Under bf16 autocast on the CPU, attention itself runs in fp32: torch's bf16 CPU attention is
    several times slower, forward and backward (docs/benchmarks.md).
    """
    return t.float() if _fp32_on_cpu(t) else t


def _fp32_on_cpu(t: Tensor) -> bool:
    return t.device.type == "cpu" and t.dtype == torch.bfloat16


def _group_queries(q: Tensor, group: int) -> Tensor:
    """(B*G, H, Tq, Dh) -> (B, H, G*Tq, Dh): a sentence's G hypotheses as one row of queries."""
    if group == 1:
        return q
    return q.unflatten(0, (-1, group)).transpose(1, 2).flatten(2, 3)


def _ungroup(t: Tensor, group: int) -> Tensor:
    """(B, H, G*Tq, X) -> (B*G, H, Tq, X): undo :func:`_group_queries`."""
    if group == 1:
        return t
    return t.unflatten(2, (group, -1)).transpose(1, 2).flatten(0, 1)


def _fp32_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float,
                    is_causal: bool) -> Tensor:
    """SDPA in fp32 with autocast off (bf16 CPU inputs); the result in q's dtype, (B,H,Tq,Dh)."""
    with torch.autocast("cpu", enabled=False):
        out = F.scaled_dot_product_attention(*map(attention_dtype, (q, k, v)), attn_mask=mask,
                                             dropout_p=dropout_p, is_causal=is_causal)
    return out.to(q.dtype)
