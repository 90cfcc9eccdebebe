"""``--compile`` (``decode/compiled.py``): decoding steps compiled ahead of time (torch.export
and AOTInductor) translate as the model does, for every shape a lone sentence takes (any source
length and position, any beam up to ``max_rows``) and every shape of a batch (any number of
sentences, padded, any beam); they are compiled once and read from the cache after that, never
for another model, precision or source; and what was not compiled runs the model as ever.

One warm-up for the module, of a toy model of one layer each side (compiling takes ~20 s a
graph even for it: most of it is the C++ compiler's).
"""

from __future__ import annotations

import time

import pytest
import torch

from tests.toy import lone_sources, toy_accuracy, toy_sources
from transformer_mt.config import DecodeConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import EOS_ID, PAD_ID
from transformer_mt.decode import incremental
from transformer_mt.decode.beam_step import candidate_logits, choose
from transformer_mt.decode.compiled import CompiledDecoding
from transformer_mt.decode.compiled_state import CompiledState
from transformer_mt.decode.forcing import Forcing
from transformer_mt.decode.incremental import decoder_step, encode_source
from transformer_mt.decode.search import beam_search, greedy
from transformer_mt.precision import for_decoding

BEAM = 3


@pytest.fixture(scope="module")
def toy(one_layer_toy):
    """The reversal toy model with one layer each side."""
    return one_layer_toy


@pytest.fixture(scope="module")
def compiled(toy):
    """The toy model's decoding copy, compiled, and how long it took."""
    decoding = CompiledDecoding(for_decoding(toy, "fp32"), toy)
    start = time.perf_counter()
    decoding.warm_up("fp32", BEAM, batches=True)
    return decoding, time.perf_counter() - start


def search(model, src: torch.Tensor, beam: int) -> list:
    """The hypotheses of one sentence: greedy's, or the beam's n-best."""
    if beam == 1:
        return greedy(model, src, source_mask(src), use_cache=True)
    return beam_search(model, src, source_mask(src), beam, nbest=beam, use_cache=True)[0]


def test_compiled_steps_translate_as_the_model_does(toy, compiled, monkeypatch):
    """Greedy and beam search, one sentence at a time, tokens equal and scores within
    rounding; a key/value buffer of 2 positions at first, so that it grows (doubles) while
    decoding: the compiled code takes any capacity, source length and position."""
    decoding, seconds = compiled
    assert toy_accuracy(toy) > 0.9  # it learned: decisive outputs, no near-ties to flip
    monkeypatch.setattr("transformer_mt.decode.incremental.MIN_CAPACITY", 2)
    eager = for_decoding(toy, "fp32")
    uncompiled = []  # the steps a lone sentence ran without the compiled graphs
    monkeypatch.setattr("transformer_mt.decode.compiled.decoder_step",
                        lambda *args: uncompiled.append(args) or decoder_step(*args))
    monkeypatch.setattr(incremental, "encode_source",
                        lambda *args: uncompiled.append(args) or encode_source(*args))
    monkeypatch.setattr("transformer_mt.decode.compiled.choose",
                        lambda *args: uncompiled.append(args) or choose(*args))
    for src in lone_sources():
        for beam in (1, 2, BEAM):  # any beam: the warm-up compiled one of 2 hypotheses
            ours = search(decoding, src, beam)
            assert not uncompiled  # every step ran compiled, and the encoder
            theirs = search(eager, src, beam)
            uncompiled.clear()
            assert [h.tokens for h in ours] == [h.tokens for h in theirs]
            for a, b in zip(ours, theirs, strict=True):
                assert a.score == pytest.approx(b.score, abs=1e-4)
    print(f"warm-up: {seconds:.1f} s")


