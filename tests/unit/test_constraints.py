"""Lexically constrained search (decode/constraints.py): every output holds every constraint,
where the spans say; without constraints it is beam search; a constraint the model would
write anyway changes nothing."""

from __future__ import annotations

import itertools

import pytest
import torch

from tests.toy import lone_sources, make_model, toy_sources, train_toy_model
from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import EOS_ID, PAD_ID
from transformer_mt.decode.constraints import _top, constrained_search
from transformer_mt.decode.search import beam_search


@pytest.fixture(scope="module")
def weak_model():
    """An imperfect toy model: its outputs vary and ties are unlikely."""
    return train_toy_model(steps=30, seed=1)


def _holds(tokens: list[int], spans: list[tuple[int, int, int]],
           constraints: list[list[int]]) -> None:
    assert sorted(j for j, _, _ in spans) == list(range(len(constraints)))
    for j, start, end in spans:
        assert tokens[start:end] == constraints[j]
    ordered = sorted(spans, key=lambda s: s[1])
    assert all(a[2] <= b[1] for a, b in itertools.pairwise(ordered))  # apart
    assert EOS_ID not in tokens


@pytest.mark.parametrize("beam", [1, 3, 5])
def test_without_constraints_it_is_beam_search(weak_model, beam):
    for src in lone_sources(8):
        mask = source_mask(src)
        plain = beam_search(weak_model, src, mask, beam, nbest=beam, use_cache=True)[0]
        held = constrained_search(weak_model, src, mask, [[]], beam, nbest=beam,
                                  use_cache=True)[0]
        assert [h.tokens for h in held] == [h.tokens for h in plain]
        assert [h.score for h in held] == pytest.approx([h.score for h in plain], rel=1e-5)


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("use_cache", [False, True])
def test_every_output_holds_its_constraints(weak_model, beam, use_cache):
    gen = torch.Generator().manual_seed(3)
    for n, src in enumerate(lone_sources(6)):
        constraints = [torch.randint(4, 14, (1 + (n + j) % 3,), generator=gen).tolist()
                       for j in range(1 + n % 3)]
        hyps = constrained_search(weak_model, src, source_mask(src), [constraints], beam,
                                  nbest=2, use_cache=use_cache)[0]
        assert len(hyps) == 2
        for h in hyps:
            _holds(h.tokens, h.spans, constraints)


def test_the_length_limit_appends_what_is_missing():
    """An untrained model that may never place its constraints, and no room: each output still
    holds them (appended at the limit)."""
    model = make_model()
    for src in lone_sources(4):
        constraints = [[7, 8, 9], [11]]
        hyps = constrained_search(model, src, source_mask(src), [constraints], 2,
                                  max_len_a=0.0, max_len_b=1, nbest=2)[0]
        for h in hyps:
            _holds(h.tokens, h.spans, constraints)


@pytest.mark.parametrize("beam", [1, 5])
def test_a_constraint_the_model_writes_anyway_changes_nothing(toy_model, beam):
    for src in lone_sources(6):
        mask = source_mask(src)
        plain = beam_search(toy_model, src, mask, beam, use_cache=True)[0][0]
        middle = plain.tokens[1:3]
        held = constrained_search(toy_model, src, mask, [[middle]], beam, use_cache=True)[0][0]
        assert held.tokens == plain.tokens
        assert held.spans == [(0, 1, 3)]


def test_no_glued_token_right_after_a_constraint(weak_model):
    """``glued`` (the pieces that would go on with a word) never follows a constraint: a
    required term is not made the start of a longer word."""
    glued = frozenset(range(4, 10))
    for src in lone_sources(6):
        constraints = [[12], [10, 11]]
        for h in constrained_search(weak_model, src, source_mask(src), [constraints], 3,
                                    nbest=3, glued=glued)[0]:
            _holds(h.tokens, h.spans, constraints)
            assert all(h.tokens[end] not in glued for _, _, end in h.spans
                       if end < len(h.tokens))


def _windows(tokens: list[int], n: int) -> set[tuple[int, ...]]:
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


