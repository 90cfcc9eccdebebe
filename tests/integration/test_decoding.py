from __future__ import annotations

import collections
import itertools
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.toy import toy_accuracy, toy_sources, train_toy_model
from transformer_mt.config import ModelConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from transformer_mt.decode.beam_step import StepByStep
from transformer_mt.decode.search import beam_search, greedy

aten = torch.ops.aten


def test_tiny_model_learns_to_reverse(toy_model):
    # 0.96 to 1.0 on the CPUs here, below 0.95 on a 16-thread Intel (rounding steers the 500
    # steps); an untrained model scores ~0.1, one that learned only the length ~0.2
    assert toy_accuracy(toy_model) >= 0.9


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
        for hg, hb in zip(g, b, strict=True):
            assert hg.score == pytest.approx(hb[0].score, abs=1e-4)


def test_nbest_is_sorted_and_distinct(toy_model):
    src = toy_sources(6)
    results = beam_search(toy_model, src, source_mask(src), beam_size=4, nbest=3)
    for hyps in results:
        assert len(hyps) == 3
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 3


class MarkovModel(StepByStep):
    """A fake model whose next-token distribution depends only on the last token (its own
    decoding state, deciding step by step).

    From <bos>: A 0.5, B 0.4, <eos> 0.1. After A: <eos> 0.4, A 0.3, B 0.3. After B: <eos> 0.9,
    A 0.05, B 0.05. Greedy takes A then <eos> (p = 0.2); the best sequence is B <eos> (0.36).
    """

    A, B = 4, 5
    cfg = ModelConfig()  # only its length limit (max_output_tokens) is read

    def __init__(self) -> None:
        table = torch.full((6, 6), 1e-9)
        table[BOS_ID, [self.A, self.B, EOS_ID]] = torch.tensor([0.5, 0.4, 0.1])
        table[self.A, [self.A, self.B, EOS_ID]] = torch.tensor([0.3, 0.3, 0.4])
        table[self.B, [self.A, self.B, EOS_ID]] = torch.tensor([0.05, 0.05, 0.9])
        self.logits = table.log()
        self.fed: list[int] = []

    def start_decoding(self, src, src_mask, group=1):
        return self

    def next_logits(self, prefix):
        self.fed.extend(prefix[:, -1].tolist())
        return self.logits[prefix[:, -1]]

    def select(self, rows, sentences=None):
        pass


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


WAITING = {aten._local_scalar_dense.default, aten.is_nonzero.default, aten.nonzero.default,
           aten.masked_select.default, aten.equal.default}


