"""A lone sentence's decoding steps compiled (``--compile``, ``Translator.load(compile=True)``).

A lone sentence decodes one row a step (greedy) or K (beam search). Each step multiplies those
rows by every weight matrix of the decoder and runs ~80 small operations around them; at so few
rows none of them keeps the machine busy, and the time goes to calling them: PyTorch's dispatch,
Python, and BLAS or oneDNN calls of ~20-60 us each for a matrix-vector product (docs/
benchmarks.md, "Decoding speed"). Here the incremental decoder's step,
:func:`~transformer_mt.decode.incremental.decoder_step` as it is, is compiled by
``torch.compile``'s inductor into one C++ function a step: the weights frozen into it and
multiplied by kernels generated for these shapes (inductor's CPU GEMM template, 4-12 us for
the products that took 20-60), the small operations fused into loops around them, attention
written as the loops it is (:class:`LoopAttention`). The same translations, ~2-2.5x faster one
sentence at a time (``tests/test_compiled.py``, ``bench/decode_speed.py``).

Compiling takes ~20-30 s on a 2-core CPU for greedy decoding (the first step and the others)
and ~10-15 s more for beams, at every start (inductor cannot keep code with frozen oneDNN
weights on disk), so it is opt-in and done at load (:meth:`CompiledDecoding.warm_up`), for the
shapes that will be used: the steps of one sentence, greedy and, where the checkpoint's beam is
wider than 1, of any beam up to ``MAX_ROWS``, for any source length and position. Anything else
(batches of several sentences, where oneDNN's packed kernels are faster; a wider beam) runs
the decoding copy as ever: nothing compiles mid-request.
"""

from __future__ import annotations

import itertools
import logging
import math
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from transformer_mt.data.batch import source_mask
from transformer_mt.data.vocab import BOS_ID, EOS_ID
from transformer_mt.decode import incremental
from transformer_mt.decode.incremental import DecoderState, decoder_step
from transformer_mt.errors import MTError
from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.transformer import Transformer
from transformer_mt.precision import autocast, laid_out, shared_copy

log = logging.getLogger(__name__)

MAX_ROWS = 8  # a wider beam's steps run as ever: at 32 rows oneDNN's packed kernels are faster

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


