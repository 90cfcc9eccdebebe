"""Incremental decoding: the decoder fed one position at a time, with the reference model's weights.

The reference (``Transformer.decode``) re-runs the decoder over the whole prefix at every step.
Here each step feeds only the newest token: the keys and values of the earlier positions are read
from a buffer that the :class:`DecoderState` keeps for every decoder layer (this position's are
written into it), and the encoder's keys and values are projected once per sentence and shared
by that sentence's hypotheses. ``tests/unit/test_decoding_equivalence.py`` proves the logits
equal to the reference's, for greedy and for beam search's hypotheses.

Beam search keeps ``G`` hypotheses per sentence. What belongs to a hypothesis (its prefix, its
self-attention keys and values) has one row per hypothesis, ``B*G`` rows; what belongs to the
sentence (the encoder output, the source mask, the cross-attention keys and values) has one row
per sentence, ``B`` rows, and cross-attention attends each sentence's ``G`` query rows to that
sentence's one copy of the keys and values. At the first step a sentence's G hypotheses are
the same (``<bos>``), so it is decoded once per sentence and copied (as CTranslate2 does).
"""

from __future__ import annotations

import math
import threading
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from transformer_mt.decode.beam_step import StepByStep
from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.layers import DecoderLayer, residual
from transformer_mt.model.transformer import AttentionWeights, Transformer
from transformer_mt.precision import attention_dtype

MIN_CAPACITY = 32  # target positions the key/value buffer holds at first (it doubles when full)


class BufferPool(threading.local):
    """Key/value buffers that decoding on this thread no longer uses, kept for the next.

    A buffer is tens of MiB (32 sentences' beams of 5 hold 30 MiB at 32 positions), and every
    page of a new one costs its first write a page fault (~1 ms a MiB here): a batch's steps
    took ~1.5 ms more each to write their keys and values into fresh buffers, ~15 % of a
    batch-32 beam search's time. Buffers given back (by a finished state, or when one grows)
    are taken again by the next state, on the CPU; at most ``KEEP`` of them, the largest.
    (A GPU's caching allocator does this itself.)
    """

    KEEP = 4

    def __init__(self) -> None:
        self.free: list[Tensor] = []

    def take(self, shape: tuple[int, ...], like: Tensor) -> Tensor:
        """A buffer of ``shape`` with ``like``'s dtype and device, not zeroed (one made in
        inference mode only in inference mode, where it can be written: and the other way).
        Its view is made here, in this call's grad mode: a view made under ``no_grad`` may not
        be written where grad mode is on."""
        size, inference = math.prod(shape), torch.is_inference_mode_enabled()
        for i, buffer in enumerate(self.free):  # the smallest that is large enough
            if (buffer.numel() >= size and buffer.dtype == like.dtype
                    and buffer.device == like.device and buffer.is_inference() == inference):
                return self.free.pop(i).view(-1)[:size].view(shape)
        return like.new_empty(shape)

    def give(self, buffer: Tensor | None) -> None:
        """Keep ``buffer`` (no longer used) for a later :meth:`take`."""
        if buffer is None or buffer.device.type != "cpu" or buffer.requires_grad:
            return
        whole = buffer if buffer._base is None else buffer._base
        if any(whole.data_ptr() == kept.data_ptr() for kept in self.free):
            return
        self.free = sorted([*self.free, whole], key=Tensor.numel)[-self.KEEP:]


BUFFERS = BufferPool()


