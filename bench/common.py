"""Helpers shared by the benchmarks: machine description, peak memory, matmul peak."""

from __future__ import annotations

import os
import platform
import resource
import time

import torch

SIMD_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def machine(device: torch.device | None = None) -> dict[str, object]:
    """What a figure was measured on: CPU model and its SIMD flags, cores, torch, the GPU."""
    cpu = platform.processor() or platform.machine()
    flags: list[str] = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
        names = [line.split(":", 1)[1].strip() for line in text.splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
        present = set(text.split())
        flags = [flag for flag in SIMD_FLAGS if flag in present]
    except OSError:
        pass
    info: dict[str, object] = {"cpu": cpu, "cpu_flags": flags, "cores": os.cpu_count(),
                               "torch": str(torch.__version__),
                               "threads": torch.get_num_threads()}
    if device is not None and device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


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


def matmul_flops(dtype: torch.dtype, device: torch.device, n: int = 2048,
                 seconds: float = 1.0) -> float:
    """Measured FLOP/s of a square matmul: the hardware ceiling our model is compared with."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    a @ b
    synchronize(device)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    synchronize(device)
    return 2 * n**3 * count / (time.perf_counter() - start)
