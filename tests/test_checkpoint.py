from __future__ import annotations

import errno
import os
import pickle

import pytest
import torch

from tests.conftest import run_cli
from transformer_mt.config import Config, ModelConfig
from transformer_mt.data.vocab import Vocab
from transformer_mt.errors import CheckpointError, MTError
from transformer_mt.model.transformer import build_model
from transformer_mt.train import checkpoint as ck


def small_checkpoint(seed: int = 0) -> dict:
    torch.manual_seed(seed)
    cfg = Config(model=ModelConfig(d_model=16, n_heads=2, n_encoder_layers=1,
                                   n_decoder_layers=1, d_ff=32))
    vocab = Vocab.build([["a", "b"]], min_freq=1)
    model = build_model(cfg.model, len(vocab), len(vocab))
    return ck.make_checkpoint(model, cfg, vocab, vocab, {"step": seed})


def test_round_trip_rebuilds_the_model(tmp_path):
    ckpt = small_checkpoint()
    ck.save_checkpoint(ckpt, tmp_path / "m.pt")
    model, cfg, src_vocab, _ = ck.model_from_checkpoint(ck.load_checkpoint(tmp_path / "m.pt"))
    assert cfg.model.d_model == 16 and len(src_vocab) == 6
    for k, v in model.state_dict().items():
        assert torch.equal(v, ckpt["model"][k])


def test_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    ck.save_checkpoint(small_checkpoint(1), path)
    before = path.read_bytes()

    def disk_full(obj, f):
        f.write(b"partial data")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(MTError, match=r"No space left on device.*unchanged"):
        ck.save_checkpoint(small_checkpoint(2), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left


class Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / "evil.pt"
    ckpt = small_checkpoint()
    ckpt["progress"] = {"step": Payload()}
    torch.save(ckpt, evil)
    with pytest.raises(CheckpointError, match="refusing to load"):
        ck.load_checkpoint(evil)
    plain = tmp_path / "plain.pkl"
    plain.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(CheckpointError):
        ck.load_checkpoint(plain)
    assert not (tmp_path / "PWNED").exists()


def test_truncated_foreign_and_future_checkpoints(tmp_path):
    good = tmp_path / "good.pt"
    ck.save_checkpoint(small_checkpoint(), good)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        ck.load_checkpoint(truncated)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="not a transformer_mt checkpoint"):
        ck.load_checkpoint(foreign)
    future = tmp_path / "future.pt"
    ckpt = small_checkpoint()
    ckpt["format_version"] = 99
    torch.save(ckpt, future)
    with pytest.raises(CheckpointError, match="format version 99"):
        ck.load_checkpoint(future)
    with pytest.raises(CheckpointError, match="not found"):
        ck.load_checkpoint(tmp_path / "missing.pt")


def test_weights_that_do_not_fit_the_vocabulary_are_refused(tmp_path):
    ckpt = small_checkpoint()
    ckpt["tgt_vocab"] = [*ckpt["tgt_vocab"], "extra"]
    with pytest.raises(CheckpointError, match="do not fit"):
        ck.model_from_checkpoint(ckpt)


def test_average_of_identical_checkpoints_is_the_same_model(tmp_path):
    a, b = small_checkpoint(0), small_checkpoint(1)
    ck.save_checkpoint(a, tmp_path / "a.pt")
    ck.save_checkpoint(b, tmp_path / "b.pt")
    avg = ck.average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"])
    key = "encoder.layers.0.ffn.linear1.weight"
    assert torch.allclose(avg["model"][key], (a["model"][key] + b["model"][key]) / 2)
    assert len(avg["progress"]["averaged_from"]) == 2


@pytest.mark.parametrize("content", [b"", b"garbage bytes", None])
def test_cli_bad_checkpoint_is_one_line(tmp_path, content):
    path = tmp_path / "x.pt"
    if content is not None:
        path.write_bytes(content)
    result = run_cli(["translate", "--checkpoint", str(path), "Hallo"])
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr and "x.pt" in result.stderr