@pytest.mark.parametrize(("sentences", "beam"), [(1, 5), (4, 3), (2, 1)])
@pytest.mark.parametrize("forced", [False, True])
def test_the_compiled_choice_is_beam_searchs(toy, compiled, sentences, beam, forced):
    """Beam search's decisions at a step (``decode/beam_step.py``) compiled, from the logits:
    equal to the function's (its log-probabilities within rounding), where candidates end,
    where some are impossible (-inf: a sentence at its length limit), where sentences are
    done and where a forced prefix bars tokens."""
    decoding, _ = compiled
    generator = torch.Generator().manual_seed(sentences * 10 + beam)
    z = torch.randn(sentences * beam, toy.tgt_vocab_size, generator=generator) * 3
    z[0, EOS_ID] = 20.0  # the first sentence's best candidate ends
    z[-beam:, :] = -torch.inf  # the last one may only end
    z[-beam:, EOS_ID] = 0.0
    scores = torch.randn(sentences, beam, generator=generator)
    n_finished = torch.arange(sentences) % max(beam, 2)
    limits = torch.full((sentences,), 7)
    barred = None
    if forced:  # a third of the tokens barred, never <eos>
        barred = torch.where(torch.rand(sentences, toy.tgt_vocab_size, generator=generator)
                             < 0.3, -torch.inf, 0.0)
        barred[:, EOS_ID] = 0.0
    for step in (3, 7):
        ours = decoding.choose(z, scores, n_finished, limits, step, barred)
        theirs = choose(z, scores, n_finished, limits, step, barred)
        assert ours._fields == theirs._fields
        for name, a, b in zip(theirs._fields, ours, theirs, strict=True):
            if a.is_floating_point():
                torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
            else:
                assert torch.equal(a, b), name


@pytest.mark.parametrize("no_repeat", [0, 2])
def test_forced_prefixes_decode_compiled_as_the_model_does(toy, compiled, no_repeat):
    """Outputs that must begin a given way (``decode/forcing.py``), then one of some tokens
    or any: compiled, in a batch and a sentence at a time (its beam's steps and choices in
    one graph), the same hypotheses as the decoding copy's, each beginning as forced; and
    with no pair twice (``no_repeat``: decode/repeats.py, steps apart from their choice)."""
    decoding, _ = compiled
    eager = for_decoding(toy, "fp32")
    src = toy_sources(4, seed=5)
    first = EOS_ID + 1  # the toy's tokens
    forcing = Forcing.of([[first + i] for i in range(4)],
                         [[first + 2, first + 3], None, None, [first + 4]])
    for beam in (1, BEAM):
        for rows in ([0, 1, 2, 3], [0], [3]):
            part, forced = src[rows], forcing.subset(rows)
            part = part[:, (part != PAD_ID).any(dim=0)]  # no column of padding alone
            ours, theirs = (beam_search(model, part, source_mask(part), beam, nbest=beam,
                                        use_cache=True, forcing=forced, no_repeat=no_repeat)
                            for model in (decoding, eager))
            assert [[h.tokens for h in hyps] for hyps in ours] == [
                [h.tokens for h in hyps] for hyps in theirs]
            for mine, other, tokens in zip(ours, theirs, forced.tokens, strict=True):
                assert all(h.tokens[:len(tokens)] == tokens for h in mine)
                assert [h.score for h in mine] == pytest.approx([h.score for h in other],
                                                                abs=1e-4)
            ours, theirs = (greedy(model, part, source_mask(part), use_cache=True,
                                   forcing=forced, no_repeat=no_repeat)
                            for model in (decoding, eager))
            assert [h.tokens for h in ours] == [h.tokens for h in theirs]
            assert all(h.tokens[:len(t)] == t for h, t in zip(ours, forced.tokens, strict=True))
            assert [h.score for h in ours] == pytest.approx([h.score for h in theirs], abs=1e-4)


def test_a_second_load_reads_the_cache(toy, compiled, monkeypatch):
    """Another process's warm-up (a new CompiledDecoding of the same weights) compiles
    nothing: it loads what the first one kept, and translates alike."""
    monkeypatch.setattr(CompiledDecoding, "_build", lambda *args: 1 / 0)
    again = CompiledDecoding(for_decoding(toy, "fp32"), toy)
    again.warm_up("fp32", BEAM)
    for src in lone_sources(3):
        for beam in (1, BEAM):
            ours, theirs = (search(model, src, beam) for model in (again, compiled[0]))
            assert [(h.tokens, h.score) for h in ours] == [(h.tokens, h.score) for h in theirs]


def test_the_decode_benchmark_counts_what_compiling_changed(toy, compiled):
    """bench/decode_speed.py's check of its compiled rows, on the warmed-up toy model (its
    smoke run skips them: compiling again would take ~15 s)."""
    from bench.decode_speed import _differing_compiled

    decoding, _ = compiled
    cfg = DecodeConfig(precision="fp32")
    ids = [src[0].tolist() for src in lone_sources(4)]
    assert _differing_compiled(for_decoding(toy, "fp32"), decoding, ids, cfg,
                               torch.device("cpu"), exact=True) == 0


