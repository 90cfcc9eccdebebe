"""Target prefixes, alternatives at a position and word alignments (decode/forcing.py,
decode/alternatives.py, decode/align.py), on the reference and the incremental decoder alike:
a prefix that is the model's own output changes nothing, forced tokens are scored as scoring
scores them, the first alternative is the greedy output, and attention aligns a reversal
model's words where they are known to be."""

from __future__ import annotations

import pytest
import torch

from tests.toy import VOCAB, toy_sources, train_toy_model
from transformer_mt.config import DecodeConfig
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import EOS_ID
from transformer_mt.decode.align import pharaoh, token_links, word_links
from transformer_mt.decode.alternatives import alternatives, next_token_choices
from transformer_mt.decode.forcing import Forcing
from transformer_mt.decode.score import score_outputs
from transformer_mt.decode.search import (
    beam_search,
    greedy,
    length_penalty,
    max_output_lengths,
)
from transformer_mt.translate.engines import TorchEngine


@pytest.fixture(scope="module")
def rough_model():
    return train_toy_model(steps=30, seed=1)  # undertrained: outputs of every kind


def _rows(src, i):
    return src[i:i + 1], source_mask(src[i:i + 1])


@pytest.mark.parametrize("use_cache", [False, True])
def test_greedy_with_its_own_output_as_prefix_changes_nothing(rough_model, use_cache):
    src = toy_sources(24, seed=5)
    mask = source_mask(src)
    plain = greedy(rough_model, src, mask, use_cache=use_cache)
    for cut in (0, 1, 3, 100):  # a different prefix length for each sentence, in one batch
        forcing = Forcing.of([h.tokens[:(cut + i) % (len(h.tokens) + 1)]
                              for i, h in enumerate(plain)])
        forced = greedy(rough_model, src, mask, use_cache=use_cache, forcing=forcing)
        assert [h.tokens for h in forced] == [h.tokens for h in plain]
        assert [h.score for h in forced] == pytest.approx([h.score for h in plain], abs=1e-5)


@pytest.mark.parametrize("use_cache", [False, True])
def test_forced_tokens_begin_the_output_and_are_scored_as_scoring_scores_them(rough_model,
                                                                            use_cache):
    src = toy_sources(16, seed=9)
    mask = source_mask(src)
    limits = max_output_lengths(mask, 1.5, 10, rough_model.cfg.max_output_tokens).tolist()
    gen = torch.Generator().manual_seed(3)
    prefixes = [torch.randint(4, VOCAB, (i % 4,), generator=gen).tolist() for i in range(16)]
    forcing = Forcing.of(prefixes)
    for alpha in (0.0, 0.6):
        found = [[h] for h in greedy(rough_model, src, mask, use_cache=use_cache,
                                     forcing=forcing)] if alpha == 0 else beam_search(
            rough_model, src, mask, beam_size=4, alpha=alpha, nbest=2, use_cache=use_cache,
            forcing=forcing)
        for k in range(len(found[0])):
            outputs = [hyps[k].tokens for hyps in found]
            scored = score_outputs(rough_model, src, mask, outputs, use_cache=use_cache)
            for prefix, hyps, log_probs, limit in zip(prefixes, found, scored, limits,
                                                      strict=True):
                assert hyps[k].tokens[:len(prefix)] == prefix
                if len(hyps[k].tokens) < limit:  # not cut (search forced <eos> there)
                    penalty = float(length_penalty(len(log_probs), alpha))
                    assert sum(log_probs) / penalty == pytest.approx(hyps[k].score, abs=1e-4)


def test_reference_and_incremental_decoders_agree_under_forcing(rough_model):
    src = toy_sources(12, seed=2)
    mask = source_mask(src)
    forcing = Forcing.of([[4 + i % 5] * (i % 3) for i in range(12)],
                         [None if i % 2 else [5, 6, 7] for i in range(12)])
    for search in ("greedy", "beam"):
        out = []
        for use_cache in (False, True):
            if search == "greedy":
                found = [[h] for h in greedy(rough_model, src, mask, use_cache=use_cache,
                                             forcing=forcing)]
            else:
                found = beam_search(rough_model, src, mask, beam_size=3, nbest=3,
                                    use_cache=use_cache, forcing=forcing)
            out.append([[(h.tokens, round(h.score, 4)) for h in hyps] for hyps in found])
        assert out[0] == out[1]


def test_beam_search_with_its_whole_output_forced_finds_it_again(rough_model):
    src = toy_sources(12, seed=4)
    mask = source_mask(src)
    best = beam_search(rough_model, src, mask, beam_size=4, alpha=0.6, nbest=1)
    again = beam_search(rough_model, src, mask, beam_size=4, alpha=0.6, nbest=4,
                        forcing=Forcing.of([hyps[0].tokens for hyps in best]))
    for first, hyps in zip(best, again, strict=True):
        same = [h for h in hyps if h.tokens == first[0].tokens]
        assert same and same[0].score == pytest.approx(first[0].score, abs=1e-5)


