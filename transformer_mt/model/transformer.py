"""The encoder-decoder Transformer: layer stacks between embeddings and output projection.

``model(src, tgt_in, src_mask)`` gives the logits of teacher forcing; with the targets,
``model(src, tgt_in, src_mask, tgt_out, label_smoothing)`` gives the summed label-smoothed
cross-entropy, exactly ``F.cross_entropy`` of those logits. Training computes the same loss
without holding the logits (``training/loss.py``) and decoding feeds one position at a time
(``decode/incremental.py``); both reuse this module's weights and are proven equal to it by
``tests/unit/test_equivalence.py`` and ``tests/unit/test_decoding_equivalence.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_mt.config import ModelConfig
from transformer_mt.model.embedding import PositionalEncoding, TokenEmbedding
from transformer_mt.model.layers import DecoderLayer, EncoderLayer

if TYPE_CHECKING:
    from transformer_mt.data.batch import Batch


@dataclass
class AttentionWeights:
    """Attention weights of one forward pass, one tensor per layer (returned only when asked)."""

    encoder: list[Tensor] = field(default_factory=list)  # (B, H, S, S) each
    decoder_self: list[Tensor] = field(default_factory=list)  # (B, H, T, T) each
    cross: list[Tensor] = field(default_factory=list)  # (B, H, T, S) each


class Encoder(nn.Module):
    """Embedding + positional encoding + N encoder layers (+ a final LayerNorm with pre-norm)."""

    def __init__(self, cfg: ModelConfig, vocab_size: int, pad_id: int) -> None:
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, cfg.d_model, pad_id)
        self.pos = PositionalEncoding(cfg.d_model, cfg.max_positions, cfg.dropout)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    def forward(self, src: Tensor, src_mask: Tensor | None,
                attention: AttentionWeights | None = None) -> Tensor:
        """src: (B, S) ids, src_mask: (B, 1, 1, S) (None: no padding) -> memory (B, S, D)."""
        x = self.pos(self.embed(src))  # (B, S, D)
        for layer in self.layers:
            x, weights = layer(x, src_mask, need_weights=attention is not None)
            if attention is not None:
                attention.encoder.append(weights)
        return self.norm(x)


class Decoder(nn.Module):
    """Embedding + positional encoding + N decoder layers + LayerNorm; and the projection to the
    vocabulary, which :class:`Transformer` applies to the final states."""

    def __init__(self, cfg: ModelConfig, vocab_size: int, pad_id: int) -> None:
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, cfg.d_model, pad_id)
        self.pos = PositionalEncoding(cfg.d_model, cfg.max_positions, cfg.dropout)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.project = nn.Linear(cfg.d_model, vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.project.weight = self.embed.weight  # one matrix for input and output words

    def forward(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor,
                attention: AttentionWeights | None = None) -> Tensor:
        """tgt_in: (B, T) ids, memory: (B, S, D) -> final states (B, T, D)."""
        x = self.pos(self.embed(tgt_in))  # (B, T, D)
        for layer in self.layers:
            x, self_w, cross_w = layer(x, memory, src_mask, attention is not None)
            if attention is not None:
                attention.decoder_self.append(self_w)
                attention.cross.append(cross_w)
        return self.norm(x)  # (B, T, D)


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need", sized by a ModelConfig.

    ``pad_id`` is the id of ``<pad>`` in both vocabularies: its embedding rows start at zero
    and get no gradient, and the loss ignores it. With ``shared_vocab`` (one vocabulary for
    both languages) the encoder embeds with the decoder's embedding matrix, which with
    ``cfg.tie_embeddings`` is also the output projection: one matrix tied three ways.
    """

    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int,
                 pad_id: int, shared_vocab: bool = False) -> None:
        super().__init__()
        self.cfg, self.pad_id = cfg, pad_id
        self.encoder = Encoder(cfg, src_vocab_size, pad_id)
        self.decoder = Decoder(cfg, tgt_vocab_size, pad_id)
        if shared_vocab:
            if src_vocab_size != tgt_vocab_size:
                raise ValueError(f"a shared vocabulary has one size, got {src_vocab_size} "
                                 f"and {tgt_vocab_size}")
            self.encoder.embed = self.decoder.embed
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform for every matrix, zero biases, N(0, D^-1/2) for embeddings."""
        for name, p in self.named_parameters():
            if "embed" in name:
                nn.init.normal_(p, std=self.cfg.d_model ** -0.5)
                with torch.no_grad():
                    p[self.pad_id].zero_()
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def encode(self, src: Tensor, src_mask: Tensor | None,
               attention: AttentionWeights | None = None) -> Tensor:
        """(B, S) ids -> (B, S, D) memory."""
        return self.encoder(src, src_mask, attention)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor,
               attention: AttentionWeights | None = None) -> Tensor:
        """Logits (B, T, V) of every position of the prefixes tgt_in (B, T), given the memory."""
        return self.decoder.project(self.decoder(tgt_in, memory, src_mask, attention))

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor,
                tgt_out: Tensor | None = None, label_smoothing: float = 0.0,
                attention: AttentionWeights | None = None) -> Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T), src_mask (B, 1, 1, S) -> logits (B, T, V).

        With ``tgt_out`` (B, T), the summed label-smoothed cross-entropy of its real tokens
        instead (an fp32 scalar; divide by the token count for the mean).
        """
        logits = self.decode(tgt_in, self.encode(src, src_mask, attention), src_mask, attention)
        if tgt_out is None:
            return logits  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1).float(), tgt_out.flatten(),
                               ignore_index=self.pad_id, label_smoothing=label_smoothing,
                               reduction="sum")

    def loss(self, batch: Batch, label_smoothing: float = 0.0) -> Tensor:
        """Summed label-smoothed cross-entropy of a :class:`~transformer_mt.data.batch.Batch`."""
        return self(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out, label_smoothing)

    @property
    def tgt_vocab_size(self) -> int:
        return self.decoder.project.out_features

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
