"""Variants of the training pairs with numbers (``data.train.numbers``: data/numbers.py)."""

from __future__ import annotations

import pytest

from transformer_mt.config import Config
from transformer_mt.config.data import CorpusConfig, DataConfig
from transformer_mt.config.file import load_config
from transformer_mt.data.corpus import Corpus
from transformer_mt.data.numbers import NUMBER, number_variants
from transformer_mt.data.prepare import prepare_data
from transformer_mt.errors import ConfigError, DataError

PAIRS = [("2 Männer stehen vor Haus 17.", "2 men stand in front of house 17."),
         ("Ein Hund läuft.", "A dog runs."),
         ("1 Mann, 3 Hunde, 3 Katzen und k-9 um 14:30 für 4,50.",
          "1 man, 3 dogs, 3 cats and k-9 at 14:30 for 4,50."),
         ("Zwei Männer und 5 Kinder.", "Two men and 6 children.")]


def test_a_pairs_shared_numbers_change_together_on_both_sides_and_nothing_else():
    """Each variant puts other numbers where the pair's shared ones stand, the same number
    on both sides and everywhere it stands; 1, numbers in words, times and decimals stay, as
    does a pair whose sides share no number; the same seed, the same variants."""
    variants = list(number_variants(*PAIRS[0], 5, seed=0))
    assert len(variants) == 5 and len(set(variants)) == 5
    for src, tgt in variants:
        a, b = NUMBER.findall(src), NUMBER.findall(tgt)
        assert a == b and len(set(a)) == 2 and not set(a) & {"1", "2", "17"}
        assert src == f"{a[0]} Männer stehen vor Haus {a[1]}."
        assert tgt == f"{a[0]} men stand in front of house {a[1]}."
    assert variants == list(number_variants(*PAIRS[0], 5, seed=0))
    assert variants != list(number_variants(*PAIRS[0], 5, seed=1))
    (src, tgt), = number_variants(*PAIRS[2], 1, seed=3)
    n = NUMBER.findall(src)[1]
    assert src == f"1 Mann, {n} Hunde, {n} Katzen und k-9 um 14:30 für 4,50."
    assert tgt == f"1 man, {n} dogs, {n} cats and k-9 at 14:30 for 4,50."
    for pair in PAIRS[1], PAIRS[3], ("1 Mann.", "1 man."):
        assert list(number_variants(*pair, 5, seed=0)) == []


def _corpus(tmp_path, rows, numbers: int) -> Corpus:
    path = tmp_path / "train.tsv"
    path.write_text("".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
    return Corpus.from_config(CorpusConfig(tsv=str(path), numbers=numbers), "data.train",
                              "de", "en")


def test_a_corpus_with_numbers_reads_each_pairs_variants_after_it(tmp_path):
    """Both sides line by line parallel: each pair, then its variants; its fingerprint (the
    caches' key) is not the plain corpus's."""
    corpus = _corpus(tmp_path, PAIRS, 3)
    src, tgt = list(corpus.lines("src")), list(corpus.lines("tgt"))
    expected = [p for n, pair in enumerate(PAIRS)
                for p in [pair, *number_variants(*pair, 3, seed=n)]]
    assert list(zip(src, tgt, strict=True)) == expected and len(expected) == 4 + 2 * 3
    plain = _corpus(tmp_path, PAIRS, 0)
    assert list(plain.lines("src")) == [a for a, _ in PAIRS]
    assert corpus.describe() == f"{plain.describe()} with 3 variants of each pair with numbers"
    assert CorpusConfig(multi30k="train", numbers=8).describe() == (
        "Multi30k train with 8 variants of each pair with numbers")
    assert {corpus.fingerprint(s) for s in ("src", "tgt")}.isdisjoint(
        {plain.fingerprint(s) for s in ("src", "tgt")})


def test_numbers_of_sides_of_different_lengths_or_of_a_test_set_are_one_line(tmp_path):
    (tmp_path / "a.de").write_text("2 Hunde.\n3 Katzen.\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("2 dogs.\n", encoding="utf-8")
    corpus = Corpus.from_config(CorpusConfig(src=str(tmp_path / "a.de"),
                                             tgt=str(tmp_path / "a.en"), numbers=2),
                                "data.train", "de", "en")
    with pytest.raises(DataError, match=r"has 2 lines but '.*a.en' has 1; the two sides must"):
        list(corpus.lines("src"))
    with pytest.raises(ConfigError, match=r"'data.valid' has a weight, a tag or numbers"):
        DataConfig(valid=CorpusConfig(multi30k="val", numbers=2)).validate()
    with pytest.raises(ConfigError, match=r"'data.train.numbers' must be from 0 to 100"):
        DataConfig(train=CorpusConfig(multi30k="train", numbers=-1)).validate()
    with pytest.raises(ConfigError, match=r"\(got none\); a --set of data.train.numbers, weight "
                       r"or tag alone replaces the default corpus: name it too, e.g. --set "
                       r"data.train.multi30k=train$"):
        load_config("config/cpu.yaml", ["data.train.numbers=8"])


def test_training_reads_the_variants_as_pairs_of_its_corpus(tmp_path, monkeypatch):
    """The training set holds each pair and its variants, as ids of their text."""
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))
    rows = PAIRS * 5
    path = tmp_path / "train.tsv"
    path.write_text("".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
    cfg = Config(data=DataConfig(min_freq=1, train=CorpusConfig(tsv=str(path), numbers=2),
                                 valid=CorpusConfig(tsv=str(path))))
    prepared = prepare_data(cfg)
    pairs = prepared.train.corpora[0].pairs
    lines = list(Corpus.from_config(cfg.data.train, "data.train", "de", "en").lines("tgt"))
    assert len(pairs) == len(lines) == 5 * (4 + 2 * 2)
    for k in (1, 2, 7):
        words = [prepared.tgt_vocab.itos[i] for i in pairs.target(k)[1:-1]]
        assert words == next(prepared.tokenizers[1].tokenize([lines[k]]))
