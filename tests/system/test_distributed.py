"""Two processes with gloo on the CPU through torchrun: one process's result; rank 0 writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from tests.helpers import REPO, TINY_OVERRIDES, run_cli
from transformer_mt.build import model_from_checkpoint
from transformer_mt.checkpoint import load_checkpoint
from transformer_mt.data.batch import source_mask

COMMON = ["model.dropout=0.0", "train.max_steps=6", "train.eval_every=3", "train.save_every=3",
          "train.device=cpu", "train.threads=1", "train.max_tokens=300"]


def _sets(*overrides: str) -> list[str]:
    return [a for o in [*TINY_OVERRIDES, *COMMON, *overrides] for a in ("--set", o)]


def test_two_ranks_train_like_one_process_with_the_same_budget(tmp_path):
    """train.max_tokens is a step's budget: 2 ranks take the 1-process run's steps, each rank
    half of every batch, and end with the same weights."""
    cache = tmp_path / "fresh-cache"  # nothing tokenized yet: both ranks want to prepare data
    ddp_dir, single_dir = tmp_path / "ddp", tmp_path / "single"
    env = dict(os.environ, MT_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    ddp = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "transformer_mt", "train", "--config", "config/quickstart.yaml", "--run-dir",
         str(ddp_dir), *_sets()],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    single = run_cli(["train", "--config", "config/quickstart.yaml", "--run-dir",
                      str(single_dir), *_sets()],
                     env={"MT_CACHE_DIR": str(cache)})
    assert single.returncode == 0, single.stderr

    # The two models compute the same function. (Their raw weights are compared through
    # outputs: parameters whose true gradient is zero, like the key biases, which softmax
    # ignores, receive float noise of a different order from 1 vs 2 processes, and Adam scales
    # any nonzero gradient to a step of about lr; they change no output.)
    out_a, out_b = (_log_probs(run_dir / "last.pt") for run_dir in (ddp_dir, single_dir))
    assert torch.allclose(out_a, out_b, atol=5e-4), (out_a - out_b).abs().max()

    # The logged target tokens are all ranks' together (not rank 0's count times 2), and
    # DDP was set up without its deprecated broadcast_buffers.
    tokens = [[r["tokens"] for r in _records(d, "train")] for d in (ddp_dir, single_dir)]
    assert tokens[0] == tokens[1] and sum(tokens[1]) > 0
    assert "deprecated" not in ddp.stderr, ddp.stderr[-2000:]

    # Each file of the corpus was tokenized once, under the lock; the other rank reused it.
    assert ddp.stderr.count("INFO tokenizing ") == 4  # train and val, de and en
    assert "tokenizing" not in single.stderr

    # Only rank 0 wrote: one record per step, the log has rank 0's lines only.
    assert [r["step"] for r in _records(ddp_dir, "train")] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in _records(ddp_dir, "valid")] == [3, 6]
    log = (ddp_dir / "train.log").read_text()
    assert "process 0 of 2" in log and "process 1 of 2" not in log
    assert "process 1 of 2" in ddp.stderr  # rank 1 ran, and logged to the console only
    losses, single_losses = ([r["loss"] for r in _records(d, "train")]
                             for d in (ddp_dir, single_dir))
    assert len(losses) == len(single_losses) == 6  # the same steps
    assert losses == pytest.approx(single_losses, rel=1e-4, abs=1e-4)
    valid, single_valid = ([r["val_loss"] for r in _records(d, "valid")]
                           for d in (ddp_dir, single_dir))
    assert valid == pytest.approx(single_valid, abs=2e-4)

    # every rank saved its own random streams, seeded apart (train.seed + rank)
    rng = torch.load(ddp_dir / "last.pt", weights_only=True)["training_state"]["rng"]["ranks"]
    assert len(rng) == 2 and not torch.equal(rng[0]["torch"], rng[1]["torch"])

    # the same run resumes on one process: the batches stay, a warning says it is not exact
    resumed = run_cli(["train", "--config", "config/quickstart.yaml", "--run-dir",
                       str(ddp_dir), *_sets("train.max_steps=8")],
                      env={"MT_CACHE_DIR": str(cache)})
    assert resumed.returncode == 0, resumed.stderr
    assert "another number of processes" in resumed.stderr
    assert torch.load(ddp_dir / "last.pt", weights_only=True)["progress"]["step"] == 8


def test_two_ranks_end_a_budget_in_minutes_at_the_same_step(tmp_path):
    """train.max_minutes under torchrun: each rank's clock is its own, so the ranks take the
    largest at log steps and end there together (a rank that stopped alone would leave the
    other waiting in an all-reduce); rank 0 validates and saves that step."""
    run_dir = tmp_path / "ddp"
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    ddp = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "transformer_mt", "train", "--config", "config/quickstart.yaml", "--run-dir",
         str(run_dir), *_sets("train.max_steps=null", "train.max_epochs=null",
                              "train.max_minutes=0.01", "train.log_every=4",
                              "train.eval_every=1000", "train.save_every=1000")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    progress = torch.load(run_dir / "last.pt", weights_only=True)["progress"]
    assert progress["step"] % 4 == 0 and progress["seconds"] >= 0.6
    assert [r["step"] for r in _records(run_dir, "valid")] == [progress["step"]]
    assert ddp.stderr.count(f"done at step {progress['step']} ") == 2  # both ranks, that step


def _records(run_dir, kind: str) -> list[dict]:
    """The run's metrics.jsonl records of ``kind`` (train, valid)."""
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r["type"] == kind]


def _log_probs(checkpoint) -> torch.Tensor:
    """The checkpoint's model's log-probabilities for a fixed random batch (8 pairs)."""
    model = model_from_checkpoint(load_checkpoint(checkpoint))[0]
    gen = torch.Generator().manual_seed(0)
    v_src, v_tgt = model.encoder.embed.embedding.num_embeddings, model.decoder.project.out_features
    src = torch.randint(4, v_src, (8, 12), generator=gen)
    tgt = torch.randint(4, v_tgt, (8, 10), generator=gen)
    with torch.no_grad():
        return model(src, tgt, source_mask(src)).log_softmax(-1)
