"""The encoder-decoder Transformer: layer stacks between embeddings and output projection."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from transformer_mt.config import ModelConfig
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.model.attention import KVCache
from transformer_mt.model.embedding import PositionalEncoding, TokenEmbedding
from transformer_mt.model.layers import DecoderLayer, EncoderLayer


@dataclass
class Attention:
    """Attention weights of one forward pass, one tensor per layer (returned only when asked)."""

    encoder: list[Tensor] = field(default_factory=list)  # (B, H, S, S) each
    decoder_self: list[Tensor] = field(default_factory=list)  # (B, H, T, T) each
    cross: list[Tensor] = field(default_factory=list)  # (B, H, T, S) each


class Encoder(nn.Module):
    """Embedding + positional encoding + N encoder layers (+ a final LayerNorm with pre-norm)."""

    def __init__(self, cfg: ModelConfig, vocab_size: int) -> None:
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, cfg.d_model, PAD_ID)
        self.pos = PositionalEncoding(cfg.d_model, cfg.max_positions, cfg.dropout)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()

    def forward(self, src: Tensor, src_mask: Tensor,
                attention: Attention | None = None) -> Tensor:
        """src: (B, S) ids, src_mask: (B, 1, 1, S) -> memory (B, S, D)."""
        x = self.pos(self.embed(src))  # (B, S, D)
        for layer in self.layers:
            x, weights = layer(x, src_mask, need_weights=attention is not None)
            if attention is not None:
                attention.encoder.append(weights)
        return self.norm(x)


class Decoder(nn.Module):
    """Embedding + positional encoding + N decoder layers + LayerNorm + projection to the vocab."""

    def __init__(self, cfg: ModelConfig, vocab_size: int) -> None:
        super().__init__()
        self.embed = TokenEmbedding(vocab_size, cfg.d_model, PAD_ID)
        self.pos = PositionalEncoding(cfg.d_model, cfg.max_positions, cfg.dropout)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.project = nn.Linear(cfg.d_model, vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.project.weight = self.embed.weight  # one matrix for input and output words

    def forward(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor,
                caches: list[dict[str, KVCache]] | None = None, offset: int = 0,
                attention: Attention | None = None, project: bool = True) -> Tensor:
        """tgt_in: (B, T) ids, memory: (B, S, D) -> logits (B, T, V).

        With ``caches`` (one dict per layer) only the new positions are fed, starting at position
        ``offset``; earlier positions' keys and values come from the caches. With
        ``project=False`` the final states (B, T, D) come back instead of the logits (training
        projects them inside its loss, a chunk at a time: ``train/loss.py``).
        """
        x = self.pos(self.embed(tgt_in), offset)  # (B, T, D)
        for i, layer in enumerate(self.layers):
            cache = caches[i] if caches is not None else None
            x, self_w, cross_w = layer(x, memory, src_mask, cache, attention is not None)
            if attention is not None:
                attention.decoder_self.append(self_w)
                attention.cross.append(cross_w)
        x = self.norm(x)  # (B, T, D)
        return self.project(x) if project else x  # (B, T, V) or (B, T, D)


@dataclass
class DecoderState:
    """What incremental decoding carries from one step to the next, for a batch of hypotheses."""

    memory: Tensor  # (B, S, D) encoder output
    src_mask: Tensor  # (B, 1, 1, S)
    caches: list[dict[str, KVCache]]  # per decoder layer: {"self": {k, v}, "cross": {k, v}}
    offset: int = 0  # target positions fed so far

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep (and reorder) hypotheses: row ``i`` becomes old row ``rows[i]``.

        What belongs to the sentence rather than to a hypothesis (the encoder output, its mask,
        the cross-attention keys/values) has one row per sentence, shared by that sentence's
        hypotheses in beam search; ``sentences`` selects those rows when sentences leave the
        batch. Without it the sentences stay as they are (beam search reordering its beams).
        """
        for cache in self.caches:
            for name in list(cache.get("self", {})):
                cache["self"][name] = cache["self"][name].index_select(0, rows)
        if sentences is None:
            return
        self.memory = self.memory.index_select(0, sentences)
        self.src_mask = self.src_mask.index_select(0, sentences)
        for cache in self.caches:
            for name in list(cache.get("cross", {})):
                cache["cross"][name] = cache["cross"][name].index_select(0, sentences)


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need", sized by a ModelConfig."""

    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg, src_vocab_size)
        self.decoder = Decoder(cfg, tgt_vocab_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform for every matrix, zero biases, N(0, D^-1/2) for embeddings."""
        for name, p in self.named_parameters():
            if "embed" in name:
                nn.init.normal_(p, std=self.cfg.d_model ** -0.5)
                with torch.no_grad():
                    p[PAD_ID].zero_()
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def encode(self, src: Tensor, src_mask: Tensor, attention: Attention | None = None) -> Tensor:
        """(B, S) ids -> (B, S, D) memory."""
        return self.encoder(src, src_mask, attention)

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor,
                attention: Attention | None = None, project: bool = True) -> Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T), src_mask (B, 1, 1, S) -> logits (B, T, V).

        ``project=False``: the decoder's final states (B, T, D) instead of the logits.
        """
        memory = self.encode(src, src_mask, attention)
        return self.decoder(tgt_in, memory, src_mask, attention=attention, project=project)

    def start_decoding(self, src: Tensor, src_mask: Tensor) -> DecoderState:
        """Encode once and return the state that :meth:`decode_step` advances."""
        memory = self.encode(src, src_mask)
        return DecoderState(memory, src_mask, [{} for _ in self.decoder.layers])

    def decode_step(self, last: Tensor, state: DecoderState,
                    attention: Attention | None = None) -> Tensor:
        """Feed the newest tokens (B,) and return next-token logits (B, V), using the caches."""
        logits = self.decoder(last[:, None], state.memory, state.src_mask, state.caches,
                              state.offset, attention)  # (B, 1, V)
        state.offset += 1
        return logits[:, -1]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Transformer:
    return Transformer(cfg, src_vocab_size, tgt_vocab_size)