def test_batches_run_compiled_as_the_model_does(toy, compiled, monkeypatch):
    """Several sentences at once (padded to the longest; sentences leave the batch as they
    end), greedy and beam search, and a lone sentence's beam wider than ``max_rows``: every
    step runs compiled (the batch graph; the last sentence left, a lone sentence's) and they
    translate as the decoding copy does; buffers of 2 positions at first, so that they grow."""
    decoding, _ = compiled
    monkeypatch.setattr("transformer_mt.decode.incremental.MIN_CAPACITY", 2)
    eager = for_decoding(toy, "fp32")
    uncompiled = []
    monkeypatch.setattr("transformer_mt.decode.compiled.decoder_step",
                        lambda *args: uncompiled.append(args) or decoder_step(*args))
    monkeypatch.setattr("transformer_mt.decode.compiled.choose",
                        lambda *args: uncompiled.append(args) or choose(*args))
    src = toy_sources(6, seed=3)
    assert (src == PAD_ID).any()  # some sentences are padded
    mask = source_mask(src)
    for beam in (1, BEAM):
        ours = beam_search(decoding, src, mask, beam, nbest=beam, use_cache=True)
        assert not uncompiled
        theirs = beam_search(eager, src, mask, beam, nbest=beam, use_cache=True)
        assert [[h.tokens for h in hyps] for hyps in ours] == [
            [h.tokens for h in hyps] for hyps in theirs]
        for mine, other in zip(ours, theirs, strict=True):
            assert [h.score for h in mine] == pytest.approx([h.score for h in other], abs=1e-4)
        a, b = (greedy(model, src, mask, use_cache=True) for model in (decoding, eager))
        assert [h.tokens for h in a] == [h.tokens for h in b]
    monkeypatch.setattr(decoding, "max_rows", BEAM - 1)
    lone = lone_sources(1)[0]
    assert [h.tokens for h in search(decoding, lone, BEAM)] == [
        h.tokens for h in search(eager, lone, BEAM)]
    assert not uncompiled


def test_a_batchs_last_sentence_runs_a_lone_sentences_graph(toy, compiled, monkeypatch):
    """Once one sentence is left in a batch, its greedy steps run the lone sentence's graph,
    its source's padding cut off: the same logits and the same keys and values written as the
    model's step with the mask, at a position with keys and values before it."""
    decoding, _ = compiled
    eager = for_decoding(toy, "fp32")
    runs = []
    run = decoding._run
    monkeypatch.setattr(decoding, "_run", lambda runner, inputs: runs.append(runner) or run(
        runner, inputs))
    src = torch.cat([lone_sources(1)[0], torch.full((1, 3), PAD_ID)], dim=1)  # padded
    mask = source_mask(src)
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        state = incremental.start_decoding(eager, src, mask)
        kv = state.reserve(1)  # (1, capacity, L, 2, H, Dh)
        kv.copy_(torch.randn(kv.shape, generator=generator))  # 3 positions "before"
        last = torch.randint(EOS_ID + 1, toy.tgt_vocab_size, (1,), generator=generator)
        theirs_kv, mine_kv = kv.clone(), kv.clone()
        theirs = decoder_step(eager, last, 3, theirs_kv, state.cross_kv, mask, 1)
        mine = decoding.batch_step(eager, last, 3, mine_kv, state.cross_kv, mask, 1)
    assert runs == [decoding._one]
    torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mine_kv[:, :4], theirs_kv[:, :4], atol=1e-5, rtol=1e-5)


