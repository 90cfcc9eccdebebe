"""A trained model laid out for decoding on the machine at hand: same function, faster steps.

A decoding step multiplies a few rows (one per sentence or hypothesis) by every weight matrix,
which suits BLAS less well than training's thousands of rows. :func:`for_decoding` makes a copy
of the model whose linear layers hold their weights the way the machine multiplies them fastest:

- on a CPU with oneDNN (torch's x86 builds), each large weight is packed once into oneDNN's
  blocked layout and multiplied by oneDNN's kernels (:class:`PackedLinear`), as inference
  engines do: at 32 rows on 2 cores 1.3-2.3x faster than ``F.linear`` for the feed-forward
  and output projections. A call costs ~25-45 us more, though, so smaller weights (below
  ``PACK_MIN_WEIGHTS`` entries: the 256 x 256 attention projections of the default model)
  keep ``F.linear``, with the weight stored transposed in memory, which BLAS multiplies
  faster at few rows (docs/benchmarks.md);
- under ``bf16`` the weights are cast once instead (autocast would cast them at every call,
  a fifth of the decoding time); embeddings and LayerNorms stay fp32.

The packing uses torch's own oneDNN operators, the ones ``torch.compile``'s CPU backend emits
for frozen weights; they are not public API, so :func:`packing_available` checks that they
exist, and tests compare their products with ``F.linear``'s (equal up to rounding).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

ROWS_HINT = 32  # the rows oneDNN's packed layout is tuned for (any number works)
PACK_MIN_WEIGHTS = 2**17  # smaller weights are not worth a oneDNN call


class PackedLinear(nn.Module):
    """An ``nn.Linear`` for inference whose weight is packed for oneDNN's matrix multiply."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach().float().contiguous()  # (out, in)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, ROWS_HINT)
        self.bias = None if linear.bias is None else linear.bias.detach().float().clone()
        self.weight = nn.Parameter(weight, requires_grad=False)  # kept for weight.dtype etc.

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out)."""
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


def packing_available(device: torch.device) -> bool:
    """Whether this torch build packs linear weights for oneDNN on ``device``."""
    return (device.type == "cpu" and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


def for_decoding(model: nn.Module, precision: str = "fp32",
                 device: torch.device | None = None) -> nn.Module:
    """A copy of ``model`` in eval mode with its linear layers laid out for decoding; the model
    itself if it is such a copy already or needs no change (fp32 on a GPU)."""
    device = device or next(model.parameters()).device
    bf16 = precision == "bf16"
    linears = [m for m in model.modules() if isinstance(m, (nn.Linear, PackedLinear))]
    if (not bf16 and device.type != "cpu") or all(_laid_out(m, bf16) for m in linears):
        return model
    clone = copy.deepcopy(model).eval()
    _replace_linears(clone, bf16, pack=not bf16 and packing_available(device))
    return clone


def _laid_out(module: nn.Module, bf16: bool) -> bool:
    if bf16:
        return module.weight.dtype == torch.bfloat16
    return isinstance(module, PackedLinear) or module.weight.stride(0) == 1


def _replace_linears(module: nn.Module, bf16: bool, pack: bool) -> None:
    for name, child in module.named_children():
        if not isinstance(child, nn.Linear):
            _replace_linears(child, bf16, pack)
        elif pack and child.weight.numel() >= PACK_MIN_WEIGHTS:
            setattr(module, name, PackedLinear(child))
        elif bf16:  # cast once (autocast would cast at every call)
            child.weight = nn.Parameter(child.weight.detach().bfloat16(), requires_grad=False)
            if child.bias is not None:
                child.bias = nn.Parameter(child.bias.detach().bfloat16(), requires_grad=False)
        else:  # (out, in) stored as (in, out): BLAS gets a row-major right-hand matrix
            weight = child.weight.detach().t().contiguous().t()
            child.weight = nn.Parameter(weight, requires_grad=False)
