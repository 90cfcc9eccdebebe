"""The contract between the reference and its fast paths, for decoding (test_equivalence.py:
the model's and training's):

- incremental decoding (``decode/incremental.py``: one position a step, key/value buffer, encoder
  keys/values shared by a sentence's hypotheses) equals re-running the decoder on the whole
  prefix, and translates the same;
- the decoding layouts (``precision.for_decoding``) and ensembles of one equal the model;
- beam search's top-k read by blocks (``decode/graphs.py``, compiled) equals ``topk``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.toy import make_model, toy_sources, train_toy_model
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, PAD_ID
from transformer_mt.decode import incremental
from transformer_mt.decode.graphs import BLOCK, top_k_by_blocks
from transformer_mt.decode.incremental import decode_step, start_decoding
from transformer_mt.decode.search import beam_search, greedy
from transformer_mt.internals.torch_private import packing_available
from transformer_mt.model.transformer import AttentionWeights
from transformer_mt.precision import PackedLinear, for_decoding


def test_cached_logits_equal_full_prefix_logits(toy_model, monkeypatch):
    # a key/value buffer of 2 positions at first: it grows (doubles) twice in 6 steps
    monkeypatch.setattr("transformer_mt.decode.incremental.MIN_CAPACITY", 2)
    src = toy_sources(5)
    mask = source_mask(src)
    state = start_decoding(toy_model, src, mask)
    prefix = torch.full((5, 1), BOS_ID)
    for _ in range(6):
        cached = decode_step(state, prefix[:, -1])  # (B, V)
        full = toy_model.decode(prefix, state.memory, mask)[:, -1]  # (B, V)
        assert torch.allclose(cached, full, atol=1e-5)
        prefix = torch.cat([prefix, cached.argmax(-1, keepdim=True)], dim=1)


@pytest.mark.parametrize("beam", [1, 4])
def test_cache_does_not_change_translations(toy_model, beam):
    src = toy_sources()
    a = beam_search(toy_model, src, source_mask(src), beam, use_cache=True)
    b = beam_search(toy_model, src, source_mask(src), beam, use_cache=False)
    assert [h[0].tokens for h in a] == [h[0].tokens for h in b]
    g1 = greedy(toy_model, src, source_mask(src), use_cache=True)
    g2 = greedy(toy_model, src, source_mask(src), use_cache=False)
    assert [h.tokens for h in g1] == [h.tokens for h in g2]


def test_reused_buffers_change_no_translation(toy_model, monkeypatch):
    """Key/value buffers a finished decoding gave back (``incremental.BUFFERS``) are taken by
    the next one, garbage and all (here: NaN), and translate as fresh ones; growing gives
    the outgrown buffer back; a buffer is kept once, at most ``KEEP`` of them, the largest."""
    pool = incremental.BufferPool()
    monkeypatch.setattr(incremental, "BUFFERS", pool)
    monkeypatch.setattr(incremental, "MIN_CAPACITY", 2)  # so that buffers grow
    src = toy_sources()
    fresh = [beam_search(toy_model, src, source_mask(src), beam, use_cache=True)
             for beam in (1, 4)]
    assert pool.free  # given back: outgrown ones, and the finished decodings' own
    with torch.inference_mode():  # (they were made there)
        for kept in pool.free:
            kept.fill_(torch.nan)
    taken = []  # whether each buffer taken held garbage

    def take(*args):
        buffer = incremental.BufferPool.take(pool, *args)
        taken.append(bool(torch.isnan(buffer).any()))
        return buffer

    monkeypatch.setattr(pool, "take", take)
    again = [beam_search(toy_model, src, source_mask(src), beam, use_cache=True)
             for beam in (1, 4)]
    assert any(taken)  # decoding took what was kept
    assert [[h[0].tokens for h in hyps] for hyps in again] == [
        [h[0].tokens for h in hyps] for hyps in fresh]
    assert [[h[0].score for h in hyps] for hyps in again] == [
        [h[0].score for h in hyps] for hyps in fresh]
    pool.free.clear()
    buffers = [torch.empty(size) for size in (5, 1, 9, 3, 7, 2)]
    for buffer in [*buffers, buffers[2][:4]]:  # the last: a view of one given already
        pool.give(buffer)
    assert [b.numel() for b in pool.free] == [3, 5, 7, 9]  # KEEP = 4, the largest
    taken_one = pool.take((2, 3), torch.empty(0))  # the smallest large enough: the 7
    assert taken_one.shape == (2, 3) and taken_one.data_ptr() == buffers[4].data_ptr()
    assert [b.numel() for b in pool.free] == [3, 5, 9]
    assert pool.take((2,), torch.empty(0, dtype=torch.long)).dtype == torch.long  # a new one
    assert [b.numel() for b in pool.free] == [3, 5, 9]
    with torch.inference_mode():  # kept from inference mode: not written outside it
        pool.give(torch.empty(100))
    assert not pool.take((50,), torch.empty(0)).is_inference()
    with torch.inference_mode():
        assert pool.take((50,), torch.empty(0)).is_inference()
    assert [b.numel() for b in pool.free] == [3, 5, 9]


def test_a_buffer_given_back_under_no_grad_is_written_where_grad_mode_is_on(monkeypatch):
    """The decoder stepped where grad mode is on (a learner's notebook: the weights require
    grad) after a decoding under ``no_grad`` gave its buffers back: a step takes one and
    computes what a fresh buffer does (a view made under ``no_grad`` may not be written
    there: the pool makes its views when it hands a buffer out)."""
    pool = incremental.BufferPool()
    monkeypatch.setattr(incremental, "BUFFERS", pool)
    monkeypatch.setattr(incremental, "MIN_CAPACITY", 2)  # so that buffers grow
    model = make_model(n_encoder_layers=1, n_decoder_layers=1).eval()
    assert all(p.requires_grad for p in model.parameters())
    src = toy_sources(5)

    def logits() -> torch.Tensor:  # (steps, B, V)
        state = start_decoding(model, src, source_mask(src))
        prefix, out = torch.full((5, 1), BOS_ID), []
        for _ in range(4):
            out.append(decode_step(state, prefix[:, -1]).detach())
            prefix = torch.cat([prefix, out[-1].argmax(-1, keepdim=True)], dim=1)
        return torch.stack(out)

    fresh = logits()
    pool.free.clear()
    with torch.no_grad():
        logits()
    assert pool.free  # the buffers it outgrew
    assert torch.equal(logits(), fresh)


def test_beams_share_the_encoder_keys_and_values(toy_model, monkeypatch):
    """Incremental cross-attention with one key/value row per sentence (its hypotheses' queries
    side by side) equals the reference with a memory row per hypothesis."""
    monkeypatch.setattr("transformer_mt.decode.incremental.MIN_CAPACITY", 2)  # grows, reordered
    src = toy_sources(3)
    mask = source_mask(src)
    k = 4
    rows = torch.arange(3).repeat_interleave(k)  # (B*K,) sentence of each hypothesis
    prefix = torch.randint(4, 12, (3 * k, 5))
    prefix[:, 0] = BOS_ID
    memory = toy_model.encode(src, mask)[rows]  # the reference: one row per hypothesis
    # step by step, with the caches, reordering hypotheses between steps
    state = start_decoding(toy_model, src, mask, group=k)
    order = torch.tensor([1, 0, 3, 2, 4, 5, 6, 7, 11, 10, 9, 8])  # stays within each sentence
    fed = prefix[:, :1]
    for t in range(1, 5):
        cached = decode_step(state, fed[:, -1])  # (B*K, V)
        full = toy_model.decode(fed, memory, mask[rows])[:, -1]
        assert torch.allclose(cached, full, atol=1e-5)
        state.select(order)
        memory = memory[order]
        fed = torch.cat([fed[order], prefix[:, t:t + 1]], dim=1)


def test_first_step_decodes_each_sentence_once(toy_model):
    """A sentence's K hypotheses all start from <bos>: the first step decodes one row per
    sentence and copies it, which gives what K rows decoded side by side give (the reference,
    with attention weights asked for, decodes them all)."""
    src = toy_sources(3)
    mask = source_mask(src)
    k = 4
    fed = torch.full((3 * k,), BOS_ID)
    once = start_decoding(toy_model, src, mask, group=k)
    rows_seen = []
    hook = toy_model.decoder.project.register_forward_hook(
        lambda module, args, out: rows_seen.append(args[0].size(0)))
    try:
        shortcut = decode_step(once, fed)  # (B*K, V)
    finally:
        hook.remove()
    assert rows_seen == [3]
    every = start_decoding(toy_model, src, mask, group=k)
    full = decode_step(every, fed, AttentionWeights())  # every row computed
    # fp32 products of 3 rows and of 12 rows may run different oneDNN kernels (on an AMX CPU
    # another blocking, so another order of sums: seen 4.5e-6 and 1.2e-5 on logits of ~10):
    # equal to 1e-5 of the logits' scale; a wrong row copied differs by their whole scale
    tol = 1e-5 * full.detach().abs().max().item()
    assert torch.allclose(shortcut, full, rtol=0, atol=tol)
    assert once.self_kv is not None and every.self_kv is not None
    assert once.self_kv.size(0) == 3 * k
    # the first position only: the buffers' later positions are not written yet (torch.empty:
    # whatever memory held, NaN included, so the scale is taken from the written part)
    first, first_every = once.self_kv[:, :1], every.self_kv[:, :1]
    assert torch.allclose(first, first_every, rtol=0,
                          atol=1e-5 * first_every.detach().abs().max().item())
    fed = shortcut.argmax(-1)  # the next steps go on from the copied keys and values
    assert torch.allclose(decode_step(once, fed), decode_step(every, fed), rtol=0, atol=tol)


def test_bf16_weight_copy_computes_what_autocast_computes(toy_model):
    """Decoding casts the linear weights to bf16 once: kept as ``nn.Linear`` (what compiling
    reads), under autocast that changes nothing; packed for oneDNN (how the CPU decodes), the
    same products up to bf16's rounding and the same translations."""
    model = make_model()
    plain = for_decoding(model, "bf16", pack=False)
    assert for_decoding(plain, "bf16") is plain  # converting again is a no-op
    assert isinstance(plain.decoder.project, torch.nn.Linear)
    assert plain.decoder.project.weight.dtype == torch.bfloat16
    assert model.decoder.project.weight.dtype == torch.float32  # the original is untouched
    assert plain.decoder.embed.embedding.weight.dtype == torch.float32  # untied in the copy
    src, tgt = torch.randint(4, 30, (3, 8)), torch.randint(4, 25, (3, 6))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(plain(src, tgt, source_mask(src)), model(src, tgt, source_mask(src)))
    if not packing_available(torch.device("cpu"), bf16=True):
        return  # (an AVX2 CPU: nn.Linear layers, as above)
    packed = for_decoding(toy_model, "bf16")
    assert for_decoding(packed, "bf16") is packed
    layers = [m for m in packed.modules() if isinstance(m, (torch.nn.Linear, PackedLinear))]
    assert layers and all(isinstance(m, PackedLinear) and m.weight.dtype == torch.bfloat16
                          for m in layers)  # every one, the small ones too
    plain = for_decoding(toy_model, "bf16", pack=False)
    src = toy_sources(40, seed=3)
    mask = source_mask(src)
    tgt = torch.randint(4, toy_model.tgt_vocab_size, (40, 7))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        ours, theirs = packed(src, tgt, mask), plain(src, tgt, mask)
        assert ours.dtype == theirs.dtype
        assert torch.allclose(ours.float(), theirs.float(), rtol=0,
                              atol=0.02 * theirs.float().abs().max().item())
        for beam in (1, 4):
            assert [h.tokens for h in _best(packed, src, mask, beam)] == [
                h.tokens for h in _best(plain, src, mask, beam)]


