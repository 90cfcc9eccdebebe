"""Decoding speed: greedy and beam 5, batch 1, 32 and N, with and without the key/value cache,
and against CTranslate2 (the same weights exported, when the ctranslate2 package is installed).

    python bench/decode_speed.py [--checkpoint runs/quickstart/best.pt] [--quick] [--batch 64]
                                 [--device cpu|cuda]

Translates the checkpoint's first test set (``--split``; Multi30k: test_2016_flickr), the first
``--sentences`` of it, in one run, checks that cached and uncached decoding give identical
translations, and prints one JSON record with sentences/s and output tokens/s for each setting,
``cache_speedup`` (cached / uncached, beam 5, batch N) and, with CTranslate2, ``vs_ctranslate2``
(engine time / ours, > 1: ours faster; greedy and beam 5, in batches of 32 and one sentence a
call: the same batches and length limits, translations only, best of 3 turns each; ours at
``--threads`` and with the allocator ``mt`` starts with (tcmalloc where installed:
``machine.allocator``), the engine at its better way: each of ``--engine-threads``' counts
(default 1 to ours) with the system's malloc and, where installed, tcmalloc (``1 tcmalloc``):
``ours_threads``, ``ctranslate2_threads`` and each way's ``ctranslate2_by_threads``),
``first_call`` (a fresh ``mt translate`` of one sentence against ``import torch``; with
``--first-call-checkpoint``, ``first_call_also`` the same for other checkpoints),
``first_translation`` (with CTranslate2: a fresh process's first translation of a sentence
against its second, ours and the engine's, and the engine's first ÷ ours) and
``ratio``, the smallest of the ``vs_ctranslate2`` values (without CTranslate2: the cache
speedup). ``--engine-env KEY=VALUE`` sets an environment variable in the engine's process only
(recorded as ``engine_env``): the engine as tuned for the machine, not only as it comes;
``--engine-quantization int8`` exports its model quantized (``engine_quantization``), e.g.
against ours in bf16 (``--precision auto``): each engine at its fastest.
On the CPU the sentences are also decoded with ``--compile``'s compiled steps
(``decode/compiled.py``; ``*_compiled`` rows, lone sentences and batches of 32; ``compile_s``
the first warm-up (it compiles the graphs, into a cache of its own), ``load_compiled_s`` a
later one (it loads them), and ``sentences_differing_compiled``: none may differ in fp32);
``--no-compile`` skips them.
Without a checkpoint (and no runs/quickstart/best.pt) it uses a seeded untrained model of the
same sizes, whose outputs run to the length limit: slower, and not what a user sees.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from multiprocessing.pool import Pool
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import environment, machine, start_as_mt, synchronize
from bench.first_call import first_call, first_translations
from transformer_mt.__main__ import tcmalloc
from transformer_mt.decode.search import decode_corpus
from transformer_mt.device import pick_device, threads_per_process
from transformer_mt.evaluate import read_test_set
from transformer_mt.precision import for_decoding, resolve_precision
from transformer_mt.translate import Translator
from transformer_mt.translate.engines import TorchEngine, output_limits

DEFAULT_CHECKPOINT = Path("runs/quickstart/best.pt")


def load_translator(path: Path | None, device: torch.device) -> tuple[Translator, str]:
    """The checkpoint's translator if it exists, else a seeded untrained default-sized one."""
    if path is not None and path.exists():
        return Translator.load(path, str(device)), str(path)
    t = Translator.untrained()
    t.model.to(device)
    return t, "seeded untrained model"


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
                 "vs_ctranslate2": {}}
    lone = min(LONE, len(src_tok))
    ways = [("eager", "")] + ([("compiled", "_compiled")] if compiled else []) + (
        [("workers", "_compiled_workers" if compiled else "_workers")] if args.workers > 1
        else [])
    counts = _configurations(args)
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        export_ctranslate2(args.checkpoint, tmp, args.engine_quantization)
        pools = {n: stack.enter_context(_engine_process(tmp, device, way, args.engine_env))
                 for n, way in counts.items()}
        for beam in (1, 5):
            name = "greedy" if beam == 1 else "beam5"
            for batch in (32, 1):
                # a lone sentence is one batch: several at once are the same as one
                runs = {n: pool for n, pool in pools.items() if batch > 1 or counts[n][1] == 1}
                theirs: dict[str, list[float]] = {n: [] for n in runs}
                mine: dict[str, list[float]] = {suffix: [] for way, suffix in ways
                                                if batch > 1 or way != "workers"}
                # in turns: ours (eager, compiled, in processes), the engine each way
                for _ in range(ROUNDS if batch > 1 else LONE_ROUNDS):
                    for way, suffix in ways:
                        if suffix in mine:
                            mine[suffix].append(ours(beam, batch, way))
                    for n, pool in runs.items():
                        theirs[n].append(pool.apply(_engine_time, (src_tok, limits, beam,
                                                                   batch, lone, alpha)))
                _record(out, f"{name}_batch{batch}", theirs, mine,
                        lone if batch == 1 else len(src_tok), batch == 1)
        if sentence and args.first_call_rounds:
            out["first_translation"] = first_translations(
                args.checkpoint, tmp, sentence, src_tok[0], limits[0], device,
                args.first_call_rounds, counts[out["ctranslate2_threads"]["greedy_batch1"]][0])
    return out


