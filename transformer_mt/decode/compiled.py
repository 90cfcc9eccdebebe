"""Decoding steps compiled (``--compile``, ``Translator.load(compile=True)``).

A lone sentence decodes one row a step (greedy) or K (beam search). Each step multiplies those
rows by every weight matrix of the decoder and runs ~80 small operations around them; at so few
rows none of them keeps the machine busy, and the time goes to calling them: PyTorch's dispatch,
Python, and BLAS or oneDNN calls of ~20-60 us each for a matrix-vector product (docs/
measurements/notes-2026-11.md, "Decoding speed"). Here the incremental decoder's step,
:func:`~transformer_mt.decode.incremental.decoder_step` as it is, is exported
(``torch.export``) and compiled ahead of time by AOTInductor into a shared library: one C++
function a step, with the weights frozen into it and multiplied by kernels generated for these
shapes (inductor's CPU GEMM template, 4-12 us for the products that took 20-60), the small
operations fused into loops around them, attention written as the loops it is
(:class:`~transformer_mt.decode.graphs.LoopAttention`), and nothing in Python between them
(torch.compile's guards and wrapper took ~150-250 us a step). A batch's step is one too, with
oneDNN's packed products (a 32-row step ~1.7x faster than the eager one: the ~80 operations
fused into a few loops, no Python between them). The same translations
(``tests/system/test_compiled.py``).

The graphs (``decode/graphs.py``), each for any source length and position: for lone sentences
the encoder, a step of one hypothesis (greedy, and every beam's first step) and, where the beam
is wider than 1, a step of 2 to ``MAX_ROWS`` (any such beam); for batches, a step of any number
of sentences with any number of hypotheses each (their encoder runs as ever: once a batch).
:meth:`CompiledDecoding.warm_up` compiles the ones asked for the first time, in processes apart,
one a core (``decode/compilers.py``; ~13-20 s of a core a graph, ~30 s more for the first of
all: inductor's checks of the CPU and its precompiled headers, kept in its cache); the packages
are kept in the cache (``cache_dir()/compiled``, checked whenever read), under a key of
everything they depend on (the weights, the precision, this package's source, torch, the CPU's
flags, the threads), and later starts load them in ~0.1-0.2 s. Anything not compiled (batches
before the batch graph is asked for, positions past the model's table) runs the decoding copy
as ever.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

import transformer_mt
from transformer_mt.data.cache import cache_entry, free_cache_entry
from transformer_mt.decode import incremental
from transformer_mt.decode.beam_step import Choice, choose
from transformer_mt.decode.compiled_state import CompiledState
from transformer_mt.decode.compilers import Compilers, stop_compiling
from transformer_mt.decode.graphs import BLOCK, MAX_GROUP, exported, loop_attention_copy
from transformer_mt.decode.incremental import DecoderState, decoder_step
from transformer_mt.decode.state import DecodingModel
from transformer_mt.errors import MTError
from transformer_mt.internals import torch_private
from transformer_mt.model.transformer import Transformer
from transformer_mt.precision import cpu_flags, laid_out

log = logging.getLogger(__name__)

MAX_ROWS = 8  # a lone sentence's wider beam runs the batch graph: oneDNN's kernels are faster
PACKAGE_FORMAT = 3  # part of the cache key: a package made otherwise is never read as this one

# inductor's settings: weights frozen into the compiled code (packed once); a lone sentence's
# step's few rows multiplied by products generated for their shapes (the CPP template) instead
# of BLAS calls, the many rows of a batch's step and of a source's tokens by oneDNN's packed
# kernels (ATen's: 1.7x faster than the template at 32 rows; a 13-token source's encoder
# 716 against 773 us in fp32, 482 against 862 in bf16, 25 tokens 1.1 against 1.8 ms); no
# pointwise operations fused into a product's template (in bf16 inductor 2.13 asserts there);
# a graph's intermediate tensors of fixed size on the stack where it has no library call
# (a lone sentence's step, whose ~40 allocations a call took ~20 of its ~140 us here)
INDUCTOR_OPTIONS: dict[str, Any] = {
    "freezing": True, "max_autotune": True, "max_autotune_gemm_backends": "CPP",
    "epilogue_fusion": False, "aot_inductor.allow_stack_allocation": True}
GEMMS = {"batch": "ATEN", "encode": "ATEN"}  # the graphs whose products are not the template's
# The template's products keep a vector register of sums for each row and vector of columns of
# its block, each a chain of multiply-adds that wait for one another; its blocks are made for
# many rows: a lone sentence's one row gets 2-3 chains, and an AVX2 block of 4 rows splits a
# beam of 5 into 4 + 1, too few chains to hide a multiply-add's latency. These graphs' products
# (fp32, and bf16 multiplied in fp32) take blocks of their own instead, (rows, columns) by the
# vector width: one row of 8 vectors, and for a beam in AVX2 6 rows of 2 (a lone sentence
# greedy in AVX2 ~10 % faster, in bf16 on AVX-512 ~10 %, a lone beam in AVX2 ~18 %;
# docs/benchmarks.md).
FEW_ROWS = {"one": {"avx2": (1, 64), "avx512": (1, 128)}, "beam": {"avx2": (6, 16)}}

# a compiled graph's inputs -> outputs (AOTInductor's runner)
Runner = Callable[[list[Tensor]], list[Tensor]]


class CompiledDecoding(DecodingModel):
    """A model for decoding whose steps run compiled.

    It offers what search needs of a model (``cfg``, ``tgt_vocab_size``) and brings its own
    decoding state: the incremental decoder's, over ``model`` (the decoding copy,
    ``precision.for_decoding``), whose steps run the graphs :meth:`warm_up` loaded, compiled
    over ``plain``: the same weights in ``nn.Linear`` layers (``for_decoding(..., pack=False)``),
    which inductor can read (``model``'s oneDNN-packed ones it cannot). Each compiled graph
    keeps its own packed copy of the decoder's weights.
    """

    def __init__(self, model: Transformer, plain: Transformer) -> None:
        super().__init__()
        self.model = model
        self.cfg = model.cfg
        self.tgt_vocab_size = model.tgt_vocab_size
        # not a submodule: its layers are not laid out for decoding
        self._plain = (loop_attention_copy(plain),)
        # the graphs of a lone sentence's encoder, of its step of one hypothesis (greedy, a
        # beam's first step) and of one of 2 to max_rows; of a batch's step
        self._encode: Runner | None = None
        self._one: Runner | None = None
        self._beam: Runner | None = None  # a step of a lone sentence's beam and its choice
        self._batch: Runner | None = None
        self._choose: Runner | None = None  # beam search's decisions at a step
        self._none_barred: Tensor | None = None
        # of beams of at most this many (a step ranks 2K candidates of the V tokens): where the
        # vocabulary has blocks for beams of MAX_ROWS, as wide as its best tokens can be read
        # by blocks (graphs.top_k_by_blocks)
        blocks = self.tgt_vocab_size // BLOCK // 2
        self.widest_choice = min(MAX_GROUP, self.tgt_vocab_size // 2,
                                  blocks if blocks >= MAX_ROWS else MAX_GROUP)
        self.max_rows = MAX_ROWS
        self.max_positions = model.decoder.pos.table.size(0)
        self.max_source = model.encoder.pos.table.size(0)
        self.eval()

    @property
    def plain(self) -> Transformer:
        """The model in plain ``nn.Linear`` layers (its attention :class:`LoopAttention`),
        as the graphs are exported from."""
        return self._plain[0]

    @property
    def lone(self) -> bool:
        """Whether a lone sentence's steps run compiled (warm_up says)."""
        return self._one is not None

    @property
    def beams(self) -> bool:
        """Whether a lone sentence's beams run compiled too (warm_up says)."""
        return self._beam is not None

    @property
    def widest_beam(self) -> int:
        """The widest beam of a lone sentence the beam graph takes: ``max_rows``, or fewer
        where the vocabulary has fewer than twice as many tokens (a step ranks 2K)."""
        return min(self.max_rows, self.tgt_vocab_size // 2)

    def none_barred(self, device: torch.device, sentences: int = 1) -> Tensor:
        """(sentences, V) zeros: no token barred, as the graphs take it (kept: a lone beam's
        step made one in ~8 us, a batch's in ~30)."""
        kept = self._none_barred
        if kept is None or kept.device != device or kept.size(0) < sentences:
            kept = self._none_barred = torch.zeros(max(sentences, 1), self.tgt_vocab_size,
                                                   device=device)
        return kept[:sentences]

    @property
    def batches(self) -> bool:
        """Whether batches' steps run compiled (warm_up says)."""
        return self._batch is not None

    def loaded_for(self, sentences: int, beam_size: int) -> bool:
        """Whether a call of ``sentences`` at ``beam_size`` finds the graphs it runs loaded
        (:meth:`warm_up`, ``lone`` or ``batches`` as :meth:`runs_batches` says): a batch's; a
        lone sentence's, and its beam's for a beam of 2 to ``widest_beam`` (a greedy first
        call loaded none: a beam after it ran uncompiled, ~3x slower)."""
        if self.runs_batches(sentences, beam_size):
            return self.batches
        return self.lone and (beam_size == 1 or self.beams)

    def runs_batches(self, sentences: int, beam_size: int) -> bool:
        """Whether a call of ``sentences`` at ``beam_size`` runs the batch's graph: several
        sentences, or a lone one's beam wider than ``widest_beam``."""
        return sentences > 1 or beam_size > self.widest_beam

    def start_decoding(self, src: Tensor, src_mask: Tensor, group: int = 1) -> DecoderState:
        """The incremental decoder's state over the decoding copy, whose steps run compiled: a
        lone sentence's (``src`` of one row, a beam of at most ``max_rows``) in its graphs,
        others in the batch graph, where loaded."""
        encode = self._encode
        if (encode is not None and src.size(0) == 1 and src.size(1) <= self.max_source
                and (group == 1 or (self.beams and group <= self.widest_beam))):  # a lone one
            memory, cross_kv = self._run(encode, [src.contiguous()])
            return CompiledState(self.model, memory, src_mask, cross_kv, group,
                                 step=self.step, decoding=self)
        memory, cross_kv = incremental.encode_source(self.model, src, src_mask)
        if not (self.batches and group <= MAX_GROUP):
            return CompiledState(self.model, memory, src_mask, cross_kv, group, decoding=self)
        slots = torch.arange(src.size(0) * group, device=src.device)  # (B*G,)
        return CompiledState(self.model, memory, src_mask, cross_kv, group,
                             step=self.batch_step, decoding=self, ancestors=slots[:, None],
                             slots=slots)

    def step(self, model: Transformer, last: Tensor, position: int, kv: Tensor,
             cross_kv: Tensor, src_mask: Tensor | None, group: int) -> Tensor:
        """:func:`decoder_step` of a lone sentence's one hypothesis, compiled: ``kv`` (1,
        capacity, L, 2, H, Dh) a whole buffer (contiguous), this position's keys and values
        written into it here. (A beam's steps run :class:`BeamGraph`:
        :meth:`CompiledState.choose_next`.)"""
        runner = self._one if last.size(0) == 1 else None
        if runner is None or position >= self.max_positions:  # the model says what is wrong
            return decoder_step(model, last, position, kv, cross_kv, src_mask, group)
        no_limit = torch.full((1,), position + 1, device=last.device)  # (the pick unused)
        logits, fresh, _, _ = self._run(runner, [
            last.contiguous(), kv, last.new_empty(position + 1), cross_kv.contiguous(),
            no_limit, self.none_barred(last.device)])
        kv.select(1, position).copy_(fresh)  # (N, L, 2, H, Dh)
        return logits

    def batch_step(self, model: Transformer, last: Tensor, position: int, kv: Tensor,
                   cross_kv: Tensor, src_mask: Tensor | None, group: int) -> Tensor:
        """:func:`decoder_step` of a batch whose steps do not run the batch graph
        (:meth:`CompiledState.next_logits` runs it): once one sentence is left, its greedy
        steps run a lone sentence's graph where loaded (0.25 against 0.8 ms a step here:
        oneDNN's products are slow at one row), as its beam's do
        (:meth:`CompiledState.choose_next`); ``kv`` (B*G, capacity, L, 2, H, Dh) a whole
        buffer (contiguous), this position's keys and values written into it here."""
        if cross_kv.size(0) == 1 and src_mask is not None and group == 1 and self._one:
            length = int(src_mask.sum())  # its source without the padding (masked anyway)
            return self.step(model, last, position, kv, cross_kv[..., :length, :], None, group)
        return decoder_step(model, last, position, kv, cross_kv, src_mask, group)

    def choose(self, z: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor,
               step: int | Tensor, barred: Tensor | None = None) -> Choice:
        """:func:`~transformer_mt.decode.beam_step.choose`, compiled where loaded."""
        n, k = scores.shape
        if self._choose is None or k > self.widest_choice or (
                barred is not None and barred.size(0) != n):  # (its graph: a row a sentence)
            return choose(z, scores, n_finished, limits, step, barred)
        return Choice(*self._run(self._choose, [
            z.view(n, k, -1), scores.contiguous(), n_finished.contiguous(),
            limits.contiguous(), torch.tensor(step, device=scores.device),
            self.none_barred(z.device, n) if barred is None else barred.contiguous()]))

    def _run(self, runner: Runner, inputs: list[Tensor]) -> list[Tensor]:
        return runner(inputs)

    def warm_up(self, precision: str, beam_size: int = 1, lone: bool = True,
                batches: bool = False) -> float:
        """Load the graphs that decoding at ``precision`` (a resolved one) runs: with ``lone``,
        a lone sentence's (the encoder's, a step's of one hypothesis and, for a ``beam_size``
        above 1, of 2 to ``max_rows``); with ``batches``, a batch's step. The first time,
        compile them, side by side; graphs loaded before stay. Returns the seconds it took; a
        one-line :class:`MTError` if it cannot compile (no C++ compiler, say)."""
        start = time.perf_counter()
        # the longest to compile first
        wanted = (("batch",) if batches else ()) + (
            (("beam",) if beam_size > 1 else ()) + ("one", "encode") if lone else ()) + (
            ("choose",) if batches else ())
        names = [name for name in wanted if getattr(self, f"_{name}") is None]
        if not names:
            return time.perf_counter() - start
        key = model_key(self._plain[0], precision)
        # a graph not in the cache compiles in a process apart (export and inductor are
        # Python, then the C++ compiler: one core each), as many at once as this process has
        # threads (its share of the cores: mt serve --workers 2 on 2 cores, one each)
        with Compilers(self._plain[0], precision, self.max_rows, torch.get_num_threads()) as ours, \
                ThreadPoolExecutor(len(names)) as threads:
            try:
                paths = list(threads.map(lambda name: self._entry(name, key, ours), names))
            except (KeyboardInterrupt, SystemExit):  # Ctrl-C: the compilers go too
                stop_compiling()
                raise
        for name, path in zip(names, paths, strict=True):
            setattr(self, f"_{name}", torch_private.aoti_runner(str(path / PACKAGE)))
        laid_out(self, precision)  # for_decoding's copy as it is (its check: ~0.4 ms a call)
        seconds = time.perf_counter() - start
        log.info("loaded the compiled decoding steps in %.1f s", seconds)
        return seconds

    def _entry(self, name: str, key: str, compilers: Compilers) -> Path:
        """The cache entry of the graph ``name`` of the model ``key``: read back, or compiled
        within a turn of ``compilers``. An entry another process is making (another process
        that warms the same model up: ``mt serve --workers 2``'s) is passed over for now, the
        turn given to the next graph, and read once that process has made it: two processes
        compile a model's graphs between them, not one while the other waits."""
        entry = graph_key(self, name, key)
        build = functools.partial(self._build, name=name, compilers=compilers)
        with compilers.turn():
            directory = free_cache_entry("compiled", entry, build, (PACKAGE,))
        if directory is None:  # (made here after all if that process failed, in a turn)
            directory = cache_entry("compiled", entry, functools.partial(build, turn=True),
                                    (PACKAGE,))
        return directory

    def _build(self, directory: Path, name: str, compilers: Compilers,
               turn: bool = False) -> None:
        """Compile the graph ``name`` into ``directory`` in one of ``compilers``' processes
        (taking a turn first with ``turn``); at once a one-line :class:`MTError` if there is
        no C++ compiler (inductor runs ``CXX``, else ``g++``: it would fail only after ~15 s)."""
        cxx = os.environ.get("CXX") or "g++"
        if shutil.which(cxx) is None and not os.environ.get("TORCH_INDUCTOR_INSTALL_GXX"):
            raise MTError(f"--compile could not compile the decoder: no C++ compiler ({cxx} "
                          "not found: install g++ or set CXX); translate without --compile")
        with compilers.turn() if turn else contextlib.nullcontext():
            compilers.compile(name, directory)

    def compile_graph(self, directory: Path, name: str, precision: str) -> None:
        """Export and compile the graph ``name`` (one of ``GRAPHS``) into ``directory``; a
        one-line :class:`MTError` if it cannot."""
        recursion_limit = sys.getrecursionlimit()  # inductor raises it for good (to 2,000)
        try:
            with torch.inference_mode():
                module, example, shapes = exported(self, name, precision)
                graph = torch.export.export(module, example, dynamic_shapes=shapes)
                with few_row_blocks(name):
                    torch_private.aoti_compile(graph, str(directory / PACKAGE), dict(
                        INDUCTOR_OPTIONS, max_autotune_gemm_backends=GEMMS.get(name, "CPP")))
        except Exception as e:  # inductor's errors are many, and many lines long
            raise MTError(str(e).strip().splitlines()[0][:300]) from e
        finally:
            sys.setrecursionlimit(recursion_limit)


def few_row_blocks(name: str) -> contextlib.AbstractContextManager[None]:
    """While the graph ``name`` compiles, inductor's template blocks its products as
    :data:`FEW_ROWS` says (``internals/torch_private.py: template_blocks``)."""
    return torch_private.template_blocks(FEW_ROWS.get(name, {}))


GRAPHS = ("encode", "one", "beam", "batch", "choose")
PACKAGE = "step.pt2"


# the package's code the graphs are made of: the model, the decoding step and what it imports
GRAPH_SOURCES = ("model", "decode", "internals", "precision.py", "config/__init__.py",
                 "data/vocab.py", "data/batch.py")


def graph_sources() -> list[Path]:
    """The source files of :data:`GRAPH_SOURCES`: an edit elsewhere (the server, the CLI)
    compiles nothing again."""
    root = Path(transformer_mt.__file__).parent
    return sorted(path for part in GRAPH_SOURCES for path in (
        [root / part] if part.endswith(".py") else (root / part).rglob("*.py")))


def model_key(model: Transformer, precision: str) -> str:
    """A digest of everything a compiled step depends on: the model's config (heads and
    activation are in no weight's shape) and weights and buffers, the precision, the code
    of the model and of the decoding step (:func:`graph_sources`), torch's version, the CPU
    (its flags: the kernels are compiled for its instruction set) and the threads (fixed in
    the compiled code). A checkpoint rewritten at the same path has other weights: another
    key, never the old graphs."""
    digest = hashlib.sha256()
    digest.update(json.dumps(dataclasses.asdict(model.cfg), sort_keys=True).encode())
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        digest.update(f"{name} {tuple(tensor.shape)} {tensor.dtype}".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    _add_code_and_machine(digest, precision)
    return digest.hexdigest()


def _add_code_and_machine(digest: Any, precision: str | None) -> None:
    """Add to ``digest`` what every graph depends on besides the model: the code, torch, the
    CPU and the threads, and the precision (None: a graph the same at every precision)."""
    for source in graph_sources():
        digest.update(source.read_bytes())
    facts = [PACKAGE_FORMAT, precision, torch.__version__, platform.machine(), cpu_flags(),
             os.environ.get("ATEN_CPU_CAPABILITY"),  # inductor compiles for it, if set
             torch.get_num_threads()]
    digest.update(json.dumps(facts).encode())


def graph_key(decoding: CompiledDecoding, name: str, model: str) -> str:
    """The cache key of ``decoding``'s graph ``name``, where ``model`` is its
    :func:`model_key`. Beam search's choice reads no weight and takes fp32 scores at every
    precision: it is one graph for every model of its vocabulary's size (each checkpoint of a
    run, either precision), keyed by that, the code, torch, the CPU and the threads."""
    if name != "choose":
        return json.dumps([model, name])
    digest = hashlib.sha256()
    _add_code_and_machine(digest, None)
    return json.dumps([digest.hexdigest(), name, decoding.tgt_vocab_size,
                       decoding.widest_choice])


def check_compilable(device: torch.device, members: int) -> None:
    """Refuse ``--compile`` where it does not apply, in one line."""
    if device.type != "cpu":
        raise MTError(f"--compile compiles CPU decoding; on {device.type} decode without it")
    if members > 1:
        raise MTError("--compile decodes with one model, not an ensemble; pass one checkpoint")
