"""Outputs without a repeated n-gram (``decode.no_repeat_ngram_size``, decode/repeats.py): the
tokens barred are those transformers' own processor bars; no output of any search holds an
n-gram twice, yet scores what the model gives it; the cached and reference states, the plain
and the constrained search agree; a forced prefix and a constraint are written whole."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import NoRepeatNGramLogitsProcessor

from tests.toy import lone_sources, make_model, toy_sources
from transformer_mt.data.batch import source_mask
from transformer_mt.decode.constraints import constrained_search
from transformer_mt.decode.forcing import Forcing
from transformer_mt.decode.repeats import barred_tokens, repeats
from transformer_mt.decode.score import score_outputs
from transformer_mt.decode.search import beam_search, greedy, max_output_lengths


def _ngrams(tokens: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def _repeats_one(tokens: list[int], n: int) -> bool:
    grams = _ngrams(tokens, n)
    return len(grams) != len(set(grams))


@pytest.fixture(scope="module")
def looping_model():
    """An untrained model: its outputs loop ("7 7 7 7 ...") until their length limit."""
    return make_model()


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_the_barred_tokens_are_those_transformers_bars(n):
    gen = torch.Generator().manual_seed(n)
    for length in (1, 2, 3, 5, 9, 20):
        prefix = torch.randint(0, 6, (7, length), generator=gen)  # (N, t): repeats likely
        theirs = NoRepeatNGramLogitsProcessor(n)(prefix, torch.zeros(7, 8))
        ours = repeats(prefix, n, 8)
        assert torch.equal(torch.zeros(7, 8) if ours is None else ours, theirs)
        sets = barred_tokens(prefix, n, 8)
        assert [sorted(s) for s in sets] == [theirs[r].isinf().nonzero().flatten().tolist()
                                              for r in range(7)]
    assert repeats(torch.zeros(3, 4, dtype=torch.long), 0, 8) is None  # off


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("beam", [1, 4])
def test_no_output_holds_an_ngram_twice_and_each_scores_as_the_model_does(looping_model, n,
                                                                          beam):
    src = toy_sources(8)
    mask = source_mask(src)
    plain = [h[0].tokens for h in beam_search(looping_model, src, mask, beam, alpha=0.0)]
    assert sum(_repeats_one(t, n) for t in plain) >= 4  # (the model loops)
    if beam == 1:
        found = [[h] for h in greedy(looping_model, src, mask, no_repeat=n)]
    else:
        found = beam_search(looping_model, src, mask, beam, alpha=0.0, nbest=beam,
                            no_repeat=n)
    for hyps in found:
        for h in hyps:
            assert not _repeats_one(h.tokens, n)
    # scored as the model scores them (<eos> free at the length limit, where search forces it)
    best = [h[0] for h in found]
    limits = max_output_lengths(mask, 1.5, 10, looping_model.cfg.max_output_tokens).tolist()
    steps = score_outputs(looping_model, src, mask, [h.tokens for h in best])
    model_scores = [sum(lp[:-1]) + (lp[-1] if len(h.tokens) < n else 0.0)
                    for lp, h, n in zip(steps, best, limits, strict=True)]
    assert [h.score for h in best] == pytest.approx(model_scores, abs=1e-4)


@pytest.mark.parametrize("beam", [1, 3])
def test_the_cached_search_bars_what_the_reference_bars(looping_model, beam):
    src = toy_sources(10, seed=3)
    mask = source_mask(src)
    ways = [beam_search(looping_model, src, mask, beam, nbest=beam, use_cache=cached,
                        no_repeat=2) for cached in (True, False)]
    assert [[h.tokens for h in hyps] for hyps in ways[0]] == \
        [[h.tokens for h in hyps] for hyps in ways[1]]


@pytest.mark.parametrize("n", [2, 3])
def test_the_constrained_search_bars_what_beam_search_bars(looping_model, n):
    for src in lone_sources(6):
        mask = source_mask(src)
        plain = beam_search(looping_model, src, mask, 4, nbest=4, use_cache=True, no_repeat=n)
        held = constrained_search(looping_model, src, mask, [[]], 4, nbest=4, use_cache=True,
                                  no_repeat=n)
        assert [h.tokens for h in held[0]] == [h.tokens for h in plain[0]]


def test_a_forced_prefix_and_a_constraint_are_written_whole(looping_model):
    src = toy_sources(3, seed=5)
    mask = source_mask(src)
    forced = [[5, 5, 5, 5], [6, 7, 6, 7], [8]]
    for hyp, prefix in zip(greedy(looping_model, src, mask, no_repeat=2,
                                  forcing=Forcing.of(forced)), forced, strict=True):
        assert hyp.tokens[:len(prefix)] == prefix
        assert not _repeats_one(hyp.tokens[len(prefix) - 1:], 2)  # after it: none
    constraint = [9, 9, 9]
    for src in lone_sources(4):
        (best,) = constrained_search(looping_model, src, source_mask(src), [[constraint]], 3,
                                     use_cache=True, no_repeat=2)[0][:1]
        (_, start, end), = best.spans
        assert best.tokens[start:end] == constraint