def _configurations(args) -> dict[str, tuple[int, int, str]]:
    """The engine's ways to time, each (threads, batches at once, allocator): ``--engine-threads``'
    counts (default 1 to ours), and with ``--workers N`` (ours: N processes) N batches at once,
    the cores shared (``NxT``); each with the system's malloc, as the engine comes, and where
    tcmalloc is installed with it too, as ``mt`` runs ours (``T tcmalloc``)."""
    ways = {str(n): (n, 1) for n in args.engine_threads or range(1, torch.get_num_threads() + 1)}
    if args.workers > 1:
        threads = threads_per_process(args.workers)
        ways[f"{args.workers}x{threads}"] = (threads, args.workers)
    allocators = ("system", "tcmalloc") if tcmalloc() else ("system",)
    return {name + ("" if allocator == "system" else f" {allocator}"): (*way, allocator)
            for name, way in ways.items() for allocator in allocators}


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


def _engine_process(model_dir: str, device: torch.device, way: tuple[int, int, str],
                    env: dict[str, str]) -> Pool:
    """A process of the engine's (a pool of one) at ``way`` (threads, batches at once,
    allocator), started with ``env`` and the allocator (:func:`engine_environment`)."""
    threads, workers, allocator = way
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


ROUNDS = 3  # turns of ours and the engine in the side-by-side comparison
LONE_ROUNDS = 5  # the same for the lone sentences' rows (short turns)
LONE = 40  # sentences translated one a call for the latency rows


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--quick", action="store_true", help="fewer sentences")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--first-call-rounds", type=int, default=3,
                        help="fresh `mt translate` processes timed against `import torch` "
                        "(best of N; 0: none)")
    parser.add_argument("--first-call-checkpoint", type=Path, action="append", default=[],
                        help="also time a fresh `mt translate` with this checkpoint (e.g. a "
                        "SentencePiece model's: its tokenizer imports less than spaCy and "
                        "sacremoses); repeatable")
    parser.add_argument("--split", help="the test set to translate (default: the checkpoint's "
                        "first, test_2016_flickr for Multi30k)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="ours (default: torch's)")
    parser.add_argument("--engine-threads", type=_counts, default=[], metavar="N,M",
                        help="CTranslate2's thread counts to time, each row compared with the "
                        "better (default: 1 to ours)")
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="also decode the batches of 32 in N processes (mt translate "
                        "--workers N; *_workers rows), against the engine decoding N batches "
                        "at once too (its inter_threads; configuration NxT), each with its "
                        "share of the cores")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--no-compile", dest="compile", action="store_false",
                        help="skip the lone sentences decoded with --compile's compiled steps "
                        "(compiling takes ~1 minute)")
    parser.add_argument("--engine-env", type=_setting, action="append", default=[],
                        metavar="KEY=VALUE", help="set in CTranslate2's process only, e.g. "
                        "ONEDNN_MAX_CPU_ISA=AVX2 (on an AMD Zen 4 its oneDNN GEMM runs ~30%% "
                        "faster so, ours slower); repeatable")
    parser.add_argument("--engine-quantization", choices=["int8", "int8_float32", "bfloat16",
                                                          "float16"],
                        help="export for the engine so (mt export --quantization; default "
                        "float32), e.g. int8 against our bf16: each at its fastest")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16", "auto"],
                        help="default: fp32 on the CPU, where cached and uncached decoding must "
                        "translate identically; auto on a GPU, as users decode there. Elsewhere "
                        "rounding differs between the two (GPU kernels differ by shape), so the "
                        "differences are counted")
    return parser


