"""The encoder-decoder Transformer: layer stacks between embeddings and output projection.

The model owns its loss: ``model(src, tgt_in, src_mask)`` gives the logits, and with the
targets, ``model(src, tgt_in, src_mask, tgt_out, label_smoothing)`` (or ``model.loss(batch)``)
gives the summed label-smoothed cross-entropy, computed without ever holding the full logits
(``model/loss.py``). Decoding uses :meth:`Transformer.start_decoding` and
:meth:`Transformer.decode_step`, which carry a :class:`DecoderState` from step to step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from transformer_mt.config import ModelConfig
from transformer_mt.model.embedding import PositionalEncoding, TokenEmbedding
from transformer_mt.model.layers import DecoderLayer, EncoderLayer
from transformer_mt.model.loss import label_smoothed_cross_entropy

if TYPE_CHECKING:
    from transformer_mt.data.batch import Batch


def loss_chunk_size(device_type: str, vocab_size: int) -> int:
    """Tokens per chunk of the loss: 1,024 on the CPU (less memory, as fast); on a GPU as many
    as keep the chunk's two (tokens x vocab) buffers within 1 GiB, usually the whole batch."""
    if device_type == "cpu":
        return 1024
    return max(1024, 2**30 // (6 * vocab_size))  # bytes per logit: a bf16/fp32 and an fp32 copy


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

    def forward(self, src: Tensor, src_mask: Tensor,
                attention: AttentionWeights | None = None) -> Tensor:
        """src: (B, S) ids, src_mask: (B, 1, 1, S) -> memory (B, S, D)."""
        x = self.pos(self.embed(src))  # (B, S, D)
        for layer in self.layers:
            x, weights = layer(x, src_mask, need_weights=attention is not None)
            if attention is not None:
                attention.encoder.append(weights)
        return self.norm(x)


class Decoder(nn.Module):
    """Embedding + positional encoding + N decoder layers + LayerNorm; and the projection to the
    vocabulary, which :class:`Transformer` applies (as logits or inside the loss)."""

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
                attention: AttentionWeights | None = None, group: int = 1) -> Tensor:
        """tgt_in: (B*G, T) ids, memory: (B, S, D) -> final states (B*G, T, D).

        ``group`` is the number of target rows per source row (beam search's hypotheses per
        sentence).
        """
        x = self.pos(self.embed(tgt_in))  # (B*G, T, D)
        for layer in self.layers:
            x, self_w, cross_w = layer(x, memory, src_mask, attention is not None, group)
            if attention is not None:
                attention.decoder_self.append(self_w)
                attention.cross.append(cross_w)
        return self.norm(x)  # (B*G, T, D)

    def step(self, last: Tensor, state: DecoderState,
             attention: AttentionWeights | None = None) -> Tensor:
        """The final states (B*G, D) of the newest tokens ``last`` (B*G,), fed at position
        ``state.offset``, the earlier positions' keys and values read from ``state``."""
        x = self.pos(self.embed(last[:, None]), state.offset)[:, 0]  # (B*G, D)
        kv = state.reserve(x.size(0))  # (B*G, L, 2, H, capacity, Dh)
        for i, layer in enumerate(self.layers):
            x, self_w, cross_w = layer.step(x, kv[:, i], state.offset, state.cross_kv[:, i],
                                            state.src_mask, state.group, attention is not None)
            if attention is not None:
                attention.decoder_self.append(self_w)
                attention.cross.append(cross_w)
        return self.norm(x)


MIN_CAPACITY = 32  # target positions the key/value buffer holds at first (it doubles when full)


