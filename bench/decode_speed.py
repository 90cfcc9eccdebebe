"""Decoding speed: greedy and beam 5, batch 1, 32 and N, with and without the key/value cache,
and against CTranslate2 (the same weights exported, when the ctranslate2 package is installed).

    python bench/decode_speed.py [--checkpoint runs/quickstart/best.pt] [--quick] [--batch 64]
                                 [--device cpu|cuda]

Translates the checkpoint's first test set (``--split``; Multi30k: test_2016_flickr), the first
``--sentences`` of it, in one run, checks that cached and uncached decoding give identical
translations, and prints one JSON record with sentences/s and output tokens/s for each setting,
``cache_speedup`` (cached / uncached, beam 5, batch N) and, with CTranslate2, ``vs_ctranslate2``
(engine time / ours, > 1: ours faster; greedy and beam 5, in batches of 32 and one sentence a
call: the same batches and length limits, neither with the checkpoint's
``no_repeat_ngram_size`` (`make demo`'s 3), translations only, best of 3 turns each, 5 for the
lone sentences (``--rounds``; ``rounds``); ours at
``--threads`` and with the allocator ``mt`` starts with (tcmalloc where installed:
``machine.allocator``), the engine at its better way: each of ``--engine-threads``' counts
(default 1 to ours) with the system's malloc and, where installed, tcmalloc (``1 tcmalloc``):
``ours_threads``, ``ctranslate2_threads`` and each way's ``ctranslate2_by_threads``),
``text_path`` (lone sentences through ``Translator.translate``, text in and out, against
``translate_ids``: ``overhead_ms``), ``first_call`` (a fresh ``mt translate`` of one sentence
against ``import torch``; with
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
import os
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, start_as_mt, synchronize
from bench.first_call import first_call
from bench.peer import LONE, engine_comparison
from transformer_mt.decode.search import decode_corpus
from transformer_mt.device import pick_device
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
    parser.add_argument("--rounds", type=int, metavar="N", help="turns of ours and the engine "
                        "in each row, the best of them kept (default 3, and 5 for the lone "
                        "sentences' rows)")
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
    args = _parser().parse_args()  # (a mistyped flag: refused before it starts again)
    start_as_mt()  # ours timed as mt runs it, with its allocator
    args.engine_env = dict(args.engine_env)
    if args.threads:
        torch.set_num_threads(args.threads)
    n = min(args.sentences, 200 if args.quick else args.sentences)
    device = pick_device(args.device)
    args.precision = args.precision or ("auto" if device.type == "cuda" else "fp32")
    exact = args.precision == "fp32" and device.type == "cpu"
    translator, source = load_translator(args.checkpoint, device)
    model, cfg = translator.model, translator.config
    src_text, src_tok, src_ids = _sources(args, translator, n)
    cfg.decode.precision, cfg.decode.no_repeat_ngram_size = args.precision, 0  # (docstring)
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
    engine.update(first_calls(args, src_text[0], device),
                  text_path=text_path(translator, src_text[:LONE], args))
    print(json.dumps({
        "benchmark": "decode_speed", "machine": machine(device), "device": str(device),
        "model": source, "date": time.strftime("%Y-%m-%d"), "precision": args.precision,
        "identical_with_and_without_cache": differing == 0,
        "sentences_differing_with_and_without_cache": differing,
        "results": results, "cache_speedup": cache_speedup, **engine,
        **({"engine_env": args.engine_env} if args.engine_env else {}),
        "engine_quantization": args.engine_quantization or "float32",
        "ratio": (min(engine["vs_ctranslate2"].values()) if "vs_ctranslate2" in engine
                  else cache_speedup)}, indent=2))


def _sources(args, translator: Translator, n: int) -> tuple[list[str], list, list[list[int]]]:
    """The first ``n`` sentences of the test set (``--split``, default the checkpoint's
    first): as text, as the engine's tokens, as our ids."""
    split = args.split or next(iter(translator.config.data.test_sets()), "valid")
    src_text, _ = read_test_set(translator, split, n)
    return (src_text, list(translator.tokenizers[0].tokenize(src_text)),
            translator.encode(src_text))


def text_path(translator: Translator, texts: list[str], args) -> dict:
    """Lone sentences through ``Translator.translate`` (text in, text out: their tokenizing,
    casing, kept spans and copied unknown words too) against ``translate_ids`` (ids in,
    translations out), greedy and eager, ms a sentence, the best of ``rounds`` turns: what the
    rows above leave out (a read of the whole vocabulary at every call once cost 3.6 ms)."""
    cfg, rounds = translator.settings(beam_size=1, precision=args.precision), args.rounds or 3
    ids = translator.encode(texts)

    def best(call) -> float:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            for k in range(len(texts)):
                call(k)
            times.append((time.perf_counter() - start) / len(texts) * 1000)
        return min(times)

    best(lambda k: translator.translate([texts[k]], cfg))  # (the tokenizers' first words)
    text = best(lambda k: translator.translate([texts[k]], cfg))
    plain = best(lambda k: translator.translate_ids([ids[k]], cfg))
    return {"sentences": len(texts), "text_ms": round(text, 2), "ids_ms": round(plain, 2),
            "overhead_ms": round(text - plain, 2)}


def first_calls(args, sentence: str, device: torch.device) -> dict:
    """``first_call`` (a fresh ``mt translate`` of ``sentence`` against ``import torch``) for
    ``--checkpoint``, and ``first_call_also`` for each ``--first-call-checkpoint``."""
    found: dict = {}
    if args.checkpoint is not None and args.checkpoint.exists() and args.first_call_rounds:
        found["first_call"] = first_call(args.checkpoint, sentence, device,
                                         args.first_call_rounds)
    if args.first_call_checkpoint and args.first_call_rounds:  # (--checkpoint's: measured)
        found["first_call_also"] = {str(path): found["first_call"] if "first_call" in found
                                    and path.resolve() == args.checkpoint.resolve() else
                                    first_call(path, sentence, device, args.first_call_rounds)
                                    for path in args.first_call_checkpoint}
    return found


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
