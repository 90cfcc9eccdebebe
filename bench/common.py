"""Helpers shared by the benchmarks: machine description, peak memory, matmul peak, the memory
allocator."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import torch

SIMD_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def machine(device: torch.device | None = None) -> dict[str, object]:
    """What a figure was measured on: CPU model (with its family and model numbers: a VM's
    "AMD EPYC" is a Zen 4, family 25, or a Zen 5, family 26) and its SIMD flags, cores, torch,
    the GPU."""
    cpu = platform.processor() or platform.machine()
    flags: list[str] = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
        first = dict(line.split(":", 1) for line in text.split("\n\n")[0].splitlines()
                     if ":" in line)
        first = {key.strip(): value.strip() for key, value in first.items()}
        cpu = first.get("model name", cpu)
        if "cpu family" in first:
            cpu += f" (family {first['cpu family']}, model {first.get('model', '?')})"
        present = set(text.split())
        flags = [flag for flag in SIMD_FLAGS if flag in present]
    except OSError:
        pass
    from transformer_mt.__main__ import allocator_in_use

    info: dict[str, object] = {"cpu": cpu, "cpu_flags": flags, "cores": os.cpu_count(),
                               "torch": str(torch.__version__),
                               "threads": torch.get_num_threads(),
                               "allocator": allocator_in_use()}
    if device is not None and device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def start_as_mt() -> None:
    """Start this benchmark again as ``mt`` starts (transformer_mt/__main__.py): with tcmalloc
    preloaded where it is installed, or what ``MT_ALLOCATOR`` says, so that what it times of
    ours in its own process runs as ``mt`` runs it (``machine()["allocator"]`` names it). A
    peer's process is started as its own users start it (:func:`environment`)."""
    from transformer_mt.__main__ import restart_with_allocator

    error = restart_with_allocator()
    if error:
        raise SystemExit(f"{Path(sys.argv[0]).name}: error: {error}")


def as_mt_starts() -> dict[str, str | None]:
    """What a process started with these changes to the environment (:func:`environment`)
    starts with, as ``mt`` would start again (:func:`start_as_mt`): its allocator preloaded
    from the first, torch imported once."""
    from transformer_mt.__main__ import allocator_environment

    env = allocator_environment()
    if isinstance(env, str):
        raise SystemExit(f"{Path(sys.argv[0]).name}: error: {env}")
    return {key: value for key, value in (env or {}).items() if os.environ.get(key) != value}


@contextlib.contextmanager
def environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    """``os.environ`` with ``changes`` (None: the variable removed) while the block runs: what
    a process started in it inherits (``{"LD_PRELOAD": None}``: the system's malloc)."""
    saved = {key: os.environ.get(key) for key in changes}
    try:
        _set_environment(changes)
        yield
    finally:
        _set_environment(saved)


