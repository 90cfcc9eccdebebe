"""What a user waits for before the first translation, for bench/decode_speed.py: a fresh
``mt translate`` of one sentence against ``import torch`` (``first_call``), and a fresh
process's first translation against its second, ours and CTranslate2's
(``first_translations``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch


def first_call(checkpoint: Path, sentence: str, device: torch.device, rounds: int) -> dict:
    """What a user waits for one sentence: ``mt translate --checkpoint C SENTENCE`` in a fresh
    process against ``python -c "import torch"`` (the floor every PyTorch command pays), best
    of ``rounds`` each, in turns."""
    def timed(argv: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], check=True, capture_output=True)
        return time.perf_counter() - start

    translate = ["-m", "transformer_mt", "translate", "--quiet", "--checkpoint",
                 str(checkpoint), "--device", str(device), sentence]
    ours, floor = [], []
    for _ in range(rounds):
        floor.append(timed(["-c", "import torch"]))
        ours.append(timed(translate))
    floor_s, ours_s = round(min(floor), 3), round(min(ours), 3)  # the ratio of what is printed
    return {"import_torch_s": floor_s, "mt_translate_s": ours_s,
            "ratio_to_import_torch": round(ours_s / floor_s, 2)}


# a fresh process's first and second translation of one sentence: ours (Translator, the
# tokenizer included) and the engine's (CTranslate2 given the tokens), seconds each
OURS_PROBE = """import json, sys, time
from transformer_mt.translate import Translator
translator, times = Translator.load(sys.argv[1], sys.argv[2]), []
for _ in range(2):
    start = time.perf_counter()
    translator.translate([sys.argv[3]], beam_size=1)
    times.append(time.perf_counter() - start)
print(json.dumps(times))"""
ENGINE_PROBE = """import json, sys, time
import ctranslate2
path, device, threads, tokens, limit, never = sys.argv[1:7]
engine, times = ctranslate2.Translator(path, device, intra_threads=int(threads)), []
for _ in range(2):
    start = time.perf_counter()
    engine.translate_batch([json.loads(tokens)], beam_size=1, return_scores=False,
                           max_decoding_length=int(limit) + 1,
                           suppress_sequences=json.loads(never))
    times.append(time.perf_counter() - start)
print(json.dumps(times))"""


def first_translations(checkpoint: Path, exported: str, sentence: str, tokens: list[str],
                       limit: int, device: torch.device, rounds: int,
                       engine_threads: int, engine_env: dict[str, str] | None = None) -> dict:
    """The first call against the second, in a fresh process each, ours (at torch's threads)
    and the engine's (at ``engine_threads``, with ``engine_env`` set), best of ``rounds``
    processes each, in turns, in milliseconds; and the engine's first ÷ ours (> 1: ours
    faster); greedy, both."""
    from transformer_mt.translate.exported import NEVER_PRODUCED

    def probe(code: str, *argv: object, env: dict[str, str] | None = None) -> list[float]:
        done = subprocess.run([sys.executable, "-c", code, *map(str, argv)], check=True,
                              capture_output=True, text=True, env=os.environ | (env or {}))
        return json.loads(done.stdout.strip().splitlines()[-1])

    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(probe(OURS_PROBE, checkpoint, device, sentence))
        theirs.append(probe(ENGINE_PROBE, exported, device.type, engine_threads,
                            json.dumps(tokens), limit, json.dumps(NEVER_PRODUCED),
                            env=engine_env))
    out: dict = {}
    for name, times in (("ours", ours), ("ctranslate2", theirs)):
        # to the microsecond, and the ratio of what is printed (a tiny model's second call
        # takes ~0.1 ms, where rounding to 0.01 ms would move the ratio by 5 %)
        first, second = (round(1000 * min(t[i] for t in times), 3) for i in (0, 1))
        out[name] = {"first_ms": first, "second_ms": second,
                     "first_vs_second": round(first / second, 2)}
    out["vs_ctranslate2_first"] = round(out["ctranslate2"]["first_ms"]
                                        / out["ours"]["first_ms"], 2)
    return out
