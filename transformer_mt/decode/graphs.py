"""The graphs ``--compile`` exports and compiles (``decode/compiled.py``): modules whose
``forward`` is a piece of incremental decoding (``decode/incremental.py``) as it is, with
inputs of fixed layout and sizes that vary within stated ranges, so that ``torch.export``
can trace them once for every source length, position and number of hypotheses.

- :class:`EncoderGraph`: a lone sentence's encoder and its keys and values for every layer
  (its products oneDNN's, as a batch's step's: a source's tokens are rows enough);
- :class:`StepGraph`: a step of a lone sentence's one hypothesis (greedy), whose matrix
  products inductor generates for that row (its CPP template);
- :class:`BeamGraph`: a step of a lone sentence's beam and beam search's choice from it, in
  one (its products the template's for the beam's few rows), each hypothesis's past read
  through its ancestors (no buffer reordered);
- :class:`BatchGraph`: a step of a batch of sentences, each with a group of hypotheses (greedy:
  one; beam search: the beam), its padding masked, whose products are oneDNN's packed ones
  (faster from a few dozen rows on);
- :class:`ChoiceGraph`: beam search's decisions at a step (``decode/beam_step.py``), each
  hypothesis's best tokens read by blocks (:func:`top_k_by_blocks`);

and :func:`exported`: each one's module, made-up inputs and the sizes that vary, to export.

Attention is :class:`LoopAttention` in all of them: written as the loops it is.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_mt.decode import incremental
from transformer_mt.decode.beam_step import (
    choose_among,
    eos_only,
    never_produced,
    step_logprobs,
)
from transformer_mt.decode.incremental import decoder_step
from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.transformer import Transformer
from transformer_mt.precision import autocast, shared_copy

if TYPE_CHECKING:
    from transformer_mt.decode.compiled import CompiledDecoding

MAX_GROUP = 64  # the widest beam the batch graph takes
MAX_SENTENCES = 4096  # the most sentences a batch graph's step takes

# a graph to export: the module, its example inputs, the sizes that vary (torch.export's)
Exported = tuple[nn.Module, tuple[Tensor, ...], dict[str, Any]]


class LoopAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` whose ``softmax(QK^T/sqrt(d))V`` is written as products and
    sums, computed in fp32, which inductor fuses into a loop or two around a step's few rows.

    A step's attention is tiny (a row of queries against a few dozen keys); SDPA's kernel took
    ~15 us a call there, six calls a step, and inductor turns a written-out matmul-softmax-
    matmul back into that kernel. Equal to SDPA up to rounding
    (``tests/unit/test_compiled_keys.py``).
    """

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
               need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """q (B, H, Tq, Dh), k and v (B, H, Tk, Dh) -> (B, H, Tq, Dh)."""
        if need_weights or is_causal:
            return super().attend(q, k, v, mask, is_causal, need_weights)
        dtype, q, k, v = q.dtype, q.float(), k.float(), v.float()
        scores = (q[..., :, None, :] * k[..., None, :, :]).sum(-1) / math.sqrt(q.size(-1))
        if mask is not None:  # (B, H, Tq, Tk) above; the mask broadcasts to it
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)  # (B, H, Tq, Tk)
        return (weights[..., None] * v[..., None, :, :]).sum(-2).to(dtype), None


def loop_attention_copy(model: Transformer) -> Transformer:
    """A copy of ``model`` (its tensors shared) whose attention is :class:`LoopAttention`."""
    twin = shared_copy(model)
    for module in twin.modules():
        if isinstance(module, MultiHeadAttention):
            module.__class__ = LoopAttention
    return twin


