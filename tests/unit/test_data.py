from __future__ import annotations

import shutil
from collections import Counter

import numpy as np
import pytest
import torch

from tests.helpers import DATA_DIR, needs_data
from transformer_mt.config import Config
from transformer_mt.config.data import CorpusConfig, DataConfig
from transformer_mt.data import multi30k
from transformer_mt.data.batching import epoch_steps, make_batches
from transformer_mt.data.corpus import Corpus
from transformer_mt.data.prepare import encode_corpus, prepare_data
from transformer_mt.data.tokenize import WordTokenizer
from transformer_mt.errors import DataError
from transformer_mt.fileio import sha256_of


@needs_data
def test_multi30k_split_is_located_verified_and_read_as_a_corpus():
    corpus = Corpus.from_config(CorpusConfig(multi30k="val"), "data.valid", "de", "en", DATA_DIR)
    src, tgt = list(corpus.lines("src")), list(corpus.lines("tgt"))
    assert len(src) == len(tgt) == 1014
    assert corpus.fingerprint("src") == multi30k.SHA256["val.de.gz"]


def test_corrupt_user_copy_is_refused(tmp_path):
    bad = tmp_path / "val.de.gz"
    bad.write_bytes(b"not the real file")
    with pytest.raises(DataError, match="is corrupt"):
        multi30k.locate("val.de.gz", data_dir=tmp_path)


def test_missing_and_offline_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MT_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))

    def offline(name, dest, timeout=60.0):
        raise DataError("could not download: no network")

    monkeypatch.setattr(multi30k, "_download", offline)
    with pytest.raises(DataError) as err:
        multi30k.locate("train.en.gz", data_dir=tmp_path / "given")
    message = str(err.value)
    assert "not found" in message and str(tmp_path / "given") in message
    assert "MT_DATA_DIR" in message and "\n" not in message


@needs_data
def test_corrupt_cached_download_is_fetched_again(tmp_path, monkeypatch):
    monkeypatch.delenv("MT_DATA_DIR")
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))
    cached = tmp_path / "cache" / "multi30k" / "val.en.gz"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"truncated download")
    calls = []

    def fake_download(name, dest, timeout=60.0):  # stands in for the GitHub download
        calls.append(name)
        shutil.copy(DATA_DIR / name, dest)

    monkeypatch.setattr(multi30k, "_download", fake_download)
    path = multi30k.locate("val.en.gz")
    assert calls == ["val.en.gz"] and path == cached
    assert sha256_of(cached) == multi30k.SHA256["val.en.gz"]
    multi30k.locate("val.en.gz")
    assert calls == ["val.en.gz"]  # verified cache is reused


