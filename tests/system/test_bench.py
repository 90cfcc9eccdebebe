"""Each benchmark runs at a smoke size, so that a broken benchmark fails the suite: here those
of decoding, serving and the training step's speed (test_bench_training.py: quality, data
scale, profiling and the GPU check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from bench.peer import LONE, takes_mkl
from tests.helpers import REPO, TOY_DE_EN, needs_data, run_bench
from transformer_mt.__main__ import tcmalloc
from transformer_mt.device import threads_per_process


@needs_data  # the benchmarks measure Multi30k
def test_train_speed_benchmark_runs_and_reports_a_ratio():
    """bench/train_speed.py measures ours and the tutorial baseline side by side (two
    processes) and prints one JSON record whose ``ratio`` compares their tokens/s; ours runs
    with ``mt``'s allocator (tcmalloc where installed), the baseline with the system's."""
    # --seen-shapes (a GPU's mode: the timed steps run once before; gpu_check's smoke run
    # below takes the other path)
    result = run_bench("bench/train_speed.py", "--smoke", "--precision", "fp32",
                       "--seen-shapes", "--without", "row-buckets", "cpu-dropout")
    record = json.loads(result.stdout)
    for name in ("row_buckets", "cpu_dropout"):  # (fp32: the products are not padded either)
        plain = record[f"ours_without_{name}"]
        assert plain["tokens_per_s"] > 0 and plain["dtype"] == record["ours"]["dtype"] == "fp32"
        assert record[f"{name}_ratio"] == round(record["ours"]["tokens_per_s"]
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
    installed (each row against the engine at its better way: threads, allocator, backend),
    else the cache's speed-up."""
    checkpoint = str(trained_run[0] / "best.pt")
    record = json.loads(run_bench(
        "bench/decode_speed.py", "--checkpoint", checkpoint, "--sentences", "40", "--batch",
        "4", "--threads", "1", "--workers", "2", "--first-call-rounds", "1", "--no-compile",
        "--first-call-checkpoint", checkpoint, "--engine-env", "ONEDNN_VERBOSE=0",
        "--engine-threads", "1", "--engine-quantization", "int8", "--rounds", "1").stdout)
    assert record["identical_with_and_without_cache"]
    assert record["engine_env"] == {"ONEDNN_VERBOSE": "0"}
    assert record["engine_quantization"] == "int8"
    assert {"greedy_batch4_cached", "beam5_batch1_uncached"} <= set(record["results"])
    expected = (min(record["vs_ctranslate2"].values()) if "vs_ctranslate2" in record
                else record["cache_speedup"])
    assert record["ratio"] == expected > 0
    if "vs_ctranslate2" in record:  # batches of 32 and one sentence a call, each way (not
        # compiled: compiling takes ~15 s; tests/system/test_compiled.py runs their code)
        assert set(record["vs_ctranslate2"]) == {
            "greedy_batch32", "greedy_batch1", "beam5_batch32", "beam5_batch1",
            "greedy_batch32_workers", "beam5_batch32_workers"}  # (40 sentences: 2 batches)
        assert record["ours"]["greedy_batch1_ms"] > 0 < record["ctranslate2"]["beam5_batch1_ms"]
        # each row against the engine at its better way, each way's figure kept: a thread
        # count, and 2 batches at once (ours: --workers 2) for the batches of 32, each with the
        # system's malloc and tcmalloc where installed (ours runs with mt's allocator), and
        # on an Intel CPU each with Intel's MKL (its default there) and oneDNN
        library = tcmalloc()
        assert record["machine"]["allocator"] == (library or "the system's malloc")
        assert record["ours_threads"] == 1 and record["rounds"] == {"batches": 1, "lone": 1}
        by_threads = record["ctranslate2_by_threads"]
        replicas = f"2x{threads_per_process(2)}"
        tails = [a + b for a in (("", " tcmalloc") if library else ("",))
                 for b in (("", " onednn") if takes_mkl({}) else ("",))]
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
    _check_the_text_path_and_first_calls(record, checkpoint)


