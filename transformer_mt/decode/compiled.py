"""A lone sentence's decoding steps compiled (``--compile``, ``Translator.load(compile=True)``).

A lone sentence decodes one row a step (greedy) or K (beam search). Each step multiplies those
rows by every weight matrix of the decoder and runs ~80 small operations around them; at so few
rows none of them keeps the machine busy, and the time goes to calling them: PyTorch's dispatch,
Python, and BLAS or oneDNN calls of ~20-60 us each for a matrix-vector product (docs/
benchmarks.md, "Decoding speed"). Here the incremental decoder's step,
:func:`~transformer_mt.decode.incremental.decoder_step` as it is, is exported
(``torch.export``) and compiled ahead of time by AOTInductor into a shared library: one C++
function a step, with the weights frozen into it and multiplied by kernels generated for these
shapes (inductor's CPU GEMM template, 4-12 us for the products that took 20-60), the small
operations fused into loops around them, attention written as the loops it is
(:class:`LoopAttention`), and nothing in Python between them (torch.compile's guards and
wrapper took ~150-250 us a step). The same translations (``tests/test_compiled.py``).

Three graphs, each for any source length and position: the encoder of a lone sentence, a step
of one hypothesis (greedy, and every beam's first step) and, where the checkpoint's beam is
wider than 1, a step of 2 to ``MAX_ROWS`` (any such beam). The first start for a model compiles
them side by side, each in a process of its own (~20-30 s of a core each on a 2-core CPU: ~55 s
for the three); the packages are kept in the cache (``cache_dir()/compiled``, checked whenever
read), under a key of everything they depend on (the weights, the precision, this package's
source, torch, the CPU's flags, the threads), and later starts load them in ~0.1-0.2 s.
Anything else (batches of several sentences, where oneDNN's packed kernels are faster; a wider
beam) runs the decoding copy as ever.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

import transformer_mt
from transformer_mt.data.batch import source_mask
from transformer_mt.data.cache import cache_entry
from transformer_mt.data.vocab import BOS_ID, EOS_ID
from transformer_mt.decode import incremental
from transformer_mt.decode.incremental import DecoderState, decoder_step
from transformer_mt.errors import MTError
from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.transformer import Transformer
from transformer_mt.precision import autocast, for_decoding, laid_out, shared_copy

log = logging.getLogger(__name__)

MAX_ROWS = 8  # a wider beam's steps run as ever: at 32 rows oneDNN's packed kernels are faster
PACKAGE_FORMAT = 1  # part of the cache key: a package made otherwise is never read as this one

# inductor's settings for the step: weights frozen into the compiled code (packed once), and
# the matrix products generated for their shapes (the CPP template) instead of BLAS calls;
# no pointwise operations fused into a product's template (in bf16 inductor 2.13 asserts there)
INDUCTOR_OPTIONS: dict[str, Any] = {
    "freezing": True, "max_autotune": True, "max_autotune_gemm_backends": "CPP",
    "epilogue_fusion": False}


class LoopAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` whose ``softmax(QK^T/sqrt(d))V`` is written as products and
    sums, computed in fp32, which inductor fuses into a loop or two around a step's few rows.

    A step's attention is tiny (a row of queries against a few dozen keys); SDPA's kernel took
    ~15 us a call there, six calls a step, and inductor turns a written-out matmul-softmax-
    matmul back into that kernel. Equal to SDPA up to rounding (``tests/test_compiled.py``).
    """

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
               need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """q (B, H, Tq, Dh), k and v (B, H, Tk, Dh) -> (B, H, Tq, Dh)."""
        if need_weights or is_causal:
            return super().attend(q, k, v, mask, is_causal, need_weights)
        dtype, q, k, v = q.dtype, q.float(), k.float(), v.float()
        scores = (q[..., :, None, :] * k[..., None, :, :]).sum(-1) / math.sqrt(q.size(-1))
        if mask is not None:  # (B, H, Tq, Tk) above; the mask broadcasts to it
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)  # (B, H, Tq, Tk)
        return (weights[..., None] * v[..., None, :, :]).sum(-2).to(dtype), None


def loop_attention_copy(model: Transformer) -> Transformer:
    """A copy of ``model`` (its tensors shared) whose attention is :class:`LoopAttention`."""
    twin = shared_copy(model)
    for module in twin.modules():
        if isinstance(module, MultiHeadAttention):
            module.__class__ = LoopAttention
    return twin