def _best(model, src: torch.Tensor, mask: torch.Tensor, beam: int) -> list:
    """Each sentence's translation, greedy's or the beam's best, as commands decode."""
    if beam == 1:
        return greedy(model, src, mask, use_cache=True)
    return [h[0] for h in beam_search(model, src, mask, beam_size=beam, use_cache=True)]


@pytest.mark.skipif(not packing_available(torch.device("cpu")), reason="no oneDNN in this torch")
@pytest.mark.parametrize("pack_min", [0, 10**9])
def test_decoding_layout_computes_what_the_model_computes(toy_model, monkeypatch, pack_min):
    """fp32 decoding on the CPU multiplies by oneDNN-packed weights (the large ones) or by
    weights stored transposed: same logits up to rounding, same translations, and the model
    itself is left as it was."""
    monkeypatch.setattr("transformer_mt.precision.PACK_MIN_WEIGHTS", pack_min)
    fast = for_decoding(toy_model, "fp32", torch.device("cpu"))
    assert for_decoding(fast, "fp32", torch.device("cpu")) is fast
    project = fast.decoder.project
    if pack_min == 0:
        assert isinstance(project, PackedLinear)
    else:
        assert isinstance(project, torch.nn.Linear) and project.weight.stride() == (
            1, project.weight.size(0))  # (V, D) stored as (D, V)
        assert torch.equal(project.weight, toy_model.decoder.project.weight)
    assert isinstance(toy_model.decoder.project, torch.nn.Linear)
    assert toy_model.decoder.project.weight.is_contiguous()
    assert toy_model.decoder.project.weight is toy_model.decoder.embed.weight  # still tied
    assert fast.decoder.embed.weight is toy_model.decoder.embed.weight  # shared, not copied
    assert fast.encoder.layers[0].norm1.weight is toy_model.encoder.layers[0].norm1.weight
    assert not any(isinstance(m, PackedLinear) for m in toy_model.modules())
    assert not any(isinstance(m, torch.nn.Dropout) for m in fast.modules())  # eval's identity
    assert any(isinstance(m, torch.nn.Dropout) for m in toy_model.modules())
    src = toy_sources(40, seed=3)
    mask = source_mask(src)
    tgt = torch.randint(4, toy_model.tgt_vocab_size, (40, 7))
    with torch.inference_mode():
        assert torch.allclose(fast(src, tgt, mask), toy_model(src, tgt, mask), atol=1e-4)
    for search in (lambda m, s, k: greedy(m, s, k, use_cache=True),  # as commands decode
                   lambda m, s, k: [h[0] for h in beam_search(m, s, k, beam_size=4,
                                                              use_cache=True)]):
        assert [h.tokens for h in search(fast, src, mask)] == [h.tokens for h in
                                                                search(toy_model, src, mask)]


