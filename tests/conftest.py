"""Shared fixtures: a private cache, the tiny trained run, the toy model.

The tiny run learns the toy German -> English corpus checked in under tests/data/toy-de-en, so
the suite needs no download; the few tests that read Multi30k itself (its download and cache,
the benchmarks, README's back-translation recipe) are marked ``needs_data`` and skipped where it
is missing.

The tests come in two tiers. ``make test`` (CI) runs them all; ``make test-fast`` (about a
minute, for the edit-test loop) leaves out those marked ``system``: the modules that start real
processes and servers, kill them, time them or run the benchmarks (test_reliability: SIGKILL and
resume; test_distributed: torchrun; test_serve_process: a server and Chromium;
test_serve_robustness: slow clients and grace periods; test_bench: every benchmark's smoke run).
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.helpers import DATA_DIR, run_cli, tiny_train_args


def pytest_configure(config: pytest.Config) -> None:
    """The whole session (subprocesses too) uses a private cache and the local Multi30k copy."""
    import tempfile

    os.environ["MT_CACHE_DIR"] = tempfile.mkdtemp(prefix="mt-test-cache-")
    if DATA_DIR is not None:
        os.environ["MT_DATA_DIR"] = str(DATA_DIR)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def toy_model():
    """A tiny model trained to reverse sequences (tests/toy.py), shared by the whole run."""
    from tests.toy import train_toy_model

    return train_toy_model()


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """One tiny trained run on the toy corpus, shared by the tests that only read it:
    (run_dir, its result)."""
    run_dir = tmp_path_factory.mktemp("tiny") / "run"
    result = run_cli(tiny_train_args(run_dir))
    assert result.returncode == 0, result.stderr
    return run_dir, result
