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
    a = model_from_checkpoint(load_checkpoint(ddp_dir / "last.pt"))[0]
    b = model_from_checkpoint(load_checkpoint(single_dir / "last.pt"))[0]
    gen = torch.Generator().manual_seed(0)
    v_src, v_tgt = a.encoder.embed.embedding.num_embeddings, a.decoder.project.out_features
    src = torch.randint(4, v_src, (8, 12), generator=gen)
    tgt = torch.randint(4, v_tgt, (8, 10), generator=gen)
    with torch.no_grad():
        out_a = a(src, tgt, source_mask(src)).log_softmax(-1)
        out_b = b(src, tgt, source_mask(src)).log_softmax(-1)
    assert torch.allclose(out_a, out_b, atol=5e-4), (out_a - out_b).abs().max()

    # The logged target tokens are all ranks' together (not rank 0's count times 2), and
    # DDP was set up without its deprecated broadcast_buffers.
    def tokens(run_dir):
        records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        return [r["tokens"] for r in records if r["type"] == "train"]

    assert tokens(ddp_dir) == tokens(single_dir) and sum(tokens(single_dir)) > 0
    assert "deprecated" not in ddp.stderr, ddp.stderr[-2000:]

    # Each file of the corpus was tokenized once, under the lock; the other rank reused it.
    assert ddp.stderr.count("INFO tokenizing ") == 4  # train and val, de and en
    assert "tokenizing" not in single.stderr

    # Only rank 0 wrote: one record per step, the log has rank 0's lines only.
    records = [json.loads(x) for x in (ddp_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["type"] == "train"] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in records if r["type"] == "valid"] == [3, 6]
    log = (ddp_dir / "train.log").read_text()
    assert "process 0 of 2" in log and "process 1 of 2" not in log
    assert "process 1 of 2" in ddp.stderr  # rank 1 ran, and logged to the console only
    losses = [r["loss"] for r in records if r["type"] == "train"]
    single_losses = [json.loads(x)["loss"] for x in
                     (single_dir / "metrics.jsonl").read_text().splitlines()
                     if json.loads(x)["type"] == "train"]
    assert len(losses) == len(single_losses) == 6  # the same steps
    assert losses == pytest.approx(single_losses, rel=1e-4, abs=1e-4)
    valid = [r["val_loss"] for r in records if r["type"] == "valid"]
    single_valid = [json.loads(x)["val_loss"] for x in
                    (single_dir / "metrics.jsonl").read_text().splitlines()
                    if json.loads(x)["type"] == "valid"]
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