class StepGraph(nn.Module):
    """What is exported: :func:`decoder_step` for the hypotheses ``last`` (N,) of a lone
    sentence, with ``filled`` (N, T, L, 2, H, Dh) the key/value buffer's positions so far and
    this one (read only) and ``cross_kv`` (1, L, 2, H, S, Dh) the encoder's; returns the logits
    (N, V) and this position's keys and values (N, L, 2, H, Dh), for the caller to write (a
    graph writing into its input copies the whole buffer)."""

    def __init__(self, model: Transformer, precision: str) -> None:
        super().__init__()
        self.model, self.precision = model, precision

    def forward(self, last: Tensor, filled: Tensor, cross_kv: Tensor) -> tuple[Tensor, Tensor]:
        fresh: list[Tensor] = []
        with autocast(last.device, self.precision):
            logits = decoder_step(self.model, last, filled.size(1) - 1, filled, cross_kv, None,
                                  last.size(0), fresh=fresh)
        return logits, torch.stack(fresh, dim=1)


class EncoderGraph(nn.Module):
    """What is exported for a lone sentence's source: :func:`incremental.encode_source` of
    ``src`` (1, S) (no padding, so no mask): the encoder output (1, S, D) and the keys and
    values of every decoder layer (1, L, 2, H, S, Dh)."""

    def __init__(self, model: Transformer, precision: str) -> None:
        super().__init__()
        self.model, self.precision = model, precision

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        with autocast(src.device, self.precision):
            return incremental.encode_source(self.model, src, None)


# a compiled graph's inputs -> outputs (AOTInductor's runner)
Runner = Callable[[list[Tensor]], list[Tensor]]