def _check_the_text_path_and_first_calls(record: dict, checkpoint: str) -> None:
    text = record["text_path"]  # lone sentences as text against as ids: the same decoding
    assert text["sentences"] == LONE and text["text_ms"] > 0 < text["ids_ms"]
    assert text["overhead_ms"] == pytest.approx(text["text_ms"] - text["ids_ms"], abs=0.011)
    also = record["first_call_also"]
    assert set(also) == {checkpoint}  # the same, for the checkpoints asked for
    assert also[checkpoint] == record["first_call"]  # --checkpoint's: measured
    for first in (record["first_call"], *also.values()):  # fresh mt translate / import torch
        # (either may take longer: mt keeps the collector off torch's objects, which python -c
        # "import torch" does not; docs/measurements/notes-2026-11.md, "The first call")
        assert first["mt_translate_s"] > 0 and first["import_torch_s"] > 0
        assert first["ratio_to_import_torch"] == pytest.approx(
            first["mt_translate_s"] / first["import_torch_s"], abs=0.02)


def test_decode_speed_starts_the_engines_process_with_its_settings_and_allocator(
        monkeypatch, capsys):
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
    settings = SimpleNamespace(engine_threads=[1, 2], workers=2, engine_env={"X": "1"})
    ways = peer.configurations(settings)
    backends = ("", " onednn") if takes_mkl({}) else ("",)
    assert set(ways) == {f"{way}{tail}{backend}"
                         for way in ("1", "2", f"2x{threads_per_process(2)}")
                         for tail in (("", " tcmalloc") if library else ("",))
                         for backend in backends}
    for name, (_, _, _, env) in ways.items():  # --engine-env's settings in every way
        assert env == {"X": "1", **({"CT2_USE_MKL": "0"} if name.endswith("onednn") else {})}
    told = SimpleNamespace(engine_threads=[1], workers=0, engine_env={"CT2_USE_MKL": "1"})
    assert not any(name.endswith("onednn") for name in peer.configurations(told))
    from bench import decode_speed

    for argv, message in ((["--engine-env", "AVX2"], "'AVX2' is not KEY=VALUE"),
                          (["--engine-threads", "0,2"], "'0,2' is not thread counts")):
        monkeypatch.setattr(sys, "argv", ["decode_speed.py", *argv])
        with pytest.raises(SystemExit) as exit_:
            decode_speed.main()
        assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_serve_load_benchmark_compares_batched_and_unbatched(trained_run):
    """bench/serve_load.py at a smoke size: real server processes, batching on and off."""
    result = run_bench("bench/serve_load.py", "--smoke", "--checkpoint",
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
    """bench/glossary.py on the toy test set: constrained search and the glossary (its terms
    read in the source where the vocabulary lacks them) hold every sentence's term (the plain
    search need not); ``ratio`` and ``read_as_target_ratio`` are beam BLEUs' quotients."""
    record = json.loads(run_bench("bench/glossary.py", "--checkpoint",
                                  str(trained_run[0] / "best.pt"), "--set", "toy_test",
                                  "--max-sentences", "8", "--beam", "3").stdout)
    assert record["sentences"] == 8 and record["with_a_term"] > 0
    for search in ("greedy", "beam3"):
        for how in ("constrained", "glossary"):
            assert record[f"{search}_{how}"]["terms_held"] == record["with_a_term"]
        assert record[f"{search}_plain"]["terms_held"] <= record["with_a_term"]
    plain, held = record["beam3_plain"]["bleu"], record["beam3_glossary"]["bleu"]
    constrained = record["beam3_constrained"]["bleu"]
    assert record["ratio"] == (round(held / plain, 3) if plain else None)
    assert record["read_as_target_ratio"] == (round(held / constrained, 3) if constrained
                                              else None)


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
    record = json.loads(run_bench(*argv[1:]).stdout)
    assert record["identical"] and record["sentences"] == 6 and record["library"]
    assert all(len(record[k][a]) == 1 for k in ("seconds", "peak_rss_mib")
               for a in ("system", "auto"))
    assert record["ratio"] == round(min(record["seconds"]["system"])
                                    / min(record["seconds"]["auto"]), 2)


def test_inline_markup_benchmark_scores_pages_against_pieces(trained_run):
    """bench/inline_markup.py on the toy test set: each page's text is its sentence's
    translation (the bench counts those that are not: none), so their BLEU is equal, the
    pieces translated apart
    score otherwise, and ``ratio`` is the quotient of the two BLEUs; the same for the
    sentences as subtitles, as pages whose source wraps its lines, as pages with a line
    break inside each sentence, and as text whose longest words a hyphen cuts across lines."""
    record = json.loads(run_bench("bench/inline_markup.py", "--checkpoint",
                                  str(trained_run[0] / "best.pt"), "--set", "toy_test",
                                  "--max-sentences", "8").stdout)
    assert record["sentences"] == 8 and record["ours"]["bleu"] == record["plain"]["bleu"]
    assert record["differ"] == record["wrapped"]["differ"] == record["breaks"]["differ"] == 0
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
    wrapped = record["wrapped"]  # pages whose source wraps at 40 columns
    assert wrapped["pages"] == 8 and wrapped["ours"]["bleu"] == record["plain"]["bleu"]
    ours, theirs = wrapped["ours"]["bleu"], wrapped["lines"]["bleu"]
    assert wrapped["ratio"] == (round(ours / theirs, 3) if theirs else None)
    for name in ("breaks", "hyphens"):  # a <br> inside each sentence; its longest word cut
        breaks = record[name]
        assert 0 < breaks["runs_on"] <= breaks["broken"] <= breaks["pages"] == 8
        ours, theirs = breaks["ours"]["bleu"], breaks["lines"]["bleu"]
        assert breaks["ratio"] == (round(ours / theirs, 3) if theirs else None)


def test_pdf_benchmark_compares_paragraphs_read_whole_with_each_line_alone(trained_run):
    """bench/pdf_documents.py on the toy test set: a PDF of its sentences, 4 a paragraph,
    translated as ``mt translate`` does against each line alone; ``ratio`` the quotient."""
    pytest.importorskip("reportlab")
    record = json.loads(run_bench("bench/pdf_documents.py", "--checkpoint",
                                  str(trained_run[0] / "best.pt"), "--set", "toy_test",
                                  "--max-sentences", "16").stdout)
    assert record["paragraphs"] == 4 and record["line_count"] >= 4 and record["pages"] == 1
    ours, theirs = record["ours"]["bleu"], record["lines"]["bleu"]
    assert record["ratio"] == (round(ours / theirs, 3) if theirs else None)
    assert record["ours"]["seconds"] > 0 and 0 <= record["sentences"]["chrf"] <= 100


def test_long_inputs_benchmark_compares_ours_with_each_input_read_whole(trained_run):
    """bench/long_inputs.py on the toy test set: the sentences alone, two to a line and two as
    one sentence of clauses, ours (a sentence at a time, past the training's length in parts)
    against each input read whole; the length it cuts at is what training recorded."""
    import torch

    path = trained_run[0] / "best.pt"
    record = json.loads(run_bench("bench/long_inputs.py", "--checkpoint", str(path), "--set",
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


def test_typed_inputs_benchmark_compares_ours_with_each_sentence_read_as_typed(trained_run):
    """bench/typed_inputs.py on the toy test set: each way of typing changes the sentences it
    should (those with an umlaut spelt out), ours against each read as typed; with an emoji,
    ours keeps it in every translation and, scored without it, is the sentences' as written
    (it is read as a space); so with brackets and quotes the toy model does not know (in
    order)."""
    record = json.loads(run_bench("bench/typed_inputs.py", "--checkpoint",
                                  str(trained_run[0] / "best.pt"), "--set", "toy_test",
                                  "--max-sentences", "8").stdout)
    sources = (TOY_DE_EN / "test.de").read_text(encoding="utf-8").splitlines()[:8]
    assert record["sentences"] == 8
    with_letters = sum(any(c in s for c in "äöüßÄÖÜ") for s in sources)
    assert record["spelt out"]["changed"] == record["without dots"]["changed"] == with_letters
    for name in ("capitals", "lower case", "first in lower case", "title case", "spelt out",
                 "without dots", "an emoji", "in brackets", "a question"):
        found = record[name]
        ours, typed = found["ours"]["bleu"], found["typed"]["bleu"]
        assert found["ratio"] == (round(ours / typed, 3) if typed else None)
        assert 0 <= found["ours"]["chrf"] <= 100 and 0 <= found["typed"]["chrf"] <= 100
    emoji = record["an emoji"]
    assert emoji["changed"] == 8 and emoji["kept"]["ours"] == 8
    assert emoji["ours"] == record["written"]
    for name in ("in brackets", "in quotes"):  # (quotes in English's marks: each two)
        marks = record[name]
        assert marks["changed"] == marks["kept"]["ours"] == 8 and marks["ours"] == record["written"]
    assert record["a question"]["changed"] == 8
