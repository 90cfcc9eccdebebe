"""Numeric precision and the CPU's layouts: every choice that makes the reference model run
faster on the machine at hand without changing what it computes.

- :func:`resolve_precision` turns ``precision: auto`` into bf16, fp16 or fp32 for a device, and
  :func:`autocast` is the one mixed-precision context training and decoding use; on a CUDA GPU
  it also keeps attention off cuDNN's kernels, which build an execution plan for every new
  tensor shape (docs/gpu.md).
- Under bf16 on the CPU, attention computes in fp32 (:class:`PolicyAttention`, which
  :func:`use_precision_policy` makes every attention module of a model): torch's bf16 CPU
  attention is several times slower, forward and backward (docs/benchmarks.md).
- :func:`for_decoding` lays a trained model's linear layers out for decoding.

A decoding step multiplies a few rows (one per sentence or hypothesis) by every weight matrix,
which suits BLAS less well than training's thousands of rows. :func:`for_decoding` makes a copy
of the model whose linear layers hold their weights the way the machine multiplies them fastest:

- on a CPU with oneDNN (torch's x86 builds), each large weight is packed once into oneDNN's
  blocked layout and multiplied by oneDNN's kernels (:class:`PackedLinear`), as inference
  engines do: at 32 rows on 2 cores 1.3-2.3x faster than ``F.linear`` for the feed-forward
  and output projections. A call costs ~25-45 us more, though, so smaller weights (below
  ``PACK_MIN_WEIGHTS`` entries: the 256 x 256 attention projections of the default model)
  keep ``F.linear``, with the weight stored transposed in memory, which BLAS multiplies
  faster at few rows (docs/benchmarks.md), and so does one row (a lone sentence's greedy
  step) for every layer;
- under ``bf16`` the weights are cast once (autocast would cast them at every call, a fifth
  of the decoding time) and, with oneDNN, every one is packed, the small ones too: in bf16
  oneDNN's packed products are 1.3-2x faster than ``F.linear``'s at 1 to 160 rows (an AMX
  CPU; docs/benchmarks.md); embeddings and LayerNorms stay fp32.

The packing uses torch's own oneDNN operators, the ones ``torch.compile``'s CPU backend emits
for frozen weights; they are not public API, so they are called through
``internals/torch_private.py`` (on a torch version they were not tested on: plain linear
layers), and tests compare their products with ``F.linear``'s (equal up to rounding).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import platform
import weakref
from collections.abc import Iterator
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint

from transformer_mt.errors import ConfigError
from transformer_mt.internals import torch_private
from transformer_mt.model.attention import MultiHeadAttention

ModuleT = TypeVar("ModuleT", bound=nn.Module)  # a model, given back as what it was


def resolve_precision(precision: str, device: torch.device) -> str:
    """Turn ``auto`` into ``bf16`` where the device computes in bf16 natively; on a GPU without
    native bf16 (emulation is slower than fp32) into ``fp16``, trained with a loss scaler;
    else into ``fp32``. ``tf32`` (a CUDA GPU's) is fp32 whose matrix products use TF32
    tensor cores (:func:`fp32_matmul`)."""
    if precision != "auto":
        if precision in ("fp16", "tf32") and device.type != "cuda":
            raise ConfigError(f"precision {precision} needs a CUDA GPU; use bf16 or fp32 on "
                              f"{device.type}")
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"
    if device.type != "cpu":
        return "fp32"
    flags = cpu_flags().split()
    return "bf16" if ("avx512_bf16" in flags or "amx_bf16" in flags) else "fp32"


@functools.lru_cache(maxsize=1)
def cpu_flags() -> str:
    """The CPU's feature flags (Linux; read once: every translation asks), else what platform
    says of it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


# The kernels of ``F.scaled_dot_product_attention`` on a CUDA GPU in bf16 and fp16: cuDNN's are
# left out. torch puts them first on Hopper for masked attention, and they build an execution
# plan for each new shape (~0.4 s on an H100): a training step with a batch shape not seen
# before, and nearly every decoding step (the key length grows), paid it (docs/gpu.md).
CUDA_ATTENTION_KERNELS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                          SDPBackend.MATH]


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[Any]:
    """The mixed-precision context of ``precision`` (a resolved one) on ``device``; on a CUDA
    GPU, with attention restricted to :data:`CUDA_ATTENTION_KERNELS` (fp32 attention never
    reaches cuDNN's kernels)."""
    dtype = AUTOCAST_DTYPES.get(precision)
    if dtype is None:
        return contextlib.nullcontext()
    if device.type != "cuda":
        return torch.autocast(device.type, dtype=dtype)
    return _cuda_autocast(dtype)


