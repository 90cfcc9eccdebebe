"""The trainer's parts: optimizer groups, precision, resume state per rank, learning-rate
schedules, stop signals, what the last checkpoint records."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import logging
import os
import re
import signal
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import run_cli, tiny_train_args
from tests.toy import make_model
from transformer_mt.config import TrainConfig
from transformer_mt.config.file import config_from_dict
from transformer_mt.precision import resolve_precision
from transformer_mt.training.distributed import DistInfo
from transformer_mt.training.resume import check_resumable, rank_rng_state, rng_state
from transformer_mt.training.schedule import learning_rate
from transformer_mt.training.state import Progress
from transformer_mt.training.stop import StopRequestedError, StopSignals
from transformer_mt.training.trainer import make_optimizer


def test_weight_decay_only_on_weight_matrices():
    model = make_model(tie_embeddings=False)
    opt = make_optimizer(model, TrainConfig(weight_decay=0.01))
    decayed = {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[i] for i in decayed} == {
        n for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n}
    assert "decoder.project.weight" in {names[i] for i in decayed}  # untied: a matrix
    assert not any("norm" in names[i] or "bias" in names[i] for i in decayed)
    every = [p for g in opt.param_groups for p in g["params"]]
    assert len(every) == len(list(model.parameters()))  # each parameter exactly once

    # a decayed step shrinks matrices; the embeddings and norms follow their gradients only
    tied = make_model()
    before = {n: p.detach().clone() for n, p in tied.named_parameters()}
    opt = make_optimizer(tied, TrainConfig(weight_decay=0.5, lr=0.1))
    for p in tied.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    after = dict(tied.named_parameters())
    assert not torch.equal(after["encoder.layers.0.ffn.linear1.weight"],
                           before["encoder.layers.0.ffn.linear1.weight"])
    for name in ("encoder.embed.embedding.weight", "encoder.layers.0.norm1.weight",
                 "encoder.layers.0.ffn.linear1.bias"):
        assert torch.equal(after[name], before[name]), name


def test_auto_precision_on_gpus_with_and_without_native_bf16(monkeypatch):
    gpu = torch.device("cuda", 0)
    for native, expected in ((True, "bf16"), (False, "fp16")):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                            lambda including_emulation=True, n=native: n or including_emulation)
        assert resolve_precision("auto", gpu) == expected  # emulated bf16 does not count
    assert resolve_precision("fp32", gpu) == "fp32"
    assert resolve_precision("auto", torch.device("mps")) == "fp32"


def test_each_rank_resumes_its_own_random_streams():
    states = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        states.append(rng_state())
    saved = {"ranks": states}
    state, exact = rank_rng_state(saved, 1, 2)
    assert exact and torch.equal(state["torch"], states[1]["torch"])
    state, exact = rank_rng_state(saved, 0, 1)  # fewer processes now: not exact
    assert not exact and torch.equal(state["torch"], states[0]["torch"])
    state, exact = rank_rng_state(saved, 2, 3)  # a new rank keeps its fresh seed
    assert state is None and not exact
    state, exact = rank_rng_state(states[0], 0, 1)  # early checkpoints: one state, no list
    assert exact and torch.equal(state["torch"], states[0]["torch"])


def test_learning_rate_schedules():
    """Both warm up alike; linear then falls in a straight line to zero after the last step."""
    peak, warmup, total = 1e-3, 10, 50
    for step in range(1, warmup):
        assert learning_rate(step, peak, warmup, "linear", total) == learning_rate(
            step, peak, warmup) == pytest.approx(peak * step / warmup)
    assert learning_rate(warmup, peak, warmup, "linear", total) == pytest.approx(peak)
    after = [learning_rate(s, peak, warmup, "linear", total) for s in range(warmup, total + 2)]
    drops = [a - b for a, b in itertools.pairwise(after)]
    assert drops == pytest.approx([peak / (total + 1 - warmup)] * len(drops))  # a straight line
    assert after[-2] > 0 and after[-1] == 0  # the last step still learns; beyond it, nothing
    assert learning_rate(4 * warmup, peak, warmup) == pytest.approx(peak / 2)  # inverse sqrt
    assert learning_rate(9, peak, 0) == pytest.approx(peak / 3)  # no warmup: peak / sqrt(step)
    with pytest.raises(ValueError):
        learning_rate(5, peak, warmup, "linear")


@pytest.mark.parametrize("schedule, warns", [("linear", True), ("inverse_sqrt", False)])
def test_resuming_with_another_length_warns_only_where_the_rates_depend_on_it(
        tmp_path, caplog, schedule, warns):
    """A linear schedule's rates are counted to max_steps: resuming with another max_steps is
    no longer the same run; an inverse_sqrt run may simply go on longer."""
    stored = config_from_dict({}, [f"train.lr_schedule={schedule}", "train.max_steps=1100"])
    now = config_from_dict({}, [f"train.lr_schedule={schedule}", "train.max_steps=1200"])
    with caplog.at_level(logging.WARNING):
        check_resumable(stored.to_dict(), now, tmp_path / "run")
    assert ("train.max_steps=1100, the config now says 1200" in caplog.text) is warns
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # the schedule itself changed: warned either way
        other = "inverse_sqrt" if schedule == "linear" else "linear"
        stored = config_from_dict({}, [f"train.lr_schedule={other}", "train.max_steps=1200"])
        check_resumable(stored.to_dict(), now, tmp_path / "run")
    assert f"train.lr_schedule={other}, the config now says {schedule}" in caplog.text


def _as_rank_1(monkeypatch, rank_0_says):
    """resume.checkpoint_to_resume on rank 1 of 2, rank 0's verdict given."""
    from transformer_mt.training import resume

    def gather(obj, info):  # the first exchange carries rank 0's verdict, the second problems
        gather.calls += 1
        return [rank_0_says, obj] if gather.calls == 1 else [None, obj]

    gather.calls = 0
    monkeypatch.setattr(resume, "gather_objects", gather)
    return resume.checkpoint_to_resume


