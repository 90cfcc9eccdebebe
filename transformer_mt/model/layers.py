"""The position-wise feed-forward network and one encoder / decoder layer.

Each sublayer is wrapped in a residual connection and a LayerNorm. Pre-norm (the default) normalises
the sublayer's input, ``x = x + dropout(sublayer(norm(x)))``; post-norm, as in the paper,
normalises the sum, ``x = norm(x + dropout(sublayer(x)))``.
"""

from __future__ import annotations

from torch import Tensor, nn

from transformer_mt.config import ModelConfig
from transformer_mt.model.attention import MultiHeadAttention


class FeedForward(nn.Module):
    """``Linear(D, F) -> activation -> dropout -> Linear(F, D)``, applied to every position."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0,
                 activation: str = "relu") -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.activation = nn.GELU() if activation == "gelu" else nn.ReLU()
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, D)."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # via (B, T, F)


def _attention(cfg: ModelConfig, cross: bool = False) -> MultiHeadAttention:
    return MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout, cross=cross,
                              impl=cfg.attention)


class EncoderLayer(nn.Module):
    """Self-attention over the source, then the feed-forward network."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.self_attn = _attention(cfg)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout, cfg.activation)
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, src_mask: Tensor | None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x: (B, S, D), src_mask: (B, 1, 1, S) -> (B, S, D) and (B, H, S, S) weights if asked."""
        if self.pre_norm:
            h, weights = self.self_attn(self.norm1(x), mask=src_mask, need_weights=need_weights)
            x = x + self.dropout(h)
            x = x + self.dropout(self.ffn(self.norm2(x)))
        else:
            h, weights = self.self_attn(x, mask=src_mask, need_weights=need_weights)
            x = self.norm1(x + self.dropout(h))
            x = self.norm2(x + self.dropout(self.ffn(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Causal self-attention over the target prefix, cross-attention to the source, feed-forward."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.self_attn = _attention(cfg)
        self.cross_attn = _attention(cfg, cross=True)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout, cfg.activation)
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.norm3 = nn.LayerNorm(cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None,
                need_weights: bool = False,
                group: int = 1) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x: (B*G, T, D), memory: (B, S, D), src_mask: (B, 1, 1, S); G = ``group``.

        Returns (B*G, T, D) and, if asked, self-attention (B*G, H, T, T) and cross-attention
        (B*G, H, T, S) weights. Self-attention needs only the causal mask (padding follows
        the last real token).
        """
        if self.pre_norm:
            h, self_w = self.self_attn(self.norm1(x), is_causal=True, need_weights=need_weights)
            x = x + self.dropout(h)
            h, cross_w = self.cross_attn(self.norm2(x), memory, mask=src_mask,
                                         need_weights=need_weights, group=group)
            x = x + self.dropout(h)
            x = x + self.dropout(self.ffn(self.norm3(x)))
        else:
            h, self_w = self.self_attn(x, is_causal=True, need_weights=need_weights)
            x = self.norm1(x + self.dropout(h))
            h, cross_w = self.cross_attn(x, memory, mask=src_mask, need_weights=need_weights,
                                         group=group)
            x = self.norm2(x + self.dropout(h))
            x = self.norm3(x + self.dropout(self.ffn(x)))
        return x, self_w, cross_w

    def step(self, x: Tensor, kv: Tensor, position: int, cross_kv: Tensor,
             src_mask: Tensor | None, group: int = 1,
             need_weights: bool = False) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """:meth:`forward` for the newest position alone, at inference (no dropout).

        x: (B*G, D) at ``position``; kv: (B*G, 2, H, capacity, Dh), the keys and values of
        the earlier positions (this one's are added); cross_kv: (B, 2, H, S, Dh), the
        encoder's. Returns (B*G, D) and, if asked, the (B*G, H, 1, T) and (B*G, H, 1, S)
        attention weights.
        """
        if self.pre_norm:
            h, self_w = self.self_attn.self_step(self.norm1(x), kv, position, need_weights)
            x = x + h
            h, cross_w = self.cross_attn.cross_step(self.norm2(x), cross_kv, src_mask, group,
                                                    need_weights)
            x = x + h
            return x + self.ffn(self.norm3(x)), self_w, cross_w
        h, self_w = self.self_attn.self_step(x, kv, position, need_weights)
        x = self.norm1(x + h)
        h, cross_w = self.cross_attn.cross_step(x, cross_kv, src_mask, group, need_weights)
        x = self.norm2(x + h)
        return self.norm3(x + self.ffn(x)), self_w, cross_w
