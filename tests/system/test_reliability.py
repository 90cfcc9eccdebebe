"""Never lose a run: exact resume after SIGKILL, SIGTERM handling, determinism, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.helpers import REPO, run_cli, tiny_train_args, toy_corpus
from transformer_mt.training.schedule import learning_rate

_args = tiny_train_args


def _steps(run_dir, kind: str = "train") -> list[int]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["step"] for r in records if r["type"] == kind]


def _weights(path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["model"]


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "transformer_mt", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _wait_for_step(proc: subprocess.Popen, run_dir, step: int, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = _steps(run_dir)
        if done and done[-1] >= step:
            return done[-1]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.005)
    raise AssertionError(f"step {step} not reached in {timeout}s")


# Bitwise on the CPU. On a GPU the fused attention's backward and cuBLAS's reductions are not
# bitwise reproducible (atomics, and kernels chosen by timing): there, close.
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU"))]


def _same(a: torch.Tensor, b: torch.Tensor, device: str) -> bool:
    return torch.equal(a, b) if device == "cpu" else torch.allclose(a, b, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tokens", [
    ("data.tokenizer=spacy",),
    ("data.tokenizer=sentencepiece", "data.vocab_size=500", "data.shared_vocab=true",
     "train.lr_schedule=linear"),
    ("data.tokenizer=sentencepiece", "data.vocab_size=500", "data.shared_vocab=true",
     f"data.train=[{toy_corpus('train')}, {toy_corpus('valid')[:-1]}, weight: 0.5, "
     "tag: '<bt>'}]",
     "data.sampling.alpha=0.1", "data.sampling.copies=2")],
    ids=["spacy", "sentencepiece-linear-lr", "two-corpora-sampled"])
def test_resume_after_sigkill_is_bitwise_exact(tmp_path, tokens, device):
    n = 14
    # log_every=3 with save_every=4: a save falls inside a log interval, whose partial loss sums
    # must survive the kill too for the logged losses to match
    common = (f"train.max_steps={n}", "train.eval_every=5", "train.keep_last=0",
              "train.log_every=3", f"train.device={device}", *tokens)
    straight = tmp_path / "straight"
    result = run_cli(_args(straight, *common, "train.save_every=1000"))
    assert result.returncode == 0, result.stderr

    killed = tmp_path / "killed"
    proc = _start(_args(killed, *common, "train.save_every=4"))
    reached = _wait_for_step(proc, killed, 6)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    saved = torch.load(killed / "last.pt", weights_only=True)["progress"]["step"]
    assert saved % 4 == 0 and saved < n, (saved, reached)

    result = run_cli(_args(killed, *common, "train.save_every=4"))
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stderr
    a, b = _weights(straight / "last.pt"), _weights(killed / "last.pt")
    assert a.keys() == b.keys()
    assert all(_same(a[k], b[k], device) for k in a), "resumed weights differ from a straight run"
    assert _steps(killed) == [3, 6, 9, 12]  # every log record exactly once
    assert _steps(killed, "valid") == _steps(straight, "valid") == [5, 10, 14]
    if device == "cpu":
        assert _losses(killed) == _losses(straight)
    else:
        assert _losses(killed) == pytest.approx(_losses(straight), rel=1e-3)
    # the logged rates are the schedule's, counted to this run's max_steps
    schedule = "linear" if "train.lr_schedule=linear" in tokens else "inverse_sqrt"
    records = [json.loads(x) for x in (killed / "metrics.jsonl").read_text().splitlines()]
    assert [r["lr"] for r in records if r["type"] == "train"] == [
        learning_rate(step, 1e-3, 2, schedule, n) for step in (3, 6, 9, 12)]


def _losses(run_dir) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x)["loss"] for x in lines if json.loads(x)["type"] == "train"]


@pytest.mark.parametrize("device", DEVICES)
def test_same_seed_gives_the_same_loss_curve(tmp_path, device):
    for name in ("a", "b"):
        result = run_cli(_args(tmp_path / name, "train.max_steps=5", "train.eval_every=100",
                               f"train.device={device}"))
        assert result.returncode == 0, result.stderr
    if device == "cpu":
        assert _losses(tmp_path / "a") == _losses(tmp_path / "b")
    else:
        assert _losses(tmp_path / "a") == pytest.approx(_losses(tmp_path / "b"), rel=1e-3)
    result = run_cli(_args(tmp_path / "c", "train.max_steps=5", "train.eval_every=100",
                           f"train.device={device}", "train.seed=99"))
    assert _losses(tmp_path / "c") != _losses(tmp_path / "a")


@pytest.mark.parametrize("start", ["auto", "overwrite"])
def test_sigterm_saves_a_checkpoint_and_exits_non_zero(tmp_path, start):
    """The stop's save is last.pt alone: a step file of its own (off the save schedule) would
    push a scheduled save out of the train.keep_last kept for averaging. Its message says how
    to resume: the same command again, but not where that command is --start overwrite
    (which would delete the run) or new (which would refuse it)."""
    run_dir = tmp_path / "run"
    sets = ("train.save_every=100000", "train.eval_every=100000", "train.keep_last=3")
    proc = _start([*_args(run_dir, "train.max_steps=100000", *sets), "--start", start])
    _wait_for_step(proc, run_dir, 3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    step = torch.load(run_dir / "last.pt", weights_only=True)["progress"]["step"]
    assert step >= 3 and _steps(run_dir)[-1] == step
    assert not list(run_dir.glob("step_*.pt"))
    assert "checkpoint saved to" in err and "Traceback" not in err
    if start == "auto":
        assert err.strip().endswith("run the same command again to resume")
        return
    assert "with --start resume in place of --start overwrite" in err
    resumed = run_cli([*_args(run_dir, f"train.max_steps={step + 1}", *sets),
                       "--start", "resume"])
    assert resumed.returncode == 0, resumed.stderr
    assert _steps(run_dir)[-2:] == [step, step + 1]  # went on from the stop, not afresh


def _one_line_error(result) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    return lines[-1]


def test_non_finite_loss_stops_with_a_message(tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli(_args(run_dir, "train.lr=1e30", "train.warmup_steps=0",
                           "train.clip_grad_norm=null", "train.save_every=1",
                           "train.max_steps=20"))
    line = _one_line_error(result)
    assert "NaN" in line or "nan" in line or "inf" in line
    _assert_names_only_existing_checkpoints(line)
    if (run_dir / "last.pt").exists():
        assert all(torch.isfinite(v).all() for v in _weights(run_dir / "last.pt").values())


def _assert_names_only_existing_checkpoints(line: str) -> None:
    import re

    named = re.findall(r"(\S+\.pt)\b", line)
    assert all(os.path.exists(p) for p in named), line
    assert named or "No checkpoint was saved" in line, line


def test_no_checkpoint_ever_holds_nan_weights(tmp_path):
    """Validating every step with diverging weights: best.pt is never written with NaNs."""
    run_dir = tmp_path / "run"
    result = run_cli(_args(run_dir, "train.lr=1e30", "train.warmup_steps=0",
                           "train.clip_grad_norm=null", "train.eval_every=1",
                           "train.log_every=1000", "train.max_steps=20"))
    line = _one_line_error(result)
    assert "NaN/inf" in line
    _assert_names_only_existing_checkpoints(line)
    for path in run_dir.glob("*.pt"):
        assert all(torch.isfinite(v).all() for v in _weights(path).values()), path


def test_a_new_run_does_not_clobber_an_earlier_one(tmp_path):
    run_dir = tmp_path / "run"
    assert run_cli(_args(run_dir, "train.max_steps=3", "train.keep_last=1")).returncode == 0
    (run_dir / "last.pt").unlink()  # results remain, nothing to resume
    best = (run_dir / "best.pt").read_bytes()
    metrics = (run_dir / "metrics.jsonl").read_text()
    line = _one_line_error(run_cli(_args(run_dir, "train.max_steps=3", "model.d_model=64")))
    assert "another run's files" in line and "--start overwrite" in line
    assert (run_dir / "best.pt").read_bytes() == best
    assert (run_dir / "metrics.jsonl").read_text() == metrics
    result = run_cli([*_args(run_dir, "train.max_steps=3", "model.d_model=64"),
                      "--start", "overwrite"])
    assert result.returncode == 0, result.stderr
    assert _steps(run_dir) == [1, 2, 3]  # the new run's records only
    assert torch.load(run_dir / "best.pt", weights_only=True)["config"]["model"]["d_model"] == 64
    last = (run_dir / "last.pt").read_bytes()
    line = _one_line_error(run_cli([*_args(run_dir, "train.max_steps=5"), "--start", "new"]))
    assert "already holds a run" in line and (run_dir / "last.pt").read_bytes() == last


def test_a_second_trainer_on_a_live_run_directory_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    first = _start(_args(run_dir, "train.max_steps=100000", "train.save_every=2",
                         "train.eval_every=100000"))
    try:
        _wait_for_step(first, run_dir, 3)
        line = _one_line_error(run_cli(_args(run_dir, "train.max_steps=100000")))
        assert "in use by another mt train" in line and f"pid {first.pid}" in line
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    steps = _steps(run_dir)
    assert steps == sorted(set(steps))  # no duplicated or out-of-order records


def test_resume_drops_a_half_written_metrics_line_and_warns_on_changed_batches(tmp_path):
    run_dir = tmp_path / "run"
    assert run_cli(_args(run_dir, "train.max_steps=4", "train.save_every=2",
                         "train.eval_every=100")).returncode == 0
    with open(run_dir / "metrics.jsonl", "a") as f:
        f.write('{"type": "train", "st')  # the process was killed mid-write
    (run_dir / ".last.pt.x1y2.tmp").write_bytes(b"partial")  # and mid-save
    result = run_cli(_args(run_dir, "train.max_steps=6", "train.save_every=2",
                           "train.eval_every=100", "train.max_tokens=500"))
    assert result.returncode == 0, result.stderr
    assert "train.max_tokens=600, the config now says 500" in result.stderr
    assert "train.max_steps" not in result.stderr  # inverse_sqrt runs may simply go on longer
    assert _steps(run_dir) == [1, 2, 3, 4, 5, 6]  # every line parses again
    assert not list(run_dir.glob(".*.tmp"))
    plot = run_cli(["plot", str(run_dir), "--output", str(tmp_path / "plots")])
    assert plot.returncode == 0, plot.stderr


def test_resume_with_another_model_config_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    assert run_cli(_args(run_dir, "train.max_steps=2")).returncode == 0
    line = _one_line_error(run_cli(_args(run_dir, "train.max_steps=4", "model.d_model=64")))
    assert "model.d_model=32" in line and "new --run-dir" in line
    line = _one_line_error(run_cli([*_args(tmp_path / "fresh"), "--start", "resume"]))
    assert "no checkpoint" in line and not (tmp_path / "fresh").exists()


def test_resume_in_another_precision_restarts_the_loss_scaler(tmp_path):
    """A bf16 run resumed as fp16 (or back) keeps its weights and optimizer; only the loss
    scaler, which one of them does not have, starts afresh."""
    run_dir = tmp_path / "run"
    assert run_cli(_args(run_dir, "train.max_steps=2", "train.save_every=2")).returncode == 0
    ckpt = torch.load(run_dir / "last.pt", weights_only=True)
    ckpt["training_state"]["precision"] = "fp16"
    ckpt["training_state"]["scaler"] = {"scale": 1024.0, "growth_factor": 2.0,
                                        "backoff_factor": 0.5, "growth_interval": 2000,
                                        "_growth_tracker": 3}
    torch.save(ckpt, run_dir / "last.pt")
    result = run_cli(_args(run_dir, "train.max_steps=4", "train.save_every=2"))
    assert result.returncode == 0, result.stderr
    assert "trained in fp16 and resumes in fp32" in result.stderr


def test_cuda_where_there_is_none(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    line = _one_line_error(run_cli(_args(tmp_path / "run", "train.device=cuda")))
    assert "no CUDA GPU" in line and "train.device=cpu" in line


@pytest.fixture
def checkpoint(trained_run):
    return trained_run[0] / "best.pt"


def test_translation_input_errors(checkpoint, tmp_path):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Ein Hund.\nEin Mann fährt.\n".encode("latin-1"))
    line = _one_line_error(run_cli(["translate", "--checkpoint", str(checkpoint), "--input",
                                    str(latin1)]))
    assert "line 2" in line and "UTF-8" in line
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    line = _one_line_error(run_cli(["translate", "--checkpoint", str(checkpoint), "--input",
                                    str(empty)]))
    assert "empty" in line
    line = _one_line_error(run_cli(["translate", "--checkpoint", str(checkpoint), "   "]))
    assert "empty" in line
    out = tmp_path / "out.txt"
    out.write_text("keep me\n")
    result = run_cli(["translate", "--checkpoint", str(checkpoint), "--input",
                      str(tmp_path / "missing.txt"), "--output", str(out)])
    assert "not found" in _one_line_error(result)
    assert out.read_text() == "keep me\n"  # nothing the user had is lost


def test_bom_is_stripped_and_too_wide_beams_are_refused(checkpoint, tmp_path):
    text = tmp_path / "bom.txt"
    text.write_bytes("\ufeffEin Hund.\n".encode())
    with_bom = run_cli(["translate", "--checkpoint", str(checkpoint), "--input", str(text)])
    plain = run_cli(["translate", "--checkpoint", str(checkpoint), "Ein Hund."])
    assert with_bom.returncode == 0, with_bom.stderr
    assert with_bom.stdout == plain.stdout
    vocab = len(torch.load(checkpoint, weights_only=True)["tgt_vocab"])
    for flag in ("--beam", "--nbest"):
        line = _one_line_error(run_cli(["translate", "--checkpoint", str(checkpoint), flag,
                                        str(vocab), "Ein Hund."]))
        assert "too wide" in line and f"at most {(vocab - 2) // 2}" in line


def test_very_long_input_is_translated_whole_and_an_nbest_list_reads_its_start(checkpoint):
    """A sentence far past the model's limit is translated in parts (``long_sentences.py``),
    what Python's ``translate`` gives; an n-best list reads its first tokens, with a warning."""
    from transformer_mt.translate import Translator

    long_sentence = " ".join(["Hund"] * 3000)
    result = run_cli(["translate", "--checkpoint", str(checkpoint), long_sentence])
    assert result.returncode == 0, result.stderr
    assert "only the first" not in result.stderr
    assert result.stdout == Translator.load(checkpoint, "cpu").translate([long_sentence])[0] + "\n"
    result = run_cli(["translate", "--checkpoint", str(checkpoint), "--nbest", "2",
                      long_sentence])
    assert result.returncode == 0, result.stderr
    assert "3000 tokens; only the first" in result.stderr
    assert len(result.stdout.splitlines()) == 2
