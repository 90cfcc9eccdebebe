"""Learning-rate schedule: linear warmup, then inverse-square-root decay.

A pure function of the step, so resuming needs nothing but the step number.
"""

from __future__ import annotations

import math


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