def test_a_batch_reads_each_hypothesis_past_through_its_ancestors(toy, compiled):
    """A batch's step in the batch graph with its buffer never reordered: each hypothesis
    writes in a row of its own (``slots``; two rows more, as of sentences that left) and reads
    its past from the rows its ancestors wrote (``ancestors``): the logits and keys and values
    of the model's step over each one's own past, with the mask. Beams reordered and a
    sentence leaving then select ancestors and slots only (nothing of the buffer is copied);
    settling gives each row its own past."""
    decoding, _ = compiled
    eager = for_decoding(toy, "fp32")
    src = toy_sources(3, seed=7)
    mask = source_mask(src)
    g, rows = BEAM, 3 * BEAM + 2
    generator = torch.Generator().manual_seed(3)
    with torch.inference_mode():
        memory, cross_kv = encode_source(eager, src, mask)
        slots = torch.randperm(rows, generator=generator)[:3 * g]  # (B*G,)
        state = CompiledState(eager, memory, mask, cross_kv, g, step=decoding.batch_step,
                              decoding=decoding, slots=slots)
        kv = state.reserve(rows)  # (rows, capacity, L, 2, H, Dh)
        kv.copy_(torch.randn(kv.shape, generator=generator))  # 3 positions "before"
        state.offset = 3
        past = torch.randint(0, rows, (3 * g, 3), generator=generator)
        state.ancestors = torch.cat([past, slots[:, None]], dim=1)
        prefix = torch.randint(EOS_ID + 1, toy.tgt_vocab_size, (3 * g, 4), generator=generator)
        own = torch.zeros(3 * g, *kv.shape[1:])  # each hypothesis's own past, in its row
        own[:, :3] = kv[past, torch.arange(3)]
        theirs = decoder_step(eager, prefix[:, -1], 3, own, cross_kv, mask, g)
        mine = state.next_logits(prefix)
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(kv[slots, 3], own[:, 3], atol=1e-5, rtol=1e-5)
        assert state.offset == 4
        assert torch.equal(state.ancestors, torch.cat([past, slots[:, None], slots[:, None]], 1))
        reorder = torch.arange(3 * g).view(3, g).flip(1).flatten()  # within each sentence
        state.select(reorder)
        keep = torch.tensor([0, 2])  # the second sentence leaves
        hypotheses = (keep[:, None] * g + torch.arange(g)).flatten()
        state.select(hypotheses, keep)
        assert torch.equal(state.slots, slots[hypotheses])
        assert torch.equal(state.ancestors[:, -1], slots[hypotheses])
        assert state.cross_kv.size(0) == 2 and torch.equal(state.src_mask, mask[keep])
        state._settle()
    assert state.ancestors is None and state.slots is None
    torch.testing.assert_close(state.self_kv[:2 * g, :4], own[reorder[hypotheses], :4],
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("limit", "forced"), [(9, False), (3, False), (9, True)])
def test_the_greedy_graph_is_a_step_and_its_pick(toy, compiled, limit, forced):
    """A lone sentence's greedy step and its pick in one graph: the token greedy search picks
    from the model's step (its first best, at the length limit only <eos>, with a forced
    prefix only what it allows), that token's log-probability, the keys and values written."""
    decoding, _ = compiled
    eager = for_decoding(toy, "fp32")
    src = lone_sources(1)[0]
    mask = source_mask(src)
    generator = torch.Generator().manual_seed(limit + forced)
    vocab = toy.tgt_vocab_size
    with torch.inference_mode():
        memory, cross_kv = encode_source(eager, src, mask)
        state = CompiledState(eager, memory, mask, cross_kv, 1, decoding=decoding, lone=True)
        kv = state.reserve(1)  # (1, capacity, L, 2, H, Dh)
        kv.copy_(torch.randn(kv.shape, generator=generator))  # 3 positions "before"
        state.offset = 3
        prefix = torch.randint(EOS_ID + 1, vocab, (1, 4), generator=generator)
        bars = None  # or a forced prefix's: half the tokens barred
        if forced:
            bars = torch.where(torch.rand(1, vocab, generator=generator) < 0.5, -torch.inf, 0.0)
        own = kv.clone()
        logits = decoder_step(eager, prefix[:, -1], 3, own, cross_kv, mask, 1)
        z = candidate_logits(logits, torch.full((1,), limit <= 3))
        token = (z if bars is None else z + bars).max(dim=-1).indices
        logprob = z.log_softmax(dim=-1).gather(1, token[:, None]).squeeze(1)
        mine = state.pick_next(prefix, torch.tensor([limit]), bars)
    assert mine is not None and torch.equal(mine[0], token)
    torch.testing.assert_close(mine[1], logprob, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(kv[:, 3], own[:, 3], atol=1e-5, rtol=1e-5)
    assert state.offset == 4


@pytest.mark.parametrize(("limit", "forced"), [(9, False), (3, False), (9, True)])
def test_the_beam_graph_is_a_step_and_its_choice(toy, compiled, limit, forced):
    """A lone sentence's beam step in one graph, each hypothesis's past read through its
    ancestors (rows the buffer was never reordered into): the choice beam search makes from
    the model's step over each hypothesis's own past, the same keys and values written, the
    next prefixes and ancestors; at the length limit (only <eos>) and with a forced prefix
    too. Reordering the hypotheses afterwards gives each row its own past."""
    decoding, _ = compiled
    eager = for_decoding(toy, "fp32")
    src = lone_sources(1)[0]
    mask = source_mask(src)
    generator = torch.Generator().manual_seed(limit + forced)
    g, vocab = BEAM, toy.tgt_vocab_size
    with torch.inference_mode():
        memory, cross_kv = encode_source(eager, src, mask)
        state = CompiledState(eager, memory, mask, cross_kv, g, decoding=decoding, lone=True)
        kv = state.reserve(g)  # (G, capacity, L, 2, H, Dh)
        kv.copy_(torch.randn(kv.shape, generator=generator))  # 3 positions "before"
        state.offset = 3
        ancestors = torch.randint(0, g, (g, 4), generator=generator)
        ancestors[:, -1] = torch.arange(g)  # (each writes its own row at the newest)
        state.ancestors = ancestors
        prefix = torch.randint(EOS_ID + 1, vocab, (g, 4), generator=generator)
        scores = torch.randn(1, g, generator=generator)
        n_finished, limits = torch.tensor([1]), torch.tensor([limit])
        barred = None  # or a forced prefix's: half the tokens barred
        if forced:
            barred = torch.where(torch.rand(1, vocab, generator=generator) < 0.5, -torch.inf, 0.0)
        own = kv.clone()  # each hypothesis's own past, as the model's step reads it
        own[:, :3] = kv[ancestors[:, :3], torch.arange(3)]
        logits = decoder_step(eager, prefix[:, -1], 3, own, cross_kv, mask, g)
        at_limit = torch.full((g,), limit <= 3)
        theirs = choose(candidate_logits(logits, at_limit), scores, n_finished, limits, 3,
                        barred)
        mine, following = state.choose_next(prefix, scores, n_finished, limits, barred)
    for name, a, b in zip(theirs._fields, mine, theirs, strict=True):
        if a.is_floating_point():
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        else:
            assert torch.equal(a, b), name
    assert torch.equal(following, torch.cat([prefix[theirs.rows], theirs.tokens.view(-1, 1)], 1))
    torch.testing.assert_close(kv[:, 3], own[:, 3], atol=1e-5, rtol=1e-5)
    assert torch.equal(state.ancestors, torch.cat([ancestors[theirs.rows],
                                                   torch.arange(g)[:, None]], 1))
    assert state.offset == 4
    reorder = torch.tensor([2, 0, 1])
    with torch.inference_mode():
        state.select(reorder)
    torch.testing.assert_close(state.self_kv[:, :4], own[theirs.rows[reorder], :4])
    assert state.ancestors is None


@pytest.mark.usefixtures("compiled")  # its graphs, in the cache
def test_what_was_not_compiled_decodes_as_ever(toy, monkeypatch):
    """A warm-up for lone sentences only (read from the cache): batches' steps run the
    model's decoding copy as it is (but for a beam's last sentence left: the beam graph, as
    a lone sentence's), the same results."""
    monkeypatch.setattr(CompiledDecoding, "_build", lambda *args: 1 / 0)
    decoding = CompiledDecoding(for_decoding(toy, "fp32"), toy)
    decoding.warm_up("fp32", BEAM)
    assert decoding.beams and not decoding.batches
    eager = for_decoding(toy, "fp32")
    runs = []
    run = decoding._run
    monkeypatch.setattr(decoding, "_run", lambda runner, inputs: runs.append(runner) or run(
        runner, inputs))
    src = toy_sources(4)
    mask = source_mask(src)
    for beam in (1, BEAM):
        a = beam_search(decoding, src, mask, beam, use_cache=True)
        b = beam_search(eager, src, mask, beam, use_cache=True)
        assert [h[0].tokens for h in a] == [h[0].tokens for h in b]
    assert runs and set(runs) == {decoding._beam}
    runs.clear()
    search(decoding, lone_sources(1)[0], 1)  # while a lone sentence's steps do run compiled
    assert decoding._one in runs