class CompiledDecoding(nn.Module):
    """A model for decoding whose lone sentences' steps run compiled.

    It offers what search needs of a model (``cfg``, ``tgt_vocab_size``) and brings its own
    decoding state: the incremental decoder's, over ``model`` (the decoding copy,
    ``precision.for_decoding``), whose steps of a lone sentence run :func:`decoder_step`
    compiled over ``plain``: the same weights in ``nn.Linear`` layers, which inductor can read
    (``model``'s oneDNN-packed ones it cannot). The compiled code keeps its own packed copy of
    the decoder's weights (one for one hypothesis, one for beams).
    """

    def __init__(self, model: Transformer, plain: Transformer) -> None:
        super().__init__()
        self.model = model
        self.cfg = model.cfg
        self.tgt_vocab_size = model.tgt_vocab_size
        # not a submodule: its layers are not laid out for decoding
        self._plain = (loop_attention_copy(plain),)
        # the step compiled for one hypothesis (greedy) and for any number from 2 to max_rows
        # (a beam): at one row the matrix products are ~3x faster compiled for it than for a
        # variable number of rows; and the first step (a window of one position, which
        # torch.compile would take as a constant), of one row (a beam's starts as one)
        self._one, self._many, self._first = _compile(_step), _compile(_step), _compile(_step)
        self.max_rows = MAX_ROWS
        self.beams = True  # whether beams run compiled too (warm_up says)
        self.warm = False  # once warmed up, a shape not compiled yet runs eagerly
        self.eval()

    def start_decoding(self, src: Tensor, src_mask: Tensor, group: int = 1) -> DecoderState:
        """The incremental decoder's state over the decoding copy; a lone sentence's (``src``
        of one row, a beam of at most ``max_rows``) steps then run compiled."""
        lone = src.size(0) == 1 and (group == 1 or (self.beams and group <= self.max_rows))
        return incremental.start_decoding(self.model, src, src_mask, group,
                                          step=self.step if lone else None)

    def step(self, model: Transformer, last: Tensor, position: int, kv: Tensor,
             cross_kv: Tensor, src_mask: Tensor | None, group: int) -> Tensor:
        """:func:`decoder_step` of a lone sentence's hypotheses, compiled."""
        filled = kv[:, :position + 1]  # the positions so far and this one
        rows = last.size(0)
        # a contiguous copy of the newest tokens: prefix[:, -1]'s stride changes every step
        last = last.clone(memory_format=torch.contiguous_format)
        if not self.warm:  # compiled for any number of positions and source length
            if position > 0:
                torch._dynamo.mark_dynamic(filled, 1)
            torch._dynamo.mark_dynamic(cross_kv, 4)
            if rows > 1:  # and of hypotheses
                torch._dynamo.mark_dynamic(filled, 0)
                torch._dynamo.mark_dynamic(last, 0)
        # a lone sentence has no padding, so no mask
        compiled = self._first if position == 0 else self._one if rows == 1 else self._many
        return self._run(compiled, self._plain[0], last, filled, cross_kv)

    def _run(self, compiled: Callable[..., Any], *args: Any) -> Any:
        """``compiled(*args)``; once warmed up, eagerly where it would have to compile (not
        expected: a safety net)."""
        if not self.warm:
            return compiled(*args)
        with torch.compiler.set_stance("eager_on_recompile"):
            return compiled(*args)

    def warm_up(self, precision: str, beam_size: int = 1) -> float:
        """Compile what a lone sentence runs at ``precision`` (a resolved one): its steps
        after the first, of one hypothesis and, for a ``beam_size`` above 1, of any number up
        to ``max_rows`` (so any such beam), for any source length and position, by feeding a
        made-up source and prefix for a few positions. Returns the seconds it took; a
        one-line :class:`MTError` if it cannot compile (no C++ compiler, say). A beam that
        was not compiled decodes as ever."""
        import torch._inductor.config as inductor
        import torch.fx.experimental._config as shapes

        start = time.perf_counter()
        recursion_limit = sys.getrecursionlimit()  # inductor raises it for good (to 2,000)
        device = next(self.model.parameters()).device
        # made outside inference mode, as search's callers make them (the compiled code is
        # specialised on that)
        src = torch.tensor([[EOS_ID + 1, EOS_ID + 2, EOS_ID]], device=device)  # (1, 3)
        mask = source_mask(src)
        self.beams = beam_size > 1
        # the settings patched while it compiles (torch.compile's options= does not freeze);
        # sizes that happen to be equal here (the source's and the layers', say) are not
        # assumed equal ever after
        try:
            with (torch.inference_mode(), autocast(device, precision),
                  inductor.patch(INDUCTOR_OPTIONS),
                  shapes.patch(use_duck_shape=False)):  # type: ignore[attr-defined]
                for rows in (1, 2) if beam_size > 1 else (1,):  # 2: any number
                    self._feed(src, mask, rows)
        except Exception as e:  # inductor's errors are many, and many lines long
            raise MTError(f"--compile could not compile the decoder: "
                          f"{str(e).strip().splitlines()[0][:300]}; translate without "
                          "--compile") from e
        finally:
            sys.setrecursionlimit(recursion_limit)
        self.warm = True
        laid_out(self, precision)  # for_decoding's copy as it is (its check: ~0.4 ms a call)
        seconds = time.perf_counter() - start
        log.info("compiled the decoding steps in %.1f s", seconds)
        return seconds

    def _feed(self, src: Tensor, mask: Tensor, rows: int) -> None:
        """Decode positions 0, 1 and 2 of ``rows`` made-up hypotheses."""
        state = self.start_decoding(src, mask, group=rows)
        prefix = torch.full((rows, 1), BOS_ID, dtype=torch.long, device=src.device)  # (rows, t)
        for _ in range(3):
            state.next_logits(prefix)
            prefix = torch.cat([prefix, prefix[:, -1:] + 1], dim=1)  # (rows, t + 1)


def _step(model: Transformer, last: Tensor, filled: Tensor, cross_kv: Tensor) -> Tensor:
    """:func:`decoder_step` for the hypotheses ``last`` of a lone sentence, with ``filled``
    the key/value buffer's positions so far and this one: what varies from step to step is
    the size of a tensor, which torch.compile takes as a variable from the start (an int
    argument would be compiled twice: as a constant first)."""
    return decoder_step(model, last, filled.size(1) - 1, filled, cross_kv, None, last.size(0))


def _compile(function: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(function)`` for one model and one use (one hypothesis, or several),
    with the source length and the position varying.

    The model's modules are not guarded (a step took ~100 us more to check them): their
    weights are frozen into the compiled code, decoded as they are (as ``for_decoding``'s copy
    is). So each use gets a function of its own, with a code object of its own under a name of
    its own: torch.compile keeps what it compiled with the code object (another model's frozen
    weights must never be found there) and what sizes it saw change under the name (the
    number of hypotheses would become a variable at one row, and the products ~3x slower).
    """
    code = function.__code__.replace(co_name=f"{function.__name__}_{next(_USES)}")
    own = types.FunctionType(code, function.__globals__, code.co_name, function.__defaults__,
                             function.__closure__)
    return torch.compile(own, options={
        "guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe})


_USES = itertools.count()


def check_compilable(device: torch.device, members: int) -> None:
    """Refuse ``--compile`` where it does not apply, in one line."""
    if device.type != "cpu":
        raise MTError(f"--compile compiles CPU decoding; on {device.type} decode without it")
    if members > 1:
        raise MTError("--compile decodes with one model, not an ensemble; pass one checkpoint")
