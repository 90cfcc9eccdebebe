"""``mt translate`` of a test set with tcmalloc (what ``mt`` starts with where it is installed:
transformer_mt/__main__.py) against the system's malloc (``MT_ALLOCATOR=system``), each a
fresh process in turns, the same command and settings: the whole command's seconds (best of
``--rounds``), its peak memory, and whether the two translated alike (they must: an allocator
changes no arithmetic).

    python bench/allocator.py --checkpoint runs/quickstart/best.pt [--rounds 4]

``ratio``: the system's malloc's seconds over tcmalloc's (above 1: tcmalloc is faster).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import on_a_test_set

ALLOCATORS = ("system", "auto")  # MT_ALLOCATOR: the system's malloc, then tcmalloc


def translate(argv: list[str], allocator: str) -> tuple[float, float]:
    """``python -m transformer_mt ARGV`` with ``MT_ALLOCATOR=allocator``: its wall seconds
    and peak resident memory (MiB, its own: ``wait4``)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "transformer_mt", *argv],
                               env={**env, "MT_ALLOCATOR": allocator},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    assert process.stderr is not None
    error = process.stderr.read().decode()
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"allocator: mt translate with MT_ALLOCATOR={allocator} failed: "
                         f"{error.strip()[-500:]}")
    return seconds, usage.ru_maxrss / 1024


def run(translator, sources: list[str], refs: list[str], rounds: int, checkpoint: Path) -> dict:
    from transformer_mt.__main__ import tcmalloc

    library = tcmalloc()
    if library is None:
        raise SystemExit("allocator: tcmalloc is not installed (apt install "
                         "libtcmalloc-minimal4), so mt runs with the system's malloc")
    with tempfile.TemporaryDirectory() as folder:
        src = Path(folder) / "src.txt"
        src.write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
        seconds: dict[str, list[float]] = {a: [] for a in ALLOCATORS}
        memory: dict[str, list[float]] = {a: [] for a in ALLOCATORS}
        for _ in range(rounds):
            for allocator in ALLOCATORS:
                argv = ["translate", "--quiet", "--checkpoint", str(checkpoint), "--input",
                        str(src), "--output", str(Path(folder) / f"{allocator}.txt")]
                s, mib = translate(argv, allocator)
                seconds[allocator].append(round(s, 2))
                memory[allocator].append(round(mib))
        outputs = {a: (Path(folder) / f"{a}.txt").read_text(encoding="utf-8")
                   for a in ALLOCATORS}
    best = {a: min(seconds[a]) for a in ALLOCATORS}
    return {"library": library, "sentences": len(sources), "rounds": rounds,
            "seconds": seconds, "peak_rss_mib": memory,
            "identical": outputs["system"] == outputs["auto"],
            "ratio": round(best["system"] / best["auto"], 2)}


def options(parser) -> None:
    parser.add_argument("--rounds", type=int, default=4, help="turns of each (best counts)")


if __name__ == "__main__":
    on_a_test_set("allocator", __doc__.splitlines()[0], run, options, with_checkpoint=True)
