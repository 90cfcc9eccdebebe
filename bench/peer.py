"""CTranslate2, the peer ``bench/decode_speed.py`` times ours against: the same weights exported
(``mt export``), each of its ways (thread counts, batches at once, allocator) in a process of
its own, started as a user would start it, and timed in turns with ours."""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from contextlib import ExitStack
from multiprocessing.pool import Pool

import torch

from bench.common import environment
from bench.first_call import first_translations
from transformer_mt.__main__ import tcmalloc
from transformer_mt.device import threads_per_process

ROUNDS = 3  # turns of ours and the engine in the side-by-side comparison
LONE_ROUNDS = 5  # the same for the lone sentences' rows (short turns)
LONE = 40  # sentences translated one a call for the latency rows


def engine_comparison(args, src_tok, limits, ours, device, compiled: bool,
                      sentence: str = "", alpha: float = 0.0) -> dict:
    """CTranslate2 on the same sentences, greedy and beam 5, fp32 (or as
    ``--engine-quantization`` exports it), at each of ``args.engine_threads`` (default: 1 to
    ours) in a process of its own, timed in turns with ``ours(beam, batch)`` (seconds of our
    decoding of the same batches at our threads), best of ``ROUNDS`` each (``LONE_ROUNDS`` for
    the lone sentences, whose turns are short), so that a slow moment of the machine does not
    favour either side: batches of 32 (sorted by length), and one sentence a call (the first
    ``LONE`` sentences, in milliseconds a sentence: a lone request's latency; with
    ``compiled``, ours also with the compiled steps). Both get the same batches, the same
    per-sentence length limits and length penalty (``alpha``) and return translations only.
    (That both compute the same is tested in tests/integration/test_export.py.) Each row
    compares ours with the engine at its better thread count for that row
    (``ctranslate2_threads``; every count's figures in ``ctranslate2_by_threads``): its OpenMP
    runtime has run several times slower at 2 threads than at 1 on some VMs, and a ratio
    against a crippled engine says nothing.

    The engine runs in processes of its own, as it would for a user: CTranslate2 brings its
    own OpenMP runtime, and once its threads exist in a process, PyTorch's there decode a lone
    sentence ~1.8x slower (25 against 46 ms a sentence measured here), which would time the
    two runtimes' contention, not our decoder."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return {}
    from transformer_mt.formats.ctranslate2 import export_ctranslate2

    if args.checkpoint is None or not args.checkpoint.exists():
        return {}
    out: dict = {"ours_threads": torch.get_num_threads(), "ctranslate2": {},
                 "ctranslate2_threads": {}, "ctranslate2_by_threads": {}, "ours": {},
                 "vs_ctranslate2": {}, "rounds": {"batches": args.rounds or ROUNDS,
                                                   "lone": args.rounds or LONE_ROUNDS}}
    lone = min(LONE, len(src_tok))
    ways = [("eager", "")] + ([("compiled", "_compiled")] if compiled else []) + (
        [("workers", "_compiled_workers" if compiled else "_workers")] if args.workers > 1
        else [])
    counts = configurations(args)
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        export_ctranslate2(args.checkpoint, tmp, args.engine_quantization)
        pools = {n: stack.enter_context(_engine_process(tmp, device, way))
                 for n, way in counts.items()}
        for beam in (1, 5):
            for batch in (32, 1):
                # a lone sentence is one batch: several at once are the same as one
                runs = {n: pool for n, pool in pools.items() if batch > 1 or counts[n][1] == 1}
                _time_row(out, runs, ours, ways, beam, batch,
                          (src_tok, limits, beam, batch, lone, alpha), args.rounds)
        if sentence and args.first_call_rounds:
            out["first_translation"] = first_translations(
                args.checkpoint, tmp, sentence, src_tok[0], limits[0], device,
                args.first_call_rounds, *counts[out["ctranslate2_threads"]["greedy_batch1"]][::3])
    return out


def _time_row(out: dict, runs: dict[str, Pool], ours, ways: list[tuple[str, str]], beam: int,
              batch: int, job: tuple, rounds: int | None = None) -> None:
    """One row (``beam`` at ``batch``), in turns: ours each way (eager, compiled, in
    processes), the engine each way (``runs``: its processes; ``job``: ``_engine_time``'s
    arguments), best of ``rounds`` (default ``ROUNDS``, ``LONE_ROUNDS`` one sentence a call)
    each, into ``out``."""
    theirs: dict[str, list[float]] = {n: [] for n in runs}
    mine: dict[str, list[float]] = {suffix: [] for way, suffix in ways
                                    if batch > 1 or way != "workers"}
    for _ in range(rounds or (ROUNDS if batch > 1 else LONE_ROUNDS)):
        for way, suffix in ways:
            if suffix in mine:
                mine[suffix].append(ours(beam, batch, way))
        for n, pool in runs.items():
            theirs[n].append(pool.apply(_engine_time, job))
    src_tok, lone = job[0], job[4]
    _record(out, f"{'greedy' if beam == 1 else 'beam5'}_batch{batch}", theirs, mine,
            lone if batch == 1 else len(src_tok), batch == 1)


Way = tuple[int, int, str, dict[str, str]]  # threads, batches at once, allocator, environment
ONEDNN = {"CT2_USE_MKL": "0"}  # CTranslate2's products by oneDNN where it would take Intel's MKL


def configurations(args) -> dict[str, Way]:
    """The engine's ways to time, each (threads, batches at once, allocator, environment):
    ``--engine-threads``' counts (default 1 to ours), and with ``--workers N`` (ours: N
    processes) N batches at once, the cores shared (``NxT``); each with the system's malloc,
    as the engine comes, and where tcmalloc is installed with it too, as ``mt`` runs ours
    (``T tcmalloc``); each with ``--engine-env``'s settings, and on an Intel CPU, where the
    engine takes Intel's MKL for its products, also with oneDNN's (``T onednn``: on an Intel
    Xeon VM its MKL ran 3.5-6x slower on 2 threads than on 1 in float32, oneDNN on 2 1.6x
    faster than either), unless ``--engine-env`` sets ``CT2_USE_MKL``."""
    ways = {str(n): (n, 1) for n in args.engine_threads or range(1, torch.get_num_threads() + 1)}
    if args.workers > 1:
        threads = threads_per_process(args.workers)
        ways[f"{args.workers}x{threads}"] = (threads, args.workers)
    allocators = ("system", "tcmalloc") if tcmalloc() else ("system",)
    backends: dict[str, dict[str, str]] = {"": {}, **({" onednn": ONEDNN} if takes_mkl(
        args.engine_env) else {})}
    return {name + ("" if allocator == "system" else f" {allocator}") + backend:
            (*way, allocator, {**args.engine_env, **env})
            for name, way in ways.items() for allocator in allocators
            for backend, env in backends.items()}


def takes_mkl(env: dict[str, str]) -> bool:
    """Whether CTranslate2 takes Intel's MKL for its products here: on an Intel CPU, unless
    ``env`` says (``CT2_USE_MKL``)."""
    if "CT2_USE_MKL" in env:
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return "GenuineIntel" in f.read(4096)
    except OSError:
        return False


def engine_environment(allocator: str, env: dict[str, str]) -> dict[str, str | None]:
    """What the engine's process starts with: ``--engine-env``'s settings (read by its libraries
    once, as they load) and the allocator preloaded (``system``: none)."""
    return {"LD_PRELOAD": tcmalloc() if allocator == "tcmalloc" else None, **env}


def _record(out: dict, key: str, theirs: dict[str, list[float]],
            mine: dict[str, list[float]], sentences: int, lone: bool) -> None:
    """The best of each side's times as milliseconds a sentence (``lone``) or sentences a
    second: the engine's at each thread count and at its best one, ours each way, and each of
    ours against the engine at its best."""
    def figure(seconds: float) -> float:
        return round(1000 * seconds / sentences, 2) if lone else round(sentences / seconds, 1)

    unit = "_ms" if lone else ""
    for n, times in theirs.items():
        out["ctranslate2_by_threads"].setdefault(str(n), {})[key + unit] = figure(min(times))
    best = min(theirs, key=lambda n: min(theirs[n]))
    out["ctranslate2"][key + unit] = figure(min(theirs[best]))
    out["ctranslate2_threads"][key] = best
    for suffix, times in mine.items():
        if times:
            out["ours"][key + suffix + unit] = figure(min(times))
            out["vs_ctranslate2"][key + suffix] = round(min(theirs[best]) / min(times), 2)


_ENGINE: list = []  # the engine process's CTranslate2 engine


def _engine_process(model_dir: str, device: torch.device, way: Way) -> Pool:
    """A process of the engine's (a pool of one) at ``way`` (threads, batches at once,
    allocator, environment), started with that environment and allocator
    (:func:`engine_environment`)."""
    threads, workers, allocator, env = way
    with environment(engine_environment(allocator, env)):
        return multiprocessing.get_context("spawn").Pool(1, _engine_start, (
            model_dir, device.type, threads, workers))


def _engine_start(model_dir: str, device: str, threads: int, workers: int) -> None:
    from transformer_mt.translate.exported import load_exported

    _ENGINE.append(load_exported(model_dir, device, threads=threads, workers=workers).engine)


def _engine_time(src_tok, limits, beam: int, batch: int, lone: int, alpha: float) -> float:
    """In the engine's process: seconds to translate the batches (or the lone sentences)."""
    engine = _ENGINE[0]
    start = time.perf_counter()
    if batch == 1:
        for k in range(lone):
            engine.translate_tokens(src_tok[k:k + 1], limits[k:k + 1], beam, 1, alpha=alpha)
    else:
        engine.translate_tokens(src_tok, limits, beam, batch_size=32, alpha=alpha)
    return time.perf_counter() - start