@pytest.mark.skipif(not packing_available(torch.device("cpu")), reason="no oneDNN in this torch")
def test_a_packed_layer_multiplies_one_row_with_blas_and_more_with_onednn(toy_model,
                                                                           monkeypatch):
    """In fp32 a packed layer's one row (a lone sentence's greedy step) is ``F.linear``'s
    product with the weight stored transposed, two rows and more oneDNN's packed product:
    equal up to rounding; a lone sentence translates as the model does, greedy and beam."""
    from transformer_mt.internals import torch_private

    monkeypatch.setattr("transformer_mt.precision.PACK_MIN_WEIGHTS", 0)
    layer = for_decoding(toy_model, "fp32", torch.device("cpu")).decoder.project
    assert isinstance(layer, PackedLinear)
    assert layer.weight.stride() == (1, layer.weight.size(0))  # (V, D) stored as (D, V)
    plain = toy_model.decoder.project
    x = torch.randn(3, 1, plain.in_features, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        one, rows = layer(x[0]), layer(x)  # (1, V); (3, 1, V)
        assert torch.equal(one, torch.nn.functional.linear(x[0], layer.weight, layer.bias))
        assert torch.equal(rows, torch_private.packed_linear(x, layer.packed, layer.bias))
        for ours in (one, rows[0]):
            assert torch.allclose(ours, plain(x[0]), atol=1e-5)
    fast = for_decoding(toy_model, "fp32", torch.device("cpu"))
    for src in toy_sources(6, seed=4).split(1):
        src = src[:, (src != PAD_ID).any(dim=0)]  # a lone sentence, no padding
        mask = source_mask(src)
        for beam in (1, 4):
            assert [h.tokens for h in _best(fast, src, mask, beam)] == [
                h.tokens for h in _best(toy_model, src, mask, beam)]


def test_bf16_decoding_steps_follow_the_full_prefix(toy_model):
    """Under bf16 the step keeps its keys and values in the dtype attention computes in (fp32
    on the CPU) and gives the full prefix's logits up to bf16 rounding."""
    fast = for_decoding(toy_model, "bf16")
    src = toy_sources(6)
    mask = source_mask(src)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        state = start_decoding(fast, src, mask)
        prefix = torch.full((6, 1), BOS_ID)
        for _ in range(5):
            cached = decode_step(state, prefix[:, -1]).float()  # (B, V)
            full = fast.decode(prefix, state.memory, mask)[:, -1].float()
            assert state.self_kv is not None and state.self_kv.dtype == torch.float32
            assert torch.allclose(cached, full, atol=0.15), (cached - full).abs().max()
            prefix = torch.cat([prefix, full.argmax(-1, keepdim=True)], dim=1)


def test_an_ensemble_of_one_or_of_copies_equals_the_model(toy_model):
    from transformer_mt.decode.ensemble import Ensemble

    src = toy_sources(30, seed=5)
    mask = source_mask(src)
    weak = train_toy_model(steps=30, seed=1)  # an imperfect model: ties are unlikely
    for model in (toy_model, weak):
        alone = beam_search(model, src, mask, beam_size=3, nbest=2)
        for ensemble in (Ensemble([model]), Ensemble([model, model])):
            together = beam_search(ensemble, src, mask, beam_size=3, nbest=2)
            assert [[h.tokens for h in s] for s in together] == [[h.tokens for h in s]
                                                                 for s in alone]
            for s_a, s_b in zip(alone, together, strict=True):
                for a, b in zip(s_a, s_b, strict=True):
                    assert a.score == pytest.approx(b.score, abs=1e-4)
        mixed = greedy(Ensemble([model, toy_model]), src, mask)
        assert len(mixed) == 30


def test_an_ensembles_next_token_log_probabilities_are_its_members_mean_probability(toy_model):
    """log of the mean of the members' softmaxes, computed plainly in float64, for three
    different models (the decoding states' logits, every prefix row)."""
    from transformer_mt.decode.ensemble import Ensemble
    from transformer_mt.decode.search import start_decoding as start

    members = [toy_model, train_toy_model(steps=30, seed=1), train_toy_model(steps=10, seed=2)]
    src = toy_sources(5, seed=7)
    mask = source_mask(src)
    prefix = torch.cat([torch.full((5, 1), BOS_ID), src[:, :3]], dim=1)  # (5, 4)
    with torch.no_grad():
        ours = start(Ensemble(members), src, mask).next_logits(prefix)  # (5, V)
        probs = [start(m, src, mask).next_logits(prefix).double().softmax(-1) for m in members]
    expected = torch.stack(probs).mean(0).log()
    assert ours.dtype == torch.float32 and torch.allclose(ours.double(), expected, atol=1e-5)



@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 6), vocab=st.integers(1, 24 * BLOCK), count=st.integers(1, 20),
       barred=st.sampled_from([0.0, 0.5, 0.99]), ties=st.booleans(),
       seed=st.integers(0, 2**16))
