"""Helpers shared by the benchmarks: machine description, peak memory, matmul peak."""

from __future__ import annotations

import os
import platform
import resource
import time

import torch


def machine() -> dict[str, object]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    info: dict[str, object] = {"cpu": cpu, "cores": os.cpu_count(),
                               "torch": str(torch.__version__),
                               "threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def matmul_flops(dtype: torch.dtype, device: torch.device, n: int = 2048,
                 seconds: float = 1.0) -> float:
    """Measured FLOP/s of a square matmul: the hardware ceiling our model is compared with."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 2 * n**3 * count / (time.perf_counter() - start)
