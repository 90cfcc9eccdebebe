"""Token embeddings and sinusoidal positional encoding."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    """Looks up a vector per token id and scales it by ``sqrt(d_model)``.

    The scale brings the embeddings (initialised with std ``d_model ** -0.5``) to unit size, the
    same size as the positional encoding that is added next, as in "Attention Is All You Need".
    """

    def __init__(self, vocab_size: int, d_model: int, pad_id: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.scale = math.sqrt(d_model)

    @property
    def weight(self) -> Tensor:
        return self.embedding.weight

    def forward(self, ids: Tensor) -> Tensor:
        """``(B, T)`` ids -> ``(B, T, D)`` vectors."""
        return self.embedding(ids) * self.scale


def sinusoidal_table(max_positions: int, d_model: int) -> Tensor:
    """``(max_positions, D)`` table of the sinusoidal encoding.

    ``PE[pos, 2i] = sin(pos / 10000^(2i/D))`` and ``PE[pos, 2i+1] = cos(pos / 10000^(2i/D))``.
    """
    position = torch.arange(max_positions, dtype=torch.float32)[:, None]  # (P, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32)
                         * (-math.log(10000.0) / d_model))  # (ceil(D/2),)
    angles = position * inv_freq  # (P, ceil(D/2))
    table = torch.zeros(max_positions, d_model)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table


class PositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal position signal, then applies dropout."""

    table: Tensor  # (max_positions, D)

    def __init__(self, d_model: int, max_positions: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        # Not saved in checkpoints: it is a pure function of the config.
        self.register_buffer("table", sinusoidal_table(max_positions, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """``(B, T, D) -> (B, T, D)``; ``offset`` is the position of ``x[:, 0]`` (for decoding)."""
        t = x.size(1)
        if offset + t > self.table.size(0):
            raise ValueError(f"sequence of {offset + t} positions exceeds model.max_positions="
                             f"{self.table.size(0)}")
        return self.dropout(x + self.table[offset: offset + t].to(x.dtype))  # (B, T, D)
