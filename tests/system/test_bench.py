"""Each benchmark runs at a smoke size, so that a broken benchmark fails the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import REPO, needs_data, run_cli
from transformer_mt.__main__ import tcmalloc
from transformer_mt.device import threads_per_process

TINY = ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_encoder_layers=1",
        "model.n_decoder_layers=1", "data.max_pairs=300", "data.valid_max_pairs=40"]


def _bench(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


@needs_data  # the benchmarks measure Multi30k
def test_train_speed_benchmark_runs_and_reports_a_ratio():
    """bench/train_speed.py measures ours and the tutorial baseline side by side (two
    processes) and prints one JSON record whose ``ratio`` compares their tokens/s; ours runs
    with ``mt``'s allocator (tcmalloc where installed), the baseline with the system's."""
    # --seen-shapes (a GPU's mode: the timed steps run once before; gpu_check's smoke run
    # below takes the other path)
    result = _bench("bench/train_speed.py", "--smoke", "--precision", "fp32", "--seen-shapes",
                    "--without-row-buckets")
    record = json.loads(result.stdout)
    plain = record["ours_without_row_buckets"]  # (fp32: the products are not padded either)
    assert plain["tokens_per_s"] > 0 and plain["dtype"] == record["ours"]["dtype"] == "fp32"
    assert record["row_buckets_ratio"] == round(record["ours"]["tokens_per_s"]
                                                / plain["tokens_per_s"], 2)
    assert record["benchmark"] == "train_speed" and record["steps"] == 3
    assert record["seen_shapes"] is True and record["ours"]["warmup_s"] > 0
    for side in ("ours", "baseline"):
        assert record[side]["tokens_per_s"] > 0 and 0 <= record[side]["padding"] < 1
        assert record[side]["mfu"] > 0 and record[side]["mfu_nominal"] is None  # a CPU
    assert record["ratio"] == round(record["ours"]["tokens_per_s"]
                                    / record["baseline"]["tokens_per_s"], 2)
    assert record["ours"]["allocator"] == plain["allocator"] == (tcmalloc()
                                                                 or "the system's malloc")
    assert record["baseline"]["allocator"] == "the system's malloc"


def test_decode_speed_benchmark_compares_cached_uncached_and_the_engine(trained_run):
    """bench/decode_speed.py on a few sentences: cached and uncached decoding translate alike
    in fp32 (the bench asserts it), and the ratio is ours against CTranslate2 when it is
    installed (each row against the engine at its better way: threads, allocator), else the cache's
    speed-up."""
    run_dir, _ = trained_run
    record = json.loads(_bench("bench/decode_speed.py", "--checkpoint", str(run_dir / "best.pt"),
                               "--sentences", "40", "--batch", "4", "--threads", "1",
                               "--workers", "2",
                               "--first-call-rounds", "1", "--no-compile",
                               "--first-call-checkpoint", str(run_dir / "best.pt"),
                               "--engine-env", "ONEDNN_VERBOSE=0",
                               "--engine-threads", "1", "--engine-quantization",
                               "int8").stdout)
    assert record["identical_with_and_without_cache"]
    assert record["engine_env"] == {"ONEDNN_VERBOSE": "0"}
    assert record["engine_quantization"] == "int8"
    assert {"greedy_batch4_cached", "beam5_batch1_uncached"} <= set(record["results"])
    expected = (min(record["vs_ctranslate2"].values()) if "vs_ctranslate2" in record
                else record["cache_speedup"])
    assert record["ratio"] == expected > 0
    if "vs_ctranslate2" in record:  # batches of 32 and one sentence a call, each way (the
        # compiled rows skipped: compiling takes ~15 s; tests/system/test_compiled.py runs
        # their code)
        assert set(record["vs_ctranslate2"]) == {
            "greedy_batch32", "greedy_batch1", "beam5_batch32", "beam5_batch1",
            "greedy_batch32_workers", "beam5_batch32_workers"}  # (40 sentences: 2 batches)
        assert record["ours"]["greedy_batch1_ms"] > 0 < record["ctranslate2"]["beam5_batch1_ms"]
        # each row against the engine at its better way, each way's figure kept: a thread
        # count, and 2 batches at once (ours: --workers 2) for the batches of 32, each with the
        # system's malloc and with tcmalloc where installed (ours runs with mt's allocator)
        library = tcmalloc()
        assert record["machine"]["allocator"] == (library or "the system's malloc")
        assert record["ours_threads"] == 1
        by_threads = record["ctranslate2_by_threads"]
        replicas = f"2x{threads_per_process(2)}"
        tails = ("", " tcmalloc") if library else ("",)
        assert set(by_threads) == {n + tail for n in ("1", replicas) for tail in tails}
        for row, best in record["ctranslate2_threads"].items():
            key = row + ("_ms" if row.endswith("batch1") else "")
            ways = [n + tail for n in (("1",) if row.endswith("batch1") else ("1", replicas))
                    for tail in tails]
            assert set(ways) == {n for n in by_threads if key in by_threads[n]}
            figures = [by_threads[n][key] for n in ways]
            assert record["ctranslate2"][key] == by_threads[str(best)][key] == (
                min(figures) if key.endswith("_ms") else max(figures))
        first = record["first_translation"]  # a fresh process's first translation, and second
        for side in (first["ours"], first["ctranslate2"]):
            assert side["first_ms"] > 0 < side["second_ms"]
            assert side["first_vs_second"] == pytest.approx(
                side["first_ms"] / side["second_ms"], rel=0.01, abs=0.02)
        assert first["vs_ctranslate2_first"] == pytest.approx(
            first["ctranslate2"]["first_ms"] / first["ours"]["first_ms"], rel=0.01, abs=0.02)
    also = record["first_call_also"]
    assert set(also) == {str(run_dir / "best.pt")}  # the same, for the checkpoints asked for
    assert also[str(run_dir / "best.pt")] == record["first_call"]  # --checkpoint's: measured
    for first in (record["first_call"], *also.values()):  # fresh mt translate / import torch
        # (either may take longer: mt keeps the collector off torch's objects, which python -c
        # "import torch" does not; docs/measurements/notes-2026-11.md, "The first call")
        assert first["mt_translate_s"] > 0 and first["import_torch_s"] > 0
        assert first["ratio_to_import_torch"] == pytest.approx(
            first["mt_translate_s"] / first["import_torch_s"], abs=0.02)


def test_decode_speed_starts_the_engines_process_with_its_settings_and_allocator():
    """The engine's process starts with --engine-env's settings (its libraries read them once,
    as they load) and with the allocator of its way (the system's malloc, or tcmalloc where
    installed: each way timed), the benchmark's own environment unchanged; a setting that is
    not KEY=VALUE is refused."""
    import multiprocessing

    from bench import peer
    from bench.common import environment
    from transformer_mt.__main__ import allocator_in_use

    before = dict(os.environ)
    library = tcmalloc()
    for allocator in ("system", "tcmalloc") if library else ("system",):
        with environment(peer.engine_environment(allocator, {"ONEDNN_MAX_CPU_ISA": "AVX2"})):
            pool = multiprocessing.get_context("spawn").Pool(1)
        with pool:
            assert pool.apply(os.getenv, ("ONEDNN_MAX_CPU_ISA",)) == "AVX2"
            assert pool.apply(allocator_in_use) == (
                library if allocator == "tcmalloc" else "the system's malloc")
        assert dict(os.environ) == before
    if library:
        settings = SimpleNamespace(engine_threads=[1, 2], workers=2)
        assert set(peer.configurations(settings)) == {
            f"{way}{tail}" for way in ("1", "2", f"2x{threads_per_process(2)}")
            for tail in ("", " tcmalloc")}
    result = subprocess.run([sys.executable, "bench/decode_speed.py", "--engine-env", "AVX2"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "'AVX2' is not KEY=VALUE" in result.stderr
    result = subprocess.run([sys.executable, "bench/decode_speed.py", "--engine-threads", "0,2"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "'0,2' is not thread counts" in result.stderr


@needs_data  # the benchmarks measure Multi30k
def test_quality_benchmark_reports_each_seed_and_their_mean_as_mt_evaluate_scores(tmp_path):
    """Two seeds trained at once, the last 3 saves of each averaged and scored; the mean and
    spread are the runs', and a run's figure is what ``mt evaluate`` prints for its averaged
    checkpoint, with the checkpoint's length penalty (0.6) and with each of ``--alphas``; the
    ensemble's, what ``mt evaluate --ensemble`` prints for the runs' checkpoints."""
    record = _quality(tmp_path, "train.max_steps=30", "--seeds", "1,2", "--jobs", "2",
                      "--alphas", "0.6,2", "--ensemble", "--out", str(tmp_path / "q.json"))
    assert json.loads((tmp_path / "q.json").read_text()) == record  # no parts_to_come
    runs = record["runs"]
    assert [r["seed"] for r in runs] == [1, 2] and not any(r["stopped"] for r in runs)
    for run in runs:
        run_dir = tmp_path / "runs" / f"seed-{run['seed']}"
        assert run["run_dir"] == str(run_dir) and run["steps"] == 30
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
    record = _quality(tmp_path, "train.max_steps=100000", "--train-timeout", "10")
    (run,) = record["runs"]
    assert run["stopped"] and 0 < run["steps"] < 100000 and run["seed"] == 1234
    assert run["averaged"] == [str(tmp_path / "runs" / "last.pt")]  # no step file yet
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


@pytest.mark.parametrize(("args", "message"), [
    (["--alphas", "1.0,11"], "'1.0,11' is not a comma-separated list of length penalties "
                             "from 0 to 10"),
    (["--ensemble", "--seeds", "1"], "--ensemble needs two or more --seeds or --checkpoint"),
])
def test_quality_benchmark_refuses_what_it_cannot_do_before_it_trains(tmp_path, args,
                                                                       message):
    result = subprocess.run([sys.executable, "bench/quality.py", "--config",
                             "config/quickstart.yaml", "--run-dir", str(tmp_path / "runs"),
                             *args], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and message in result.stderr.splitlines()[-1]
    assert not (tmp_path / "runs").exists()


def _quality(tmp_path, max_steps: str, *args: str) -> dict:
    sets = [f"--set={s}" for s in (*TINY, max_steps, "train.max_epochs=null",
                                   "train.eval_every=50", "train.save_every=5",
                                   "train.keep_last=3")]
    return json.loads(_bench("bench/quality.py", "--config", "config/quickstart.yaml", *sets,
                             "--run-dir", str(tmp_path / "runs"), "--beam", "2",
                             "--max-sentences", "5", *args).stdout)


@needs_data  # the benchmarks measure Multi30k
def test_data_scale_benchmark_reports_the_memory_ratio(tmp_path):
    record = json.loads(_bench("bench/data_scale.py", "--sizes", "200", "400", "--steps", "2",
                               "--tokenizer", "spacy", "--workdir", str(tmp_path)).stdout
                        .strip().splitlines()[-1])
    assert [r["pairs"] for r in record["rungs"]] == [200, 400]
    first, last = record["rungs"][0], record["rungs"][-1]
    assert record["ratio"] == round(last["train_peak_rss_mib"] / first["train_peak_rss_mib"], 3)
    assert all(r["mt_data_seconds"] > 0 for r in record["rungs"])  # mt data ran on each


@needs_data  # the benchmarks measure Multi30k
def test_profile_step_prints_throughput_and_the_profile():
    sets = [f"--set={s}" for s in (*TINY, "train.max_tokens=512")]
    out = _bench("bench/profile_step.py", "--precision", "fp32", "--steps", "1", "--measure",
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
def test_gpu_check_refuses_an_out_it_cannot_write_before_it_starts(tmp_path):
    result = subprocess.run(["bash", "scripts/gpu_check.sh", "--smoke", "--out", str(tmp_path)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "is a directory" in result.stderr.splitlines()[-1]
    assert "gpu_check: environment" not in result.stderr  # refused before the first part


def test_serve_load_benchmark_compares_batched_and_unbatched(trained_run):
    """bench/serve_load.py at a smoke size: real server processes, batching on and off."""
    result = _bench("bench/serve_load.py", "--smoke", "--checkpoint",
                    str(trained_run[0] / "best.pt"))
    record = json.loads(result.stdout)
    torch_results = record["results"]["torch"]
    for mode in ("batched", "unbatched"):
        assert [r["clients"] for r in torch_results[mode]] == [1, 4]
        assert all(r["sentences"] > 0 and r["failed"] == 0 for r in torch_results[mode])
    assert record["ratio"] == round(torch_results["batched"][-1]["sentences_per_s"]
                                    / torch_results["unbatched"][-1]["sentences_per_s"], 2)
    first = record["first_request"]["torch"]  # a fresh server's first request, timed
    assert first["first_request_ms"] > 0 and first["first_vs_p50"] == pytest.approx(
        first["first_request_ms"] / first["lone_p50_ms"], abs=0.02)
    assert first["again_ms"] > 0 and first["first_vs_again"] == pytest.approx(
        first["first_request_ms"] / first["again_ms"], abs=0.02)
    assert first["after_idle_ms"] > 0 and first["first_vs_after_idle"] == pytest.approx(
        first["first_request_ms"] / first["after_idle_ms"], abs=0.02)
    workers = record["workers"]["torch"]  # mt serve --workers 1 and 2, at the most clients
    assert sorted(workers) == ["1", "2"] and all(w["failed"] == 0 and w["sentences"] > 0
                                                 for w in workers.values())
    assert workers["1"] == torch_results["batched"][-1]  # one worker: the batched setting
    assert record["workers_vs_one"]["torch"]["2"] == round(
        workers["2"]["sentences_per_s"] / workers["1"]["sentences_per_s"], 2)


def test_glossary_benchmark_holds_every_term_and_reports_a_ratio(trained_run):
    """bench/glossary.py on the toy test set: constrained search holds every sentence's term
    (the plain search need not), and ``ratio`` is their beam BLEUs' quotient."""
    record = json.loads(_bench("bench/glossary.py", "--checkpoint",
                               str(trained_run[0] / "best.pt"), "--set", "toy_test",
                               "--max-sentences", "8", "--beam", "3").stdout)
    assert record["sentences"] == 8 and record["with_a_term"] > 0
    for search in ("greedy", "beam3"):
        assert record[f"{search}_glossary"]["terms_held"] == record["with_a_term"]
        assert record[f"{search}_plain"]["terms_held"] <= record["with_a_term"]
    plain, held = record["beam3_plain"]["bleu"], record["beam3_glossary"]["bleu"]
    assert record["ratio"] == (round(held / plain, 3) if plain else None)


