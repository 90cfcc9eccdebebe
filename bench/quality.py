"""Translation quality: train a config, then score it on val and the test sets, greedy and beam.

    python bench/quality.py --config config/cpu.yaml [--run-dir runs/cpu] [--set key=value ...]
    python bench/quality.py --checkpoint runs/cpu/best.pt      # score an existing model only

Prints one JSON record: config, machine, device, training wall time and steps, and for val,
each test set of the config (Multi30k: test_2016_flickr and test_2017_flickr) the sacreBLEU
BLEU (cased, detokenized) and chrF with greedy search and with beam search.
Model selection uses val only; the test sets are only reported.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine
from transformer_mt.config.file import load_config
from transformer_mt.evaluate import decode_and_score, read_test_set
from transformer_mt.training.trainer import train
from transformer_mt.translate import Translator


def evaluate_all(checkpoint: Path, beam: int, max_sentences: int | None = None) -> dict:
    translator = Translator.load(checkpoint)
    out = {}
    for split in ["valid", *translator.config.data.test_sets()]:
        sources, refs = read_test_set(translator, split, max_sentences)
        for name, size in (("greedy", 1), (f"beam{beam}", beam)):
            r = decode_and_score(translator, refs, sources, beam_size=size)
            out[f"{split}_{name}"] = {"bleu": round(r.scores.bleu, 2),
                                      "chrf": round(r.scores.chrf, 2),
                                      "seconds": round(r.seconds, 1)}
    out["bleu_signature"] = r.scores.bleu_signature
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="train this config first")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--run-dir")
    parser.add_argument("--checkpoint", type=Path, help="only score this checkpoint")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-sentences", type=int, help="score only the first N sentences of "
                        "each set (a smoke run)")
    args = parser.parse_args()
    record: dict = {"benchmark": "quality", "machine": machine(),
                    "date": time.strftime("%Y-%m-%d")}
    if args.checkpoint is None:
        if not args.config:
            parser.error("give --config to train, or --checkpoint to score")
        config = load_config(args.config, args.set)
        run_dir = Path(args.run_dir or f"runs/{config.name}")
        start = time.perf_counter()
        progress = train(config, run_dir, progress=False)
        record.update(config=args.config, overrides=args.set,
                      train_wall_s=round(time.perf_counter() - start, 1), steps=progress.step,
                      epochs=progress.epoch, best_val_bleu_greedy=progress.best_bleu,
                      best_step=progress.best_step)
        args.checkpoint = run_dir / "best.pt"
    record["checkpoint"] = str(args.checkpoint)
    record["scores"] = evaluate_all(args.checkpoint, args.beam, args.max_sentences)
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