def _counts(text: str) -> list[int]:
    try:
        counts = sorted({int(n) for n in text.split(",")})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not thread counts such as 1,2")
    return counts


def _setting(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"'{text}' is not KEY=VALUE")
    return key, value


def main() -> None:
    start_as_mt()  # ours timed as mt runs it, with its allocator
    args = _parser().parse_args()
    args.engine_env = dict(args.engine_env)
    if args.threads:
        torch.set_num_threads(args.threads)
    n = min(args.sentences, 200 if args.quick else args.sentences)
    device = pick_device(args.device)
    args.precision = args.precision or ("auto" if device.type == "cuda" else "fp32")
    exact = args.precision == "fp32" and device.type == "cpu"
    translator, source = load_translator(args.checkpoint, device)
    model, cfg = translator.model, translator.config
    split = args.split or next(iter(cfg.data.test_sets()), "valid")
    src_text, _ = read_test_set(translator, split, n)
    src_tok = list(translator.tokenizers[0].tokenize(src_text))
    src_ids = translator.encode(src_text)
    cfg.decode.precision = args.precision
    # laid out for decoding once, as Translator does (not timed)
    model = for_decoding(model, resolve_precision(args.precision, device), device)

    results, outputs = _settings(model, cfg, src_ids, n, args.batch, device)
    differing = _differing(outputs, exact)
    key = f"beam5_batch{args.batch}"
    cache_speedup = round(results[f"{key}_cached"]["sentences_per_s"]
                          / results[f"{key}_uncached"]["sentences_per_s"], 2)
    compiled = compiled_decoding(args, translator, model, device)

    shared = workers_engine(args, translator, device, src_ids, cfg.decode, bool(compiled))

    def ours(beam: int, batch: int, way: str = "eager") -> float:
        cfg.decode.batch_size = batch
        decoding = compiled["model"] if way == "compiled" else model
        synchronize(device)
        start = time.perf_counter()
        if way == "workers":
            shared.decode(src_ids, dataclasses.replace(cfg.decode, beam_size=beam),
                          scores=False)
        elif batch == 1:  # one call a sentence, as a lone request is decoded
            for k in range(min(LONE, len(src_ids))):
                decode_corpus(decoding, src_ids[k:k + 1], cfg.decode, device, beam,
                              scores=False)
        else:
            decode_corpus(decoding, src_ids, cfg.decode, device, beam, scores=False)
        synchronize(device)
        return time.perf_counter() - start

    limits = output_limits(src_ids, cfg.decode, cfg.model.max_output_tokens)
    engine = engine_comparison(args, src_tok[:n], limits, ours, device, bool(compiled),
                               src_text[0], cfg.decode.alpha)
    if compiled:
        engine["compile_s"], engine["load_compiled_s"] = compiled["seconds"], compiled["load_s"]
        engine["sentences_differing_compiled"] = _differing_compiled(
            model, compiled["model"], src_ids, cfg.decode, device, exact)
    if args.checkpoint is not None and args.checkpoint.exists() and args.first_call_rounds:
        engine["first_call"] = first_call(args.checkpoint, src_text[0], device,
                                          args.first_call_rounds)
    if args.first_call_checkpoint and args.first_call_rounds:  # (--checkpoint's: measured)
        engine["first_call_also"] = {str(path): engine["first_call"] if "first_call" in engine
                                     and path.resolve() == args.checkpoint.resolve() else
                                     first_call(path, src_text[0], device,
                                                args.first_call_rounds)
                                     for path in args.first_call_checkpoint}
    record = {"benchmark": "decode_speed", "machine": machine(device), "device": str(device),
              "model": source,
              "date": time.strftime("%Y-%m-%d"), "precision": args.precision,
              "identical_with_and_without_cache": differing == 0,
              "sentences_differing_with_and_without_cache": differing,
              "results": results, "cache_speedup": cache_speedup, **engine,
              **({"engine_env": args.engine_env} if args.engine_env else {}),
              "engine_quantization": args.engine_quantization or "float32",
              "ratio": (min(engine["vs_ctranslate2"].values()) if "vs_ctranslate2" in engine
                        else cache_speedup)}
    print(json.dumps(record, indent=2))


_CACHES: list[tempfile.TemporaryDirectory] = []  # removed at exit