class _WaitCounter(TorchDispatchMode):
    """Counts, per decoding step, the operators that make the host wait for a GPU: reading a
    value (``item``, ``bool``), ``nonzero`` and boolean-mask indexing (their output size depends
    on the data). A step starts at each ``next_logits`` call."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[list[int]] = []  # [waits, rows decoded]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        mask_index = func.overloadpacket in (aten.index, aten.index_put, aten.index_put_) and any(
            isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in args[1])
        if self.steps and (func in WAITING or mask_index):
            self.steps[-1][0] += 1
        return func(*args, **(kwargs or {}))


class _EndlessModel(MarkovModel):
    """Always A, <eos> least likely: every sentence runs to its length limit."""

    def __init__(self, counter: _WaitCounter) -> None:
        super().__init__()
        self.counter = counter
        self.logits[BOS_ID] = self.logits[self.A] = torch.tensor(
            [1e-9, 1e-9, 1e-9, 1e-12, 1.0, 1e-9]).log()

    def next_logits(self, prefix):
        self.counter.steps.append([0, prefix.size(0)])
        return self.logits[prefix[:, -1]]


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_decoding_waits_for_the_device_only_where_it_must(search):
    """No hidden wait: once a sentence is at its length limit, the others' steps add none
    (it was a masked write, one wait a step). On a GPU the planned waits are transfers
    (``.cpu()``, ``.tolist()``), which on the CPU run no operator: what remains countable here is
    greedy's test of its host copy (1 a step) and, where sentences end, the rows to drop."""
    src = torch.tensor([[4, EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID], [4, 4, 4, 4, 4, EOS_ID]])
    counter = _WaitCounter()
    with counter:
        if search == "greedy":
            greedy(_EndlessModel(counter), src, source_mask(src), max_len_a=1.0, max_len_b=1)
        else:
            beam_search(_EndlessModel(counter), src, source_mask(src), beam_size=2, alpha=0.0,
                        max_len_a=1.0, max_len_b=1)
    rows = [n for _, n in counter.steps]
    assert rows == [rows[0]] * 4 + [rows[0] // 2] * 4  # the short one ends at step 4 (limit 3)
    quiet = [w for (w, n), (_, after) in itertools.pairwise(counter.steps) if n == after]
    assert quiet == [1 if search == "greedy" else 0] * 6


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


def test_a_seeded_draw_is_the_same_alone_or_among_others(trained_run):
    """Each sentence draws from a generator of its own, seeded alike: its sampled translation
    does not depend on the sentences before it in the request or the file."""
    from transformer_mt.translate import Translator

    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    settings = {"sample_topk": 20, "sample_seed": 11, "temperature": 2.0, "precision": "fp32"}
    one = "Ein Hund läuft über die Wiese."
    others = ["Zwei Männer spielen Fußball im Park.", "Eine Frau liest ein Buch am Strand."]
    alone = translator.translate([one], **settings)[0]
    assert translator.translate([*others, one], **settings)[-1] == alone
    assert translator.translate([one, *others], batch_size=1, **settings)[0] == alone
    draws = {translator.translate([one], sample_topk=20, sample_seed=seed, temperature=2.0,
                                  precision="fp32")[0] for seed in range(4)}
    assert len(draws) > 1  # and the seed still matters


def test_a_sentence_a_text_holds_again_is_decoded_once(trained_run, monkeypatch):
    """A text's sentences each decoded once however often it holds them (a subtitle's "Ja.",
    a sheet's repeated cells): each place holds what the sentence alone translates to,
    searched or sampled (a sentence's draw is its seed's, in any place)."""
    from transformer_mt.translate import Translator

    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    decoded: list = []
    real = translator.translate_ids
    monkeypatch.setattr(translator, "translate_ids",
                        lambda ids, *a, **k: decoded.extend(ids) or real(ids, *a, **k))
    text = "Ein Hund läuft. Zwei Männer spielen. Ein Hund läuft.\nEin Hund läuft."
    for settings in ({}, {"sample_topk": 20, "sample_seed": 5, "temperature": 2.0}):
        decoded.clear()
        out = translator.translate([text], form="text", **settings)[0]
        assert len(decoded) == 2
        one, two = translator.translate(["Ein Hund läuft.", "Zwei Männer spielen."],
                                        **settings)
        assert out == f"{one} {two} {one}\n{one}"


def test_settings_of_a_command_leave_the_loaded_config_alone(trained_run):
    """What a command decodes with by default is a new translator around the same engine:
    the loaded config (what a server's compare model or another caller reads) is unchanged."""
    from transformer_mt.translate import Translator

    translator = Translator.load(trained_run[0] / "best.pt", "cpu")
    before = translator.config.decode
    sampling = translator.with_settings(translator.settings(sample_topk=20, sample_seed=3,
                                                            temperature=2.0))
    assert translator.config.decode == before and sampling.engine is translator.engine
    one = ["Ein Hund läuft über die Wiese."]
    assert sampling.translate(one) == translator.translate(one, sample_topk=20, sample_seed=3,
                                                           temperature=2.0)
    assert translator.translate(one) == translator.translate(one, **vars(before))


def test_nucleus_sampling_draws_from_the_nucleus_only():
    """From <bos> the Markov model gives A 0.5, B 0.4, <eos> 0.1: the 0.85 nucleus is {A, B}
    (drawn 5:4), the 0.45 nucleus {A}; a nucleus of 1 is plain sampling, top-k and nucleus
    together are the nucleus of the top k, and a vanishing nucleus is greedy."""
    model = MarkovModel()
    src = torch.full((2000, 3), 4)
    mask = source_mask(src)

    def first_tokens(seed=0, **kw):
        gen = torch.Generator().manual_seed(seed)
        return [h.tokens[0] if h.tokens else EOS_ID for h in greedy(
            model, src, mask, max_len_a=0.0, max_len_b=1, generator=gen, **kw)]

    nucleus = collections.Counter(first_tokens(top_p=0.85))
    assert set(nucleus) == {MarkovModel.A, MarkovModel.B}  # <eos> is outside it
    assert nucleus[MarkovModel.A] / 2000 == pytest.approx(0.5 / 0.9, abs=0.04)
    assert set(first_tokens(top_p=0.45)) == {MarkovModel.A}
    everything = collections.Counter(first_tokens(sample_topk=3))
    assert everything[EOS_ID] / 2000 == pytest.approx(0.1, abs=0.025)  # plain sampling
    assert first_tokens(3, sample_topk=3, top_p=1.0) == first_tokens(3, sample_topk=3)
    # of the top 2 (A 5/9, B 4/9): the 0.5 nucleus is A alone
    assert set(first_tokens(sample_topk=2, top_p=0.5)) == {MarkovModel.A}
    assert first_tokens(top_p=1e-6) == first_tokens()  # greedy


@pytest.mark.parametrize("use_cache", [False, True])
def test_a_given_translation_scores_what_beam_search_reported(use_cache):
    """Scoring each of beam search's n-best outputs (teacher-forced, token by token) gives the
    score search reported for it once divided by the same length penalty, and greedy's
    outputs score their greedy score. (Not for an output search cut at its length limit:
    search forced its <eos>, which scoring gives the model's own probability.)"""
    from transformer_mt.decode.score import score_outputs
    from transformer_mt.decode.search import length_penalty, max_output_lengths

    model = train_toy_model(steps=30, seed=1)  # undertrained: outputs of every kind
    src = toy_sources(24, seed=5)
    mask = source_mask(src)
    limits = max_output_lengths(mask, 1.5, 10, model.cfg.max_output_tokens).tolist()
    for alpha in (0.0, 0.6):
        nbest = beam_search(model, src, mask, beam_size=4, alpha=alpha, nbest=3)
        for k in range(3):
            outputs = [hyps[k].tokens for hyps in nbest]
            scored = score_outputs(model, src, mask, outputs, use_cache=use_cache)
            for hyps, log_probs, limit in zip(nbest, scored, limits, strict=True):
                assert len(log_probs) == len(hyps[k].tokens) + 1  # and <eos>
                if len(hyps[k].tokens) == limit:
                    continue
                penalty = float(length_penalty(len(log_probs), alpha))
                assert sum(log_probs) / penalty == pytest.approx(hyps[k].score, abs=1e-4)
    greedy_out = greedy(model, src, mask)
    scored = score_outputs(model, src, mask, [h.tokens for h in greedy_out], use_cache)
    ended = [i for i, h in enumerate(greedy_out) if len(h.tokens) < limits[i]]
    assert len(ended) >= 8  # enough outputs that ended on their own
    assert [sum(scored[i]) for i in ended] == pytest.approx(
        [greedy_out[i].score for i in ended], abs=1e-4)
