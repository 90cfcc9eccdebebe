"""The training benchmarks at a smoke size (test_bench.py: the others): a recipe's quality
over seeds, memory as the corpus grows, a step's profile, and the GPU check."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys

import pytest
import torch

from tests.helpers import REPO, TOY_DE_EN, needs_data, run_bench, run_cli
from transformer_mt.__main__ import tcmalloc

TINY = ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_encoder_layers=1",
        "model.n_decoder_layers=1", "data.max_pairs=300", "data.valid_max_pairs=40"]


@needs_data  # the benchmarks measure Multi30k
def test_quality_benchmark_reports_each_seed_and_their_mean_as_mt_evaluate_scores(tmp_path):
    """Two seeds trained at once, the last 3 saves of each averaged and scored; the mean and
    spread are the runs', and a run's figure is what ``mt evaluate`` prints for its averaged
    checkpoint, with the checkpoint's length penalty (0.6) and with each of ``--alphas``; the
    ensemble's, what ``mt evaluate --ensemble`` prints for the runs' checkpoints."""
    record = _quality(tmp_path, "train.max_steps=30", "--seeds", "1,2", "--jobs", "2",
                      "--alphas", "0.6,2", "--ensemble", "--out", str(tmp_path / "q.json"))
    assert json.loads((tmp_path / "q.json").read_text()) == record  # no parts_to_come
    # scored with mt's allocator (tcmalloc where installed), as its trainings run
    assert record["machine"]["allocator"] == (tcmalloc() or "the system's malloc")
    runs = record["runs"]
    assert [r["seed"] for r in runs] == [1, 2] and not any(r["stopped"] for r in runs)
    for run in runs:
        run_dir = tmp_path / "runs" / f"seed-{run['seed']}"
        assert run["run_dir"] == str(run_dir) and run["steps"] == 30
        assert 0 < run["training_s"] < run["train_wall_s"]  # the loop's, not the start's
        avg = torch.load(run_dir / "avg.pt", map_location="cpu", weights_only=False)
        assert run["averaged"] == avg["progress"]["averaged_from"] \
            == [str(run_dir / f"step_00000{s}.pt") for s in (20, 25, 30)]
        assert avg["config"]["train"]["seed"] == run["seed"]
        assert {"valid_greedy", "valid_beam2", "test_2016_flickr_beam2", "valid_beam2_alpha2",
                "test_2016_flickr_beam2_alpha0.6"} <= set(run["scores"])
        for split in ("valid", "test_2016_flickr"):  # the checkpoint's own, asked for again
            assert run["scores"][f"{split}_beam2_alpha0.6"]["bleu"] \
                == run["scores"][f"{split}_beam2"]["bleu"]
    for key, mean in record["mean"].items():
        bleu = [r["scores"][key]["bleu"] for r in runs]
        assert mean["runs"] == 2 and mean["bleu"] == round(sum(bleu) / 2, 2)
        assert (mean["bleu_min"], mean["bleu_max"]) == (min(bleu), max(bleu))
    for key, alpha in (("valid_beam2", []), ("valid_beam2_alpha2", ["--alpha", "2"])):
        evaluated = json.loads(run_cli(["evaluate", "--checkpoint", runs[0]["checkpoint"],
                                        "--split", "valid", "--beam-size", "2", *alpha,
                                        "--max-sentences", "5", "--json"]).stdout)
        assert round(evaluated["bleu"], 2) == runs[0]["scores"][key]["bleu"]
        assert round(evaluated["chrf"], 2) == runs[0]["scores"][key]["chrf"]
    ensemble = record["ensemble"]
    assert ensemble["checkpoints"] == [r["checkpoint"] for r in runs]
    assert set(ensemble["scores"]) == set(runs[0]["scores"])
    checkpoints = [arg for r in runs for arg in ("--checkpoint", r["checkpoint"])]
    evaluated = json.loads(run_cli(["evaluate", "--ensemble", *checkpoints, "--split",
                                    "test_2016_flickr", "--beam-size", "2", "--alpha", "2",
                                    "--max-sentences", "5", "--json"]).stdout)
    assert round(evaluated["bleu"], 2) == ensemble["scores"]["test_2016_flickr_beam2_alpha2"][
        "bleu"]


@needs_data  # the benchmarks measure Multi30k
def test_quality_benchmark_stops_a_run_at_its_timeout_and_scores_what_it_saved(tmp_path):
    """A run stopped at ``--train-timeout`` is scored from the average of its last saves or
    from ``last.pt``, the one with the better val BLEU (greedy), as evaluated again here."""
    run_cli(["data", "--config", "config/quickstart.yaml", *_sets("train.max_steps=100000")])
    record = _quality(tmp_path, "train.max_steps=100000", "--train-timeout", "10")  # (the 10 s
    (run,) = record["runs"]                                     # train: the corpora are ready)
    assert run["stopped"] and 0 < run["steps"] < 100000 and run["seed"] == 1234
    saves = [str(p) for p in sorted((tmp_path / "runs").glob("step_*.pt"))[-3:]]
    assert len(saves) > 1  # (save_every 5: a few in 10 s)
    val = run["chosen_on_val_greedy"]
    for name in ("avg.pt", "last.pt"):
        evaluated = json.loads(run_cli(["evaluate", "--checkpoint", str(tmp_path / "runs" / name),
                                        "--split", "valid", "--beam-size", "1",
                                        "--max-sentences", "5", "--json"]).stdout)
        assert round(evaluated["bleu"], 2) == val[name]
    chosen = "last.pt" if val["last.pt"] > val["avg.pt"] else "avg.pt"
    assert run["checkpoint"] == str(tmp_path / "runs" / chosen)
    assert run["averaged"] == (saves if chosen == "avg.pt" else [run["checkpoint"]])
    assert run["scores"]["valid_greedy"]["bleu"] == val[chosen]
    assert record["mean"]["valid_beam2"]["bleu"] == run["scores"]["valid_beam2"]["bleu"]
    assert "stopped by SIGINT" in (tmp_path / "runs.log").read_text()


def test_quality_benchmark_cut_short_keeps_the_models_it_scored(trained_run, tmp_path,
                                                                  monkeypatch):
    """A time limit that stops the benchmark while it scores the ensemble leaves --out holding
    each model's scores and their mean, and naming the ensemble as still to come."""
    from bench import quality

    def killed(*args, **kwargs):
        raise SystemExit(124)  # what `timeout` does to the process, as far as the file goes

    monkeypatch.setattr(quality, "ensemble", killed)
    monkeypatch.setattr(quality, "start_as_mt", lambda: None)  # (it would start pytest again)
    models = [str(trained_run[0] / name) for name in ("step_0000003.pt", "best.pt")]
    out = tmp_path / "quality.json"
    monkeypatch.setattr(sys, "argv", ["quality.py", *(a for m in models for a in (
        "--checkpoint", m)), "--ensemble", "--beam", "2", "--max-sentences", "4", "--out",
        str(out)])
    with pytest.raises(SystemExit):
        quality.main()
    report = json.loads(out.read_text())
    assert report["parts_to_come"] == ["ensemble"] and "ensemble" not in report
    assert [r["checkpoint"] for r in report["runs"]] == models
    assert report["mean"]["toy_test_beam2"]["runs"] == 2