class SearchGraph(nn.Module):
    """A graph that computes what search chooses from: the logits as
    :func:`~transformer_mt.decode.beam_step.candidate_logits` makes them, from vectors (the
    graph's constants) added or selected, where inductor's loops compared indices and read a
    bool mask (~15 us a step each)."""

    never: Tensor  # (V,) 0, -inf for <pad> and <bos>
    eos_only: Tensor  # (V,) -inf, 0 for <eos>

    def __init__(self, model: Transformer, precision: str) -> None:
        super().__init__()
        self.model, self.precision = model, precision
        vocab, device = model.tgt_vocab_size, next(model.parameters()).device
        self.register_buffer("never", never_produced(vocab, device), persistent=False)
        self.register_buffer("eos_only", eos_only(vocab, device), persistent=False)

    def candidates(self, logits: Tensor, at_limit: Tensor) -> Tensor:
        """``candidate_logits(logits, at_limit)``: (N, V) logits, ``at_limit`` (N, 1) bool."""
        return torch.where(at_limit, self.eos_only, logits.float() + self.never)


class StepGraph(SearchGraph):
    """What is exported for a lone sentence's greedy steps: :func:`decoder_step` for its
    newest token ``last`` (1,) at the position ``length.size(0) - 1`` (only ``length``'s size
    is read: a size the graph may vary, where a number would be fixed), with ``kv`` (1,
    capacity, L, 2, H, Dh) the whole key/value buffer (read only: a slice of it would have to
    be copied to the layout the graph was exported for) and ``cross_kv`` (1, L, 2, H, S, Dh)
    the encoder's; and greedy search's pick from it (``decode/search.py``), at the length
    limit ``limits`` (1,) and with what a forced prefix bars (``barred`` (1, V): -inf, 0).
    Returns the logits (1, V), this position's keys and values (1, L, 2, H, Dh), for the
    caller to write (a graph writing into its input copies the whole buffer), the token picked
    (1,) and its log-probability (1,)."""

    def forward(self, last: Tensor, kv: Tensor, length: Tensor, cross_kv: Tensor,
                limits: Tensor, barred: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        fresh: list[Tensor] = []
        position = length.size(0) - 1
        with autocast(last.device, self.precision):
            logits = decoder_step(self.model, last, position, kv, cross_kv, None,
                                  last.size(0), fresh=fresh)
        z = self.candidates(logits, (position >= limits)[:, None])  # (1, V)
        token = (z + barred).argmax(dim=-1)  # (1,) the first best, as max's index is
        logprob = z.log_softmax(dim=-1).gather(1, token[:, None]).squeeze(1)  # (1,)
        return logits, torch.stack(fresh, dim=1), token, logprob


class BeamGraph(SearchGraph):
    """What is exported for a lone sentence's beam search: a step of its K hypotheses and the
    search's choice from it (:func:`~transformer_mt.decode.beam_step.choose`), in one graph.

    The key/value buffer is never reordered: row ``h`` of ``kv`` (K, capacity, L, 2, H, Dh)
    at a position holds what hypothesis ``h`` of that step wrote, and ``ancestors`` (K, T)
    says, for each hypothesis now, the row its past was written in at each position (its own,
    ``h``, at the newest): a step reads each hypothesis's past through it (``kv[ancestors,
    positions]``, which inductor reads in its loops, never copied). Reordering the buffer
    instead copied every filled position of every layer at each step.

    ``prefix`` (K, T): the hypotheses' tokens, ``<bos>`` first (T - 1: the position fed);
    ``cross_kv`` (1, L, 2, H, S, Dh) the encoder's keys and values; ``barred`` (1, V): -inf
    for the tokens a forced prefix bars, 0 for the others; ``scores`` (1, K),
    ``n_finished`` (1,), ``limits`` (1,) as :func:`choose` takes them. Returns the
    :class:`Choice`'s tensors in its order, then this position's keys and values (K, L, 2, H,
    Dh) for the caller to write at row ``h``, and the next step's prefix and ancestors (K,
    T + 1) each.
    """

    def __init__(self, model: Transformer, precision: str, widest: int) -> None:
        super().__init__(model, precision)
        self.widest = widest

    def forward(self, prefix: Tensor, kv: Tensor, ancestors: Tensor, cross_kv: Tensor,
                barred: Tensor, scores: Tensor, n_finished: Tensor,
                limits: Tensor) -> tuple[Tensor, ...]:
        k, length = prefix.shape
        position = length - 1
        past = kv[ancestors, torch.arange(length, device=kv.device)]  # (K, T, L, 2, H, Dh)
        fresh: list[Tensor] = []
        with autocast(prefix.device, self.precision):
            logits = decoder_step(self.model, prefix[:, -1], position, past, cross_kv, None, k,
                                  fresh=fresh)  # (K, V)
        z = self.candidates(logits, (position >= limits)[:, None])  # (K, V)
        logprobs = step_logprobs(z, k, barred)  # (K, V), then what forcing bars
        row_best = top_k_by_blocks(logprobs, 2 * k, 2 * self.widest)
        choice = choose_among(row_best, scores, n_finished, limits, position)
        keep = torch.arange(k, device=prefix.device)[:, None]  # (K, 1) each its own row next
        return (*choice, torch.stack(fresh, dim=1),
                torch.cat([prefix[choice.rows], choice.tokens.reshape(-1, 1)], dim=1),
                torch.cat([ancestors[choice.rows], keep], dim=1))


class EncoderGraph(nn.Module):
    """What is exported for a lone sentence's source: :func:`incremental.encode_source` of
    ``src`` (1, S) (no padding, so no mask): the encoder output (1, S, D) and the keys and
    values of every decoder layer (1, L, 2, H, S, Dh)."""

    def __init__(self, model: Transformer, precision: str) -> None:
        super().__init__()
        self.model, self.precision = model, precision

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        with autocast(src.device, self.precision):
            return incremental.encode_source(self.model, src, None)


class BatchGraph(nn.Module):
    """What is exported for batches: :class:`StepGraph`'s step for ``last`` (B, G), the newest
    tokens of B sentences' G hypotheses each, with ``kv`` (R, capacity, L, 2, H, Dh) the
    whole buffer, read through ``ancestors`` (B, G, T): the row each hypothesis's keys and
    values are in at each position (as :class:`BeamGraph` reads them: the buffer is never
    reordered, nor compacted when sentences leave), ``cross_kv`` (B, L, 2, H, S, Dh) and
    ``src_mask`` (B, 1, 1, S). Returns the logits (B*G, V) and this position's keys and
    values (B*G, L, 2, H, Dh)."""

    def __init__(self, model: Transformer, precision: str) -> None:
        super().__init__()
        self.model, self.precision = model, precision

    def forward(self, last: Tensor, kv: Tensor, ancestors: Tensor, cross_kv: Tensor,
                src_mask: Tensor) -> tuple[Tensor, Tensor]:
        group, length = last.size(1), ancestors.size(2)
        past = kv[ancestors.flatten(0, 1), torch.arange(length, device=kv.device)]
        fresh: list[Tensor] = []
        with autocast(last.device, self.precision):
            logits = decoder_step(self.model, last.reshape(-1), length - 1, past, cross_kv,
                                  src_mask, group, fresh=fresh)
        return logits, torch.stack(fresh, dim=1)


class ChoiceGraph(nn.Module):
    """What is exported of beam search's step: :func:`~transformer_mt.decode.beam_step.choose`
    for N sentences of K hypotheses, ``z`` (N, K, V) (the sizes of N*K rows could not vary
    apart), ``step`` a 0-d tensor, ``barred`` (N, V) (zeros: nothing barred); returns the
    :class:`Choice`'s tensors in its order.
    Each hypothesis's 2K best tokens are read by :func:`top_k_by_blocks` (``widest``: the
    widest beam, K, it is exported for)."""

    def __init__(self, widest: int) -> None:
        super().__init__()
        self.widest = widest

    def forward(self, z: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor,
                step: Tensor, barred: Tensor) -> tuple[Tensor, ...]:
        count = 2 * scores.size(1)
        logprobs = step_logprobs(z.flatten(0, 1), scores.size(1), barred)  # (N*K, V)
        row_best = top_k_by_blocks(logprobs, count, 2 * self.widest)
        return tuple(choose_among(row_best, scores, n_finished, limits, step))


BLOCK = 64  # tokens a block of a row in :func:`top_k_by_blocks`


def top_k_by_blocks(values: Tensor, count: int, most: int) -> tuple[Tensor, Tensor]:
    """``values.topk(count, dim=-1)`` of (R, V) values, read as blocks of ``BLOCK``: the
    ``count`` best of each row, best first, and their indices, (R, count) each; ``most``: the
    largest ``count`` it may be called for (blocks are read where a row has that many).

    An index among a row's ``count`` best lies in one of the ``count`` blocks with the highest
    maxima (else ``count`` blocks would each hold a better value), or in the tail after the
    last whole block; so the top-k of those ``count * BLOCK`` candidates is the row's (equal
    values aside, which either order ranks alike:
    ``tests/unit/test_decoding_equivalence.py``). The maxima are one pass over the row, and
    ``topk`` over V values was the slow part of beam search's choices: compiled, 29 against
    54 us a step of a lone beam of 5, 0.29 against 0.70 ms for 32 sentences' beams (V = 6,190;
    docs/benchmarks.md).
    """
    rows, vocab = values.shape
    whole = vocab // BLOCK * BLOCK
    if whole // BLOCK < most:  # too few blocks to choose from
        return values.topk(count, dim=-1)
    blocks = values[:, :whole].view(rows, -1, BLOCK)  # (R, V // BLOCK, BLOCK) a view
    best = blocks.amax(dim=-1).topk(count, dim=-1).indices  # (R, count) the best blocks
    candidates = blocks.gather(1, best[..., None].expand(-1, -1, BLOCK)).flatten(1)
    offsets = torch.arange(BLOCK, device=values.device)
    index = (best[..., None] * BLOCK + offsets).flatten(1)  # (R, count * BLOCK) each
    if whole < vocab:  # and the tail's
        candidates = torch.cat([candidates, values[:, whole:]], dim=1)
        tail = torch.arange(whole, vocab, device=values.device).expand(rows, -1)
        index = torch.cat([index, tail], dim=1)
    top, at = candidates.topk(count, dim=-1)  # (R, count)
    return top, index.gather(1, at)


def exported(decoding: CompiledDecoding, name: str, precision: str) -> Exported:
    """What ``decoding`` (a :class:`~transformer_mt.decode.compiled.CompiledDecoding`) exports
    as graph ``name``: the module, made-up inputs (a source of 3 tokens; the buffers as
    decoding makes them, at position 3) and the sizes that vary: the source length, the
    position and (``beam``) the hypotheses, from 2 to ``widest_beam``; a batch's sentences,
    hypotheses and buffer capacity too."""
    plain, device = decoding.plain, next(decoding.model.parameters()).device
    src = torch.tensor([[EOS_ID + 1, EOS_ID + 2, EOS_ID]], device=device)  # (1, 3)
    source = torch.export.Dim("source", min=1, max=decoding.max_source)
    positions = torch.export.Dim("positions", min=1, max=decoding.max_positions)
    if name == "encode":
        return EncoderGraph(plain, precision), (src,), {"src": {1: source}}
    if name == "batch":
        return _batch_export(decoding, precision, source, positions)
    if name == "choose":
        return _choice_export(decoding)
    rows = 1 if name == "one" else 3
    with torch.inference_mode(), autocast(device, precision):
        state = incremental.start_decoding(decoding.model, src, source_mask(src), rows)
        kv = torch.zeros_like(state.reserve(rows)[:, :8])  # (rows, 8, L, 2, H, Dh)
    capacity = torch.export.Dim("capacity", min=2, max=2 * decoding.max_positions)
    cross_kv = state.cross_kv.contiguous()  # (1, L, 2, H, S, Dh)
    if name == "one":
        last = torch.full((rows,), BOS_ID, dtype=torch.long, device=device)
        length = torch.empty(4, dtype=torch.long, device=device)
        limits = torch.tensor([9], device=device)
        barred = torch.zeros(1, decoding.tgt_vocab_size, device=device)
        return StepGraph(plain, precision), (last, kv, length, cross_kv, limits, barred), {
            "last": None, "kv": {1: capacity}, "length": {0: positions},
            "cross_kv": {4: source}, "limits": None, "barred": None}
    hypotheses = torch.export.Dim("hypotheses", min=2, max=decoding.widest_beam)
    prefix = torch.full((rows, 4), BOS_ID, dtype=torch.long, device=device)  # (K, T)
    ancestors = torch.tensor([[0, 0, 1, 0], [1, 0, 0, 1], [2, 1, 2, 2]], device=device)
    barred = torch.zeros(1, decoding.tgt_vocab_size, device=device)
    scores = torch.tensor([[-1.0, -2.0, -3.0]], device=device)
    n_finished, limits = torch.tensor([1], device=device), torch.tensor([9], device=device)
    return (BeamGraph(plain, precision, decoding.widest_beam),
            (prefix, kv, ancestors, cross_kv, barred, scores, n_finished, limits), {
                "prefix": {0: hypotheses, 1: positions}, "kv": {0: hypotheses, 1: capacity},
                "ancestors": {0: hypotheses, 1: positions}, "cross_kv": {4: source},
                "barred": None, "scores": {1: hypotheses}, "n_finished": None,
                "limits": None})

def _batch_export(decoding: CompiledDecoding, precision: str, source: Any,
              positions: Any) -> Exported:
    """:func:`exported` of ``batch``: 4 sentences (padded), 3 hypotheses each, a buffer of 8
    positions."""
    device = next(decoding.model.parameters()).device
    src = torch.tensor([[EOS_ID + 1, EOS_ID + 2, EOS_ID + 3, EOS_ID]] * 4, device=device)
    src[1:, 2:] = PAD_ID
    src[1:, 1] = EOS_ID  # (4, 4): one of 4 tokens, three of 2
    sentences, group = src.size(0), 3
    with torch.inference_mode(), autocast(device, precision):
        state = incremental.start_decoding(decoding.model, src, source_mask(src), group)
        kv = torch.zeros_like(state.reserve(sentences * group))  # (B*G, C, L, 2, H, Dh)
    kv = torch.cat([kv, kv[:2]])[:, :8].contiguous()  # (B*G + 2, 8, ...): rows to spare
    last = torch.full((sentences, group), BOS_ID, dtype=torch.long, device=device)
    generator = torch.Generator(device).manual_seed(0)
    ancestors = torch.randint(0, kv.size(0), (sentences, group, 4), generator=generator,
                              device=device)  # at position 3
    batch = torch.export.Dim("sentences", min=1, max=MAX_SENTENCES)
    hypotheses = torch.export.Dim("hypotheses", min=1, max=MAX_GROUP)
    rows = torch.export.Dim("rows", min=2, max=MAX_SENTENCES * MAX_GROUP)
    capacity = torch.export.Dim("capacity", min=2, max=2 * decoding.max_positions)
    shapes = {"last": {0: batch, 1: hypotheses}, "kv": {0: rows, 1: capacity},
              "ancestors": {0: batch, 1: hypotheses, 2: positions},
              "cross_kv": {0: batch, 4: source}, "src_mask": {0: batch, 3: source}}
    return (BatchGraph(decoding.plain, precision),
            (last, kv, ancestors, state.cross_kv.contiguous(), source_mask(src)), shapes)

def _choice_export(decoding: CompiledDecoding) -> Exported:
    """:func:`exported` of ``choose``: 3 sentences of 4 hypotheses, at step 5."""
    device = next(decoding.model.parameters()).device
    sentences, group = 3, min(4, decoding.widest_choice)
    generator = torch.Generator(device).manual_seed(0)
    z = torch.randn(sentences, group, decoding.tgt_vocab_size, generator=generator,
                    device=device)
    scores = torch.randn(sentences, group, generator=generator, device=device)
    n_finished = torch.zeros(sentences, dtype=torch.long, device=device)
    limits = torch.full((sentences,), 9, dtype=torch.long, device=device)
    batch = torch.export.Dim("sentences", min=1, max=MAX_SENTENCES)
    hypotheses = torch.export.Dim("hypotheses", min=1, max=decoding.widest_choice)
    barred = torch.zeros(sentences, decoding.tgt_vocab_size, device=device)
    shapes = {"z": {0: batch, 1: hypotheses}, "scores": {0: batch, 1: hypotheses},
              "n_finished": {0: batch}, "limits": {0: batch}, "step": None,
              "barred": {0: batch}}
    return ChoiceGraph(decoding.widest_choice), (z, scores, n_finished, limits,
                           torch.tensor(5, device=device), barred), shapes