@dataclass
class DecoderState(StepByStep):
    """What incremental decoding carries from one step to the next.

    ``memory``, ``src_mask`` and ``cross_kv`` have one row per sentence (B rows); the prefix
    and ``self_kv`` have one row per hypothesis (B*G rows, a sentence's G hypotheses next to
    each other). ``self_kv`` holds every decoder layer's keys and values of the positions fed
    so far (the first ``offset`` of its capacity): a step writes one position into it instead
    of concatenating the whole past, and reordering hypotheses copies the filled positions of
    all layers in one operation. Positions come before layers in it, so that what a
    hypothesis has filled is one block of memory: reordering copies blocks, and only the
    pages written so far are touched (a new buffer's pages cost the first write a page
    fault each, ~1 ms a MiB here).
    """

    model: Transformer
    memory: Tensor  # (B, S, D) encoder output
    src_mask: Tensor  # (B, 1, 1, S)
    cross_kv: Tensor  # (B, L, 2, H, S, Dh) the encoder's keys and values in every layer
    group: int = 1  # G: hypotheses per sentence
    # (rows, capacity, L, 2, H, Dh): the first B*G rows and ``offset`` positions are in use
    self_kv: Tensor | None = None
    offset: int = 0  # target positions fed so far
    # the buffer that reordering writes into next (same shape): two buffers take turns, so a
    # step allocates nothing
    spare: Tensor | None = None
    # what computes a step's logits from the buffers (:func:`decoder_step`, or a compiled
    # version of it: ``decode/compiled.py``)
    step: StepFunction | None = None

    def next_logits(self, prefix: Tensor) -> Tensor:
        """Next-token logits (B*G, V) of the prefixes (B*G, t): feeds their newest token."""
        return decode_step(self, prefix[:, -1])

    def reserve(self, rows: int) -> Tensor:
        """The key/value buffer of the ``rows`` hypotheses, ``(rows, capacity, L, 2, H, Dh)``,
        with room for one more position (allocated, or doubled, if needed)."""
        kv = self.self_kv
        if kv is None or self.offset == kv.size(1):
            capacity = max(2 * self.offset, MIN_CAPACITY)
            _, layers, _, heads, _, d_head = self.cross_kv.shape  # (B, L, 2, H, S, Dh)
            grown = BUFFERS.take((rows, capacity, layers, 2, heads, d_head), self.cross_kv)
            if kv is not None:
                grown[:, :self.offset] = kv[:rows, :self.offset]
            BUFFERS.give(kv)
            BUFFERS.give(self.spare)
            kv = self.self_kv = grown
            self.spare = None
        return kv[:rows]

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep (and reorder) hypotheses: row ``i`` becomes old row ``rows[i]``.

        ``sentences`` selects the rows of what belongs to the sentence (encoder output, mask,
        cross-attention keys and values) when sentences leave the batch. Without it the
        sentences stay as they are (beam search reordering its beams).
        """
        if self.self_kv is not None:
            self._select_hypotheses(rows)
        if sentences is not None:
            self._select_sentences(sentences)

    def _select_sentences(self, sentences: Tensor) -> None:
        """Keep (and reorder) what belongs to the sentences: row ``i`` becomes old row
        ``sentences[i]``."""
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
        if self.spare is None or self.spare.size(0) < rows.numel():
            BUFFERS.give(self.spare)
            self.spare = BUFFERS.take((rows.numel(), *kv.shape[1:]), kv)
        filled = self.offset
        torch.index_select(kv[:, :filled], 0, rows, out=self.spare[:rows.numel(), :filled])
        self.self_kv, self.spare = self.spare, kv

    def __del__(self) -> None:
        BUFFERS.give(self.self_kv)
        BUFFERS.give(self.spare)


def decoder_layers(model: Transformer) -> Sequence[DecoderLayer]:
    """The decoder's layers, as what they are (an ``nn.ModuleList`` holds them)."""
    return typing.cast("Sequence[DecoderLayer]", model.decoder.layers)


def start_decoding(model: Transformer, src: Tensor, src_mask: Tensor, group: int = 1,
                   step: StepFunction | None = None) -> DecoderState:
    """Encode once, project the encoder's keys and values for every decoder layer once, and
    return the state that :func:`decode_step` advances, for ``group`` hypotheses per sentence
    (its steps computed by ``step``, :func:`decoder_step` by default)."""
    memory, cross_kv = encode_source(model, src, src_mask)
    return DecoderState(model, memory, src_mask, cross_kv, group, step=step)