def test_quality_benchmark_says_when_its_timeout_came_before_the_first_step(tmp_path):
    """A run stopped while ``mt train`` still starts has nothing to score: the error says
    so, and what to change."""
    from bench import quality

    # (0.2 s: still importing torch, where mt holds a Ctrl-C back until the imports end)
    args = argparse.Namespace(config="config/quickstart.yaml", train_timeout=0.2,
                              set=[*TINY, "train.max_steps=2"])  # (ends soon if not stopped)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal:
    try:  # the training starts with SIGINT's default action (not ignored, as under nohup)
        with pytest.raises(RuntimeError, match=r"^--train-timeout 0.2 s stopped mt train "
                           r"before its first step \(log: .*\): nothing to score; give it "
                           r"longer$"):
            quality.train_run(args, 1234, tmp_path / "runs" / "seed-1234")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not (tmp_path / "runs" / "seed-1234").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--alphas", "1.0,11"], "'1.0,11' is not a comma-separated list of length penalties "
                             "from 0 to 10"),
    (["--ensemble", "--seeds", "1"], "--ensemble needs two or more --seeds or --checkpoint"),
])
def test_quality_benchmark_refuses_what_it_cannot_do_before_it_trains(tmp_path, args,
                                                                       message, monkeypatch,
                                                                       capsys):
    from bench import quality

    monkeypatch.setattr(sys, "argv", ["quality.py", "--config", "config/quickstart.yaml",
                                      "--run-dir", str(tmp_path / "runs"), *args])
    with pytest.raises(SystemExit) as exit_:
        quality.main()
    assert exit_.value.code == 2 and message in capsys.readouterr().err.splitlines()[-1]
    assert not (tmp_path / "runs").exists()


