"""Words (``data/words.py``): spaCy splits them, Moses' detokenizer writes them back; a hyphen
spaCy splits out of a word is marked (``@-@``, ``data.mark_hyphens``), so that a word model's
translation writes the word whole ("t-shirt"), where a plain hyphen is written spaced."""

from __future__ import annotations

from transformer_mt.data.tokenize import WordTokenizer
from transformer_mt.data.words import HYPHEN

SENTENCES = {  # each sentence: the hyphens of its tokens, marked
    "A man in a t-shirt and a red-haired girl.": [HYPHEN, HYPHEN],
    "Two dogs - one brown - play.": ["-", "-"],  # a dash between words stays one
    "An X-ray of a 2-3 year-old co-op.": [HYPHEN] * 4,
    "It is -5 degrees at a well- known place.": ["-5", "well-"],  # not between two words
}


def test_a_word_split_at_its_hyphen_is_written_whole_again():
    marked, plain = WordTokenizer("en", mark_hyphens=True), WordTokenizer("en")
    for sentence, hyphens in SENTENCES.items():
        tokens = next(marked.tokenize([sentence]))
        assert [t for t in tokens if "-" in t] == hyphens
        assert marked.detokenize(tokens) == sentence
        # the same words as unmarked, each marked hyphen a "-" there
        assert ["-" if t == HYPHEN else t for t in tokens] == next(plain.tokenize([sentence]))
    # unmarked (checkpoints made before the mark), the word came out in three
    tokens = next(plain.tokenize(["A man in a t-shirt."]))
    assert plain.detokenize(tokens) == "A man in a t - shirt."
    assert marked.key != plain.key  # token ids cached for one are not read for the other


def test_languages_written_without_spaces_are_not_marked():
    chinese = WordTokenizer("zh", mark_hyphens=True)
    tokens = next(chinese.tokenize(["T-shirt很好"]))
    assert HYPHEN not in tokens and chinese.detokenize(tokens) == "T-shirt很好"
