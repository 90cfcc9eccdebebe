"""The compiled path's contract at its smallest, in the fast tier: a one-layer toy model's
lone-sentence graphs (the encoder and a greedy step, ~30 s of compiling on 2 cores) translate
as the eager decoding copy does, token for token, every step compiled. The whole contract
(beams, batches, bf16, the cache, the server) is ``tests/system/test_compiled.py``'s."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.toy import lone_sources, toy_accuracy
from transformer_mt.data.batch import source_mask
from transformer_mt.decode import compiled as compiled_module
from transformer_mt.decode import incremental
from transformer_mt.decode.compiled import PACKAGE, CompiledDecoding
from transformer_mt.decode.search import greedy
from transformer_mt.fileio import cache_dir
from transformer_mt.internals import torch_private
from transformer_mt.precision import for_decoding


def test_a_tiny_models_compiled_greedy_steps_translate_as_the_model_does(one_layer_toy,
                                                                      monkeypatch):
    if not torch_private.compile_usable():
        pytest.skip("--compile is off on this torch (internals/torch_private.py)")
    toy = one_layer_toy  # (its graphs compile once: tests/system/test_compiled.py's too)
    assert toy_accuracy(toy) > 0.5  # decisive enough that rounding flips no token
    decoding = CompiledDecoding(for_decoding(toy, "fp32"), toy)
    decoding.warm_up("fp32", beam_size=1, lone=True)
    eager = for_decoding(toy, "fp32")
    uncompiled: list = []  # steps or encodings that ran eagerly
    monkeypatch.setattr(compiled_module, "decoder_step",
                        lambda *a: uncompiled.append(a) or incremental.decoder_step(*a))
    monkeypatch.setattr(incremental, "encode_source",
                        lambda *a, f=incremental.encode_source: uncompiled.append(a) or f(*a))
    for src in lone_sources():
        ours = greedy(decoding, src, source_mask(src), use_cache=True)
        assert not uncompiled
        theirs = greedy(eager, src, source_mask(src), use_cache=True)
        uncompiled.clear()  # (the eager decoding's own)
        assert [h.tokens for h in ours] == [h.tokens for h in theirs]
        assert ours[0].score == pytest.approx(theirs[0].score, abs=1e-4)


def test_a_process_ending_at_once_leaves_no_unpacked_graph_behind(one_layer_toy, tmp_path):
    """AOTInductor's loader unpacks a graph's package under ``TMPDIR`` and removes it only when
    it is destroyed: a process ending by ``os._exit`` (``mt serve --workers``' processes) or
    holding it in a thread at exit (``mt serve``) left ~22 MB in /tmp a graph, each start."""
    if not torch_private.compile_usable():
        pytest.skip("--compile is off on this torch (internals/torch_private.py)")
    CompiledDecoding(for_decoding(one_layer_toy, "fp32"), one_layer_toy).warm_up("fp32")
    entries = sorted((cache_dir() / "compiled").glob("*/sha256.json"))  # (complete ones)
    assert entries
    ends_at_once = ("import os, sys; from transformer_mt.internals import torch_private; "
                    "run = torch_private.aoti_runner(sys.argv[1]); os._exit(0)")
    subprocess.run([sys.executable, "-c", ends_at_once, str(entries[0].parent / PACKAGE)],
                   env={**os.environ, "TMPDIR": str(tmp_path)}, check=True, timeout=120)
    assert list(tmp_path.iterdir()) == []