@dataclass
class DecoderState:
    """What incremental decoding carries from one step to the next.

    The contract of beam search: ``memory``, ``src_mask`` and ``cross_kv`` have one row per
    sentence (B rows); the prefix and ``self_kv`` have one row per hypothesis (B*G rows, a
    sentence's G hypotheses next to each other). ``self_kv`` holds every decoder layer's
    keys and values of the positions fed so far (the first ``offset`` of its capacity): a
    step writes one position into it instead of concatenating the whole past, and reordering
    hypotheses copies the filled positions of all layers in one operation.
    """

    memory: Tensor  # (B, S, D) encoder output
    src_mask: Tensor  # (B, 1, 1, S)
    cross_kv: Tensor  # (B, L, 2, H, S, Dh) the encoder's keys and values in every layer
    group: int = 1  # G: hypotheses per sentence
    # (rows, L, 2, H, capacity, Dh): the first B*G rows and ``offset`` positions are in use
    self_kv: Tensor | None = None
    offset: int = 0  # target positions fed so far
    # the buffer that reordering writes into next (same shape): two buffers take turns, so a
    # step allocates nothing
    spare: Tensor | None = None

    def reserve(self, rows: int) -> Tensor:
        """The key/value buffer of the ``rows`` hypotheses, ``(rows, L, 2, H, capacity, Dh)``,
        with room for one more position (allocated, or doubled, if needed)."""
        kv = self.self_kv
        if kv is None or self.offset == kv.size(4):
            capacity = max(2 * self.offset, MIN_CAPACITY)
            shape = (rows, *self.cross_kv.shape[1:4], capacity, self.cross_kv.size(-1))
            grown = self.cross_kv.new_empty(shape)
            if kv is not None:
                grown[..., :self.offset, :] = kv[:rows, ..., :self.offset, :]
            self.self_kv, self.spare = grown, None
        return self.self_kv[:rows]

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep (and reorder) hypotheses: row ``i`` becomes old row ``rows[i]``.

        ``sentences`` selects the rows of what belongs to the sentence (encoder output, mask,
        cross-attention keys and values) when sentences leave the batch. Without it the
        sentences stay as they are (beam search reordering its beams).
        """
        if self.self_kv is not None:
            self._select_hypotheses(rows)
        if sentences is None:
            return
        self.memory = self.memory.index_select(0, sentences)
        self.src_mask = self.src_mask.index_select(0, sentences)
        self.cross_kv = self.cross_kv.index_select(0, sentences)

    def _select_hypotheses(self, rows: Tensor) -> None:
        """Row ``i`` of the buffer becomes old row ``rows[i]``, copying only the filled
        positions, into the spare buffer, which then takes the buffer's place."""
        kv = self.self_kv
        assert kv is not None
        if kv.requires_grad:  # some tests decode with autograd on: no out= then
            self.self_kv = kv.index_select(0, rows)
            return
        if self.spare is None:
            self.spare = torch.empty_like(kv)
        filled = self.offset
        torch.index_select(kv[..., :filled, :], 0, rows,
                           out=self.spare[:rows.numel(), ..., :filled, :])
        self.self_kv, self.spare = self.spare, kv


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

    def encode(self, src: Tensor, src_mask: Tensor,
               attention: AttentionWeights | None = None) -> Tensor:
        """(B, S) ids -> (B, S, D) memory."""
        return self.encoder(src, src_mask, attention)

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor,
                tgt_out: Tensor | None = None, label_smoothing: float = 0.0,
                attention: AttentionWeights | None = None) -> Tensor:
        """Teacher forcing: src (B, S), tgt_in (B, T), src_mask (B, 1, 1, S) -> logits (B, T, V).

        With ``tgt_out`` (B, T), the summed label-smoothed cross-entropy of its real tokens
        instead (an fp32 scalar; divide by the token count for the mean). Training calls this
        form through its wrappers (DDP, ``torch.compile``), which wrap ``forward``.
        """
        memory = self.encode(src, src_mask, attention)
        states = self.decoder(tgt_in, memory, src_mask, attention=attention)  # (B, T, D)
        if tgt_out is None:
            return self.decoder.project(states)  # (B, T, V)
        device = states.device.type
        # Under mixed precision the projection runs in the autocast dtype; the softmax and the
        # loss in fp32. The loss function manages its dtypes itself, so autocast is off inside.
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
        weight = self.decoder.project.weight  # (V, D)
        with torch.autocast(device, enabled=False):
            return label_smoothed_cross_entropy(states.flatten(0, 1), weight, tgt_out.flatten(),
                                                label_smoothing, self.pad_id, dtype,
                                                loss_chunk_size(device, weight.size(0)))

    def loss(self, batch: Batch, label_smoothing: float = 0.0) -> Tensor:
        """Summed label-smoothed cross-entropy of a :class:`~transformer_mt.data.batch.Batch`."""
        return self(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out, label_smoothing)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, group: int = 1,
               attention: AttentionWeights | None = None) -> Tensor:
        """Logits (B*G, T, V) for whole prefixes (B*G, T) given the memory (B, S, D): no cache."""
        return self.decoder.project(self.decoder(tgt_in, memory, src_mask, attention=attention,
                                                 group=group))

    def decode_prefix(self, prefix: Tensor, state: DecoderState) -> Tensor:
        """Next-token logits (B*G, V) from whole prefixes (B*G, t), recomputing every position."""
        return self.decode(prefix, state.memory, state.src_mask, state.group)[:, -1]

    @property
    def tgt_vocab_size(self) -> int:
        return self.decoder.project.out_features

    def start_decoding(self, src: Tensor, src_mask: Tensor, group: int = 1) -> DecoderState:
        """Encode once, project the encoder's keys and values for every decoder layer once,
        and return the state that :meth:`decode_step` advances, for ``group`` hypotheses per
        sentence."""
        memory = self.encode(src, src_mask)  # (B, S, D)
        cross_kv = torch.stack([layer.cross_attn.memory_kv(memory)
                                for layer in self.decoder.layers], dim=1)  # (B, L, 2, H, S, Dh)
        return DecoderState(memory, src_mask, cross_kv, group)

    def decode_step(self, last: Tensor, state: DecoderState,
                    attention: AttentionWeights | None = None) -> Tensor:
        """Feed the newest tokens (B*G,) and return next-token logits (B*G, V), reading the
        earlier positions from ``state`` (which this step advances)."""
        states = self.decoder.step(last, state, attention)  # (B*G, D)
        state.offset += 1
        return self.decoder.project(states)  # (B*G, V)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
