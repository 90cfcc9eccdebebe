from __future__ import annotations

import math

import pytest
import torch

from tests.test_model import make_model
from tests.toy import toy_accuracy, toy_pairs, train_toy_model
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_mt.decode.layout import PackedLinear, for_decoding, packing_available
from transformer_mt.decode.search import beam_search, greedy
from transformer_mt.model.transformer import DecoderState


@pytest.fixture(scope="module")
def toy_model():
    return train_toy_model()


def toy_sources(n: int = 24, seed: int = 7) -> torch.Tensor:
    pairs = toy_pairs(n, torch.Generator().manual_seed(seed))
    return torch.nn.utils.rnn.pad_sequence([p[0] for p in pairs], batch_first=True,
                                           padding_value=PAD_ID)


def test_tiny_model_learns_to_reverse(toy_model):
    assert toy_accuracy(toy_model) >= 0.95


def test_cached_logits_equal_full_prefix_logits(toy_model, monkeypatch):
    # a key/value buffer of 2 positions at first: it grows (doubles) twice in 6 steps
    monkeypatch.setattr("transformer_mt.model.transformer.MIN_CAPACITY", 2)
    src = toy_sources(5)
    mask = source_mask(src)
    state = toy_model.start_decoding(src, mask)
    prefix = torch.full((5, 1), BOS_ID)
    for _ in range(6):
        cached = toy_model.decode_step(prefix[:, -1], state)  # (B, V)
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


def test_greedy_without_scores_translates_the_same(toy_model):
    """Greedy decoding that skips normalising the logits picks the same tokens."""
    src = toy_sources(30, seed=4)
    model = train_toy_model(steps=30, seed=1)  # an imperfect model: not every output is right
    scored = greedy(model, src, source_mask(src))
    unscored = greedy(model, src, source_mask(src), scores=False)
    assert [h.tokens for h in scored] == [h.tokens for h in unscored]
    assert all(math.isfinite(h.score) and h.score <= 0 for h in scored)
    assert all(math.isnan(h.score) for h in unscored)


def test_beam_size_one_equals_greedy(toy_model):
    src = toy_sources(40, seed=11)
    # an undertrained model makes the comparison meaningful: its outputs are not all perfect
    for model in (toy_model, train_toy_model(steps=30, seed=1)):
        g = greedy(model, src, source_mask(src))
        b = beam_search(model, src, source_mask(src), beam_size=1, alpha=0.0)
        assert [h.tokens for h in g] == [h[0].tokens for h in b]
        for hg, hb in zip(g, b):
            assert hg.score == pytest.approx(hb[0].score, abs=1e-4)


def test_nbest_is_sorted_and_distinct(toy_model):
    src = toy_sources(6)
    results = beam_search(toy_model, src, source_mask(src), beam_size=4, nbest=3)
    for hyps in results:
        assert len(hyps) == 3
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 3


class MarkovModel:
    """A fake model whose next-token distribution depends only on the last token.

    From <bos>: A 0.5, B 0.4, <eos> 0.1. After A: <eos> 0.4, A 0.3, B 0.3. After B: <eos> 0.9,
    A 0.05, B 0.05. Greedy takes A then <eos> (p = 0.2); the best sequence is B <eos> (0.36).
    """

    A, B = 4, 5

    def __init__(self) -> None:
        table = torch.full((6, 6), 1e-9)
        table[BOS_ID, [self.A, self.B, EOS_ID]] = torch.tensor([0.5, 0.4, 0.1])
        table[self.A, [self.A, self.B, EOS_ID]] = torch.tensor([0.3, 0.3, 0.4])
        table[self.B, [self.A, self.B, EOS_ID]] = torch.tensor([0.05, 0.05, 0.9])
        self.logits = table.log()
        self.fed: list[int] = []

    def start_decoding(self, src, src_mask, group=1):
        b = src.size(0)
        return DecoderState(torch.zeros(b, 1, 1), src_mask, torch.zeros(b, 0, 2, 1, 1, 1), group)

    def decode_step(self, last, state):
        self.fed.extend(last.tolist())
        state.offset += 1
        return self.logits[last]

    def decode_prefix(self, prefix, state):
        return self.logits[prefix[:, -1]]


def test_beam_search_finds_what_greedy_misses():
    model = MarkovModel()
    src = torch.tensor([[4, 4, EOS_ID]])
    mask = source_mask(src)
    g = greedy(model, src, mask)[0]
    assert g.tokens == [MarkovModel.A]
    assert g.score == pytest.approx(math.log(0.5 * 0.4), abs=1e-4)
    best = beam_search(model, src, mask, beam_size=2, alpha=0.0)[0][0]
    assert best.tokens == [MarkovModel.B]
    assert best.score == pytest.approx(math.log(0.4 * 0.9), abs=1e-4)


def test_finished_hypotheses_are_never_extended():
    model = MarkovModel()
    src = torch.tensor([[4, 4, 4, 4, EOS_ID]] * 3)
    beam_search(model, src, source_mask(src), beam_size=3, alpha=0.6)
    assert EOS_ID not in model.fed  # no hypothesis ending in <eos> was fed back
    assert PAD_ID not in model.fed