def workers_engine(args, translator, device, src_ids, settings, compiled: bool) -> TorchEngine:
    """The model decoding in ``--workers`` processes (``mt translate --workers``; compiled
    where the compiled rows are measured), its processes started (untimed), as a second call
    finds them; the graphs each compiles (at its threads) in a cache of their own."""
    shared = TorchEngine([translator.model], device, workers=args.workers, compile=compiled)
    if args.workers > 1:
        _CACHES.append(tempfile.TemporaryDirectory())
        with mock.patch.dict(os.environ, MT_CACHE_DIR=_CACHES[-1].name):
            shared.decode(src_ids, dataclasses.replace(settings, batch_size=32), scores=False)
    return shared


def compiled_decoding(args, translator, model, device) -> dict:
    """``--compile``'s decoding (greedy and beam 5 compiled) and its warm-up's seconds, on the
    CPU unless ``--no-compile``; {} otherwise."""
    if not args.compile or device.type != "cpu":
        return {}
    from transformer_mt.decode.compiled import CompiledDecoding

    precision = resolve_precision(args.precision, device)
    plain = for_decoding(translator.model, precision, device, pack=False)
    with tempfile.TemporaryDirectory() as cache, mock.patch.dict(os.environ, MT_CACHE_DIR=cache):
        # compiles the graphs of lone sentences and of batches
        seconds = CompiledDecoding(model, plain).warm_up(precision, 5, batches=True)
        compiled = CompiledDecoding(model, plain)
        # as every later start: loads what it compiled
        load = compiled.warm_up(precision, 5, batches=True)
    return {"model": compiled, "seconds": round(seconds, 1), "load_s": round(load, 2)}


def _differing_compiled(model, compiled, src_ids, cfg, device, exact: bool,
                        lone: int = LONE) -> int:
    """Sentences the compiled steps translate otherwise than the model (greedy and beam 5),
    the first ``lone`` one at a time, and all in batches of 32; none may differ where
    decoding is ``exact``."""
    differing = 0
    for beam in (1, 5):
        cfg.batch_size = 1
        for ids in src_ids[:lone]:
            a, b = (decode_corpus(m, [ids], cfg, device, beam, scores=False)[0][0].tokens
                    for m in (model, compiled))
            differing += a != b
        cfg.batch_size = 32
        a, b = ([h[0].tokens for h in decode_corpus(m, src_ids, cfg, device, beam,
                                                     scores=False)] for m in (model, compiled))
        differing += sum(x != y for x, y in zip(a, b, strict=True))
    assert not (exact and differing), f"{differing} sentences differ when compiled"
    return differing


def _settings(model, cfg, src_ids, n: int, batch_n: int, device) -> tuple[dict, dict]:
    """Every setting (greedy and beam 5; batch 1, 32 and N; with and without the cache): its
    speed, and its translations (to compare cached and uncached)."""
    results, outputs = {}, {}
    settings = [(beam, batch, cache) for beam in (1, 5) for batch in sorted({1, 32, batch_n})
                for cache in (True, False)]
    for beam, batch, cache in settings:
        cfg.decode.batch_size = batch
        # batch 1 is slow (uncached beam most of all): measure it on a quarter of the sentences
        ids = src_ids if batch > 1 else src_ids[: max(n // 4, 1)]
        synchronize(device)
        start = time.perf_counter()
        hyps = decode_corpus(model, ids, cfg.decode, device, beam, use_cache=cache,
                             scores=False)  # as the engine is asked: translations only
        synchronize(device)
        elapsed = time.perf_counter() - start
        tokens = sum(len(h[0].tokens) + 1 for h in hyps)
        name = f"{'greedy' if beam == 1 else f'beam{beam}'}_batch{batch}_" \
               f"{'cached' if cache else 'uncached'}"
        results[name] = {"sentences": len(ids), "sentences_per_s": round(len(ids) / elapsed, 1),
                         "tokens_per_s": round(tokens / elapsed, 1),
                         "seconds": round(elapsed, 2)}
        outputs[name] = [h[0].tokens for h in hyps]
    return results, outputs


def _differing(outputs: dict[str, list[list[int]]], exact: bool) -> int:
    """Sentences each uncached setting translates otherwise than its cached twin, summed
    (none may differ where decoding is ``exact``: fp32 on the CPU)."""
    differing = 0
    for name in outputs:
        if name.endswith("_uncached"):
            twin = name.replace("_uncached", "_cached")
            diff = sum(a != b for a, b in zip(outputs[name], outputs[twin], strict=True))
            if exact:
                assert diff == 0, f"{name} and {twin} translate {diff} sentences differently"
            differing += diff
    return differing


if __name__ == "__main__":
    main()