@pytest.mark.parametrize("beam", [1, 3])
def test_no_output_holds_a_sequence_it_avoids(weak_model, beam):
    """``avoid`` (negative constraints): no output, of the n-best either, holds a sequence
    its sentence avoids (a token and a pair of its best output here), and each holds its
    constraint; avoiding nothing is the search without it, tokens and scores."""
    sources = lone_sources(8)
    for src in sources:
        mask = source_mask(src)
        plain = constrained_search(weak_model, src, mask, [[]], beam, nbest=beam,
                                   use_cache=True)[0]
        same = constrained_search(weak_model, src, mask, [[]], beam, nbest=beam,
                                  use_cache=True, avoid=[[]])[0]
        assert [(h.tokens, h.score) for h in same] == [(h.tokens, h.score) for h in plain]
        best = plain[0].tokens
        avoid = [a for a in (best[1:2], best[2:4]) if a]
        constraint = [min(set(range(4, 14)) - set(best[1:4]))]
        found = constrained_search(weak_model, src, mask, [[constraint]], beam, nbest=2,
                                   use_cache=True, avoid=[avoid])[0]
        assert len(found) == 2
        for h in found:
            _holds(h.tokens, h.spans, [constraint])
            assert not any(tuple(a) in _windows(h.tokens, len(a)) for a in avoid), h.tokens
        # a constraint may begin with what is avoided ("parkland" where "park" is): placed
        for h in constrained_search(weak_model, src, mask, [[[5, 6]]], beam, nbest=2,
                                    use_cache=True, avoid=[[[5]]])[0]:
            _holds(h.tokens, h.spans, [[5, 6]])
            assert [i for i, t in enumerate(h.tokens) if t == 5] == [h.spans[0][1]]
    # in a batch, each sentence avoids its own
    batch = torch.nn.utils.rnn.pad_sequence([s[0] for s in sources[:3]], batch_first=True,
                                            padding_value=PAD_ID)
    avoid = [[[5]], [], [[6], [7, 8]]]
    together = constrained_search(weak_model, batch, source_mask(batch), [[[9]]] * 3, beam,
                                  use_cache=True, avoid=avoid)
    alone = [constrained_search(weak_model, src, source_mask(src), [[[9]]], beam,
                                use_cache=True, avoid=[a])[0] for src, a in zip(
                                    sources[:3], avoid, strict=True)]
    assert [[h.tokens for h in hs] for hs in together] == [[h.tokens for h in hs]
                                                           for hs in alone]


@pytest.mark.parametrize("beam", [1, 4])
def test_a_batch_is_searched_as_beam_search_searches_it(weak_model, beam):
    """Sentences searched together, without constraints: beam search's outputs and scores."""
    src = toy_sources(10, seed=5)
    mask = source_mask(src)
    plain = beam_search(weak_model, src, mask, beam, nbest=beam, use_cache=True)
    held = constrained_search(weak_model, src, mask, [[]] * 10, beam, nbest=beam,
                              use_cache=True)
    assert [[h.tokens for h in hs] for hs in held] == [[h.tokens for h in hs] for hs in plain]
    assert [h.score for hs in held for h in hs] == pytest.approx(
        [h.score for hs in plain for h in hs], rel=1e-5)


def test_a_sentence_in_a_batch_is_searched_as_alone(toy_model):
    """Each sentence searches its own width, whatever the others' constraints: in a batch it
    finds what it finds alone."""
    sources = lone_sources(6)
    constraints = [[[5]], [], [[6, 7], [8]], [[9, 10, 11, 12]], [], [[13]]]
    alone = [constrained_search(toy_model, src, source_mask(src), [c], 2, nbest=2,
                                use_cache=True)[0] for src, c in zip(sources, constraints,
                                                                     strict=True)]
    batch = torch.nn.utils.rnn.pad_sequence([s[0] for s in sources], batch_first=True,
                                            padding_value=PAD_ID)
    together = constrained_search(toy_model, batch, source_mask(batch), constraints, 2,
                                  nbest=2, use_cache=True)
    assert [[(h.tokens, h.spans) for h in hs] for hs in together] == [
        [(h.tokens, h.spans) for h in hs] for hs in alone]
    for hs, c in zip(together, constraints, strict=True):
        for h in hs:
            _holds(h.tokens, h.spans, c)



def test_a_row_that_ends_a_constraint_draws_its_best_tokens_without_the_glued_ones():
    """Right after a constraint no ``glued`` token (one that would go on with its word) may
    come: the row's best tokens are drawn without them, so a hypothesis whose best all went
    on ("5kg" -> "5kgs") keeps continuations (it was left with none: a model of captions gave
    "Two men are wearing ####Ens................... 5kg", the limit's output, span appended;
    now "Two men are wearing ### 5kg."); other rows as ever, a row's ``barred`` left out."""
    logp = torch.tensor([[0.0, -1, -2, -3, -4, -5]] * 2)
    glue = torch.tensor([False, True, True, False, False, True])
    assert _top(logp, 2, [set(), set()], glue, [False, True]) == [[0, 1], [0, 3]]
    assert _top(logp, 2, [{0}, {0}], glue, [False, True]) == [[1, 2], [3, 4]]
    assert torch.equal(logp, torch.tensor([[0.0, -1, -2, -3, -4, -5]] * 2))  # (as it was)