def test_quality_benchmark_without_what_scoring_needs_stops_before_it_trains(tmp_path,
                                                                            monkeypatch, capsys):
    """A GPU machine without spaCy (2026-12-04): said at once, not after the trainings."""
    from bench import quality

    monkeypatch.setitem(sys.modules, "spacy", None)  # (not importable)
    monkeypatch.setattr(sys, "argv", ["quality.py", "--config", "config/quickstart.yaml",
                                      "--run-dir", str(tmp_path / "runs")])
    with pytest.raises(SystemExit) as exit_:
        quality.main()
    said = capsys.readouterr().err.splitlines()[-1]
    assert exit_.value.code == 2 and "the Python package spacy is not installed" in said
    assert "split by spaCy's sentencizer" in said and not (tmp_path / "runs").exists()


def _sets(max_steps: str) -> list[str]:
    return [f"--set={s}" for s in (*TINY, max_steps, "train.max_epochs=null",
                                   "train.eval_every=50", "train.save_every=5",
                                   "train.keep_last=3")]


def _quality(tmp_path, max_steps: str, *args: str) -> dict:
    return json.loads(run_bench("bench/quality.py", "--config", "config/quickstart.yaml",
                                *_sets(max_steps),
                                "--run-dir", str(tmp_path / "runs"), "--beam", "2",
                                "--max-sentences", "5", *args).stdout)


@needs_data  # the benchmarks measure Multi30k
def test_data_scale_benchmark_reports_the_memory_ratio(tmp_path):
    # (its default tokenizer, SentencePiece: with spaCy the prepare stage took ~1 s more a
    # corpus, 2.45 against 1.43 s)
    result = run_bench("bench/data_scale.py", "--sizes", "200", "400", "--steps", "2",
                       "--workdir", str(tmp_path))
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert record["tokenizer"] == "sentencepiece"
    assert [r["pairs"] for r in record["rungs"]] == [200, 400]
    first, last = record["rungs"][0], record["rungs"][-1]
    assert record["ratio"] == round(last["train_peak_rss_mib"] / first["train_peak_rss_mib"], 3)
    assert all(r["mt_data_seconds"] > 0 for r in record["rungs"])  # mt data ran on each


@needs_data  # the benchmarks measure Multi30k
def test_profile_step_prints_throughput_and_the_profile():
    sets = [f"--set={s}" for s in (*TINY, "train.max_tokens=512")]
    out = run_bench("bench/profile_step.py", "--precision", "fp32", "--steps", "1", "--measure",
                    "2", "--rows", "5", *sets).stdout
    assert "target tokens/s" in out and "Self CPU" in out


def test_mfu_is_taken_against_a_peak_that_the_device_reaches(monkeypatch):
    """A 2048^3 product is far below an H100's rate (MFU read 1.3-1.8x too high): the peak is
    measured at 8192 on a GPU, and the data-sheet peak is reported beside it."""
    import torch

    from bench.common import nominal_flops, peak_matmul_size

    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert peak_matmul_size(cuda) == 8192 and peak_matmul_size(cpu) == 2048
    for name, precision, tflops in [("NVIDIA H100 80GB HBM3", "bf16", 989),
                                    ("NVIDIA H100 PCIe", "bf16", 756),
                                    ("NVIDIA A100-SXM4-80GB", "tf32", 156),
                                    ("NVIDIA H200", "fp32", 67),
                                    ("Tesla V100-SXM2-16GB", "bf16", None),
                                    ("NVIDIA GeForce RTX 3090", "bf16", None)]:
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device, n=name: n)
        assert nominal_flops(cuda, precision) == (tflops and tflops * 1e12), name
    assert nominal_flops(cpu, "bf16") is None


