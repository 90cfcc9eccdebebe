"""The CLI end to end on a few hundred Multi30k pairs: train, translate, evaluate, info, average."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TINY_OVERRIDES, needs_data, run_cli

pytestmark = needs_data


def _sets(overrides: list[str]) -> list[str]:
    return [arg for o in overrides for arg in ("--set", o)]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cli") / "run"
    result = run_cli(["train", "--config", "config/quickstart.yaml", "--run-dir", str(run_dir),
                      *_sets(TINY_OVERRIDES)])
    assert result.returncode == 0, result.stderr
    return run_dir, result


def test_train_writes_checkpoints_metrics_and_config(trained_run):
    run_dir, result = trained_run
    for name in ("last.pt", "best.pt", "config.yaml", "src_vocab.json", "tgt_vocab.json",
                 "metrics.jsonl", "train.log"):
        assert (run_dir / name).is_file(), name
    assert sorted(p.name for p in run_dir.glob("step_*.pt")) == ["step_0000003.pt",
                                                                 "step_0000006.pt"]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in records if r["type"] == "train"]
    assert train_steps == [1, 2, 3, 4, 5, 6]
    assert all({"loss", "lr", "tokens_per_s", "grad_norm"} <= r.keys()
               for r in records if r["type"] == "train")
    valid = [r for r in records if r["type"] == "valid"]
    assert [r["step"] for r in valid] == [3, 6]
    assert all({"val_loss", "val_ppl", "val_bleu", "val_chrf"} <= r.keys() for r in valid)
    losses = [r["loss"] for r in records if r["type"] == "train"]
    assert losses[-1] < losses[0]  # it learns something even in 6 steps
    assert "trained to step 6" in result.stdout


def test_translate_sentence_file_and_stdin(trained_run, tmp_path):
    run_dir, _ = trained_run
    ckpt = str(run_dir / "best.pt")
    result = run_cli(["translate", "--checkpoint", ckpt, "Ein Mann fährt Fahrrad.",
                      "Zwei Hunde spielen."])
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2
    inp = tmp_path / "in.de"
    inp.write_text("Ein Hund läuft.\n\nEine Frau singt.\n", encoding="utf-8")
    out = tmp_path / "out.en"
    result = run_cli(["translate", "--checkpoint", ckpt, "--input", str(inp), "--output",
                      str(out)])
    assert result.returncode == 0, result.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and lines[1] == ""  # one output line per input line, order kept
    result = run_cli(["translate", "--checkpoint", ckpt], stdin="Ein Hund läuft.\nEin Mann.\n")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2
    result = run_cli(["translate", "--checkpoint", ckpt, "--beam", "3", "--nbest", "2",
                      "Ein Hund läuft."])
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert len(rows) == 2 and all(r[0] == "0" and len(r) == 3 for r in rows)
    assert float(rows[0][1]) >= float(rows[1][1])


def test_evaluate_prints_bleu_chrf_and_signature(trained_run, tmp_path):
    run_dir, _ = trained_run
    hyp = tmp_path / "hyp.txt"
    result = run_cli(["evaluate", "--checkpoint", str(run_dir / "best.pt"), "--split", "val",
                      "--max-sentences", "25", "--output", str(hyp), "--json"])
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["sentences"] == 25
    assert 0.0 <= summary["bleu"] <= 100.0 and 0.0 <= summary["chrf"] <= 100.0
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in summary["bleu_signature"]
    assert len(hyp.read_text(encoding="utf-8").splitlines()) == 25
    result = run_cli(["evaluate", "--checkpoint", str(run_dir / "best.pt"), "--split", "val",
                      "--max-sentences", "10"])
    assert result.returncode == 0, result.stderr
    assert "BLEU = " in result.stdout and "chrF2 = " in result.stdout


def test_info_and_average(trained_run, tmp_path):
    run_dir, _ = trained_run
    result = run_cli(["info", str(run_dir / "last.pt"), "--json"])
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["step"] == 6 and info["resumable"] is True and info["format_version"] == 1
    assert info["config"]["model"]["d_model"] == 32
    avg = tmp_path / "avg.pt"
    steps = sorted(str(p) for p in run_dir.glob("step_*.pt"))
    result = run_cli(["average", "--output", str(avg), *steps])
    assert result.returncode == 0, result.stderr
    result = run_cli(["translate", "--checkpoint", str(avg), "Ein Hund."])
    assert result.returncode == 0 and result.stdout.strip()


def test_training_again_on_a_finished_run_resumes_and_does_nothing(trained_run):
    run_dir, _ = trained_run
    before = (run_dir / "metrics.jsonl").read_text()
    result = run_cli(["train", "--config", "config/quickstart.yaml", "--run-dir", str(run_dir),
                      *_sets(TINY_OVERRIDES)])
    assert result.returncode == 0, result.stderr
    assert "already complete" in result.stderr
    assert (run_dir / "metrics.jsonl").read_text() == before


def test_interactive_prompt_on_a_terminal(trained_run):
    """With a terminal on stdin, mt translate prompts, translates each line, stops at Ctrl-D."""
    import os
    import pty
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    run_dir, _ = trained_run
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "transformer_mt", "translate",
                             "--checkpoint", str(run_dir / "best.pt")], cwd=REPO,
                            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    os.close(terminal)
    time.sleep(0.5)
    os.write(controller, "Ein Hund läuft.\n".encode())
    os.write(controller, b"\x04")  # Ctrl-D at the prompt: end of input
    out, err = proc.communicate(timeout=120)
    os.close(controller)
    assert proc.returncode == 0, err
    assert "Type a German sentence" in err
    assert out.count("de> ") == 2 and out.count("en> ") == 1  # two prompts, one translation
