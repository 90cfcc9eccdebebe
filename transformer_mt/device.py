"""Choosing the device (the numeric precision is ``precision.py``'s)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess

import torch

from transformer_mt.errors import ConfigError, TrainingError

log = logging.getLogger(__name__)
# the flag of each command that decodes, and of mt train
USE_CPU = "--device cpu (mt train: --set train.device=cpu), or auto"


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` means CUDA when present (one GPU per local rank), else Apple's MPS when present,
    else the CPU (with a warning where the machine has NVIDIA GPUs that PyTorch cannot use).
    fp32 stays IEEE fp32 on a GPU: TF32 only with ``precision: tf32`` (``precision.py``)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if _mps() else "cpu"
        problem = cuda_problem() if name == "cpu" else None
        if problem:
            log.warning("training and decoding on the CPU: %s", problem)
    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", name):
        raise ConfigError(f"device {name!r} is not one this tool runs on: use auto, cpu, cuda, "
                          "cuda:N or mps")
    if name == "mps" and not _mps():
        raise ConfigError("device 'mps' asks for Apple's GPU, which PyTorch does not see here; "
                          f"use {USE_CPU}")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            why = cuda_problem() or "no CUDA GPU is visible to PyTorch"
            raise ConfigError(f"device {name!r} asks for CUDA, which PyTorch cannot use "
                              f"here: {why}. To use the CPU: {USE_CPU}")
        if name == "cuda":
            name = f"cuda:{local_rank}"
        index = int(name.split(":")[1])
        if index >= torch.cuda.device_count():
            raise ConfigError(f"device {name!r}: only {torch.cuda.device_count()} GPU(s) "
                              "are visible")
    return torch.device(name)


def cores() -> int:
    """The cores this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def threads_per_process(processes: int) -> int:
    """The threads each of ``processes`` processes sharing the cores gets (one at least)."""
    return max(1, cores() // processes)


def cuda_problem() -> str | None:
    """Why PyTorch uses no NVIDIA GPU on a machine where ``nvidia-smi`` lists some, or None
    (no NVIDIA GPU here, or PyTorch uses it)."""
    driver = _nvidia_driver_cuda()
    if driver is None or torch.cuda.is_available():
        return None
    fix = "scripts/install_torch.sh installs the build that fits (docs/gpu.md)"
    built = torch.version.cuda
    if built is None:
        return (f"nvidia-smi lists GPUs, but this PyTorch ({torch.__version__}) is a CPU build; "
                f"{fix}")
    if driver and _version(driver) < _version(built):
        return (f"this PyTorch ({torch.__version__}) is built for CUDA {built}, newer than the "
                f"CUDA {driver} the NVIDIA driver supports; update the driver, or {fix}")
    return (f"nvidia-smi lists GPUs, but PyTorch (built for CUDA {built}) cannot use them "
            "(CUDA_VISIBLE_DEVICES, permissions, or a driver problem: see nvidia-smi)")


def _nvidia_driver_cuda() -> str | None:
    """The newest CUDA version the NVIDIA driver supports ('' if unknown), or None where there is
    no NVIDIA GPU (no ``nvidia-smi``, or it lists none)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or "NVIDIA-SMI" not in out.stdout:
        return None
    match = re.search(r"CUDA Version:\s*([0-9.]+)", out.stdout)
    return match.group(1) if match else ""


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def _mps() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def bound_cpu_kernel_caches(row_buckets: bool, capacity: int = 8) -> None:
    """Keep at most ``capacity`` oneDNN matmul kernels in the cache in front of oneDNN's
    (ideep's, ``LRU_CACHE_CAPACITY``), and in oneDNN's own too unless training pads its products
    to a few dozen shapes (``row_buckets``: ``training/row_buckets.py``), which that one then
    keeps (its 1,024); a size the user chose stays.

    On the CPU, bf16 matmuls run on oneDNN, which builds a kernel with its own buffers for every
    new shape (3-10 ms of a core each). With token-budget batches of every shape, both caches at
    1,024 grew a run from 1.2 to 5 GB (docs/history.md); at 8 they rebuilt each step's kernels.
    The second cache alone does not spare the builds. Takes effect if called before the first
    bf16 matmul of the process.
    """
    os.environ.setdefault("LRU_CACHE_CAPACITY", str(capacity))
    if not row_buckets:
        os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(capacity))


def device_memory(device: torch.device) -> int | None:
    """Total memory (bytes) of ``device``: the GPU's, or the machine's for the CPU; None if
    unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[1])
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_training_memory(parameters: int, device: torch.device) -> None:
    """Refuse, before allocating, a model whose training state cannot fit in memory."""
    need = parameters * 4 * 4  # fp32 weights, gradients and AdamW's two moments
    have = device_memory(device)
    if have is not None and need > have:
        raise TrainingError(
            f"the model has {parameters:,} parameters: training needs about "
            f"{need / 2**30:,.1f} GiB for its weights, gradients and optimizer state, and "
            f"{device} has {have / 2**30:,.1f} GiB; make model.d_model, model.d_ff or the "
            "layer counts smaller")