def test_a_rank_that_does_not_see_rank_0s_checkpoint_refuses(tmp_path, monkeypatch):
    """Rank 0 decides whether a run resumes; a rank whose run directory differs (not shared
    between machines) refuses instead of starting at step 0 beside the others."""
    from transformer_mt.errors import TrainingError
    from transformer_mt.training.distributed import DistInfo
    from transformer_mt.training.run_dir import RunDir

    config, rank_1 = config_from_dict({}), DistInfo(rank=1, world_size=2)
    decide = _as_rank_1(monkeypatch, ("resume", 7))
    with pytest.raises(TrainingError, match=r"rank 0 resumes from .* rank 1 does not see it"):
        decide(RunDir(tmp_path / "run", is_main=False), config, "auto", rank_1)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "last.pt").write_bytes(b"rank 1's own")
    decide = _as_rank_1(monkeypatch, ("new", None))
    with pytest.raises(TrainingError, match=r"rank 0 sees no .* rank 1 does: .* shares"):
        decide(RunDir(tmp_path / "run", is_main=False), config, "auto", rank_1)
    decide = _as_rank_1(monkeypatch, ("error", "rank 0's one-line reason"))
    with pytest.raises(TrainingError, match="rank 0's one-line reason"):
        decide(RunDir(tmp_path / "run", is_main=False), config, "auto", rank_1)


def test_a_run_that_ends_inside_its_warmup_is_warned_about(tmp_path, trained_run):
    """Raising train.max_tokens (with the number of GPUs, say) makes an epoch fewer steps: a
    budget in epochs then ends inside the warmup, silently under-trained. Where the epochs end
    a run before its train.max_steps (whichever comes first), the log says so as it starts."""
    result = run_cli(tiny_train_args(tmp_path / "run", "train.max_steps=500",
                                     "train.max_epochs=2", "train.warmup_steps=100"))
    assert result.returncode == 0, result.stderr
    assert "fewer than twice its 100 warmup steps" in result.stderr
    assert "an epoch at train.max_tokens=600" in result.stderr
    said = re.search(r"train.max_epochs=2 ends this run after ~(\d+) steps, before "
                     r"train.max_steps=500 \((\d+) steps an epoch at train.max_tokens=600; "
                     r"with train.max_epochs=null it trains all 500\)", result.stderr)
    assert said and int(said[1]) == 2 * int(said[2]) < 500
    metrics = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert abs(json.loads(metrics[-1])["step"] - int(said[1])) <= 2  # (epochs vary by a batch)
    assert "warmup steps" not in trained_run[1].stderr  # 6 steps, 2 of warmup: no warning
    assert "ends this run" not in trained_run[1].stderr  # 6 steps, the first of 20 epochs


