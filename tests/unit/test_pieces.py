"""translate/pieces.py: a target vocabulary's tokens read by what they write, made once for it."""

from __future__ import annotations

from transformer_mt.data.vocab import SPECIALS, Vocab
from transformer_mt.translate.pieces import continuing_ids, digit_ids


def test_the_tokens_that_write_a_digit_and_the_pieces_that_go_on_a_word():
    tokens = ["a", "▁b", "7", "x2", "▁3", "<0x31>", "<0x41>", "<0x2E>", "-", "½"]
    vocab = Vocab([*SPECIALS, *tokens])
    ids = {t: i for i, t in enumerate(vocab.itos)}
    assert digit_ids(vocab) == tuple(ids[t] for t in ("7", "x2", "▁3", "<0x31>"))
    assert continuing_ids(vocab) == {ids[t] for t in ("a", "7", "x2", "<0x31>", "<0x41>", "½")}


def test_each_vocabulary_has_its_own_made_once():
    """Made once a vocabulary (the same object asked again), and another vocabulary's its own,
    however alike (its tokens at other ids)."""
    first = Vocab([*SPECIALS, "7", "a", "▁b"])
    second = Vocab([*SPECIALS, "a", "▁b", "7"])
    assert digit_ids(first) is digit_ids(first) and digit_ids(first) == (4,)
    assert digit_ids(second) == (6,) and continuing_ids(second) == {4, 6}
    assert digit_ids(first) == (4,) and continuing_ids(first) == {4, 5}