def test_output_length_is_limited():
    model = MarkovModel()
    # always A, and <eos> less likely than anything else: it never stops by itself
    model.logits[MarkovModel.A] = torch.tensor([1e-9, 1e-9, 1e-9, 1e-12, 1.0, 1e-9]).log()
    model.logits[BOS_ID] = model.logits[MarkovModel.A]
    src = torch.tensor([[4, 4, EOS_ID]])
    out = greedy(model, src, source_mask(src), max_len_a=1.0, max_len_b=2)[0]
    assert len(out.tokens) == 5  # 1.0 * 3 source tokens + 2
    beam = beam_search(model, src, source_mask(src), beam_size=2, max_len_a=1.0, max_len_b=2)
    assert len(beam[0][0].tokens) == 5


def test_beams_share_the_encoder_keys_and_values(toy_model, monkeypatch):
    """Cross-attention with one memory row per sentence equals it with a row per hypothesis."""
    monkeypatch.setattr("transformer_mt.model.transformer.MIN_CAPACITY", 2)  # grows, reordered
    src = toy_sources(3)
    mask = source_mask(src)
    k = 4
    rows = torch.arange(3).repeat_interleave(k)  # (B*K,) sentence of each hypothesis
    prefix = torch.randint(4, 12, (3 * k, 5))
    prefix[:, 0] = BOS_ID
    memory = toy_model.encode(src, mask)
    shared = toy_model.decode(prefix, memory, mask, group=k)  # memory: one row per sentence
    expanded = toy_model.decode(prefix, memory[rows], mask[rows])  # one row per hypothesis
    assert torch.allclose(shared, expanded, atol=1e-5)
    # and step by step, with the caches, reordering hypotheses between steps
    state = toy_model.start_decoding(src, mask, group=k)
    order = torch.tensor([1, 0, 3, 2, 4, 5, 6, 7, 11, 10, 9, 8])  # stays within each sentence
    fed = prefix[:, :1]
    for t in range(1, 5):
        cached = toy_model.decode_step(fed[:, -1], state)  # (B*K, V)
        full = toy_model.decode(fed, memory, mask, group=k)[:, -1]
        assert torch.allclose(cached, full, atol=1e-5)
        state.select(order)
        fed = torch.cat([fed[order], prefix[:, t:t + 1]], dim=1)


def test_bf16_weight_copy_computes_what_autocast_computes():
    """Decoding casts the linear weights to bf16 once; under autocast that changes nothing."""
    model = make_model()
    fast = for_decoding(model, "bf16")
    assert for_decoding(fast, "bf16") is fast  # converting again is a no-op
    assert fast.decoder.project.weight.dtype == torch.bfloat16
    assert model.decoder.project.weight.dtype == torch.float32  # the original is untouched
    assert fast.decoder.embed.embedding.weight.dtype == torch.float32  # untied in the copy
    src, tgt = torch.randint(4, 30, (3, 8)), torch.randint(4, 25, (3, 6))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(fast(src, tgt, source_mask(src)), model(src, tgt, source_mask(src)))


@pytest.mark.skipif(not packing_available(torch.device("cpu")), reason="no oneDNN in this torch")
@pytest.mark.parametrize("pack_min", [0, 10**9])
def test_decoding_layout_computes_what_the_model_computes(toy_model, monkeypatch, pack_min):
    """fp32 decoding on the CPU multiplies by oneDNN-packed weights (the large ones) or by
    weights stored transposed: same logits up to rounding, same translations, and the model
    itself is left as it was."""
    monkeypatch.setattr("transformer_mt.decode.layout.PACK_MIN_WEIGHTS", pack_min)
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
    src = toy_sources(40, seed=3)
    mask = source_mask(src)
    tgt = torch.randint(4, toy_model.tgt_vocab_size, (40, 7))
    with torch.inference_mode():
        assert torch.allclose(fast(src, tgt, mask), toy_model(src, tgt, mask), atol=1e-4)
    for search in (greedy, lambda m, s, k: [h[0] for h in beam_search(m, s, k, beam_size=4)]):
        assert [h.tokens for h in search(fast, src, mask)] == [h.tokens for h in
                                                                search(toy_model, src, mask)]


def test_bf16_decoding_steps_follow_the_full_prefix(toy_model):
    """Under bf16 the step keeps its keys and values in the dtype attention computes in (fp32
    on the CPU) and gives the full prefix's logits up to bf16 rounding."""
    fast = for_decoding(toy_model, "bf16")
    src = toy_sources(6)
    mask = source_mask(src)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        state = fast.start_decoding(src, mask)
        prefix = torch.full((6, 1), BOS_ID)
        for _ in range(5):
            cached = fast.decode_step(prefix[:, -1], state).float()  # (B, V)
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
            for s_a, s_b in zip(alone, together):
                for a, b in zip(s_a, s_b):
                    assert a.score == pytest.approx(b.score, abs=1e-4)
        mixed = greedy(Ensemble([model, toy_model]), src, mask)
        assert len(mixed) == 30


def test_sampling_is_seeded_and_top_one_is_greedy(toy_model):
    src = toy_sources(20, seed=9)
    mask = source_mask(src)
    model = train_toy_model(steps=30, seed=1)

    def sample(seed, topk=5, temperature=1.0):
        gen = torch.Generator().manual_seed(seed)
        return [h.tokens for h in greedy(model, src, mask, sample_topk=topk,
                                         temperature=temperature, generator=gen)]

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)
    assert sample(1, topk=1) == [h.tokens for h in greedy(model, src, mask)]
