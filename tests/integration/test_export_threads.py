"""The CTranslate2 export's threads: as many as torch has where told, else the faster of
all the cores a batch and one a batch with as many batches at once (its probe)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tests.toy import SYMBOLS, VOCAB, save_toy_checkpoint
from transformer_mt.config import ModelConfig
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.model.transformer import Transformer

pytest.importorskip("ctranslate2")

from transformer_mt.formats.ctranslate2 import export_ctranslate2
from transformer_mt.translate.exported import fastest

PROBE_THREADS = """import os, sys, torch
torch.set_num_threads(int(sys.argv[2]))
from transformer_mt.translate.exported import load_exported
engine = load_exported(sys.argv[1], "cpu").engine
before = len(os.listdir("/proc/self/task"))
engine.translate_tokens([sys.argv[3].split()] * 16, [40] * 16, 5, 16)
print(len(os.listdir("/proc/self/task")) - before)"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_the_engine_decodes_with_as_many_threads_as_torch_has(tmp_path):
    """The exported model decodes with torch's thread count (a server worker's share of the
    cores), not CTranslate2's default of every core in every process: the threads its first
    translation starts are its OpenMP helpers, one fewer than its threads."""
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, d_ff=64,
                      dropout=0.0, max_positions=64)
    model = Transformer(cfg, VOCAB, VOCAB, PAD_ID).eval()
    out = export_ctranslate2(save_toy_checkpoint(model, tmp_path / "m.pt"), tmp_path / "m")
    sentence = " ".join(SYMBOLS[:8])
    started = {n: int(subprocess.run([sys.executable, "-c", PROBE_THREADS, str(out), str(n),
                                      sentence], check=True, capture_output=True, text=True,
                                     timeout=120, env=os.environ | {"OMP_NUM_THREADS": str(n)}
                                     ).stdout.split()[-1]) for n in (1, 2)}
    assert started == {1: 0, 2: 1}


def test_the_faster_way_is_taken():
    """The first way unless another decodes the probe clearly faster; each engine made only
    once the one before is timed; a lone way made, not timed."""
    made: list[int] = []

    def make(n: int) -> str:
        made.append(n)
        return f"engine at {n}"

    assert fastest([2, 1], make, {"engine at 2": 3.0, "engine at 1": 1.0}.get) == (
        1, "engine at 1")
    assert fastest([2, 1], make, {"engine at 2": 1.0, "engine at 1": 0.9}.get) == (
        2, "engine at 2")  # within the margin: the first
    assert fastest([2], make, {}.get) == (2, "engine at 2") and made == [2, 1, 2, 1, 2]
