"""The optimizer (AdamW) and its learning-rate schedules: linear warmup, then
inverse-square-root or linear decay.

The rate is a pure function of the step (and the config), so resuming needs nothing but the
step number.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch

from transformer_mt.config import TrainConfig

Schedule = Literal["inverse_sqrt", "linear"]


def learning_rate(step: int, peak_lr: float, warmup_steps: int,
                  schedule: Schedule = "inverse_sqrt", total_steps: int | None = None) -> float:
    """Learning rate for optimizer step ``step`` (1-based).

    Both schedules rise linearly to ``peak_lr`` over ``warmup_steps`` steps. Then
    ``inverse_sqrt`` decays as ``peak_lr * sqrt(warmup_steps / step)`` (the schedule of
    "Attention Is All You Need", with the peak rate as its parameter instead of
    ``d_model ** -0.5``; open-ended), and ``linear`` falls in a straight line from ``peak_lr``
    towards zero after step ``total_steps`` (the last step still moves the weights a little):
    for a fixed budget of steps.
    """
    if schedule == "linear" and total_steps is None:
        raise ValueError("the linear schedule needs the run's total_steps")
    step = max(step, 1)
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    if schedule == "inverse_sqrt":
        if warmup_steps <= 0:
            return peak_lr / math.sqrt(step)
        return peak_lr * math.sqrt(warmup_steps / step)
    assert total_steps is not None
    start = max(warmup_steps, 1)
    return peak_lr * max(total_steps + 1 - step, 0) / max(total_steps + 1 - start, 1)


def make_optimizer(model: torch.nn.Module, t: TrainConfig) -> torch.optim.Optimizer:
    """AdamW; weight decay on the weight matrices only, not on embeddings, norms and biases."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for name, param in model.named_parameters():
        (decay if param.dim() >= 2 and "embed" not in name else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": t.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    kwargs: dict[str, Any] = dict(lr=t.lr, betas=t.betas, eps=t.adam_eps)
    try:
        return torch.optim.AdamW(groups, fused=True, **kwargs)
    except (RuntimeError, TypeError):  # fused kernels not available for this device
        return torch.optim.AdamW(groups, foreach=True, **kwargs)