class CompiledDecoding(nn.Module):
    """A model for decoding whose lone sentences' steps run compiled.

    It offers what search needs of a model (``cfg``, ``tgt_vocab_size``) and brings its own
    decoding state: the incremental decoder's, over ``model`` (the decoding copy,
    ``precision.for_decoding``), whose steps of a lone sentence run :class:`StepGraph`
    compiled over ``plain``: the same weights in ``nn.Linear`` layers, which inductor can read
    (``model``'s oneDNN-packed ones it cannot). Each compiled graph keeps its own packed copy
    of the decoder's weights.
    """

    def __init__(self, model: Transformer, plain: Transformer) -> None:
        super().__init__()
        self.model = model
        self.cfg = model.cfg
        self.tgt_vocab_size = model.tgt_vocab_size
        # not a submodule: its layers are not laid out for decoding
        self._plain = (loop_attention_copy(plain),)
        # the graphs of the encoder, of a step of one hypothesis (greedy, a beam's first
        # step) and of one of 2 to max_rows
        self._encode: Runner | None = None
        self._one: Runner | None = None
        self._many: Runner | None = None
        self.max_rows = MAX_ROWS
        self.max_positions = model.decoder.pos.table.size(0)
        self.max_source = model.encoder.pos.table.size(0)
        self.warm = False  # whether warm_up loaded the graphs
        self.eval()

    @property
    def beams(self) -> bool:
        """Whether beams run compiled too (warm_up says)."""
        return self._many is not None

    def start_decoding(self, src: Tensor, src_mask: Tensor, group: int = 1) -> DecoderState:
        """The incremental decoder's state over the decoding copy; a lone sentence's (``src``
        of one row, a beam of at most ``max_rows``) steps then run compiled."""
        lone = self.warm and src.size(0) == 1 and (
            group == 1 or (self.beams and group <= self.max_rows))
        if not lone or self._encode is None or src.size(1) > self.max_source:
            return incremental.start_decoding(self.model, src, src_mask, group,
                                              step=self.step if lone else None)
        memory, cross_kv = self._run(self._encode, [src.contiguous()])
        return DecoderState(self.model, memory, src_mask, cross_kv, group, step=self.step)

    def step(self, model: Transformer, last: Tensor, position: int, kv: Tensor,
             cross_kv: Tensor, src_mask: Tensor | None, group: int) -> Tensor:
        """:func:`decoder_step` of a lone sentence's hypotheses, compiled: ``kv`` (N,
        capacity, L, 2, H, Dh), this position's keys and values written into it here."""
        rows = last.size(0)
        runner = self._one if rows == 1 else self._many
        if runner is None or position >= self.max_positions:  # the model says what is wrong
            return decoder_step(model, last, position, kv, cross_kv, src_mask, group)
        # the graph reads its inputs laid out as when it was exported (contiguous; a slice
        # of one row is, whatever its stride over rows)
        filled = kv[:, :position + 1]
        logits, fresh = self._run(runner, [last.contiguous(), filled.contiguous(),
                                           cross_kv.contiguous()])
        kv.select(1, position).copy_(fresh)  # (N, L, 2, H, Dh)
        return logits

    def _run(self, runner: Runner, inputs: list[Tensor]) -> list[Tensor]:
        return runner(inputs)

    def warm_up(self, precision: str, beam_size: int = 1) -> float:
        """Load the graphs a lone sentence runs at ``precision`` (a resolved one): the
        encoder's, a step's of one hypothesis and, for a ``beam_size`` above 1, of 2 to
        ``max_rows``; the first time, compile them, side by side. Returns the seconds it took;
        a one-line :class:`MTError` if it cannot compile (no C++ compiler, say)."""
        start = time.perf_counter()
        key = model_key(self._plain[0], precision)
        # the longest to compile first
        names = ("many", "one", "encode") if beam_size > 1 else ("one", "encode")
        # a graph not in the cache compiles in a process of its own (export and inductor are
        # Python, then the C++ compiler: one core each), as many at once as there are cores
        slots = threading.BoundedSemaphore(os.cpu_count() or 1)
        with ThreadPoolExecutor(len(names)) as threads:
            paths = list(threads.map(lambda name: cache_entry(
                "compiled", json.dumps([key, name]), functools.partial(
                    self._build, name=name, precision=precision, slots=slots), (PACKAGE,)),
                names))
        for name, path in zip(names, paths, strict=True):
            # the package's loader itself: torch._inductor.package's load_package imports
            # torch._dynamo and builds test programs to check the CPU again (~2.5 s); the key
            # has the CPU's flags. One runner: threads that call it at once take turns.
            loader = torch._C._aoti.AOTIModelPackageLoader(str(path / PACKAGE), "model",
                                                           False, 1, -1)
            setattr(self, f"_{name}", loader.run)
        self.warm = True
        laid_out(self, precision)  # for_decoding's copy as it is (its check: ~0.4 ms a call)
        seconds = time.perf_counter() - start
        log.info("loaded the compiled decoding steps in %.1f s", seconds)
        return seconds

    def _build(self, directory: Path, name: str, precision: str,
               slots: threading.BoundedSemaphore) -> None:
        """Compile the graph ``name`` into ``directory`` in a process of its own
        (:func:`build_graph`), once one of ``slots`` is free."""
        with slots:
            log.info("compiling the %s graph of decoding (once for this model; ~20-40 s)",
                     name)
            model_file, error_file = directory / "model.pt", directory / "error.txt"
            torch.save(self._plain[0], model_file)
            command = [sys.executable, "-c", "from transformer_mt.decode.compiled import "
                       "build_graph; build_graph()", str(model_file), name, precision,
                       str(torch.get_num_threads()), str(self.max_rows), str(directory)]
            process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
            try:
                output, _ = process.communicate()
            finally:  # interrupted: the compiler goes too
                if process.poll() is None:
                    process.kill()
                    process.communicate()
            model_file.unlink()
        if process.returncode != 0:
            said = (error_file.read_text(encoding="utf-8") if error_file.is_file() else
                    f"its process exited with {process.returncode}: "
                    f"{(output.strip().splitlines() or [''])[-1][:300]}")
            raise MTError(f"--compile could not compile the decoder: {said}; translate "
                          "without --compile")

    def compile_graph(self, directory: Path, name: str, precision: str) -> None:
        """Export and compile the graph ``name`` (one of ``GRAPHS``) into ``directory``; a
        one-line :class:`MTError` if it cannot."""
        import torch._inductor

        recursion_limit = sys.getrecursionlimit()  # inductor raises it for good (to 2,000)
        try:
            with torch.inference_mode():
                module, example, shapes = self._graph(name, precision)
                graph = torch.export.export(module, example, dynamic_shapes=shapes)
                torch._inductor.aoti_compile_and_package(
                    graph, package_path=str(directory / PACKAGE),
                    inductor_configs=INDUCTOR_OPTIONS)
        except Exception as e:  # inductor's errors are many, and many lines long
            raise MTError(str(e).strip().splitlines()[0][:300]) from e
        finally:
            sys.setrecursionlimit(recursion_limit)

    def _graph(self, name: str,
               precision: str) -> tuple[nn.Module, tuple[Tensor, ...], dict[str, Any]]:
        """The module to export as graph ``name``, made-up inputs (a source of 3 tokens; the
        buffers as decoding makes them, at position 3) and the sizes that vary: the source
        length, the position and (``many``) the hypotheses, from 2 to ``max_rows``."""
        plain, device = self._plain[0], next(self.model.parameters()).device
        src = torch.tensor([[EOS_ID + 1, EOS_ID + 2, EOS_ID]], device=device)  # (1, 3)
        source = torch.export.Dim("source", min=1, max=self.max_source)
        if name == "encode":
            return EncoderGraph(plain, precision), (src,), {"src": {1: source}}
        rows = 1 if name == "one" else 2
        with torch.inference_mode(), autocast(device, precision):
            state = incremental.start_decoding(self.model, src, source_mask(src), rows)
            filled = torch.zeros_like(state.reserve(rows)[:, :4])  # (rows, 4, L, 2, H, Dh)
        last = torch.full((rows,), BOS_ID, dtype=torch.long, device=device)
        positions = torch.export.Dim("positions", min=1, max=self.max_positions)
        hypotheses = torch.export.Dim("hypotheses", min=2, max=self.max_rows)
        shapes: dict[str, Any] = {"last": None, "filled": {1: positions},
                                  "cross_kv": {4: source}}
        if rows > 1:
            shapes.update(last={0: hypotheses}, filled={0: hypotheses, 1: positions})
        return (StepGraph(plain, precision), (last, filled, state.cross_kv.contiguous()),
                shapes)


