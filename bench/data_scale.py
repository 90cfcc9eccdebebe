"""Corpora larger than memory: preparation time and peak memory from 30 k to 3 M pairs.

For each corpus size, a synthetic parallel corpus (pairs drawn, seeded, from Multi30k's
training set, so the sentences are real; two plain text files) is prepared and then trained
on for a few steps, each in a fresh subprocess:

1. ``prepare``: what ``mt train`` does before its first step (hash the files, learn the
   SentencePiece model or count words, tokenize into the memory-mapped token-id cache); its
   wall time and peak RSS. Then ``mt data``'s summary of the corpus on that cache (what a
   second ``mt data`` takes; a first one adds the prepare time).
2. ``train``: a short ``mt train`` run on the prepared corpus (the cache is reused): plan the
   epoch's batches from the lengths, train ``--steps`` steps, validate, save; its peak RSS.

The corpus grows 100x; the training run's peak RSS should not (target: the largest corpus
within 1.5x of the smallest; ``ratio`` is that quotient). Prints one JSON record:

    python bench/data_scale.py [--quick] [--sizes 30000 300000 3000000]
                               [--tokenizer sentencepiece|spacy] [--steps 20]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine

REPO = Path(__file__).resolve().parents[1]
MODEL = ["model.d_model=64", "model.n_heads=2", "model.n_encoder_layers=1",
         "model.n_decoder_layers=1", "model.d_ff=256"]


def write_corpus(directory: Path, n: int, seed: int = 0) -> None:
    """``n`` training pairs (and 200 validation pairs) drawn from Multi30k train."""
    from transformer_mt.data.multi30k import locate

    sides = []
    for lang in ("de", "en"):
        with gzip.open(locate(f"train.{lang}.gz"), "rt", encoding="utf-8") as f:
            sides.append([line.rstrip("\n") for line in f])
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for name, count in (("train", n), ("valid", 200)):
        picks = [rng.randrange(len(sides[0])) for _ in range(count)]
        for lang, lines in zip(("de", "en"), sides, strict=True):
            with open(directory / f"{name}.{lang}", "w", encoding="utf-8") as f:
                for start in range(0, count, 100_000):
                    f.write("".join(lines[i] + "\n" for i in picks[start:start + 100_000]))


CHILD = r"""
import json, resource, sys, time
from transformer_mt.config.file import load_config
args = json.loads(sys.argv[1])
config = load_config(None, args["overrides"])
start = time.perf_counter()
if args["stage"] == "prepare":
    from transformer_mt.data.prepare import prepare_data
    data = prepare_data(config)
    pairs = len(data.train)
elif args["stage"] == "summary":  # mt data, on the cache the prepare stage built
    from transformer_mt.data.summary import summarize
    pairs = summarize(config)["train"][0]["pairs"]
else:
    from transformer_mt.training.trainer import train
    train(config, args["run_dir"], progress=False)
    pairs = None
print(json.dumps({"seconds": round(time.perf_counter() - start, 2), "pairs": pairs,
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                        / 1024, 1)}))
"""


def run_child(stage: str, overrides: list[str], run_dir: Path, env: dict[str, str]) -> dict:
    payload = json.dumps({"stage": stage, "overrides": overrides, "run_dir": str(run_dir)})
    result = subprocess.run([sys.executable, "-c", CHILD, payload], capture_output=True,
                            text=True, env=env, cwd=REPO)
    if result.returncode != 0:
        raise SystemExit(f"{stage} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[30_000, 300_000, 3_000_000])
    parser.add_argument("--quick", action="store_true", help="10 k, 100 k and 1 M pairs")
    parser.add_argument("--tokenizer", choices=["sentencepiece", "spacy"],
                        default="sentencepiece")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--workdir", help="where corpora and caches go (default: a temp dir)")
    args = parser.parse_args()
    sizes = [10_000, 100_000, 1_000_000] if args.quick else args.sizes
    work = Path(args.workdir or tempfile.mkdtemp(prefix="mt-data-scale-"))
    rungs = []
    try:
        for n in sizes:
            corpus = work / f"corpus-{n}"
            start = time.perf_counter()
            write_corpus(corpus, n)
            written = time.perf_counter() - start
            env = dict(os.environ, MT_CACHE_DIR=str(work / f"cache-{n}"))
            overrides = [
                f"data.train={{src: {corpus}/train.de, tgt: {corpus}/train.en}}",
                f"data.valid={{src: {corpus}/valid.de, tgt: {corpus}/valid.en}}",
                f"data.tokenizer={args.tokenizer}", "data.vocab_size=8000",
                *MODEL, f"train.max_steps={args.steps}", "train.max_tokens=4096",
                "train.eval_every=100000", "train.save_every=100000", "train.keep_last=0",
                "train.log_every=10", "decode.beam_size=1"]
            prepared = run_child("prepare", overrides, work / f"run-{n}", env)
            summary = run_child("summary", overrides, work / f"run-{n}", env)
            if summary["pairs"] != n:
                raise SystemExit(f"mt data counted {summary['pairs']} pairs, not {n}")
            trained = run_child("train", overrides, work / f"run-{n}", env)
            size = sum(f.stat().st_size for f in corpus.glob("train.*"))
            rungs.append({"pairs": n, "corpus_mib": round(size / 2**20, 1),
                          "write_seconds": round(written, 1),
                          "prepare_seconds": prepared["seconds"],
                          "prepare_peak_rss_mib": prepared["peak_rss_mib"],
                          "mt_data_seconds": summary["seconds"],
                          "mt_data_peak_rss_mib": summary["peak_rss_mib"],
                          "train_seconds": trained["seconds"],
                          "train_peak_rss_mib": trained["peak_rss_mib"]})
            print(json.dumps(rungs[-1]), file=sys.stderr)
            shutil.rmtree(corpus, ignore_errors=True)
            shutil.rmtree(work / f"cache-{n}", ignore_errors=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    ratio = rungs[-1]["train_peak_rss_mib"] / rungs[0]["train_peak_rss_mib"]
    print(json.dumps({"benchmark": "data_scale", "tokenizer": args.tokenizer,
                      "steps": args.steps, "machine": machine(), "rungs": rungs,
                      "ratio": round(ratio, 3), "target": "ratio <= 1.5",
                      "meets_target": ratio <= 1.5}))


if __name__ == "__main__":
    main()
