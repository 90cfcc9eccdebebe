"""A translation ends as its source ends (translate/endings.py): the model's final full stop
left out after a source that ends with a word, written as the source's comma, colon or
semicolon, and kept everywhere else; the score stays the model's. Word vocabularies, and a
SentencePiece model's pieces read as the text they write ("▁.", ".", a byte: "<0x3B>")."""

from __future__ import annotations

import pytest

from transformer_mt.config import DataConfig
from transformer_mt.data.tokenize import SubwordTokenizer, WordTokenizer, train_sentencepiece
from transformer_mt.data.vocab import EOS_ID, Vocab
from transformer_mt.decode.constraints import Placed
from transformer_mt.decode.search import Hypothesis
from transformer_mt.translate.endings import Endings

WORDS = Vocab(["<unk>", "<pad>", "<bos>", "<eos>", "Ein", "Hund", ".", ",", ":", "?", "A",
               "dog", "3", "(", ")"])
WORD_ENDS = Endings((WORDS, WORDS), (WordTokenizer("de"), WordTokenizer("en")))


def ids(vocab: Vocab, *tokens: str) -> list[int]:
    return [vocab.stoi[t] for t in tokens]


def src(vocab: Vocab, *tokens: str) -> list[int]:
    return [*ids(vocab, *tokens), EOS_ID]


def texts(vocab: Vocab, hyps: list[Hypothesis]) -> list[list[str]]:
    return [[vocab.itos[i] for i in h.tokens] for h in hyps]


@pytest.mark.parametrize("last", ["Hund", "3", "<unk>"])  # (<unk>: a name, a URL)
def test_after_a_word_the_full_stop_is_left_out_and_the_score_kept(last):
    hyps = [Hypothesis(ids(WORDS, "A", "dog", "."), -1.5), Hypothesis(ids(WORDS, "A", "dog"), -2.0)]
    out = WORD_ENDS.of(src(WORDS, "Ein", last), hyps)
    # the second became the first: left out
    assert texts(WORDS, out) == [["A", "dog"]] and out[0].score == -1.5


@pytest.mark.parametrize("mark", [",", ":", "?"])
def test_after_a_comma_colon_or_question_mark_the_translation_ends_with_it(mark):
    out = WORD_ENDS.of(src(WORDS, "Ein", "Hund", mark),
                       [Hypothesis(ids(WORDS, "A", "dog", "."), -1.0)])
    assert texts(WORDS, out) == [["A", "dog", mark]]


@pytest.mark.parametrize("last", [".", ")"])
def test_a_source_that_ends_otherwise_leaves_the_translation(last):
    hyps = [Hypothesis(ids(WORDS, "A", "dog", "."), -1.0)]
    source = [*ids(WORDS, "Ein", "Hund", last), EOS_ID]
    assert WORD_ENDS.of(source, hyps) == hyps
    assert WORD_ENDS.of([EOS_ID], hyps) == hyps  # (an empty source)


def test_what_is_not_the_models_own_full_stop_stays():
    """A translation that is a full stop alone, ends with two, or ends with one that a prefix
    forced or a constraint placed, stays as it is."""
    source = src(WORDS, "Ein", "Hund")
    alone = Hypothesis(ids(WORDS, "."), -1.0)
    dots = Hypothesis(ids(WORDS, "A", ".", "."), -1.0)
    forced = Hypothesis(ids(WORDS, "A", "dog", "."), -1.0)
    placed = Placed(ids(WORDS, "A", "dog", "."), -1.0, spans=[(0, 1, 3)])
    for h, n in ((alone, 0), (dots, 0), (forced, 3), (placed, 0)):
        assert WORD_ENDS.of(source, [h], forced=n) == [h]
    # a prefix that ends before it: left out
    assert texts(WORDS, WORD_ENDS.of(source, [forced], forced=2)) == [["A", "dog"]]


@pytest.fixture(scope="module")
def pieces():
    """A SentencePiece model of a few sentences (its pieces: ".", ","; ";" only as a byte)."""
    lines = ["Ein Hund läuft.", "Ein Hund, eine Katze.", "A dog runs.", "A dog, a cat."] * 20
    tokenizer = SubwordTokenizer(train_sentencepiece(lines, DataConfig(vocab_size=300)))
    vocab = tokenizer.fixed_vocab()
    assert vocab is not None
    return tokenizer, vocab


def test_subword_pieces_are_read_as_the_text_they_write(pieces):
    """A piece that goes on a word (".") becomes the mark that does (","), a byte the byte
    ("<0x3B>": ";"); a source that ends with a piece of a word ends with a word."""
    tokenizer, vocab = pieces
    ends = Endings((vocab, vocab), (tokenizer, tokenizer))
    [dog] = tokenizer.tokenize(["A dog."])
    hyp = Hypothesis(ids(vocab, *dog), -1.0)
    assert dog[-1] == "."
    for source, written in (("Ein Hund,", ","), ("Ein Hund;", "<0x3B>"), ("Ein Hund", None)):
        [tokens] = tokenizer.tokenize([source])
        [out] = ends.of(src(vocab, *tokens), [hyp])
        assert texts(vocab, [out]) == [[*dog[:-1], *([written] if written else [])]]
        assert tokenizer.detokenize(texts(vocab, [out])[0]) == "A dog" + source[len("Ein Hund"):]
