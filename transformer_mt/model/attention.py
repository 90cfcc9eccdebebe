"""Scaled dot-product attention and multi-head attention.

Masks are boolean and broadcastable to ``(B, H, T_query, T_key)``: True means "may attend".
The causal mask of decoder self-attention is :func:`causal_mask`: :func:`plain_attention`
applies it as written; ``F.scaled_dot_product_attention`` (SDPA) takes ``is_causal=True`` and
applies the same lower-triangular mask inside its kernel. ``tests/unit/test_equivalence.py`` proves
the written-out formula and SDPA equal, with and without masks.

Decoding one position at a time reuses these modules' weights from ``decode/incremental.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def causal_mask(t_query: int, t_key: int | None = None,
                device: torch.device | None = None) -> Tensor:
    """``(Tq, Tk)`` bool, True where query ``i`` may see key ``j`` (``j <= i``)."""
    t_key = t_query if t_key is None else t_key
    return torch.ones(t_query, t_key, dtype=torch.bool, device=device).tril()


def plain_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                    is_causal: bool = False, dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """``softmax(Q K^T / sqrt(d)) V`` written out; returns the output and the weights.

    q: (B, H, Tq, Dh); k, v: (B, H, Tk, Dh); returns (B, H, Tq, Dh) in q's dtype and the
    (B, H, Tq, Tk) weights. Computed in fp32 when the inputs are bf16 (autocast off): the
    weights are what a reader looks at. This is what ``F.scaled_dot_product_attention``
    computes (a test proves it); the model uses it when the weights are asked for, or when
    ``model.attention`` is ``plain``.
    """
    dtype = q.dtype
    with torch.autocast(q.device.type, enabled=False):
        if dtype == torch.bfloat16:
            q, k, v = q.float(), k.float(), v.float()
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
        if is_causal:
            causal = causal_mask(scores.size(-2), scores.size(-1), device=q.device)  # (Tq, Tk)
            mask = causal if mask is None else mask & causal
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)  # (B, H, Tq, Tk)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        return (weights @ v).to(dtype), weights  # (B, H, Tq, Dh), (B, H, Tq, Tk)


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
                is_causal: bool = False,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """Attend from ``x`` (B, Tq, D) to itself, or to ``memory`` (B, Tk, D) when cross.

        Returns (B, Tq, D) and, if asked, the (B, H, Tq, Tk) weights.
        """
        if self.cross:
            assert memory is not None, "cross-attention needs the encoder output"
            (q,) = self.split_heads(self.q_proj(x), 1)  # (B, H, Tq, Dh)
            k, v = self.split_heads(self.kv_proj(memory), 2)  # (B, H, Tk, Dh) each
        else:
            q, k, v = self.split_heads(self.qkv_proj(x), 3)  # (B, H, T, Dh) each
        out, weights = self.attend(q, k, v, mask, is_causal, need_weights)  # (B, H, Tq, Dh)
        return self.out_proj(self.merge_heads(out)), weights  # (B, Tq, D)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
               need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """``softmax(QK^T/sqrt(d))V``: (B, H, Tq, Dh), and the weights when asked for."""
        dropout_p = self.dropout if self.training else 0.0
        if need_weights or self.impl == "plain":
            return plain_attention(q, k, v, mask, is_causal, dropout_p)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                              is_causal=is_causal), None

    def split_heads(self, x: Tensor, n: int) -> tuple[Tensor, ...]:
        """``(B, T, n*D) -> n`` tensors of ``(B, H, T, Dh)``."""
        b, t, _ = x.shape
        parts = x.view(b, t, n, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)  # (n,B,H,T,Dh)
        return tuple(parts.unbind(0))

    def merge_heads(self, x: Tensor) -> Tensor:
        """``(B, H, T, Dh) -> (B, T, D)``."""
        b, _, t, _ = x.shape
        return x.transpose(1, 2).reshape(b, t, self.d_model)
