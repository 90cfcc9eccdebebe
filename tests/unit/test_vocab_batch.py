from __future__ import annotations

import pytest
import torch

from transformer_mt.data.batch import Batch
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID, Vocab
from transformer_mt.errors import DataError

SENTS = [["a", "b", "c"], ["a", "b"], ["a", "d"], ["e"]]


def test_vocab_order_min_freq_and_specials():
    v = Vocab.build(SENTS, min_freq=2)
    assert v.itos[:4] == list(SPECIALS)
    assert (UNK_ID, PAD_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert v.itos[4:] == ["a", "b"]  # a (3) before b (2); c, d, e seen once are dropped
    v1 = Vocab.build(SENTS, min_freq=1)
    assert v1.itos[4:] == ["a", "b", "c", "d", "e"]  # ties broken alphabetically
    assert Vocab.build(SENTS, min_freq=1, max_size=6).itos[4:] == ["a", "b"]


def test_vocab_encode_decode_unknown():
    v = Vocab.build(SENTS, min_freq=2)
    ids = v.encode(["a", "zzz", "b"], bos=True)
    assert ids == [BOS_ID, 4, UNK_ID, 5, EOS_ID]
    assert v.decode([*ids, 4, 4]) == ["a", "<unk>", "b"]  # stops at <eos>


def test_vocab_save_load_round_trip(tmp_path):
    v = Vocab.build([["Straße", "über", "a"], ["über"]], min_freq=1)
    v.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json") == v
    (tmp_path / "bad.json").write_text('{"no": 1}')
    with pytest.raises(DataError):
        Vocab.load(tmp_path / "bad.json")


def test_batch_shift_masks_and_counts():
    src = [torch.tensor([5, 6, 7, EOS_ID]), torch.tensor([8, EOS_ID])]
    tgt = [torch.tensor([BOS_ID, 9, 10, EOS_ID]), torch.tensor([BOS_ID, 11, EOS_ID])]
    b = Batch.from_ids(src, tgt)
    assert b.src.tolist() == [[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]]
    assert b.tgt_in.tolist() == [[BOS_ID, 9, 10], [BOS_ID, 11, EOS_ID]]
    assert b.tgt_out.tolist() == [[9, 10, EOS_ID], [11, EOS_ID, PAD_ID]]
    assert b.n_tokens == 5 and b.n_src_tokens == 6
    # one contiguous target tensor travels to the device; the shifted halves are views of it
    assert b.tgt.is_contiguous() and b.tgt_in.data_ptr() == b.tgt.data_ptr()
    assert b.tgt_out.data_ptr() == b.tgt[:, 1:].data_ptr()
    assert b.src_mask.shape == (2, 1, 1, 4)
    assert b.src_mask[1, 0, 0].tolist() == [True, True, False, False]
    assert b.padding_fraction == pytest.approx(1 - 11 / 14)