def test_last_checkpoint_holds_the_final_validations_verdict(tmp_path):
    """A run whose last step is a save step but not a validation step validates once more at
    the end; last.pt must record that verdict (best BLEU, its step, validations since), or a
    resumed run would compare against a stale best and could overwrite a better best.pt."""
    run_dir = tmp_path / "run"
    result = run_cli(tiny_train_args(run_dir, "train.max_steps=5", "train.eval_every=4",
                                     "train.save_every=5"))
    assert result.returncode == 0, result.stderr
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [(m["step"], m["val_bleu"]) for m in metrics if m.get("type") == "valid"]
    assert [step for step, _ in evals] == [4, 5]
    best = max(evals, key=lambda e: (e[1], -e[0]))  # the first of the best: only a gain counts
    progress = torch.load(run_dir / "last.pt", map_location="cpu",
                          weights_only=False)["progress"]
    assert (progress["step"], progress["best_bleu"], progress["best_step"]) == (5, *best[::-1])
    assert progress["bad_evals"] == sum(step > best[0] for step, _ in evals)
    assert sorted(p.name for p in run_dir.glob("step_*.pt")) == ["step_0000005.pt"]


def test_a_signal_while_preparing_stops_at_once_and_one_while_stepping_after_the_step():
    """Preparing the data can take minutes: Ctrl-C then stops at once (nothing to save);
    once the loop steps, it finishes the step and saves, and a second one stops at once."""
    stop = StopSignals(DistInfo(), torch.device("cpu"), log_every=1)
    before = signal.getsignal(signal.SIGINT)  # (ignored where the suite runs in the background)

    def signal_self(signum: int) -> None:
        os.kill(os.getpid(), signum)
        for _ in range(100):  # the handler runs in this thread, between two of these
            time.sleep(0.01)

    with stop.installed(), pytest.raises(StopRequestedError, match="SIGINT while preparing"
                                         ) as caught:
        signal_self(signal.SIGINT)
    assert caught.value.exit_code == 130 and not stop.agreed(1)
    stop.stepping = True
    with stop.installed():
        signal_self(signal.SIGTERM)
        assert stop.agreed(1) and "stopped by SIGTERM at step 1" in str(stop.error(1, Path("x")))
        with pytest.raises(KeyboardInterrupt):
            signal_self(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before  # put back


def test_a_signal_while_preparing_that_a_library_swallowed_stops_the_run_before_its_first_step():
    """A library that turns whatever it meets into an error of its own and goes on (numpy's
    import, torch's without NumPy) swallows the error a signal raised while preparing: the
    loop does not start, the same error stops the run."""
    stop = StopSignals(DistInfo(), torch.device("cpu"), log_every=1)
    with stop.installed():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(100):
                time.sleep(0.01)
        except StopRequestedError:
            pass  # what the library did
    with pytest.raises(StopRequestedError, match="SIGINT while preparing") as caught:
        stop.start_stepping()
    assert caught.value.exit_code == 130 and not stop.stepping
    calm = StopSignals(DistInfo(), torch.device("cpu"), log_every=1)
    calm.start_stepping()
    assert calm.stepping and not calm.agreed(1)


def test_a_signal_during_a_log_write_logs_nothing_inside_it_and_is_announced_after_the_step():
    """A signal's handler runs between two bytecodes of the main thread, maybe inside the log's
    own write to train.log: a log call there wrote into the file's writer again ("reentrant
    call inside BufferedWriter": a traceback on stderr, session 71's CI). The handler logs
    nothing; the step's end announces the signal, once."""
    stop = StopSignals(DistInfo(), torch.device("cpu"), log_every=1)
    stop.stepping = True
    writes: list[str] = []

    class Stream(io.StringIO):  # a log file that signals the process while it writes
        busy = False

        def write(self, text: str) -> int:
            if self.busy:  # what BufferedWriter refuses
                raise RuntimeError("reentrant call inside the log's writer")
            self.busy = True
            try:
                writes.append(text)
                if len(writes) == 1:
                    os.kill(os.getpid(), signal.SIGTERM)
                    for _ in range(100):  # the handler runs here, inside this write
                        time.sleep(0.01)
                return super().write(text)
            finally:
                self.busy = False

    handler = logging.StreamHandler(Stream())
    logger = logging.getLogger("transformer_mt")
    logger.addHandler(handler)
    try:
        with stop.installed(), contextlib.redirect_stderr(io.StringIO()) as stderr:
            logger.warning("step 1 loss 5.0")  # the signal arrives while this is written
            assert stop.signum == signal.SIGTERM and len(writes) == 1
            assert stop.agreed(1) and stop.agreed(2)
    finally:
        logger.removeHandler(handler)
    assert "Logging error" not in stderr.getvalue()
    assert writes[1:] == ["received SIGTERM by step 1: saving, then stopping\n"]


def _progress(run_dir: Path) -> dict:
    return torch.load(run_dir / "last.pt", map_location="cpu", weights_only=False)["progress"]


def test_a_budget_in_minutes_ends_the_run_as_max_steps_does_and_counts_over_resumes(tmp_path):
    """train.max_minutes: the machine's own budget (a GPU's 5 minutes, a CPU's hour). The run
    ends at the step where its training time passes the budget, validated and saved there as
    at max_steps; the time is kept in the checkpoint, so the same command again finds the run
    complete, and a bigger budget trains on from the time already spent."""
    run_dir = tmp_path / "run"
    budget = ["train.max_steps=null", "train.max_epochs=null", "train.eval_every=50",
              "train.save_every=50"]
    first = run_cli(tiny_train_args(run_dir, *budget, "train.max_minutes=0.02"))
    assert first.returncode == 0, first.stderr
    assert "train.max_minutes=0.02: the run ends after 0.02 minutes of training" in first.stderr
    progress = _progress(run_dir)
    step = progress["step"]
    assert 1.2 <= progress["seconds"] < 60 and step >= 1
    assert f"done at step {step} " in first.stderr and ": train.max_minutes)" in first.stderr
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["type"] == "valid"][-1] == step  # validated there
    assert (run_dir / f"step_{step:07d}.pt").exists()  # and saved: it averages with the rest

    again = run_cli(tiny_train_args(run_dir, *budget, "train.max_minutes=0.02"))
    assert again.returncode == 0 and f"already complete (step {step})" in again.stderr
    more = run_cli(tiny_train_args(run_dir, *budget, "train.max_minutes=0.04"))
    assert more.returncode == 0, more.stderr
    after = _progress(run_dir)
    assert after["step"] > step and 2.4 <= after["seconds"] < progress["seconds"] + 60