def test_different_line_counts_are_refused(tmp_path):
    (tmp_path / "a.de").write_text("eins\nzwei\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("one\n", encoding="utf-8")
    corpus = Corpus.from_config(CorpusConfig(src=str(tmp_path / "a.de"),
                                             tgt=str(tmp_path / "a.en")), "data.train", "de", "en")
    with pytest.raises(DataError, match=r"has 2 lines but .* has 1;"):
        encode_corpus(corpus, (WordTokenizer("de"), WordTokenizer("en")))


@needs_data
def test_token_ids_are_cached_and_max_pairs_applies(monkeypatch):
    cfg = Config(data=DataConfig(data_dir=str(DATA_DIR), min_freq=1))
    cfg.data.train = CorpusConfig(multi30k="val")
    data = prepare_data(cfg)
    first = data.train.corpora[0].pairs.source(0)[:3].tolist()
    assert [data.src_vocab.itos[i] for i in first] == ["Eine", "Gruppe", "von"]

    def no_more_tokenizing(*args, **kwargs):
        raise AssertionError("tokenized again instead of reading the cache")

    monkeypatch.setattr(WordTokenizer, "tokenize", no_more_tokenizing)
    cfg.data.max_pairs = 10
    again = prepare_data(cfg)
    assert len(again.train) == 10
    assert [again.train.corpora[0].pairs.source(k).tolist() for k in range(10)] != []
    # the vocabulary counts only the first 10 pairs: fewer words, each of them among the first
    assert len(again.src_vocab) < len(data.src_vocab)
    assert set(again.src_vocab.itos) <= set(data.src_vocab.itos)


def test_detokenize_joins_english_punctuation_and_unspaced_languages():
    assert WordTokenizer("en").detokenize(["A", "man", "'s", "dog", "(", "black", ")", "runs",
                                           "."]) == "A man's dog (black) runs."
    tokens = next(WordTokenizer("zh").tokenize(["我喜欢猫。"]))
    assert len(tokens) > 1 and WordTokenizer("zh").detokenize(tokens) == "我喜欢猫。"


NFC = "Ein Mädchen übt Französisch im Café."


def test_text_in_nfd_is_read_as_its_nfc_form(tmp_path, monkeypatch):
    """The same sentence typed with combining accents (NFD) got <unk>s its composed form did not:
    every tokenizer now reads NFC, in training and translation, and its cache keys say so."""
    import unicodedata

    from transformer_mt.data.tokenize import SubwordTokenizer, train_sentencepiece
    from transformer_mt.data.vocab import Vocab

    nfd = unicodedata.normalize("NFD", NFC)
    assert nfd != NFC
    words = WordTokenizer("de")
    assert next(words.tokenize([nfd])) == next(words.tokenize([NFC]))
    assert all(unicodedata.is_normalized("NFC", t) for t in next(words.tokenize([nfd])))
    vocab = Vocab.build([next(words.tokenize([NFC]))], min_freq=1)
    assert vocab.encode(next(words.tokenize([nfd]))) == vocab.encode(next(words.tokenize([NFC])))
    model = train_sentencepiece([NFC.lower(), nfd] * 50, DataConfig(tokenizer="sentencepiece",
                                                                   vocab_size=400))
    pieces = SubwordTokenizer(model)
    assert next(pieces.tokenize([nfd])) == next(pieces.tokenize([NFC]))
    assert "NFC" in words.key and "NFC" in pieces.key  # ids cached before are not reused


def test_soft_hyphens_zero_width_spaces_and_control_characters_are_not_read():
    """A word with a soft hyphen, a zero-width space, a word joiner or a byte-order mark in it
    (what text from web pages and PDFs holds), or a control character (a NUL, a bell, a
    terminal's escape), is the word, to either tokenizer; a vertical tab, a form feed or a
    carriage return separates words as a space does; the cache keys changed with it."""
    from transformer_mt.data.tokenize import SubwordTokenizer, train_sentencepiece

    hidden = ["Ein Mäd\u00adchen übt Fran\u200bzö\u2060sisch im \ufeffCafé.",
              "Ein\x00 Mäd\x07chen\x1b übt\x0bFranzö\x7fsisch\x0cim\x85Café\x9f."]
    model = train_sentencepiece([NFC.lower(), NFC] * 50, DataConfig(tokenizer="sentencepiece",
                                                                   vocab_size=400))
    for tokenizer in (WordTokenizer("de"), SubwordTokenizer(model)):
        plain = next(tokenizer.tokenize([NFC]))
        assert list(tokenizer.tokenize(hidden)) == [plain, plain]
        assert "soft hyphens" in tokenizer.key and "control characters" in tokenizer.key



def test_a_few_sentences_are_segmented_as_a_corpus_is():
    """Fewer sentences than ``POOLED`` (a translation's) are encoded one by one, more as one
    batch in SentencePiece's pool of threads: the same pieces either way, and in order."""
    from transformer_mt.data.tokenize import POOLED, SubwordTokenizer, train_sentencepiece

    texts = [f"{NFC} Nummer {n}, {'sehr ' * (n % 5)}schnell!" for n in range(POOLED + 9)]
    model = train_sentencepiece(texts * 4, DataConfig(tokenizer="sentencepiece", vocab_size=300))
    pieces = SubwordTokenizer(model)
    corpus = list(pieces.tokenize(texts))  # as a batch
    assert [next(pieces.tokenize([t])) for t in texts] == corpus  # each alone
    assert list(pieces.tokenize(texts[:POOLED - 1])) == corpus[:POOLED - 1]  # a few at once
    assert len({len(p) for p in corpus}) > 3  # segmentations of several lengths

LENGTHS = [(n % 17 + 1, (n * 7) % 23 + 1) for n in range(500)]


def test_token_batches_cover_every_example_once_within_budget():
    batches = make_batches(LENGTHS, max_tokens=200, seed=1, epoch=0)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(LENGTHS)))
    for b in batches:
        longest = max(max(LENGTHS[i]) for i in b)
        assert len(b) * longest <= 200 or len(b) == 1
    same = make_batches(LENGTHS, 200, 1, 0)  # a pure function of (seed, epoch)
    assert [b.tolist() for b in same] == [b.tolist() for b in batches]
    other = make_batches(LENGTHS, 200, 1, 1)  # reshuffled every epoch
    assert [b.tolist() for b in other] != [b.tolist() for b in batches]


def plain_make_batches(lengths, max_tokens, seed, epoch, shuffle=True):
    """The planner written with Python lists (as it was before it moved to arrays)."""
    gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(len(lengths), generator=gen).tolist() if shuffle else \
        list(range(len(lengths)))
    order.sort(key=lambda i: (lengths[i][1], lengths[i][0]))
    batches, current, longest = [], [], 0
    for i in order:
        size = max(lengths[i])
        if current and (len(current) + 1) * max(longest, size) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        batches.append(current)
    if shuffle:
        perm = torch.randperm(len(batches), generator=gen).tolist()
        batches = [batches[i] for i in perm]
    return batches


@pytest.mark.parametrize("shuffle", [True, False])
def test_array_planner_equals_the_plain_one(shuffle):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 60, size=(20_000, 2)).tolist()
    fast = make_batches(np.array(lengths, dtype=np.int32), 1000, 7, 3, shuffle)
    assert [b.tolist() for b in fast] == plain_make_batches(lengths, 1000, 7, 3, shuffle)


def test_length_bucketing_keeps_padding_small():
    batches = make_batches(LENGTHS, max_tokens=200, seed=1, epoch=0)
    real = sum(t for _, t in LENGTHS)
    padded = sum(len(b) * max(LENGTHS[i][1] for i in b) for b in batches)
    assert 1 - real / padded < 0.05


def test_ranks_share_each_step_of_the_single_process_plan():
    """max_tokens is a step's budget: N ranks split each step of the 1-process plan."""
    single = make_batches(LENGTHS, 200, 3, 2)
    steps = epoch_steps(LENGTHS, 200, 3, 2, parts=3)
    assert len(steps) == len(single) and all(len(s) == 3 for s in steps)
    for batch, pieces in zip(single, steps, strict=True):
        assert [i for piece in pieces for i in piece] == batch.tolist()  # same examples, order
        assert max(map(len, pieces)) - min(map(len, pieces)) <= 1
    assert Counter(i for s in steps for b in s for i in b) == Counter(range(len(LENGTHS)))
    assert [[p.tolist() for p in s] for s in epoch_steps(LENGTHS, 200, 3, 2)] == \
        [[b.tolist()] for b in single]