GRAPHS = ("encode", "one", "many")
PACKAGE = "step.pt2"


def build_graph() -> None:
    """A process's work for :meth:`CompiledDecoding.warm_up`: compile one graph of the model
    it saved. Arguments: the model's file, the graph's name, the precision, the threads, the
    most hypotheses and the directory to write the package (or ``error.txt``) into."""
    model_file, name, precision, threads, max_rows, directory = sys.argv[1:]
    torch.set_num_threads(int(threads))  # the compiled code's, as the parent's key says
    model = torch.load(model_file, weights_only=False)  # written by the parent just now
    decoding = CompiledDecoding(for_decoding(model, precision), model)
    decoding.max_rows = int(max_rows)
    try:
        decoding.compile_graph(Path(directory), name, precision)
    except MTError as e:
        (Path(directory) / "error.txt").write_text(str(e), encoding="utf-8")
        sys.exit(1)


def model_key(model: Transformer, precision: str) -> str:
    """A digest of everything a compiled step depends on: the model's weights and buffers,
    the precision, this package's source, torch's version, the CPU (its flags: the kernels
    are compiled for its instruction set) and the threads (fixed in the compiled code)."""
    digest = hashlib.sha256()
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        digest.update(f"{name} {tuple(tensor.shape)} {tensor.dtype}".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    for source in sorted(Path(transformer_mt.__file__).parent.rglob("*.py")):
        digest.update(source.read_bytes())
    facts = [PACKAGE_FORMAT, precision, torch.__version__, platform.machine(), _cpu_flags(),
             os.environ.get("ATEN_CPU_CAPABILITY"),  # inductor compiles for it, if set
             torch.get_num_threads()]
    digest.update(json.dumps(facts).encode())
    return digest.hexdigest()


def _cpu_flags() -> str:
    """The CPU's feature flags (Linux), else what platform says of it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def check_compilable(device: torch.device, members: int) -> None:
    """Refuse ``--compile`` where it does not apply, in one line."""
    if device.type != "cpu":
        raise MTError(f"--compile compiles CPU decoding; on {device.type} decode without it")
    if members > 1:
        raise MTError("--compile decodes with one model, not an ensemble; pass one checkpoint")