def encode_source(model: Transformer, src: Tensor,
                  src_mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """The encoder output (B, S, D) of the sources (B, S) (``src_mask`` (B, 1, 1, S), or None
    where there is no padding), and the encoder's keys and values of every decoder layer
    (B, L, 2, H, S, Dh)."""
    memory = model.encode(src, src_mask)  # (B, S, D)
    cross_kv = torch.stack([memory_kv(layer.cross_attn, memory)
                            for layer in decoder_layers(model)], dim=1)  # (B, L, 2, H, S, Dh)
    return memory, cross_kv


def decode_step(state: DecoderState, last: Tensor,
                attention: AttentionWeights | None = None) -> Tensor:
    """Feed the newest tokens ``last`` (B*G,) at position ``state.offset`` and return the
    next-token logits (B*G, V), reading the earlier positions from ``state`` (advanced here)."""
    if state.offset == 0 and state.group > 1 and attention is None:
        return _first_step(state, last)
    kv = state.reserve(last.size(0))  # (B*G, capacity, L, 2, H, Dh)
    args = (state.model, last, state.offset, kv, state.cross_kv, state.src_mask, state.group)
    if state.step is None or attention is not None:
        logits = decoder_step(*args, attention)  # (B*G, V)
    else:
        logits = state.step(*args)
    state.offset += 1
    return logits


def decoder_step(model: Transformer, last: Tensor, position: int, kv: Tensor, cross_kv: Tensor,
                 src_mask: Tensor | None, group: int,
                 attention: AttentionWeights | None = None,
                 fresh: list[Tensor] | None = None) -> Tensor:
    """The decoder on the newest tokens ``last`` (B*G,) at ``position``: their next-token
    logits (B*G, V). ``kv`` (B*G, capacity, L, 2, H, Dh) holds every layer's keys and values
    of the earlier positions, and this position's are written into it; ``cross_kv`` (B, L, 2,
    H, S, Dh) the encoder's, ``src_mask`` (B, 1, 1, S) (None: no padding). The attention
    weights go to ``attention`` if given. Given ``fresh``, the buffer is only read: each
    layer's keys and values of this position, (B*G, 2, H, Dh), go to ``fresh`` instead (a
    compiled step writing into its input would copy the whole buffer: ``decode/compiled.py``)."""
    decoder = model.decoder
    x = decoder.pos(decoder.embed(last[:, None]), position)[:, 0]  # (B*G, D)
    for i, layer in enumerate(decoder_layers(model)):
        x, self_w, cross_w = _layer_step(layer, x, kv[:, :, i], position, cross_kv[:, i],
                                         src_mask, group, attention is not None, fresh)
        if attention is not None:
            assert self_w is not None and cross_w is not None
            attention.decoder_self.append(self_w)
            attention.cross.append(cross_w)
    return decoder.project(decoder.norm(x))  # (B*G, V)


# computes a step as :func:`decoder_step` does (its arguments but the attention weights)
StepFunction = Callable[[Transformer, Tensor, int, Tensor, Tensor, Tensor | None, int], Tensor]


def _first_step(state: DecoderState, last: Tensor) -> Tensor:
    """The first step of G hypotheses per sentence, which all start from ``<bos>``: decoded
    once per sentence (B rows, not B*G), then the logits and keys/values copied to the G."""
    group, state.group = state.group, 1
    logits = decode_step(state, last[::group])  # (B, V)
    state.group = group
    copies = torch.arange(logits.size(0), device=logits.device).repeat_interleave(group)
    state.select(copies)  # (B*G,): each sentence's row G times
    return logits.index_select(0, copies)  # (B*G, V)


def _layer_step(layer: DecoderLayer, x: Tensor, kv: Tensor, position: int, cross_kv: Tensor,
                src_mask: Tensor | None, group: int, need_weights: bool,
                fresh: list[Tensor] | None) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """``DecoderLayer.forward`` for the newest position alone: x (B*G, D); kv (B*G, capacity,
    2, H, Dh) this layer's buffer; cross_kv (B, 2, H, S, Dh) the encoder's keys and values.
    Returns (B*G, D) and, if asked, the (B*G, H, 1, T) and (B*G, H, 1, S) weights."""
    look_back = partial(_self_step, layer.self_attn, kv=kv, position=position,
                        need_weights=need_weights, fresh=fresh)
    x, self_w = residual(x, look_back, layer.norm1, layer.dropout, layer.pre_norm)
    look_at_source = partial(_cross_step, layer.cross_attn, kv=cross_kv, mask=src_mask,
                             group=group, need_weights=need_weights)
    x, cross_w = residual(x, look_at_source, layer.norm2, layer.dropout, layer.pre_norm)
    x, _ = residual(x, layer.ffn, layer.norm3, layer.dropout, layer.pre_norm)
    return x, self_w, cross_w


def _self_step(attn: MultiHeadAttention, x: Tensor, kv: Tensor, position: int,
               need_weights: bool = False,
               fresh: list[Tensor] | None = None) -> tuple[Tensor, Tensor | None]:
    """Self-attention of the newest position: x (N, D), its input at ``position``.

    ``kv`` (N, capacity, 2, H, Dh) holds the keys and values of the earlier positions; this
    position's are written into it (or, given ``fresh``, appended to that list). Returns
    (N, D) and, if asked, the (N, H, 1, position + 1) weights. No mask is needed: every
    earlier position may be seen.
    """
    n = x.size(0)
    qkv = attn.qkv_proj(x).view(n, 3, attn.n_heads, attn.d_head)  # (N, 3, H, Dh)
    q = qkv[:, 0].unsqueeze(2)  # (N, H, 1, Dh)
    if fresh is None:  # this position's keys and values, (N, 2, H, Dh), into the buffer
        # select, not kv[:, position], so that a compiled step does not specialise on it
        kv.select(1, position).copy_(qkv[:, 1:])
        past = kv[:, :position + 1]  # (N, T, 2, H, Dh) a view
    else:  # the buffer read as if written: a selection, not a slice of length position
        fresh.append(qkv[:, 1:])  # (which torch.compile would specialise on at 1)
        is_new = torch.arange(position + 1, device=x.device) == position  # (T,)
        past = torch.where(is_new[:, None, None, None], qkv[:, None, 1:],
                           kv[:, :position + 1])  # (N, T, 2, H, Dh)
    past = past.transpose(1, 3)  # (N, H, 2, T, Dh)
    k, v = past[:, :, 0], past[:, :, 1]  # (N, H, T, Dh) views
    out, weights = attn.attend(q, k, v, None, False, need_weights)  # (N, H, 1, Dh)
    return attn.out_proj(out.reshape(n, attn.d_model)), weights


def _cross_step(attn: MultiHeadAttention, x: Tensor, kv: Tensor, mask: Tensor | None,
                group: int = 1, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
    """Cross-attention of the newest position: x (B*G, D) to the encoder's keys and values
    ``kv`` (B, 2, H, S, Dh) from :func:`memory_kv`, mask (B, 1, 1, S): a sentence's G
    hypotheses are one row of G queries. Returns (B*G, D) and, if asked, (B*G, H, 1, S)."""
    n = x.size(0)
    q = attn.q_proj(x).view(-1, group, attn.n_heads, attn.d_head).transpose(1, 2)  # (B,H,G,Dh)
    out, weights = attn.attend(q, kv[:, 0], kv[:, 1], mask, False, need_weights)  # (B,H,G,Dh)
    if weights is not None:
        weights = weights.transpose(1, 2).reshape(n, attn.n_heads, 1, -1)  # (B*G, H, 1, S)
    return attn.out_proj(out.transpose(1, 2).reshape(n, attn.d_model)), weights


def memory_kv(attn: MultiHeadAttention, memory: Tensor) -> Tensor:
    """The encoder output's keys and values for :func:`_cross_step`: (B, S, D) ->
    (B, 2, H, S, Dh), in the dtype attention computes in (cast once, not per step)."""
    return attention_dtype(torch.stack(attn.split_heads(attn.kv_proj(memory), 2), dim=1))