def test_a_budget_in_minutes_not_reached_changes_nothing(tmp_path, trained_run):
    """With train.max_minutes far away the run takes the same steps to the same losses, and
    stops at train.max_steps."""
    run_dir = tmp_path / "run"
    result = run_cli(tiny_train_args(run_dir, "train.max_minutes=600"))
    assert result.returncode == 0, result.stderr

    def records(directory: Path) -> list[tuple]:
        lines = (directory / "metrics.jsonl").read_text().splitlines()
        return [(r["type"], r["step"], r.get("loss"), r.get("val_loss"), r.get("val_bleu"))
                for r in map(json.loads, lines)]

    assert records(run_dir) == records(trained_run[0]) and records(run_dir)[-1][1] == 6
    assert "min of training)" in result.stderr  # (not ended by the budget)


def test_each_log_line_says_how_long_the_run_has_to_go(trained_run):
    """At the interval's pace, to the planned last step or to train.max_minutes, whichever
    comes first; the tiny run logs every step of its 6."""
    lines = [line for line in trained_run[1].stderr.splitlines() if " tok/s" in line]
    assert len(lines) == 6 and all(re.search(r"tok/s, ~\d+ s to go$", line)
                                   for line in lines[:-1])
    assert lines[-1].endswith("tok/s, ~0 s to go")
    t = TrainConfig(max_minutes=30)
    progress = Progress(step=100, seconds=600)
    assert progress.time_left(t, 1100, 2.0) == "20 min"  # 1,000 steps of 2 s: 33 min
    assert progress.time_left(t, 1100, 1.0) == "17 min"  # 1,000 s
    assert progress.time_left(TrainConfig(), 10_100, 0.6) == "1.7 h"
    assert progress.time_left(TrainConfig(), None, 1.0) == ""
    assert progress.time_left(t, 101, 45.0) == "45 s"
