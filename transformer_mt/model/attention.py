"""Scaled dot-product attention and multi-head attention, with a key/value cache for decoding.

Masks are boolean and broadcastable to ``(B, H, T_query, T_key)``: True means "may attend".
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

KVCache = dict[str, Tensor]  # {"k": (B, H, T, Dh), "v": (B, H, T, Dh)}


def plain_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                    is_causal: bool = False, dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """``softmax(Q K^T / sqrt(d)) V`` written out; returns the output and the weights.

    q: (B, H, Tq, Dh); k, v: (B, H, Tk, Dh); returns (B, H, Tq, Dh) and (B, H, Tq, Tk).
    This is what ``F.scaled_dot_product_attention`` computes (a test proves it); the model uses
    it when attention weights are asked for, or when ``model.attention`` is ``plain``.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    if is_causal:
        tq, tk = scores.shape[-2:]
        causal = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril()
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

    def _heads(self, x: Tensor, n: int) -> tuple[Tensor, ...]:
        """``(B, T, n*D) -> n`` tensors of ``(B, H, T, Dh)``."""
        b, t, _ = x.shape
        parts = x.view(b, t, n, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)  # (n,B,H,T,Dh)
        return tuple(parts.unbind(0))

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None,
                is_causal: bool = False, cache: KVCache | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """Attend from ``x`` (B, Tq, D) to itself, or to ``memory`` (B, Tk, D) when cross.

        ``cache`` (a dict, filled in place) makes decoding incremental: self-attention appends
        this step's keys/values to those of earlier steps; cross-attention computes the encoder's
        keys/values once and reuses them. Returns (B, Tq, D) and, if asked, (B, H, Tq, Tk) weights.
        """
        b, t, _ = x.shape
        if self.cross:
            (q,) = self._heads(self.q_proj(x), 1)  # (B, H, Tq, Dh)
            if cache is not None and "k" in cache:
                k, v = cache["k"], cache["v"]
            else:
                assert memory is not None, "cross-attention needs the encoder output"
                k, v = self._heads(self.kv_proj(memory), 2)  # (B, H, Tk, Dh) each
                if cache is not None:
                    k, v = _attention_dtype(k), _attention_dtype(v)  # cast once, not per step
                    cache["k"], cache["v"] = k, v
        else:
            q, k, v = self._heads(self.qkv_proj(x), 3)  # (B, H, T, Dh) each
            if cache is not None:
                k, v = _attention_dtype(k), _attention_dtype(v)
                if "k" in cache:  # earlier steps: this one query may see all of them
                    if t != 1:
                        raise ValueError("incremental decoding feeds one position at a time")
                    k = torch.cat([cache["k"], k], dim=2)  # (B, H, T_past + T, Dh)
                    v = torch.cat([cache["v"], v], dim=2)
                    is_causal = False
                cache["k"], cache["v"] = k, v
        # Beam search: the G hypotheses of a sentence share its encoder keys/values, which are
        # kept once per sentence; its G queries are attended as one sentence's G*Tq queries.
        groups = q.size(0) // k.size(0)
        if groups > 1:
            q = q.unflatten(0, (k.size(0), groups)).transpose(1, 2).flatten(2, 3)  # (B,H,G*Tq,Dh)
        dropout_p = self.dropout if self.training else 0.0
        # Under bf16 autocast on the CPU, attention itself runs in fp32: torch's bf16 CPU
        # attention is several times slower, forward and backward (docs/benchmarks.md).
        cpu_bf16 = q.device.type == "cpu" and q.dtype == torch.bfloat16
        if need_weights or self.impl == "plain":
            with torch.autocast("cpu", enabled=False):
                out, weights = plain_attention(*map(_attention_dtype, (q, k, v)), mask,
                                               is_causal, dropout_p)
            out = out.to(q.dtype)
        elif cpu_bf16:
            # The fp32 copies are not kept for the backward (they would be a third of a step's
            # activations): it recomputes them from the bf16 q, k, v.
            args = (q, k, v, mask, dropout_p, is_causal)
            out = (checkpoint(_fp32_attention, *args, use_reentrant=False)
                   if torch.is_grad_enabled() else _fp32_attention(*args))
            weights = None
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                                 is_causal=is_causal)  # (B, H, Tq, Dh)
            weights = None
        if groups > 1:
            out = _ungroup(out, groups)
            weights = _ungroup(weights, groups) if weights is not None else None
        out = out.transpose(1, 2).reshape(b, t, self.d_model)  # (B, Tq, D)
        return self.out_proj(out), weights


def _ungroup(t: Tensor, groups: int) -> Tensor:
    """(B, H, G*Tq, X) -> (B*G, H, Tq, X): undo the query grouping of beam search."""
    return t.unflatten(2, (groups, -1)).transpose(1, 2).flatten(0, 1)


def _attention_dtype(t: Tensor) -> Tensor:
    """The dtype attention computes in: fp32 for bf16 on the CPU (see ``forward``)."""
    return t.float() if t.device.type == "cpu" and t.dtype == torch.bfloat16 else t


def _fp32_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float,
                    is_causal: bool) -> Tensor:
    """SDPA in fp32 with autocast off (bf16 CPU inputs); the result in q's dtype, (B,H,Tq,Dh)."""
    with torch.autocast("cpu", enabled=False):
        out = F.scaled_dot_product_attention(*map(_attention_dtype, (q, k, v)), attn_mask=mask,
                                             dropout_p=dropout_p, is_causal=is_causal)
    return out.to(q.dtype)
