"""Each benchmark runs at a smoke size, so that a broken benchmark fails the suite."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO, needs_data


@needs_data
def test_train_speed_benchmark_runs_and_reports_a_ratio():
    """bench/train_speed.py measures ours and the tutorial baseline side by side (two
    processes) and prints one JSON record whose ``ratio`` compares their tokens/s."""
    result = subprocess.run([sys.executable, "bench/train_speed.py", "--smoke",
                             "--precision", "fp32"], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(result.stdout)
    assert record["benchmark"] == "train_speed" and record["steps"] == 3
    for side in ("ours", "baseline"):
        assert record[side]["tokens_per_s"] > 0 and 0 <= record[side]["padding"] < 1
        assert record[side]["mfu"] > 0
    assert record["ratio"] == round(record["ours"]["tokens_per_s"]
                                    / record["baseline"]["tokens_per_s"], 2)