def test_a_word_to_finish_is_one_of_its_completions_the_best_of_them(rough_model):
    src = toy_sources(10, seed=6)
    mask = source_mask(src)
    allowed = [6, 9, 11]
    forcing = Forcing.of([[4]] * 10, [allowed] * 10)
    forced = greedy(rough_model, src, mask, forcing=forcing)
    choices = [next_token_choices(rough_model, *_rows(src, i), Forcing.of([[4]], [allowed]),
                                  VOCAB) for i in range(10)]
    for hyp, options in zip(forced, choices, strict=True):
        assert hyp.tokens[0] == 4 and hyp.tokens[1] in allowed
        assert [t for t, _ in options] and {t for t, _ in options} == set(allowed)
        assert hyp.tokens[1] == options[0][0]  # the most probable of the allowed


def test_search_ends_where_the_forcing_ends_the_output(rough_model):
    src = toy_sources(4, seed=8)
    mask = source_mask(src)
    forcing = Forcing.of([[5, EOS_ID]] * 4)
    for hyps in beam_search(rough_model, src, mask, beam_size=3, forcing=forcing):
        assert [h.tokens for h in hyps] == [[5]]
    assert [h.tokens for h in greedy(rough_model, src, mask, forcing=forcing)] == [[5]] * 4


@pytest.mark.parametrize("use_cache", [False, True])
def test_alternatives_are_the_best_tokens_there_each_completed(rough_model, use_cache):
    src = toy_sources(8, seed=10)
    cfg = DecodeConfig(beam_size=1)
    for i in range(8):
        one, mask = _rows(src, i)
        plain = greedy(rough_model, one, mask)[0]
        limit = int(max_output_lengths(mask, cfg.max_len_a, cfg.max_len_b))
        for cut in (0, 2):
            prefix = plain.tokens[:cut]
            cut = len(prefix)
            found = alternatives(rough_model, one, mask, Forcing.of([prefix]), 4, cfg,
                                 use_cache=use_cache)
            log_probs = score_outputs(rough_model, one, mask, [prefix])[0]  # prefix, <eos>
            assert len(found) == 4
            assert found[0].completion.tokens == plain.tokens  # the first is greedy's
            assert found[0].completion.score == pytest.approx(plain.score, abs=1e-5)
            probs = [a.log_prob for a in found]
            assert probs == sorted(probs, reverse=True)
            for a in found:
                tokens = a.completion.tokens
                assert tokens[:cut] == prefix
                assert (tokens[cut] if len(tokens) > cut else EOS_ID) == a.token
                scored = score_outputs(rough_model, one, mask, [tokens])[0]
                assert scored[cut] == pytest.approx(a.log_prob, abs=1e-5)
                if len(tokens) < limit:  # not cut (search forced <eos> there)
                    assert sum(scored) == pytest.approx(a.completion.score, abs=1e-4)
                if a.token == EOS_ID:
                    assert a.log_prob == pytest.approx(log_probs[-1], abs=1e-5)


def test_attention_aligns_a_reversal_model_where_the_words_are_known(toy_model):
    """The toy model reverses its input: output token j is source token n - 1 - j. The last
    layer's cross-attention (heads averaged) says so for most tokens; the first layer's does
    not (it has not found the token yet)."""
    engine = TorchEngine([toy_model], torch.device("cpu"))
    src = toy_sources(60, seed=11)
    hyps = greedy(toy_model, src, source_mask(src))
    right = {-1: 0, 0: 0}
    total = 0
    for row, hyp in zip(src.tolist(), hyps, strict=True):
        ids = [x for x in row if x != 1]  # without padding; <eos> last
        known = [len(ids) - 2 - j for j in range(len(hyp.tokens))]
        for layer in right:
            links = token_links(engine.cross_attention([ids], [hyp.tokens], layer)[0])
            right[layer] += sum(a == b for a, b in zip(links, known, strict=True))
        total += len(hyp.tokens)
    assert right[-1] / total > 0.8
    assert right[0] / total < 0.6


def test_token_links_become_word_links_in_pharaoh_format():
    attention = torch.tensor([[0.1, 0.7, 0.1, 0.1],   # output token 0 -> source token 1
                              [0.6, 0.1, 0.2, 0.1],   # 1 -> 0
                              [0.1, 0.2, 0.3, 0.4],   # 2 -> 2 (<eos> column ignored)
                              [0.0, 0.0, 0.0, 1.0]])  # the <eos> row: ignored
    links = token_links(attention)
    assert links == [1, 0, 2]
    # source words: tokens 0 and 1 are word 0, token 2 word 1; output: 0 | 1 2
    assert word_links(links, [0, 0, 1], [0, 1, 1]) == [(0, 0), (0, 1), (1, 1)]
    assert pharaoh(word_links(links, [0, 1, 2], [0, 1, 2])) == "1-0 0-1 2-2"
