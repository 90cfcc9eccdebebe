"""The position-wise feed-forward network and one encoder / decoder layer.

Each sublayer is wrapped in a residual connection and a LayerNorm (:func:`residual`). Pre-norm
(the default) normalises the sublayer's input, ``x = x + dropout(sublayer(norm(x)))``;
post-norm, as in the paper, normalises the sum, ``x = norm(x + dropout(sublayer(x)))``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from torch import Tensor, nn

from transformer_mt.config import ModelConfig
from transformer_mt.model.attention import MultiHeadAttention

# A sublayer maps (B, T, D) to (B, T, D), with attention weights when it has them.
Sublayer = Callable[[Tensor], tuple[Tensor, Tensor | None]]


def residual(x: Tensor, sublayer: Sublayer, norm: nn.LayerNorm, dropout: nn.Module,
             pre_norm: bool) -> tuple[Tensor, Tensor | None]:
    """One residual connection around ``sublayer``: (B, T, D) -> (B, T, D), and its weights.

    pre-norm:  ``x + dropout(sublayer(norm(x)))``  (trains more stably)
    post-norm: ``norm(x + dropout(sublayer(x)))``  (the paper's)
    """
    if pre_norm:
        h, weights = sublayer(norm(x))
        return x + dropout(h), weights
    h, weights = sublayer(x)
    return norm(x + dropout(h)), weights


class FeedForward(nn.Module):
    """``Linear(D, F) -> activation -> dropout -> Linear(F, D)``, applied to every position."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0,
                 activation: str = "relu") -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.activation = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}[activation]()
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> tuple[Tensor, None]:
        """(B, T, D) -> (B, T, D) (and no attention weights: a sublayer's signature)."""
        return self.linear2(self.dropout(self.activation(self.linear1(x)))), None  # via (B,T,F)


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
        attend = partial(self.self_attn, mask=src_mask, need_weights=need_weights)
        x, weights = residual(x, attend, self.norm1, self.dropout, self.pre_norm)
        x, _ = residual(x, self.ffn, self.norm2, self.dropout, self.pre_norm)
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
                need_weights: bool = False) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x: (B, T, D), memory: (B, S, D), src_mask: (B, 1, 1, S).

        Returns (B, T, D) and, if asked, self-attention (B, H, T, T) and cross-attention
        (B, H, T, S) weights. Self-attention needs only the causal mask (padding follows
        the last real token).
        """
        look_back = partial(self.self_attn, is_causal=True, need_weights=need_weights)
        x, self_w = residual(x, look_back, self.norm1, self.dropout, self.pre_norm)
        look_at_source = partial(self.cross_attn, memory=memory, mask=src_mask,
                                 need_weights=need_weights)
        x, cross_w = residual(x, look_at_source, self.norm2, self.dropout, self.pre_norm)
        x, _ = residual(x, self.ffn, self.norm3, self.dropout, self.pre_norm)
        return x, self_w, cross_w