@contextlib.contextmanager
def _cuda_autocast(dtype: torch.dtype) -> Iterator[None]:
    with torch.autocast("cuda", dtype=dtype), sdpa_kernel(CUDA_ATTENTION_KERNELS):
        yield


@contextlib.contextmanager
def fp32_matmul(device: torch.device, precision: str) -> Iterator[None]:
    """fp32 matrix products on a CUDA GPU for the block: TF32 tensor cores under ``tf32``, else
    IEEE fp32 (TF32 rounds to 10 mantissa bits: only when asked for). Through torch's
    ``fp32_precision`` setting where it has one (mixing it with the older ``allow_tf32`` flags is
    an error in newer torch), else those flags; restored afterwards."""
    if device.type != "cuda":
        yield
        return
    tf32 = precision == "tf32"
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        saved = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if tf32 else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = saved
        return
    saved_flags = matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved_flags


# ------------------------------------------------------------------------ attention in bf16

def use_precision_policy(model: ModuleT) -> ModuleT:
    """Make every attention module of ``model`` a :class:`PolicyAttention` (the same module,
    weights and all, whose fused attention goes through :func:`attention_kernel`); returns
    ``model``. The reference attention is left as written: this wraps it from outside."""
    for module in model.modules():
        if type(module) is MultiHeadAttention:
            module.__class__ = PolicyAttention
    return model


class PolicyAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` whose fused path is :func:`attention_kernel` (fp32 for bf16
    inputs on the CPU, ``F.scaled_dot_product_attention`` elsewhere)."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
               need_weights: bool) -> tuple[Tensor, Tensor | None]:
        if need_weights or self.impl == "plain":
            return super().attend(q, k, v, mask, is_causal, need_weights)
        dropout_p = self.dropout if self.training else 0.0
        return attention_kernel(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                is_causal=is_causal), None


def attention_kernel(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None,
                     dropout_p: float = 0.0, is_causal: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention``, computed in fp32 for bf16 inputs on the CPU.

    The fp32 copies are not kept for the backward (they would be a third of a step's
    activations): it recomputes them from the bf16 q, k, v.
    """
    if not fp32_on_cpu(q):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal)
    args = (q, k, v, attn_mask, dropout_p, is_causal)
    if torch.is_grad_enabled():
        return checkpoint(_fp32_attention, *args, use_reentrant=False)
    return _fp32_attention(*args)


def attention_dtype(t: Tensor) -> Tensor:
    """``t`` in the dtype attention computes in: fp32 for bf16 on the CPU, else as it is."""
    return t.float() if fp32_on_cpu(t) else t


def fp32_on_cpu(t: Tensor) -> bool:
    return t.device.type == "cpu" and t.dtype == torch.bfloat16


def _fp32_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float,
                    is_causal: bool) -> Tensor:
    """SDPA in fp32 with autocast off (bf16 CPU inputs); the result in q's dtype, (B,H,Tq,Dh)."""
    with torch.autocast("cpu", enabled=False):
        out = F.scaled_dot_product_attention(attention_dtype(q), attention_dtype(k),
                                             attention_dtype(v), attn_mask=mask,
                                             dropout_p=dropout_p, is_causal=is_causal)
    return out.to(q.dtype)


# ------------------------------------------------------------------- layouts for decoding

ROWS_HINT = 32  # the rows oneDNN's packed layout is tuned for (any number works)
PACK_MIN_WEIGHTS = 2**17  # smaller weights are not worth a oneDNN call


class PackedLinear(nn.Module):
    """An ``nn.Linear`` for inference whose weight is packed for oneDNN's matrix multiply.

    In fp32 one row (a lone sentence's greedy step) is multiplied by ``F.linear`` instead,
    with the weight stored transposed: BLAS's matrix-vector product takes 0.5-0.7x the time of
    oneDNN's packed one there (docs/benchmarks.md); from two rows on, oneDNN's is faster."""

    def __init__(self, linear: nn.Linear, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach().to(dtype).contiguous()  # (out, in)
        self.packed = torch_private.pack_linear_weight(weight, ROWS_HINT)
        self.bias = None if linear.bias is None else linear.bias.detach().to(dtype).clone()
        if dtype == torch.float32:  # (out, in) stored as (in, out), for one row's product
            weight = weight.t().contiguous().t()
        self.weight = nn.Parameter(weight, requires_grad=False)

    def forward(self, x: Tensor) -> Tensor:
        """(..., in) -> (..., out), in the weight's dtype (as autocast's ``F.linear`` casts
        its input: oneDNN's operator is not one autocast knows)."""
        if x.numel() == self.in_features and x.dtype == self.weight.dtype == torch.float32:
            return F.linear(x, self.weight, self.bias)  # one row
        return torch_private.packed_linear(x.to(self.weight.dtype), self.packed, self.bias)


def for_decoding(model: ModuleT, precision: str = "fp32",
                 device: torch.device | None = None, pack: bool = True) -> ModuleT:
    """A copy of ``model`` in eval mode with its linear layers laid out for decoding (and no
    dropout modules, identities in eval mode anyway); the model itself if it is such a copy
    already or needs no change (fp32 on a GPU). The copy shares
    the model's other tensors: it is for decoding with the weights as they are now. Without
    ``pack``, the layers stay the model's ``nn.Linear`` ones, cast to bf16 under ``bf16``:
    what ``torch.compile`` reads (at fp32 the model itself)."""
    if _COPIES.get(model) == precision:  # a copy made here (checking each layer: ~0.4 ms)
        return model
    device = device or next(model.parameters()).device
    bf16 = precision == "bf16"
    linears = [m for m in model.modules() if isinstance(m, (nn.Linear, PackedLinear))]
    if (not bf16 and (device.type != "cpu" or not pack)) or all(_laid_out(m, bf16)
                                                                 for m in linears):
        return model
    # the linear layers get new tensors below and the rest (embeddings, LayerNorms) is read as
    # it is; copying 30 MB of weights into fresh memory took ~70 ms of a one-sentence
    # mt translate
    clone = shared_copy(model)
    _replace_linears(clone, bf16, pack=pack and torch_private.packing_available(device, bf16))
    _drop_dropout(clone)
    return laid_out(clone, precision)


# the copies for_decoding made (or that were made from them), by precision
_COPIES: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()


def laid_out(model: ModuleT, precision: str) -> ModuleT:
    """``model``, known from now on to be laid out for decoding at ``precision``."""
    _COPIES[model] = precision
    return model


def shared_copy(model: ModuleT) -> ModuleT:
    """A copy of ``model``'s modules in eval mode that shares its parameters and buffers."""
    shared = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    return copy.deepcopy(model, shared).eval()


def _laid_out(module: nn.Linear | PackedLinear, bf16: bool) -> bool:
    if bf16:
        return module.weight.dtype == torch.bfloat16
    return isinstance(module, PackedLinear) or module.weight.stride(0) == 1


def _drop_dropout(module: nn.Module) -> None:
    """Each ``nn.Dropout`` of ``module`` replaced by ``nn.Identity``, what it computes in eval
    mode, for less of a call: a lone sentence's greedy step calls 12 (~5 % of its time)."""
    for name, child in module.named_children():
        if isinstance(child, nn.Dropout):
            setattr(module, name, nn.Identity())
        else:
            _drop_dropout(child)


def _replace_linears(module: nn.Module, bf16: bool, pack: bool) -> None:
    for name, child in module.named_children():
        if not isinstance(child, nn.Linear):
            _replace_linears(child, bf16, pack)
        elif pack and (bf16 or child.weight.numel() >= PACK_MIN_WEIGHTS):
            setattr(module, name, PackedLinear(child, torch.bfloat16 if bf16 else torch.float32))
        elif bf16:  # cast once (autocast would cast at every call)
            child.weight = nn.Parameter(child.weight.detach().bfloat16(), requires_grad=False)
            if child.bias is not None:
                child.bias = nn.Parameter(child.bias.detach().bfloat16(), requires_grad=False)
        else:  # (out, in) stored as (in, out): BLAS gets a row-major right-hand matrix
            weight = child.weight.detach().t().contiguous().t()
            child.weight = nn.Parameter(weight, requires_grad=False)
