"""Profile training steps of ``mt train`` with the torch profiler: where does a step's time go?

    python bench/profile_step.py [--precision auto|fp32|bf16] [--steps 3] [--measure 20]
                                 [--set key=value ...]

Runs a few warm-up steps of the default model on Multi30k, measures target tokens/s over
``--measure`` steps, then prints the profiler's table of the operators that took the most time
over ``--steps`` steps (the epoch's steps are cycled when it has fewer).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformer_mt.config.file import config_from_dict
from transformer_mt.training.trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--steps", type=int, default=3, help="steps profiled")
    parser.add_argument("--measure", type=int, default=20, help="steps timed before that")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--rows", type=int, default=20)
    args = parser.parse_args()
    cfg = config_from_dict({}, [f"train.precision={args.precision}", *args.set])
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, tmp, progress=False)
        run = trainer.setup()
        plan = trainer.epoch_plan(run, 0)
        steps = [plan[i % len(plan)] for i in range(3 + args.measure + args.steps)]  # cycled
        for step in steps[:3]:  # warm-up
            trainer.train_step(run, step)
        start, tokens = time.perf_counter(), 0
        for step in steps[3:3 + args.measure]:
            tokens += trainer.train_step(run, step)[1]
        print(f"{trainer.precision}: {tokens / (time.perf_counter() - start):,.0f} target "
              f"tokens/s over {args.measure} steps")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for step in steps[3 + args.measure:]:
                trainer.train_step(run, step)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
