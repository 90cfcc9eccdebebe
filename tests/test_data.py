from __future__ import annotations

import shutil
from collections import Counter

import pytest

from tests.conftest import DATA_DIR, needs_data
from transformer_mt.config import DataConfig
from transformer_mt.data import multi30k, tokenize
from transformer_mt.data.loader import epoch_steps, make_batches, read_tokenized
from transformer_mt.errors import DataError


@needs_data
def test_locate_verifies_and_reads_parallel_splits():
    src, tgt, sums = multi30k.load_split("val", data_dir=DATA_DIR)
    assert len(src) == len(tgt) == 1014
    assert sums["de"] == multi30k.SHA256["val.de.gz"]


@needs_data
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
    assert multi30k.sha256_of(cached) == multi30k.SHA256["val.en.gz"]
    multi30k.locate("val.en.gz")
    assert calls == ["val.en.gz"]  # verified cache is reused


def test_different_line_counts_are_refused(tmp_path):
    (tmp_path / "a.de").write_text("eins\nzwei\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("one\n", encoding="utf-8")
    with pytest.raises(DataError, match="has 2 lines but"):
        multi30k.read_parallel(tmp_path / "a.de", tmp_path / "a.en")


@needs_data
def test_tokenization_is_cached_and_max_pairs_applies(monkeypatch):
    cfg = DataConfig(data_dir=str(DATA_DIR))
    _, _, src_tok, _ = read_tokenized(cfg, "val")
    assert src_tok[0][:3] == ["Eine", "Gruppe", "von"]

    def no_more_tokenizing(*args, **kwargs):
        raise AssertionError("tokenized again instead of reading the cache")

    monkeypatch.setattr(tokenize, "tokenize", no_more_tokenizing)
    src2, _, src_tok2, _ = read_tokenized(cfg, "val", max_pairs=10)
    assert len(src2) == len(src_tok2) == 10 and src_tok2 == src_tok[:10]


def test_detokenize_joins_english_punctuation():
    assert tokenize.detokenize(["A", "man", "'s", "dog", "(", "black", ")", "runs", "."],
                               "en") == "A man's dog (black) runs."


LENGTHS = [(n % 17 + 1, (n * 7) % 23 + 1) for n in range(500)]


def test_token_batches_cover_every_example_once_within_budget():
    batches = make_batches(LENGTHS, max_tokens=200, seed=1, epoch=0)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(LENGTHS)))
    for b in batches:
        longest = max(max(LENGTHS[i]) for i in b)
        assert len(b) * longest <= 200 or len(b) == 1
    assert make_batches(LENGTHS, 200, 1, 0) == batches  # a pure function of (seed, epoch)
    assert make_batches(LENGTHS, 200, 1, 1) != batches  # reshuffled every epoch


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
    for batch, pieces in zip(single, steps):
        assert [i for piece in pieces for i in piece] == batch  # the same examples, in order
        assert max(map(len, pieces)) - min(map(len, pieces)) <= 1
    assert Counter(i for s in steps for b in s for i in b) == Counter(range(len(LENGTHS)))
    assert epoch_steps(LENGTHS, 200, 3, 2) == [[b] for b in single]
