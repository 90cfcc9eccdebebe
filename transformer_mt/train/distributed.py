"""Distributed data-parallel setup under ``torchrun`` (NCCL on GPUs, gloo on the CPU)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from transformer_mt.device import pick_device

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
