"""Shared fixtures: where Multi30k lies, a private cache, a tiny config.

The tests come in two tiers. ``make test`` (CI) runs them all; ``make test-fast`` (about a
minute, for the edit-test loop) leaves out those marked ``system``: the modules that start real
processes and servers, kill them, time them or run the benchmarks (test_reliability: SIGKILL and
resume; test_distributed: torchrun; test_serve_process: a server and Chromium;
test_serve_robustness: slow clients and grace periods; test_bench: every benchmark's smoke run).
"""

from __future__ import annotations

import os
import subprocess
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
            env: dict[str, str] | None = None, stdin: str | bytes | None = None,
            fresh_process: bool = False) -> subprocess.CompletedProcess:
    """Run ``mt ARGS`` and return a CompletedProcess (exit code, stdout, stderr).

    In this process by default (``cli.main(argv)``, with its own working directory, variables,
    standard input and captured output: what a user sees, at a fraction of a start-up's cost);
    ``fresh_process=True`` starts ``python -m transformer_mt`` for the tests that need one.
    """
    text = not isinstance(stdin, bytes)
    if fresh_process:
        full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        return subprocess.run([sys.executable, "-m", "transformer_mt", *args], cwd=cwd or REPO,
                              capture_output=True, text=text, timeout=timeout, env=full_env,
                              input=stdin)
    return _run_in_process(args, cwd or REPO, env or {}, stdin, text)


def _run_in_process(args: list[str], cwd: Path, env: dict[str, str], stdin: str | bytes | None,
                    text: bool) -> subprocess.CompletedProcess:
    import contextlib
    import io
    import traceback

    from transformer_mt import cli

    data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    out, err = io.StringIO(), io.StringIO()
    saved_env = {key: os.environ.get(key) for key in env}
    saved = (os.getcwd(), sys.stdin, torch.get_num_threads())
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse: --help, --version, usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:  # what a fresh process would print before exiting with 1
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved[0])
        sys.stdin = saved[1]
        torch.set_num_threads(saved[2])
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    stdout, stderr = out.getvalue(), err.getvalue()
    if not text:
        return subprocess.CompletedProcess(args, code, stdout.encode(), stderr.encode())
    return subprocess.CompletedProcess(args, code, stdout, stderr)


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
