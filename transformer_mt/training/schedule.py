"""Learning-rate schedules: linear warmup, then inverse-square-root or linear decay.

Pure functions of the step (and the config), so resuming needs nothing but the step number.
"""

from __future__ import annotations

import math
from typing import Literal

Schedule = Literal["inverse_sqrt", "linear"]


def inverse_sqrt_lr(step: int, peak_lr: float, warmup_steps: int) -> float:
    """Learning rate for optimizer step ``step`` (1-based).

    Rises linearly to ``peak_lr`` over ``warmup_steps`` steps, then decays as
    ``peak_lr * sqrt(warmup_steps / step)``: the schedule of "Attention Is All You Need", written
    with the peak rate as its parameter instead of ``d_model ** -0.5``.
    """
    step = max(step, 1)
    if warmup_steps <= 0:
        return peak_lr / math.sqrt(step)
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    return peak_lr * math.sqrt(warmup_steps / step)


def learning_rate(step: int, peak_lr: float, warmup_steps: int,
                  schedule: Schedule = "inverse_sqrt", total_steps: int | None = None) -> float:
    """Learning rate for optimizer step ``step`` (1-based) under ``schedule``.

    ``linear`` warms up as ``inverse_sqrt`` does, then falls in a straight line from
    ``peak_lr`` at the end of warmup towards zero after step ``total_steps`` (the last step
    still moves the weights a little): for a fixed budget of steps, the decay that leaves the
    last checkpoint best.
    """
    if schedule == "inverse_sqrt":
        return inverse_sqrt_lr(step, peak_lr, warmup_steps)
    if total_steps is None:
        raise ValueError("the linear schedule needs the run's total_steps")
    step = max(step, 1)
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    start = max(warmup_steps, 1)
    return peak_lr * max(total_steps + 1 - step, 0) / max(total_steps + 1 - start, 1)