def test_a_top_k_read_by_blocks_is_topk(rows, vocab, count, barred, ties, seed):
    """The compiled choices' per-row top-k (``graphs.top_k_by_blocks``) is ``topk``'s: the
    same values, best first, each index's own; the same indices where no values are equal.
    Rows of log-probabilities with tokens barred (-inf, as <pad> or a forced step's others),
    values rounded into ties, vocabularies with and without a tail after the last whole
    block, and too few blocks (``topk`` itself)."""
    count = min(count, vocab)
    generator = torch.Generator().manual_seed(seed)
    logprobs = torch.randn(rows, vocab, generator=generator).log_softmax(dim=-1)
    if ties:
        logprobs = (logprobs * 4).round() / 4
    logprobs[torch.rand(rows, vocab, generator=generator) < barred] = -torch.inf
    top, index = top_k_by_blocks(logprobs, count, count)
    want, want_index = logprobs.topk(count, dim=-1)
    assert torch.equal(top, want)
    assert torch.equal(logprobs.gather(1, index), top)  # each index's own value
    assert all(len(set(row)) == count for row in index.tolist())  # distinct indices
    for row, values in enumerate(logprobs.tolist()):
        if len(set(values)) == vocab:  # no equal values
            assert index[row].tolist() == want_index[row].tolist()
