"""Training on the CPU in bf16: the linear layers' products in a few shapes, not one per batch.

On the CPU, bf16 matrix products run in oneDNN, which builds a kernel for each new shape
(~3-10 ms on a core; an AVX-512 or AMX kernel with its own buffers) and keeps the last ones it
built. Token-budget batches hold a different number of tokens nearly every step, so nearly every
product of every step was a new shape: a ``config/cpu.yaml`` step spent ~350 ms of its ~1.1 s
building kernels (Intel Xeon with AMX), and keeping them all let memory grow to 5 GB over a run
(docs/history.md, "Memory — session 2"). Here a training layer's rows (the batch's tokens, all
positions flattened) are padded with zeros up to a multiple of :data:`ROWS`: a run's products
take a few dozen shapes, each built once and kept in oneDNN's cache (1,024:
``device.bound_cpu_kernel_caches``).

A fast path beside the reference (``model/`` never imports it): :func:`bucket_rows` turns a
model's ``nn.Linear`` layers into :class:`RowBucketedLinear`, the same parameters and state
dict; in eval mode (validation, decoding) they are the plain layer. The padded rows are zeros
and are cut off again, so each real row is what the plain layer computes
(``tests/unit/test_row_buckets.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from transformer_mt.training.loss import ModelLoss

ROWS = 256  # rows a layer's input is padded to a multiple of: ~3 % more work, ~16 shapes a side
LOSS_ROWS = 64  # the loss's tokens likewise: its last chunk takes 4 shapes (R-Drop's chunks: 256)


class RowBucketedLinear(nn.Linear):
    """``nn.Linear`` whose input rows, in training, are padded to a multiple of :data:`ROWS`."""

    def forward(self, x: Tensor) -> Tensor:  # (..., in) -> (..., out)
        rows = x.numel() // x.size(-1)
        padded = -(-rows // ROWS) * ROWS
        if not self.training or padded == rows:
            return super().forward(x)
        flat = x.reshape(rows, x.size(-1))  # (rows, in)
        # (padded, in): cat writes each element once and its backward is a view, where F.pad
        # fills the whole and copies, each way (~2 ms a (4k, 1k) bf16 input here)
        flat = torch.cat([flat, flat.new_zeros(padded - rows, flat.size(1))])
        return super().forward(flat)[:rows].view(*x.shape[:-1], self.out_features)


def bucket_rows(loss: ModelLoss) -> int:
    """Make every ``nn.Linear`` of ``loss``'s model a :class:`RowBucketedLinear`, in place (its
    class only: parameters, state dict and hooks stay), and have the loss pad its tokens to a
    multiple of :data:`LOSS_ROWS`; returns how many layers."""
    layers = [m for m in loss.model.modules() if type(m) is nn.Linear]
    for layer in layers:
        layer.__class__ = RowBucketedLinear
    loss.row_multiple = LOSS_ROWS
    return len(layers)
