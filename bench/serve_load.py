"""Load on ``mt serve``: sentences/s and latency with 1, 8 and 32 concurrent clients, with
dynamic batching on and off (a batch of one), for our engine (as it is, and with ``--compile``:
``torch-compiled``) and CTranslate2's; and the first request a fresh server answers, against a
lone client's typical one and the same sentence sent again (at once, and after a pause).

    python bench/serve_load.py [--checkpoint runs/quickstart/best.pt] [--seconds 20]
                               [--clients 1 8 32] [--smoke]

Each setting is a real server process (``mt serve`` on a free localhost port) and N client
threads, each sending one sentence of the checkpoint's first test set (``--split``; Multi30k:
test_2016_flickr) per request, one request after another,
until the sentences or ``--seconds`` run out. Prints one JSON record; ``ratio`` is batched /
unbatched throughput at the most clients, our engine (target: >= 5x on a 2-core CPU);
``workers_vs_one``: for each engine, the throughput of ``mt serve --workers N`` at the most
clients against one.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine
from tests.helpers import post, start_server
from transformer_mt.packages import installed


def load(url: str, sentences: list[str], clients: int, seconds: float) -> dict:
    """``clients`` threads sending one sentence a request until ``sentences`` or ``seconds``
    run out: sentences/s and latency percentiles (ms)."""
    latencies: list[float] = []
    failures: list[int] = []
    lock = threading.Lock()
    queue = iter(sentences)
    deadline = time.monotonic() + seconds

    def client() -> None:
        while time.monotonic() < deadline:
            with lock:
                sentence = next(queue, None)
            if sentence is None:
                return
            start = time.perf_counter()
            status, _ = post(url + "/v1/translate", {"text": [sentence]})
            with lock:
                (latencies if status == 200 else failures).append(
                    time.perf_counter() - start if status == 200 else status)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    ms = sorted(x * 1000 for x in latencies)
    return {"clients": clients, "sentences": len(latencies), "failed": len(failures),
            "sentences_per_s": round(len(latencies) / elapsed, 2),
            "p50_ms": round(statistics.median(ms), 1) if ms else None,
            "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1) if ms else None}


IDLE_S = 0.5  # a pause before a request: the caches and threads a busy server has warm cool


def measure(checkpoint: Path, engine: str, batching: bool, sentences: list[str],
            clients: list[int], seconds: float, workers: int = 1,
            first: bool = True) -> tuple[float, float, float, list[dict]]:
    """The server's first request (ms: one sentence, as soon as /health says ok), the same
    sentence again (ms: the median of three more requests, one after another: the same work,
    warm), and three times more each after ``IDLE_S`` of quiet (ms, median: a request after a
    pause finds the model's weights out of the CPU's caches and its threads asleep, as a
    first request does), then the load of each number of clients (``first=False``: the load
    only, the three times NaN)."""
    # no translation cache: the settings share a server, and the cache would answer the
    # sentences an earlier setting sent
    extra = [*ENGINE_FLAGS[engine], "--cache-size", "0", "--workers", str(workers),
             *([] if batching else ["--no-batching"])]
    proc, url = start_server(checkpoint, *extra)
    try:
        times = [] if first else [math.nan] * 7
        for pause in (0, 0, 0, 0, IDLE_S, IDLE_S, IDLE_S) if first else ():
            time.sleep(pause)
            start = time.perf_counter()
            post(url + "/v1/translate", {"text": [sentences[-1]]})
            times.append(round(1000 * (time.perf_counter() - start), 1))
        return (times[0], statistics.median(times[1:4]), statistics.median(times[4:]),
                [load(url, sentences, n, seconds) for n in clients])
    finally:
        proc.terminate()
        proc.communicate(timeout=120)


ENGINE_FLAGS = {"torch": ["--engine", "torch"],
                "torch-compiled": ["--engine", "torch", "--compile"],
                "ctranslate2": ["--engine", "ctranslate2"]}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=Path("runs/quickstart/best.pt"))
    parser.add_argument("--seconds", type=float, default=20.0, help="per setting, at most")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--split", help="the test set the requests come from (default: the "
                        "checkpoint's first, test_2016_flickr for Multi30k)")
    parser.add_argument("--engines", nargs="+", choices=list(ENGINE_FLAGS),
                        default=list(ENGINE_FLAGS),
                        help="CTranslate2's only where the package is installed; "
                        "torch-compiled: mt serve --compile (compiling takes ~15-30 s a server)")
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2],
                        help="mt serve --workers to compare (each engine, batched, the most "
                        "clients); none: no comparison")
    parser.add_argument("--smoke", action="store_true",
                        help="a few seconds, our engine (for the tests)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.smoke:
        args.seconds, args.clients, args.sentences, args.engines = 1.5, [1, 4], 24, ["torch"]
    if not args.checkpoint.exists():
        parser.error(f"{args.checkpoint} not found: train one (make demo) or pass --checkpoint")

    from transformer_mt.evaluate import read_test_set
    from transformer_mt.translate import Translator

    translator = Translator.load(args.checkpoint, "cpu")
    split = args.split or next(iter(translator.config.data.test_sets()), "valid")
    sentences, _ = read_test_set(translator, split, args.sentences)
    engines: dict[str, Path] = {engine: args.checkpoint for engine in args.engines
                                if engine.startswith("torch")}
    with tempfile.TemporaryDirectory() as tmp:
        if "ctranslate2" in args.engines and installed("ctranslate2"):
            exported = Path(tmp) / "ct2"
            subprocess.run([sys.executable, "-m", "transformer_mt", "--quiet", "export",
                            str(args.checkpoint), str(exported)], check=True,
                           capture_output=True)
            engines["ctranslate2"] = exported
        results: dict = {}
        first: dict = {}
        for engine, path in engines.items():
            results[engine] = {}
            for mode in ("batched", "unbatched"):
                first_ms, again_ms, idle_ms, results[engine][mode] = measure(
                    path, engine, mode == "batched", sentences, args.clients, args.seconds,
                    first=mode == "batched")
                if mode == "batched":  # against the same request again (at once, and
                    # after a pause), and a lone client's typical one (p50)
                    lone = results[engine][mode][0]["p50_ms"] or float("nan")
                    first[engine] = {"first_request_ms": first_ms, "again_ms": again_ms,
                                     "first_vs_again": round(first_ms / again_ms, 2),
                                     "after_idle_ms": idle_ms,
                                     "first_vs_after_idle": round(first_ms / idle_ms, 2),
                                     "lone_p50_ms": lone,
                                     "first_vs_p50": round(first_ms / lone, 2)}
        by_workers = {engine: workers(args, engine, path, results[engine]["batched"][-1],
                                      sentences) for engine, path in engines.items()}
    ratios = {engine: round(r["batched"][-1]["sentences_per_s"]
                            / max(r["unbatched"][-1]["sentences_per_s"], 1e-9), 2)
              for engine, r in results.items()}
    record = {"benchmark": "serve_load", "machine": machine(), "date": time.strftime("%Y-%m-%d"),
              "checkpoint": str(args.checkpoint), "seconds_per_setting": args.seconds,
              "results": results, "first_request": first, "batched_vs_unbatched": ratios,
              "workers": by_workers, "workers_vs_one": {
                  engine: {n: round(r["sentences_per_s"] / max(by_n[min(by_n)]
                                                               ["sentences_per_s"], 1e-9), 2)
                           for n, r in by_n.items()} for engine, by_n in by_workers.items()},
              "ratio": ratios.get("torch", next(iter(ratios.values())))}
    print(json.dumps(record, indent=2))


def workers(args: argparse.Namespace, engine: str, path: Path, one: dict,
            sentences: list[str]) -> dict[int, dict]:
    """``mt serve --workers N`` for each of ``args.workers``, batched, at the most clients;
    one worker is ``one``, the batched setting measured before."""
    return {n: one if n == 1 else measure(path, engine, True, sentences, args.clients[-1:],
                                          args.seconds, n, first=False)[3][0]
            for n in args.workers}


if __name__ == "__main__":
    main()