def test_allocator_benchmark_times_mt_with_tcmalloc_against_the_system_malloc(trained_run):
    """bench/allocator.py on the toy test set: ``mt translate`` with tcmalloc and with the
    system's malloc, one after the other, translate alike; ``ratio`` is the system's best seconds
    over tcmalloc's. Where tcmalloc is missing it says so (CI installs it: .ci/run)."""
    argv = [sys.executable, "bench/allocator.py", "--checkpoint",
            str(trained_run[0] / "best.pt"), "--set", "toy_test", "--max-sentences", "6",
            "--rounds", "1"]
    if tcmalloc() is None and not os.environ.get("CI"):
        result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
        assert result.returncode != 0 and "tcmalloc is not installed" in result.stderr
        pytest.skip("tcmalloc is not installed (apt install libtcmalloc-minimal4)")
    record = json.loads(_bench(*argv[1:]).stdout)
    assert record["identical"] and record["sentences"] == 6 and record["library"]
    assert all(len(record[k][a]) == 1 for k in ("seconds", "peak_rss_mib")
               for a in ("system", "auto"))
    assert record["ratio"] == round(min(record["seconds"]["system"])
                                    / min(record["seconds"]["auto"]), 2)


def test_inline_markup_benchmark_scores_pages_against_pieces(trained_run):
    """bench/inline_markup.py on the toy test set: each page's text is its sentence's
    translation (the bench asserts it, so their BLEU is equal), the pieces translated apart
    score otherwise, and ``ratio`` is the quotient of the two BLEUs; the same for the
    sentences as subtitles."""
    record = json.loads(_bench("bench/inline_markup.py", "--checkpoint",
                               str(trained_run[0] / "best.pt"), "--set", "toy_test",
                               "--max-sentences", "8").stdout)
    assert record["sentences"] == 8 and record["ours"]["bleu"] == record["plain"]["bleu"]
    assert set(record["placement"]) == {"attention", "position", "pieces"}
    for found in record["placement"].values():
        assert 0 <= found["exact"] <= found["within2"] <= 1
    ours, theirs = record["ours"]["bleu"], record["pieces"]["bleu"]
    assert record["ratio"] == (round(ours / theirs, 3) if theirs else None)
    subtitles = record["subtitles"]  # the sentences as subtitles, two for the longer ones
    assert subtitles["subtitles"] == 8 + subtitles["sentences_cut"] > 8
    ours, theirs = subtitles["ours"]["bleu"], subtitles["alone"]["bleu"]
    assert subtitles["ratio"] == (round(ours / theirs, 3) if theirs else None)
    assert 0 <= subtitles["ours"]["wordless"] <= subtitles["sentences_cut"]


