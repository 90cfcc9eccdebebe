"""Distributed data-parallel setup under ``torchrun`` (NCCL on GPUs, gloo on the CPU)."""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from transformer_mt.device import pick_device
from transformer_mt.training.cpu_dropout import draw_bits_with_numpy
from transformer_mt.training.row_buckets import bucket_rows

if TYPE_CHECKING:
    from transformer_mt.training.loss import ModelLoss

log = logging.getLogger(__name__)


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # init_distributed created the process group (and ends it)

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
        # device_id binds NCCL to this rank's GPU at once (no guessing, no hang at the first
        # collective when ranks would pick the same GPU)
        dist.init_process_group(backend=backend,
                                device_id=device if device.type == "cuda" else None)
        info.owns_group = True
    log.info("distributed: rank %d of %d on %s", info.rank, world, device)
    return info, device


def barrier(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.barrier()


def gather_objects(obj: Any, info: DistInfo) -> list[Any]:
    """Every rank's ``obj``, in rank order (on every rank); ``[obj]`` without distribution."""
    if not info.enabled:
        return [obj]
    out: list[Any] = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def wrap_for_training(model: ModelLoss, info: DistInfo, device: torch.device, precision: str,
                      compile_it: bool) -> tuple[Callable[..., Tensor],
                                             DistributedDataParallel | None]:
    """The loss as training calls it, DDP-wrapped (torchrun), then compiled (``train.compile``)
    so that the compiled graph lets DDP's all-reduce overlap the backward; and the DDP wrapper
    (None without torchrun), whose ``no_sync`` skips the all-reduce of accumulation steps.
    Eager training on the CPU draws its dropout masks with NumPy (``cpu_dropout.py``), and in
    bf16 pads its products' rows to a few shapes (``row_buckets.py``)."""
    wrapped: Callable[..., Tensor] = model
    ddp = None
    if device.type == "cpu" and not compile_it:
        draw_bits_with_numpy(model.model)
        if precision == "bf16":
            bucket_rows(model)
    if info.enabled:
        # the only buffers, positional tables, never change: no copy from rank 0 each forward
        # (torch 2.13 renamed broadcast_buffers, which now warns that it is deprecated)
        renamed = "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
        no_sync: dict[str, Any] = {
            "forward_sync_buffers" if renamed else "broadcast_buffers": False}
        wrapped = ddp = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, **no_sync)
    if compile_it:
        if device.type == "cpu":  # measured: docs/config.md's train.compile
            log.warning("train.compile on the CPU: minutes of compiling before the first step "
                        "(10.5 on a 2-core Zen 4), then slower steps than without it (0.8x "
                        "there: CPU training's own fast paths are off under it); it pays on GPUs")
        # the chunked loss is a Python loop over chunks: run as it is
        model.loss_fn = torch.compiler.disable(model.loss_fn)
        wrapped = torch.compile(wrapped, dynamic=True)
    return wrapped, ddp


GLOO_SETTLE_S = 0.2  # how long gloo's worker threads get to finish before the group ends


def cleanup(info: DistInfo, completed: bool = True) -> None:
    """Leave the process group this process joined (on every way out of training).

    ``completed``: every rank finished the run, so all meet at a barrier first (after an error
    another rank may never come). Gloo's worker threads free a finished collective's tensors
    after the caller has moved on, and that takes the GIL; the group's destructor joins those
    threads while holding it, so a destructor that starts too soon waits forever (seen under
    torchrun about once in 15 tiny runs). The main thread therefore sleeps, GIL released,
    before ending the group.
    """
    if not (info.owns_group and dist.is_initialized()):
        return
    if completed:
        dist.barrier()
    if dist.get_backend() == "gloo":
        time.sleep(GLOO_SETTLE_S)
    dist.destroy_process_group()
