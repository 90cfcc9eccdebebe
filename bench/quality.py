"""Translation quality: train a config with one seed or several, then score every run on val
and the test sets, and report each run and the mean over the seeds with its spread.

    python bench/quality.py --config config/cpu.yaml [--run-dir runs/cpu] [--set key=value ...]
    python bench/quality.py --config config/gpu.yaml --seeds 1234,1,2 --jobs 3   # 3 seeds at once
    python bench/quality.py --checkpoint runs/cpu/avg.pt        # score an existing model only
    python bench/quality.py --checkpoint a.pt --checkpoint b.pt --ensemble   # and the two as one

Each run is ``mt train`` in a process of its own (several seeds: ``<run-dir>/seed-<S>``;
``--jobs`` of them at once, e.g. sharing one GPU). ``--train-timeout`` stops a run as Ctrl-C
does (it saves ``last.pt``; the same command again resumes it) and scores what it saved. The
last ``--average`` saves (``step_*.pt``) are averaged as ``mt average`` does (0: ``best.pt``; a
run stopped early: the average or ``last.pt``, the better on val), and the result is scored as
``mt evaluate`` scores: sacreBLEU BLEU (cased, detokenized) and chrF with greedy search and
with beam search (the checkpoint's length penalty; ``--alphas``: beam search also with each of
these, to choose one on val: ``<set>_beam<N>_alpha<A>``). Prints one JSON record: the machine,
each run (seed, steps, training wall time, scores) and, for every set and search, the mean
BLEU and chrF of the runs with the lowest and highest BLEU; with ``--ensemble``, the scores of
the runs' models as one ensemble (their probabilities averaged, as ``mt evaluate --ensemble``
scores them). Choose on val only; the test sets are only reported.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.common import check_out, machine, start_as_mt, write_out
from transformer_mt.average import average_checkpoints
from transformer_mt.checkpoint import load_checkpoint, save_checkpoint
from transformer_mt.config import DECODE_RANGES
from transformer_mt.config.file import load_config
from transformer_mt.errors import MTError
from transformer_mt.evaluate import decode_and_score, read_test_set
from transformer_mt.packages import require
from transformer_mt.translate import Translator

STOPPED = 128 + signal.SIGINT  # mt train's exit code once a SIGINT made it save and stop


def evaluate_all(checkpoint: Path | Sequence[Path], beam: int, max_sentences: int | None = None,
                 alphas: Sequence[float] = ()) -> dict:
    """BLEU and chrF of ``checkpoint`` (or of an ensemble of several) on val and each test set
    of its config, greedy and beam (the checkpoint's length penalty, and each of ``alphas``);
    ``bleu_signature`` is sacreBLEU's."""
    translator = Translator.load(checkpoint)
    searches: list[tuple[str, dict]] = [("greedy", {"beam_size": 1}),
                                        (f"beam{beam}", {"beam_size": beam})]
    searches += [(f"beam{beam}_alpha{a:g}", {"beam_size": beam, "alpha": a}) for a in alphas]
    out = {}
    for split in ["valid", *translator.config.data.test_sets()]:
        sources, refs = read_test_set(translator, split, max_sentences)
        for name, settings in searches:
            r = decode_and_score(translator, refs, sources, **settings)
            out[f"{split}_{name}"] = {"bleu": round(r.scores.bleu, 2),
                                      "chrf": round(r.scores.chrf, 2),
                                      "seconds": round(r.seconds, 1)}
    out["bleu_signature"] = r.scores.bleu_signature
    return out


def train_run(args: argparse.Namespace, seed: int, run_dir: Path) -> dict:
    """``mt train`` the run in its own process (its log beside the run directory), stopped by
    SIGINT after ``--train-timeout`` seconds; what its ``last.pt`` says of the run."""
    sets = [*args.set, f"train.seed={seed}"]
    command = [sys.executable, "-m", "transformer_mt", "train", "--config", args.config,
               "--run-dir", str(run_dir), "--quiet", *(f"--set={s}" for s in sets)]
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    log = run_dir.with_name(run_dir.name + ".log")
    start, timed_out = time.perf_counter(), False
    with open(log, "a", encoding="utf-8") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            rc = process.wait(timeout=args.train_timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)  # finish the step, save last.pt, exit 130
            rc, timed_out = process.wait(), True
        except KeyboardInterrupt:  # Ctrl-C reached the training too: let it save
            process.wait()
            raise
    if timed_out and not (run_dir / "last.pt").exists():  # (still starting, or preparing data)
        raise RuntimeError(f"--train-timeout {args.train_timeout:g} s stopped mt train before "
                           f"its first step (log: {log}): nothing to score; give it longer")
    if rc not in (0, STOPPED) or not (run_dir / "last.pt").exists():
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
        raise RuntimeError(f"mt train exited {rc} (log: {log}): {' '.join(tail)}")
    progress = load_checkpoint(run_dir / "last.pt")["progress"]
    return {"seed": seed, "run_dir": str(run_dir), "log": str(log), "stopped": rc == STOPPED,
            "train_wall_s": round(time.perf_counter() - start, 1), "steps": progress["step"],
            "epochs": progress["epoch"], "best_val_bleu_greedy": progress["best_bleu"],
            "best_step": progress["best_step"], "training_s": round(progress.get("seconds", 0), 1)}


def model_to_score(args: argparse.Namespace, run_dir: Path,
                   stopped: bool) -> tuple[Path, list[str], dict]:
    """``best.pt`` (``--average`` 0), or the average of the run's last ``--average`` saves
    (written to ``avg.pt``; one save is scored as it is; a run stopped before its first save
    has none: its ``last.pt``), the files it comes from, and (a run stopped before its end) the
    val BLEU that chose it. The saves of a run stopped early come from where the model still
    learns fast: their average can score under the model where it stopped (the CPU recipe at
    an hour on AVX2, 2026-12-03: val 38.72 against ``last.pt``'s 39.76), so there the one of
    the two with the better val BLEU (greedy; the average at a tie) is scored."""
    if args.average == 0:
        return run_dir / "best.pt", [str(run_dir / "best.pt")], {}
    saves = sorted(run_dir.glob("step_*.pt"))[-args.average:] or [run_dir / "last.pt"]
    if len(saves) == 1:
        return saves[0], [str(saves[0])], {}
    save_checkpoint(average_checkpoints(saves), run_dir / "avg.pt")
    if not stopped:
        return run_dir / "avg.pt", [str(p) for p in saves], {}
    val = {name: val_bleu(run_dir / name, args.max_sentences) for name in ("avg.pt", "last.pt")}
    if val["last.pt"] > val["avg.pt"]:
        return run_dir / "last.pt", [str(run_dir / "last.pt")], val
    return run_dir / "avg.pt", [str(p) for p in saves], val


def val_bleu(checkpoint: Path, max_sentences: int | None) -> float:
    """The val BLEU of ``checkpoint``, greedy (as ``evaluate_all`` rounds it)."""
    translator = Translator.load(checkpoint)
    sources, refs = read_test_set(translator, "valid", max_sentences)
    return round(decode_and_score(translator, refs, sources, beam_size=1).scores.bleu, 2)


def one_run(args: argparse.Namespace, seed: int, run_dir: Path) -> dict:
    """Train, average and score one run: its record, or its error."""
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        record = train_run(args, seed, run_dir)
        checkpoint, sources, val = model_to_score(args, run_dir, record["stopped"])
        record.update(checkpoint=str(checkpoint), averaged=sources,
                      **({"chosen_on_val_greedy": val} if val else {}),
                      scores=evaluate_all(checkpoint, args.beam, args.max_sentences,
                                          args.alphas))
        return record
    except Exception as exc:  # one failed run is reported, the others kept
        return {"seed": seed, "run_dir": str(run_dir), "error": str(exc)}


def summary(runs: list[dict]) -> dict:
    """For each set and search: the mean BLEU and chrF of the scored runs, with the lowest and
    highest BLEU and how many runs."""
    scored = [r["scores"] for r in runs if "scores" in r]
    out = {}
    for key in (scored[0] if scored else {}):
        if key == "bleu_signature":
            continue
        bleu = [s[key]["bleu"] for s in scored]
        out[key] = {"bleu": round(statistics.fmean(bleu), 2), "bleu_min": min(bleu),
                    "bleu_max": max(bleu), "runs": len(bleu),
                    "chrf": round(statistics.fmean(s[key]["chrf"] for s in scored), 2)}
    return out


def run_all(args: argparse.Namespace, seeds: list[int]) -> Iterator[dict]:
    """Every seed's run as it ends: one after another, or ``--jobs`` at once, each in a
    process of its own (which trains, then scores on the device while the others may still
    train)."""
    base = Path(args.run_dir or f"runs/{load_config(args.config, args.set).name}")
    dirs = [base / f"seed-{s}" if len(seeds) > 1 else base for s in seeds]
    if args.jobs > 1 and "OMP_NUM_THREADS" not in os.environ and not torch.cuda.is_available():
        args.threads = max(1, (os.cpu_count() or 1) // min(args.jobs, len(seeds)))
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # the trainings' share of the cores
    if args.jobs == 1:
        yield from (one_run(args, seed, run_dir) for seed, run_dir in zip(seeds, dirs,
                                                                           strict=True))
        return
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        yield from (f.result() for f in as_completed([pool.submit(one_run, args, seed, run_dir)
                                                      for seed, run_dir in zip(seeds, dirs,
                                                                               strict=True)]))


def score_all(args: argparse.Namespace, record: dict) -> list[dict]:
    """Train and score each seed's run (or score each ``--checkpoint``), then the ensemble;
    ``record`` holds what is done after each (and ``--out`` is written)."""
    if args.checkpoint is not None:
        names, parts = [str(p) for p in args.checkpoint], ({
            "checkpoint": str(path), "scores": evaluate_all(path, args.beam, args.max_sentences,
                                                            args.alphas)}
            for path in args.checkpoint)
    else:
        seeds = list(args.seeds or [load_config(args.config, args.set).train.seed])
        names, parts = [f"seed {s}" for s in seeds], run_all(args, seeds)
        record.update(config=args.config, overrides=args.set, average=args.average)
    to_come = [*names, *(["ensemble"] if args.ensemble else [])]
    runs: list[dict] = []
    for run in parts:
        runs.append(run)
        runs.sort(key=lambda r: names.index(f"seed {r['seed']}" if "seed" in r
                                            else r["checkpoint"]))
        to_come.remove(f"seed {run['seed']}" if "seed" in run else run["checkpoint"])
        record.update(beam=args.beam, runs=runs, mean=summary(runs))
        write_out(args.out, record, to_come)
    if args.ensemble:
        record["ensemble"] = ensemble(args, runs)
    write_out(args.out, record)
    return runs


def ensemble(args: argparse.Namespace, runs: list[dict]) -> dict:
    """The scores of the scored runs' models as one ensemble (or why there are none)."""
    paths = [Path(r["checkpoint"]) for r in runs if "scores" in r]
    if len(paths) < 2:
        return {"error": f"{len(paths)} run(s) scored; an ensemble needs two or more"}
    try:
        return {"checkpoints": [str(p) for p in paths],
                "scores": evaluate_all(paths, args.beam, args.max_sentences, args.alphas)}
    except Exception as exc:  # the runs' own scores are still reported
        return {"checkpoints": [str(p) for p in paths], "error": str(exc)}


def seed_list(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of whole "
                                         "numbers") from None


def alpha_list(text: str) -> list[float]:
    low, high = DECODE_RANGES["alpha"]  # what decode.alpha accepts: refused now, not after
    try:                                # the trainings
        alphas = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        alphas = [-1.0]
    if not alphas or any(not low <= a <= high for a in alphas):
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of length "
                                         f"penalties from {low:g} to {high:g}")
    return alphas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="train this config first")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--run-dir", help="default: runs/<config name>")
    parser.add_argument("--seeds", type=seed_list, help="train one run a seed, e.g. 1234,1,2 "
                        "(default: the config's train.seed)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument("--train-timeout", type=float, metavar="SECONDS",
                        help="stop each training after this long (saved; resumable)")
    parser.add_argument("--average", type=int, default=3, help="score the average of the last "
                        "N saves (default 3, as the recipes' figures; of a run stopped early, "
                        "it or last.pt: the better on val); 0: best.pt")
    parser.add_argument("--checkpoint", type=Path, action="append", help="only score this "
                        "checkpoint (repeatable: each, and their mean)")
    parser.add_argument("--ensemble", action="store_true", help="also score the runs' models "
                        "(or the --checkpoint ones) as one ensemble")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--alphas", type=alpha_list, default=[], help="beam search also with "
                        "each of these length penalties, e.g. 1.0,1.3,1.6,2.0 (choose on val)")
    parser.add_argument("--max-sentences", type=int, help="score only the first N sentences of "
                        "each set (a smoke run)")
    parser.add_argument("--out", type=Path, help="also write the JSON here (after each run and "
                        "the ensemble: a call cut short keeps what it finished, the rest in "
                        "parts_to_come)")
    args = parser.parse_args()
    if args.jobs < 1 or args.average < 0:
        parser.error("--jobs must be 1 or more, --average 0 or more")
    if not args.config and args.checkpoint is None:
        parser.error("give --config to train, or --checkpoint to score")
    check_out(parser, args.out)
    try:  # what scoring needs, before the trainings: not minutes later (a bare GPU machine)
        require({"spacy": "scoring: a line of several sentences is split by spaCy's "
                          "sentencizer", "sacrebleu": "scoring"})
    except MTError as exc:
        parser.error(str(exc))
    if args.ensemble and len(args.checkpoint or args.seeds or []) < 2:
        parser.error("--ensemble needs two or more --seeds or --checkpoint models")
    start_as_mt()  # scored as mt scores, with its allocator (the trainings are mt's too)
    args.threads = None
    record: dict = {"benchmark": "quality", "date": time.strftime("%Y-%m-%d"),
                    "machine": machine(torch.device("cuda") if torch.cuda.is_available()
                                       else None)}
    try:
        runs = score_all(args, record)
    except KeyboardInterrupt:
        sys.exit("quality.py: interrupted; each training saved where it stopped (last.pt), "
                 "and the same command resumes them")
    print(json.dumps(record, indent=2))
    failed = [r for r in [*runs, record.get("ensemble", {})] if "error" in r]
    for r in failed:
        what = f"the run of seed {r['seed']}" if "seed" in r else "the ensemble"
        print(f"quality.py: {what} failed: {r['error']}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
