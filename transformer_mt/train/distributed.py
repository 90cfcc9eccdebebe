"""Distributed data-parallel setup under ``torchrun`` (NCCL on GPUs, gloo on the CPU)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from transformer_mt.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` means CUDA when present (one GPU per local rank), else the CPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"train.device={name!r} asks for CUDA, but no CUDA GPU is visible "
                              "to PyTorch; use --set train.device=cpu (or auto)")
        if name == "cuda":
            name = f"cuda:{local_rank}"
        index = int(name.split(":")[1])
        if index >= torch.cuda.device_count():
            raise ConfigError(f"train.device={name!r}: only {torch.cuda.device_count()} GPU(s) "
                              "are visible")
    return torch.device(name)


def resolve_precision(precision: str, device: torch.device) -> str:
    """Turn ``auto`` into ``bf16`` where the device computes in bf16 natively, else ``fp32``."""
    if precision != "auto":
        if precision == "fp16" and device.type != "cuda":
            raise ConfigError("train.precision=fp16 needs a CUDA GPU; use bf16 or fp32 on the CPU")
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = f.read()
    except OSError:
        return "fp32"
    return "bf16" if ("avx512_bf16" in flags or "amx_bf16" in flags) else "fp32"


def init_distributed(device_name: str) -> tuple[DistInfo, torch.device]:
    """Join the process group that ``torchrun`` describes in the environment, if any."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo(), pick_device(device_name)
    info = DistInfo(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    device = pick_device(device_name, info.local_rank)
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend)
    log.info("distributed: rank %d of %d on %s", info.rank, world, device)
    return info, device


def barrier(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.barrier()


def broadcast_flag(flag: bool, info: DistInfo, device: torch.device) -> bool:
    """Rank 0's decision (stop now, say), shared with every rank."""
    if not info.enabled:
        return flag
    t = torch.tensor([1 if flag else 0], device=device)
    dist.broadcast(t, src=0)
    return bool(t.item())


def cleanup() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