def _set_environment(values: Mapping[str, str | None]) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so a timer reads the work's end, not its launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_memory_mib(device: torch.device) -> float:
    """Peak memory of this process on ``device``: the GPU's allocations, or the RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return peak_rss_mib()


PRECISION_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
                    "tf32": torch.float32}


def peak_matmul_size(device: torch.device) -> int:
    """The side of the square product that reaches the device's peak: 2048 fills 2 CPU cores,
    while an H100 reaches its rate only at ~8192 (at 2048 it reads 1.3-1.8x too low)."""
    return 8192 if device.type == "cuda" else 2048


def matmul_flops(precision: str, device: torch.device, n: int | None = None,
                 seconds: float = 1.0) -> float:
    """Measured FLOP/s of a square matmul in ``precision`` (``tf32``: fp32 on TF32 tensor
    cores): the hardware ceiling our model is compared with."""
    from transformer_mt.precision import fp32_matmul

    n = n or peak_matmul_size(device)
    dtype = PRECISION_DTYPES[precision]
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    with fp32_matmul(device, precision):
        a @ b
        synchronize(device)
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            a @ b
            count += 1
        synchronize(device)
    return 2 * n**3 * count / (time.perf_counter() - start)


# Dense (no sparsity) tensor-core peaks in TFLOP/s from NVIDIA's data sheets, by GPU name and
# precision: MFU against these says how far from the hardware's rating, against the measured
# matmul peak how far from what this machine reaches
NOMINAL_TFLOPS = {
    "H200": {"bf16": 989, "fp16": 989, "tf32": 495, "fp32": 67},
    "H100 PCIe": {"bf16": 756, "fp16": 756, "tf32": 378, "fp32": 51},
    "H100": {"bf16": 989, "fp16": 989, "tf32": 495, "fp32": 67},
    "A100": {"bf16": 312, "fp16": 312, "tf32": 156, "fp32": 19.5},
    "L40S": {"bf16": 362, "fp16": 362, "tf32": 183, "fp32": 91.6},
    "L4": {"bf16": 121, "fp16": 121, "tf32": 60, "fp32": 30.3},
    "A10": {"bf16": 125, "fp16": 125, "tf32": 62.5, "fp32": 31.2},
    "V100": {"fp16": 125, "fp32": 15.7},
    "T4": {"fp16": 65, "fp32": 8.1},
}


def nominal_flops(device: torch.device, precision: str) -> float | None:
    """The data-sheet peak FLOP/s of ``device`` in ``precision``, or None (a CPU, or a GPU not
    in :data:`NOMINAL_TFLOPS`)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for model, peaks in NOMINAL_TFLOPS.items():  # "H100 PCIe" before "H100"
        if model in name and precision in peaks:
            return peaks[precision] * 1e12
    return None


# ------------------------------------------------------------------ a server to measure

REPO = Path(__file__).resolve().parents[1]


def check_out(parser: argparse.ArgumentParser, out: Path | None) -> None:
    """Refuse an ``--out`` that cannot be written (a folder; a folder that cannot be made)
    before minutes of work, not after them."""
    if out is None:
        return
    if out.is_dir():
        parser.error(f"--out {out} is a directory; name the JSON file to write")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"--out {out}: cannot create its folder ({exc.strerror or exc})")


def write_out(out: Path | None, record: dict, to_come: list[str] | None = None) -> None:
    """Write ``record`` to ``out`` whole or not at all; while parts are still ``to_come``,
    they are named in it (a run that a time limit stops keeps the parts it finished)."""
    if out is not None:
        from transformer_mt.fileio import atomic_write_text

        extra = {"parts_to_come": to_come} if to_come else {}
        atomic_write_text(out, json.dumps({**record, **extra}, indent=2, default=str) + "\n")


def on_a_test_set(name: str, description: str, run: Callable[..., dict],
                  options: Callable[[argparse.ArgumentParser], object] | None = None,
                  with_checkpoint: bool = False) -> None:
    """A benchmark of a checkpoint on a test set of its config (``--checkpoint``, ``--set``,
    ``--max-sentences``, and the ``options`` it adds, given to ``run`` by name; with
    ``with_checkpoint``, its path too, as ``checkpoint``): prints its one JSON record,
    ``run(translator, sources, references, **options)`` with the machine."""
    from transformer_mt.evaluate import read_test_set
    from transformer_mt.translate import Translator

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--set", default="test_2016_flickr", help="a test set of the config")
    parser.add_argument("--max-sentences", type=int, help="the first N sentences (a smoke run)")
    if options is not None:
        options(parser)
    args = vars(parser.parse_args())
    checkpoint, test_set = args.pop("checkpoint"), args.pop("set")
    translator = Translator.load(checkpoint)
    sources, refs = read_test_set(translator, test_set, args.pop("max_sentences"))
    if with_checkpoint:
        args["checkpoint"] = checkpoint
    print(json.dumps({"benchmark": name, "machine": machine(translator.device),
                      "date": time.strftime("%Y-%m-%d"), "checkpoint": str(checkpoint),
                      "set": test_set, **run(translator, sources, refs, **args)}))
