"""Every private API of torch that transformer_mt calls: AOTInductor's package loader and
compiler and inductor's template blocks (``--compile``: decode/compiled.py), and oneDNN's
packed linear layers (the CPU's layouts for decoding: precision.py).

Tested on torch 2.13 (CPU builds, on AVX2, AVX-512 with bf16, and AMX CPUs), 2.14 and 2.15
(PyPI's CUDA builds, run on an AMX CPU and as AVX2). On any other version these features are
off, each said once in a warning line, and decoding runs the plain path: the same
translations, never a crash (tests/integration/test_internals.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from transformer_mt.fileio import sweep_ended
from transformer_mt.internals.versions import tested

log = logging.getLogger(__name__)

TESTED = ("2.13", "2.14", "2.15")


def compile_usable() -> bool:
    """Whether ``--compile`` may run here (it warns once where it may not)."""
    return tested("torch", TESTED, "--compile", "decoding runs without it")


def packing_available(device: torch.device, bf16: bool = False) -> bool:
    """Whether linear weights (of bf16 with ``bf16``) are packed for oneDNN on ``device`` (the
    CPU's decoding layouts; plain ``nn.Linear`` otherwise). oneDNN packs bf16 where it
    computes in bf16 itself: not on an AVX2 CPU, nor where ``ONEDNN_MAX_CPU_ISA`` caps it so."""
    return (device.type == "cpu" and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
            and tested("torch", TESTED, "the packed CPU layouts", "plain linear layers")
            and (not bf16 or bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())))


def pack_linear_weight(weight: Tensor, rows_hint: int) -> Tensor:
    """(out, in) fp32 weight -> oneDNN's packed layout, tuned for ``rows_hint`` rows."""
    return torch.ops.mkldnn._reorder_linear_weight(weight, rows_hint)


def packed_linear(x: Tensor, packed: Tensor, bias: Tensor | None) -> Tensor:
    """(..., in) -> (..., out) with a weight of :func:`pack_linear_weight`."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def aoti_runner(package: str) -> Callable[[list[Tensor]], list[Tensor]]:
    """The runner of an AOTInductor package: the loader itself, since torch._inductor's
    load_package imports torch._dynamo and builds test programs to check the CPU again
    (~2.5 s). One runner: threads that call it at once take turns.

    The loader unpacks the package into ``$TMPDIR/aotinductor_*`` and removes that only when
    it is destroyed, which a process ending by ``os._exit`` (multiprocessing's workers: ``mt
    serve --workers``) or a signal, or holding it in a thread at exit (``mt serve``) never
    does: ~22 MB left behind a graph, each time. So it unpacks into a folder of ours, removed
    once it has loaded: a CPU package's library holds its kernels and constants, and nothing
    is read from the folder after (the runner still runs; tests/unit/test_compiled_tiny.py)."""
    # (what a process killed as it loaded left goes; Python's temporary files keep their folder
    # meanwhile: it is read now)
    sweep_ended(Path(tempfile.gettempdir()), "mt-aoti-")
    with _unpacking, tempfile.TemporaryDirectory(prefix=f"mt-aoti-{os.getpid()}-") as ours:
        theirs = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = ours  # where the loader unpacks
        try:
            loader = torch._C._aoti.AOTIModelPackageLoader(package, "model", False, 1, -1)
        finally:
            if theirs is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = theirs
    run: Callable[[list[Tensor]], list[Tensor]] = loader.run
    return run


_unpacking = threading.Lock()  # (TMPDIR is the process's: one loader at a time sets it)


def aoti_compile(graph: Any, package: str, configs: dict[str, Any]) -> None:
    """Compile an exported graph ahead of time into the package file ``package``."""
    import torch._inductor

    torch._inductor.aoti_compile_and_package(graph, package_path=package,
                                             inductor_configs=configs)


def import_compiler() -> None:
    """Import inductor's compiler (its code generators, sympy: ~1 s), as a compiling process
    starts (``decode/compilers.py``); one that cannot is left to fail where it compiles."""
    with contextlib.suppress(ImportError):
        import torch._inductor.compile_fx  # noqa: F401


@contextlib.contextmanager
def template_blocks(blocks: dict[str, tuple[int, int]]) -> Iterator[None]:
    """While a graph compiles, inductor's CPP template blocks its products of fp32 (and bf16
    multiplied in fp32) as ``blocks`` says ((rows, columns) by vector width, for ``avx2`` and
    ``avx512``), in place of its own blocks for those widths; an inductor without the
    registry they are in compiles as it would."""
    try:
        import torch._inductor.compile_fx  # (imports the code generators in their order)
        from torch._inductor.codegen import cpp_micro_gemm as micro
        from torch._inductor.cpu_vec_isa import VecAVX2, VecAVX512

        configs = micro.micro_gemm_configs[micro.CppMicroGemmFP32Vec]
        isas = {"avx2": VecAVX2, "avx512": VecAVX512}
        ours = {isas[isa]: block for isa, block in blocks.items()}
        types = ({"input_dtype": torch.float},
                 {"input_dtype": torch.bfloat16, "output_dtype": torch.float})
        added = [config for isa, (rows, cols) in ours.items() for kinds in types
                 for config in micro.generate_gemm_config(isa, [(rows, cols, 1)], **kinds)]
        theirs = [config for config in configs if config.vec_isa_cls in ours
                  and config.input2_dtype == config.input_dtype in (torch.float, torch.bfloat16)]
    except (ImportError, AttributeError, KeyError, TypeError) as e:
        log.debug("the template's blocks stay inductor's own (%s)", e)
        yield
        return
    kept = list(configs)
    configs[:] = [config for config in configs if all(config is not c for c in theirs)] + added
    try:
        yield
    finally:
        configs[:] = kept