def test_long_inputs_benchmark_compares_ours_with_each_input_read_whole(trained_run):
    """bench/long_inputs.py on the toy test set: the sentences alone, two to a line and two as
    one sentence of clauses, ours (a sentence at a time, past the training's length in parts)
    against each input read whole; the length it cuts at is what training recorded."""
    import torch

    path = trained_run[0] / "best.pt"
    record = json.loads(_bench("bench/long_inputs.py", "--checkpoint", str(path), "--set",
                               "toy_test", "--max-sentences", "8", "--joined", "2").stdout)
    recorded = torch.load(path, weights_only=True)["data"]["source_tokens"]["99.9%"]
    assert record["max_sentence_tokens"] == recorded
    alone, lines, clauses = record["alone"], record["2 lines"], record["2 clauses"]
    assert alone["inputs"] == 8 and lines["inputs"] == clauses["inputs"] == 4
    assert lines["tokens"] == clauses["tokens"] == 2 * alone["tokens"]  # (the same tokens)
    for found in (alone, lines, clauses):
        assert 0 <= found["cut"] <= found["inputs"]
        ours, whole = found["ours"]["bleu"], found["whole"]["bleu"]
        assert found["ratio"] == (round(ours / whole, 3) if whole else None)
    if alone["cut"] == 0:  # each sentence whole: the same translations
        assert alone["ours"]["bleu"] == alone["whole"]["bleu"]