@needs_data  # the benchmarks measure Multi30k
def test_gpu_check_runs_here_and_says_what_it_skipped(tmp_path):
    """scripts/gpu_check.sh on this machine: without a GPU its GPU parts say so (and are not
    failures); loss parity, a one-process torchrun training and its resume run on the CPU."""
    import torch

    out = tmp_path / "not yet" / "there" / "gpu_check.json"  # made (a traceback at the end once)
    result = subprocess.run(["bash", "scripts/gpu_check.sh", "--smoke", "--out", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert json.loads(result.stdout) == report
    if not torch.cuda.is_available():
        for part in ("attention_kernels", "host_syncs"):
            assert report[part]["status"] == "skipped: no GPU found"
        assert report["ddp_resume"]["backend"] == "gloo (no GPU found)"
    assert report["environment"]["status"] == "ok"
    assert report["loss_parity"]["fp32"]["relative_difference"] < 1e-5
    assert report["ddp_resume"]["status"] == "ok" and report["ddp_resume"][
        "resumed_to_step"] == 8
    assert report["speed"]["runs"]["smoke"]["tokens_per_s"] > 0


def test_gpu_check_cut_short_keeps_the_parts_it_finished(tmp_path, monkeypatch):
    """A time limit that stops gpu_check in its (minutes-long) speed part leaves --out holding
    the parts already done and naming the one to come, not nothing."""
    from bench import gpu_check

    def killed(*args, **kwargs):
        raise SystemExit(124)  # what `timeout` does to the process, as far as the file goes

    monkeypatch.setattr(gpu_check, "speed", killed)
    monkeypatch.setattr(gpu_check, "ddp_resume", lambda device: {"status": "ok"})
    out = tmp_path / "gpu_check.json"
    with pytest.raises(SystemExit):
        gpu_check.main(["--smoke", "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["parts_to_come"] == ["speed"] and "speed" not in report
    assert report["environment"]["status"] == "ok"
    assert report["loss_parity"]["fp32"]["relative_difference"] < 1e-5


@needs_data  # the benchmarks measure Multi30k
def test_gpu_check_refuses_an_out_it_cannot_write_before_it_starts(tmp_path, capsys):
    from bench import gpu_check

    with pytest.raises(SystemExit) as exit_:
        gpu_check.main(["--smoke", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "is a directory" in err.splitlines()[-1]
    assert "gpu_check: environment" not in err  # refused before the first part


def test_numbers_benchmark_writes_a_number_in_digits_on_both_sides(trained_run):
    """bench/numbers_in_digits.py on the toy test set: each pair that says one number in words
    on each side ("Zwei Männer" / "Two men") has it in digits, the same on both sides and
    nothing else changed; a model against itself keeps as many."""
    from bench.numbers_in_digits import IN_WORDS, in_digits

    sources = (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:40]
    refs = (TOY_DE_EN / "test.en").read_text(encoding="utf-8").splitlines()[:40]
    pairs = in_digits(sources, refs)
    said = [(s.split(" ", 1), r.split(" ", 1)) for s, r in zip(sources, refs, strict=True)
            if IN_WORDS.get(s.split(" ")[0].casefold()) == r.split(" ")[0].casefold()]
    assert len(pairs) == len(said) > 5 and len({n for _, _, n in pairs}) > 1
    for (src, ref, number), ((_, src_rest), (_, ref_rest)) in zip(pairs, said, strict=True):
        assert (src, ref) == (f"{number} {src_rest}", f"{number} {ref_rest}")
    record = json.loads(run_bench("bench/numbers_in_digits.py", "--checkpoint",
                                  str(trained_run[0] / "best.pt"), "--against",
                                  str(trained_run[0] / "best.pt"), "--set", "toy_test",
                                  "--max-sentences", "40").stdout)
    timed = [record[f"{side}{row}"].pop("seconds") for row in ("", "_keep_spans")
             for side in ("ours", "peer")]
    assert all(seconds > 0 for seconds in timed)
    assert record["keep_spans_slowdown"] == round(timed[2] / timed[0], 2)
    assert record["sentences"] == len(pairs) and record["ours"] == record["peer"]
    assert record["ratio"] == (1.0 if record["ours"]["kept"] else None)
    # spans kept: every number held, and no other written
    assert record["ours_keep_spans"] == record["peer_keep_spans"]
    assert (record["ours_keep_spans"]["kept"], record["ours_keep_spans"]["others"]) == (
        len(pairs), 0)
    # in brackets only where the number begins neither side: each toy pair begins with it
    # (a line's "(37) " is a list item's marker, not read)
    assert record["ours_in_brackets"] == record["peer_in_brackets"] == {"sentences": 0}
    assert record["ours"]["sentences"] == len(pairs)
    # the row of such pairs, the number moved inside: kept spans write no other number
    from bench.numbers_in_digits import _row
    from transformer_mt.translate import Translator

    inner = [(f"Heute ({n}) {s.split(' ', 1)[1]}", f"Today ({n}) {r.split(' ', 1)[1]}", n)
             for s, r, n in pairs]
    row = _row(Translator.load(trained_run[0] / "best.pt", "cpu"), True,
               *map(list, zip(*inner, strict=True)), "en", bracketed=True)
    assert row["sentences"] == len(pairs) and row["others"] == 0
    assert 0 <= row["kept"] <= len(pairs) and row["bleu"] >= 0
