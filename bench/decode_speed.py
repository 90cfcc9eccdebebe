"""Decoding speed: greedy and beam 5, batch 1, 32 and N, with and without the key/value cache,
and against CTranslate2 (the same weights exported, when the ctranslate2 package is installed).

    python bench/decode_speed.py [--checkpoint runs/quickstart/best.pt] [--quick] [--batch 64]
                                 [--device cpu|cuda]

Translates the checkpoint's first test set (``--split``; Multi30k: test_2016_flickr), the first
``--sentences`` of it, in one run, checks that cached and
uncached decoding give identical translations, and prints one JSON record with sentences/s and
output tokens/s for each setting, ``cache_speedup`` (cached / uncached, beam 5, batch N) and,
with CTranslate2, ``vs_ctranslate2`` (ours / engine in sentences/s, greedy and beam 5, batch
32: the same batches, length limits and threads, translations only, best of 3 turns each) and
``ratio``, the smaller of those two (without CTranslate2: the cache speedup).
Without a checkpoint (and no runs/quickstart/best.pt) it uses a seeded untrained model of the
same sizes, whose outputs run to the length limit: slower, and not what a user sees.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, synchronize
from transformer_mt.decode.search import decode_corpus
from transformer_mt.device import pick_device
from transformer_mt.engines import output_limits
from transformer_mt.evaluate import read_test_set
from transformer_mt.precision import for_decoding, resolve_precision
from transformer_mt.translate import Translator

DEFAULT_CHECKPOINT = Path("runs/quickstart/best.pt")


def load_translator(path: Path | None, device: torch.device) -> tuple[Translator, str]:
    """The checkpoint's translator if it exists, else a seeded untrained default-sized one."""
    if path is not None and path.exists():
        return Translator.load(path, str(device)), str(path)
    t = Translator.untrained()
    t.model.to(device)
    return t, "seeded untrained model"


def engine_comparison(args, src_tok, limits, ours, device) -> dict:
    """CTranslate2 on the same sentences, batch 32, greedy and beam 5, fp32, as many threads
    as ours, timed in turns with ``ours(beam)`` (seconds of our decoding of the same batches),
    best of ``ROUNDS`` each, so that a slow moment of the machine does not favour either side.
    Both get the same batches (sorted by length, 32 a batch) and the same per-sentence length
    limits and return translations only. (That both compute the same is tested in
    tests/test_export.py.)"""
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return {}
    from transformer_mt.engines import load_exported
    from transformer_mt.export import export_ctranslate2

    if args.checkpoint is None or not args.checkpoint.exists():
        return {}
    out: dict = {"ctranslate2": {}, "ours": {}, "vs_ctranslate2": {}}
    with tempfile.TemporaryDirectory() as tmp:
        export_ctranslate2(args.checkpoint, tmp)
        engine = load_exported(tmp, device.type, threads=torch.get_num_threads()).engine
        for beam in (1, 5):
            name = "greedy" if beam == 1 else "beam5"
            theirs, mine = [], []
            for _ in range(ROUNDS):
                mine.append(ours(beam))
                start = time.perf_counter()
                engine.translate_tokens(src_tok, limits, beam, batch_size=32)
                theirs.append(time.perf_counter() - start)
            n = len(src_tok)
            out["ctranslate2"][f"{name}_batch32"] = round(n / min(theirs), 1)
            out["ours"][f"{name}_batch32"] = round(n / min(mine), 1)
            out["vs_ctranslate2"][name] = round(min(theirs) / min(mine), 2)
    return out


ROUNDS = 3  # turns of ours and the engine in the side-by-side comparison


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--quick", action="store_true", help="fewer sentences")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--split", help="the test set to translate (default: the checkpoint's "
                        "first, test_2016_flickr for Multi30k)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16", "auto"],
                        help="default: fp32 on the CPU, where cached and uncached decoding must "
                        "translate identically; auto on a GPU, as users decode there. Elsewhere "
                        "rounding differs between the two (GPU kernels differ by shape), so the "
                        "differences are counted")
    args = parser.parse_args()
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

    results, outputs = {}, {}
    settings = [(beam, batch, cache) for beam in (1, 5) for batch in sorted({1, 32, args.batch})
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
    differing = _differing(outputs, exact)
    key = f"beam5_batch{args.batch}"
    cache_speedup = round(results[f"{key}_cached"]["sentences_per_s"]
                          / results[f"{key}_uncached"]["sentences_per_s"], 2)
    def ours(beam: int) -> float:
        cfg.decode.batch_size = 32
        synchronize(device)
        start = time.perf_counter()
        decode_corpus(model, src_ids, cfg.decode, device, beam, scores=False)
        synchronize(device)
        return time.perf_counter() - start

    limits = output_limits(src_ids, cfg.decode, cfg.model.max_output_tokens)
    engine = engine_comparison(args, src_tok[:n], limits, ours, device)
    record = {"benchmark": "decode_speed", "machine": machine(device), "device": str(device),
              "model": source,
              "date": time.strftime("%Y-%m-%d"), "precision": args.precision,
              "identical_with_and_without_cache": differing == 0,
              "sentences_differing_with_and_without_cache": differing,
              "results": results, "cache_speedup": cache_speedup, **engine,
              "ratio": min(engine["vs_ctranslate2"].values()) if engine else cache_speedup}
    print(json.dumps(record, indent=2))


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
