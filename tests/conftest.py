"""Shared fixtures: where Multi30k lies, a private cache, a tiny config."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def _data_dir() -> Path | None:
    for candidate in (os.environ.get("MT_DATA_DIR"), REPO.parent / "shared/data/multi30k"):
        if candidate and (Path(candidate) / "train.de.gz").is_file():
            return Path(candidate).resolve()
    return None


DATA_DIR = _data_dir()
needs_data = pytest.mark.skipif(DATA_DIR is None, reason="Multi30k not found (set MT_DATA_DIR)")


def pytest_configure(config: pytest.Config) -> None:
    """The whole session (subprocesses too) uses a private cache and the local Multi30k copy."""
    import tempfile

    os.environ["MT_CACHE_DIR"] = tempfile.mkdtemp(prefix="mt-test-cache-")
    if DATA_DIR is not None:
        os.environ["MT_DATA_DIR"] = str(DATA_DIR)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


TINY_OVERRIDES = [
    "data.max_pairs=300", "data.valid_max_pairs=20", "data.min_freq=1",
    "model.d_model=32", "model.n_heads=2", "model.n_encoder_layers=1",
    "model.n_decoder_layers=1", "model.d_ff=64", "model.max_positions=128",
    "train.max_tokens=600", "train.max_steps=6", "train.warmup_steps=2", "train.log_every=1",
    "train.eval_every=3", "train.save_every=3", "train.precision=fp32", "train.threads=1",
    "decode.beam_size=1", "decode.batch_size=16",
]


def tiny_train_args(run_dir, *overrides: str) -> list[str]:
    """``mt train`` arguments for a tiny run of config/quickstart.yaml in ``run_dir``."""
    sets = [arg for o in [*TINY_OVERRIDES, *overrides] for arg in ("--set", o)]
    return ["train", "--config", "config/quickstart.yaml", "--run-dir", str(run_dir), *sets]


def run_cli(args: list[str], cwd: Path | None = None, timeout: int = 300,
            env: dict[str, str] | None = None, stdin: str | bytes | None = None):
    """Run ``python -m transformer_mt ARGS`` in a subprocess; returns the CompletedProcess."""
    import subprocess

    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    text = not isinstance(stdin, bytes)
    return subprocess.run([sys.executable, "-m", "transformer_mt", *args], cwd=cwd or REPO,
                          capture_output=True, text=text, timeout=timeout, env=full_env,
                          input=stdin)


@pytest.fixture(scope="session")
def toy_model():
    """A tiny model trained to reverse sequences (tests/toy.py), shared by the whole run."""
    from tests.toy import train_toy_model

    return train_toy_model()


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """One tiny trained run, shared by the tests that only read it: (run_dir, its result)."""
    if DATA_DIR is None:
        pytest.skip("Multi30k not found (set MT_DATA_DIR)")
    run_dir = tmp_path_factory.mktemp("tiny") / "run"
    result = run_cli(tiny_train_args(run_dir))
    assert result.returncode == 0, result.stderr
    return run_dir, result
