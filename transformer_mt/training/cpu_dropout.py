"""Training on the CPU: dropout with its random bits drawn by NumPy, the same distribution as
``nn.Dropout``'s in less than half its time.

torch's CPU dropout draws each element's bit from one Mersenne Twister, on one core, through a
double (torch 2.13 keeps MKL's parallel generator off): ~7 ns an element on an AMD EPYC Zen 3,
so the 17 dropouts of a d256 3+3 training pass over 4,096 tokens took ~8 % of an fp32 step
(``bench/profile_step.py``: ``aten::bernoulli_``), and more where the products are faster
(bf16). Here each call takes one 63-bit seed from torch's generator, so that
``torch.manual_seed``, the run's saved random state and an exact resume govern it as before;
NumPy's PCG64, seeded with it, gives 16 random bits an element (~0.7 ns). An element is dropped
when its bits fall below ``p`` rounded to a multiple of 1/65,536 (0.1: 0.1000061), and the
others are scaled by ``1 / (1 - p)`` of that rounded ``p``, so the expectation is the input's.

A fast path beside the reference (``model/`` keeps ``nn.Dropout``): :func:`draw_bits_with_numpy`
turns a model's ``nn.Dropout`` modules into :class:`CPUDropout`, in place (their class only),
chosen at one call site (``distributed.wrap_for_training``: eager training on the CPU). In eval
mode, on another device, or at ``p`` 0 or 1 it is ``nn.Dropout``
(``tests/unit/test_cpu_dropout.py``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

LEVELS = 1 << 16  # the resolution of p: each element's 16 random bits


class CPUDropout(nn.Dropout):
    """``nn.Dropout`` whose mask, in training on the CPU, comes from :func:`keep_mask`."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or x.device.type != "cpu" or not 0.0 < self.p < 1.0:
            return super().forward(x)
        cut = round(self.p * LEVELS)  # elements whose 16 bits fall below it are dropped
        return torch.where(keep_mask(x.shape, cut), x * (LEVELS / (LEVELS - cut)), 0)


def keep_mask(shape: torch.Size, cut: int) -> Tensor:
    """``shape`` bool, True where an element is kept: its 16 random bits (a signed int16, as
    NumPy's 64-bit draws split into four) are at least ``cut - 32,768``; seeded from torch's
    default generator."""
    seed = int(torch.empty((), dtype=torch.int64).random_())  # in [0, 2**63)
    n = shape.numel()
    draws = np.random.PCG64(seed).random_raw((n + 3) // 4)  # (ceil(n / 4),) uint64
    bits = torch.from_numpy(draws.view(np.int16)[:n]).view(shape)  # each in [-32768, 32767]
    return bits >= cut - LEVELS // 2


def draw_bits_with_numpy(model: nn.Module) -> int:
    """Make every ``nn.Dropout`` of ``model`` a :class:`CPUDropout`, in place (its class only:
    ``p`` and hooks stay; dropout has no state); returns how many."""
    layers = [m for m in model.modules() if type(m) is nn.Dropout]
    for layer in layers:
        layer.__class__ = CPUDropout
    return len(layers)
