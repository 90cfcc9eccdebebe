"""``--compile``'s parts that compile nothing (``decode/compiled.py``, ``decode/graphs.py``):
the attention the graphs are exported with computes what PyTorch's does, and the cache keys
name everything a compiled graph depends on. (tests/system/test_compiled.py: the graphs.)"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.toy import make_model
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.decode.compiled import CompiledDecoding, graph_key, model_key
from transformer_mt.decode.graphs import LoopAttention
from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.transformer import Transformer
from transformer_mt.precision import for_decoding


@pytest.fixture(scope="module")
def toy(one_layer_toy):
    """The reversal toy model with one layer each side (test_compiled.py's)."""
    return one_layer_toy


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("queries", [1, 5])
def test_loop_attention_equals_sdpa(masked, queries):
    torch.manual_seed(0)
    q = torch.randn(2, 4, queries, 8)
    k, v = torch.randn(2, 4, 9, 8), torch.randn(2, 4, 9, 8)
    mask = torch.rand(2, 1, 1, 9) > 0.3 if masked else None
    if mask is not None:
        mask[..., 0] = True  # every row sees a key
    attn = MultiHeadAttention(32, 4)
    attn.__class__ = LoopAttention
    out, weights = attn.attend(q, k, v, mask, False, False)
    assert weights is None
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(out, expected, atol=1e-6)


def test_the_cache_key_is_everything_the_graphs_depend_on(toy):
    """Compiled graphs are kept under a key of the config, the weights, the precision and
    the threads (besides the source, torch and the CPU): another model's are never read, nor
    those of the same weights under another activation or number of heads."""
    key = model_key(toy, "fp32")
    assert model_key(make_model(n_encoder_layers=1, n_decoder_layers=1), "fp32") != key
    assert model_key(toy, "bf16") != key
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        assert model_key(toy, "fp32") != key
    finally:
        torch.set_num_threads(threads)
    changed = copy.deepcopy(toy)
    assert model_key(changed, "fp32") == key
    for field, value in (("activation", "gelu"), ("n_heads", 2)):  # the same weights
        other = copy.deepcopy(toy)
        other.cfg = dataclasses.replace(toy.cfg, **{field: value})
        assert model_key(other, "fp32") != key, field
    with torch.no_grad():
        next(changed.decoder.parameters()).view(-1)[0] += 1e-3
    assert model_key(changed, "fp32") != key


def test_beam_search_choice_is_one_graph_for_every_model_of_a_vocabulary(toy):
    """The choice (``choose``) reads no weight and takes fp32 scores at every precision: the
    same key for other weights and for bf16 (tests/system/test_compiled_bf16.py checks what
    it computes there), another for another vocabulary; the models' graphs keep theirs."""
    decoding = CompiledDecoding(for_decoding(toy, "fp32"), toy)  # (a key needs no graph)
    other = copy.deepcopy(toy)  # other weights
    with torch.no_grad():
        next(other.decoder.parameters()).view(-1)[0] += 1e-3
    keys = {(name, precision, id(model)): graph_key(
        CompiledDecoding(for_decoding(model, precision), model), name,
        model_key(model, precision)) for name in ("choose", "one") for model in (toy, other)
        for precision in ("fp32", "bf16")}
    assert len({key for (name, *_), key in keys.items() if name == "choose"}) == 1
    assert len({key for (name, *_), key in keys.items() if name == "one"}) == 4
    assert graph_key(decoding, "choose", "") == keys["choose", "fp32", id(toy)]
    smaller = Transformer(toy.cfg, toy.tgt_vocab_size, toy.tgt_vocab_size - 2, PAD_ID).eval()
    assert graph_key(CompiledDecoding(for_decoding(smaller, "fp32"), smaller), "choose",
                     "") != keys["choose", "fp32", id(toy)]


def test_two_warm_ups_of_a_model_compile_its_graphs_between_them(toy, tmp_path, monkeypatch):
    """Two processes that warm the same model up at once (``mt serve --workers 2``), one
    compiler each: a graph the other is compiling is passed over for now and read once made,
    so each graph is compiled once and both compile (before, the first to start took every
    graph's entry at once, and the second waited for all of them). Two warm-ups in threads
    here (a lock file opened twice locks as two processes' do), the compiling faked."""
    import threading
    import time

    from transformer_mt.decode import compiled as compiled_module
    from transformer_mt.decode.compilers import Compilers
    from transformer_mt.fileio import file_lock

    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # one compiler a process
    made: list[tuple[int, str]] = []

    class Process:  # a compiling process of the Compilers that took it
        def __init__(self, compilers):
            self.compilers = id(compilers)

        def compile(self, name, directory):
            made.append((self.compilers, name))
            time.sleep(0.3)
            (directory / compiled_module.PACKAGE).write_bytes(name.encode())

    monkeypatch.setattr(Compilers, "_take", lambda self: Process(self))
    monkeypatch.setattr(compiled_module.torch_private, "aoti_runner", lambda path: path)
    monkeypatch.setattr(compiled_module, "laid_out", lambda *args: None)
    decodings = [CompiledDecoding(for_decoding(toy, "fp32"), toy) for _ in range(2)]
    warm_ups = [threading.Thread(target=d.warm_up, args=("fp32", 3, True, True))
                for d in decodings]
    for thread in warm_ups:  # the second a moment later, as a second process starts
        thread.start()
        time.sleep(0.1)
    for thread in warm_ups:
        thread.join(60)
    names = ["encode", "one", "beam", "batch", "choose"]
    assert sorted(name for _, name in made) == sorted(names)  # each once
    assert len({compilers for compilers, _ in made}) == 2  # by both
    for decoding in decodings:  # each has every graph, as the cache holds it
        assert [Path(getattr(decoding, f"_{n}")).read_bytes() for n in names] == [
            n.encode() for n in names]
    lock = tmp_path / "an.lock"
    with file_lock(lock), file_lock(lock, wait=False) as held:
        assert held is False
    with file_lock(lock, wait=False) as held:
        assert held is True
