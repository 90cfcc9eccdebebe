"""Shared fixtures: a private cache, the tiny trained run, the toy model.

The tiny run learns the toy German -> English corpus checked in under tests/data/toy-de-en, so
the suite needs no download; the few tests that read Multi30k itself (its download and cache,
the benchmarks, docs/usage.md's back-translation recipe) are marked ``needs_data`` and skipped
where it is missing.

The tests come in three tiers, a folder each (Sockeye's): ``unit/`` (one module's behaviour
on toy objects, in-process), ``integration/`` (the package end to end in-process: the tiny
trained run, the CLI, the app through a test client) and ``system/`` (real processes and servers
started, killed or timed, a browser, Redis, the benchmarks' smoke runs, ``--compile``'s graphs
compiled in processes of their own), whose tests are marked ``system``. ``make test`` (CI) runs
them all; ``make test-fast`` (for the edit-test loop) the first two.

Both share the modules out to one process a core (pytest-xdist, ``--dist loadfile``: a module's
fixtures stay in one process); the session's fixtures are made once for all of them
(:func:`made_once`), and all of them one cache (its entries are locked while made: a graph
that two modules compile, compiles once).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import torch

from tests.helpers import DATA_DIR, REPO, run_cli, tiny_train_args
from transformer_mt.fileio import file_lock, own_folder

T = TypeVar("T")
MADE_CACHE = pytest.StashKey[str]()  # the private cache this process made (and removes)


def pytest_configure(config: pytest.Config) -> None:
    """The whole session (its workers and subprocesses too) uses one private cache and the
    local Multi30k copy. (pytest-xdist's workers start with the controller's environment.)
    Their temporary files (``TMPDIR``: a server's downloads, inductor's kernels) go into that
    cache too, which the session removes (:func:`pytest_unconfigure`): a worker ends without
    freeing what its fixtures' threads still hold."""
    if "PYTEST_XDIST_WORKER" not in os.environ or "MT_TEST_CACHE_DIR" not in os.environ:
        # (those of sessions killed outright, ~0.4 GB each of compiled graphs, go first)
        os.environ["MT_TEST_CACHE_DIR"] = str(own_folder(CACHE_PREFIX))
        config.stash[MADE_CACHE] = os.environ["MT_TEST_CACHE_DIR"]
        os.environ["TMPDIR"] = os.path.join(os.environ["MT_TEST_CACHE_DIR"], "tmp")
        os.mkdir(os.environ["TMPDIR"])
        # inductor's cache too: this process read the temporary folder above already (tempfile
        # keeps it), so what it compiled itself went to /tmp's, where later runs found it (its
        # precompiled headers still do: inductor places them when it is imported)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.environ["TMPDIR"], "inductor")
        write_bytecode()
    os.environ["MT_CACHE_DIR"] = os.environ["MT_TEST_CACHE_DIR"]
    if DATA_DIR is not None:
        os.environ["MT_DATA_DIR"] = str(DATA_DIR)
    sys.dont_write_bytecode = False  # (the test modules' rewritten bytecode: see below)
    share_cores()


def write_bytecode() -> None:
    """The suite keeps Python's bytecode caches (``__pycache__``, ignored by git) even where
    ``PYTHONDONTWRITEBYTECODE`` is set: else each of its ~200 Python processes compiles the
    package's sources again (~0.2 s a process that imports most of it), and each worker of
    every later run assertion-rewrites every test module again (collecting took 9.6 s against
    6.1). The package's are compiled here once, before the workers and their processes start."""
    import compileall

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    for folder in ("transformer_mt", "bench"):
        compileall.compile_dir(REPO / folder, quiet=1)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The private cache goes with the session that made it (its workers are gone by now)."""
    made = config.stash.get(MADE_CACHE, None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)


CACHE_PREFIX = "mt-test-cache-"  # then the pid of the session that made it


def share_cores() -> None:
    """Each of pytest-xdist's workers (and the processes it starts) takes its share of the
    cores, not all of them: 16 workers of 16 threads each on a 16-core GPU machine ran the
    suite slower than 12 workers did (session 28), and 2 x 2 threads on CI's 2 cores ~10 %
    slower than 2 x 1. A thread count the caller set (``OMP_NUM_THREADS``) is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 1 or "OMP_NUM_THREADS" in os.environ:
        return
    threads = max(1, len(os.sched_getaffinity(0)) // workers)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


# the modules that take longest (``--durations``: compiling graphs, the benchmarks' runs), the
# bf16 graphs' after the benchmarks' first module: started beside the fp32 ones, their compiler
# waited, its core idle, while the other made inductor's precompiled headers and the graph both
# share (their fixture 90 s, 61 s after; the cores ~88 % busy, ~93 % after); and those that
# read what one of them compiled, last
FIRST = ("test_compiled.py", "test_bench.py", "test_compiled_bf16.py", "test_bench_training.py")
LAST = ("test_compiled_cli.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tier is the folder: the tests under ``tests/system`` are marked ``system``. The
    longest modules run first, each on a worker of its own, so that the workers end together
    (``make test`` hands the modules out in this order: ``--no-loadscope-reorder``); those
    that read what they compiled, last."""
    for item in items:
        if item.path.parent.name == "system":
            item.add_marker(pytest.mark.system)
    items.sort(key=lambda item: _rank(item.path.name))


def _rank(name: str) -> int:
    if name in FIRST:
        return FIRST.index(name)
    if name in LAST:
        return len(FIRST) + 1 + LAST.index(name)
    return len(FIRST)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def toy_model(tmp_path_factory):
    """A tiny model trained to reverse sequences (tests/toy.py), shared by the whole run."""
    from tests.toy import train_toy_model

    return made_once(tmp_path_factory, "toy-model", lambda directory: train_toy_model())


@pytest.fixture(scope="session")
def one_layer_toy(tmp_path_factory):
    """The reversal toy with one layer each side: the model whose graphs the tests of
    ``--compile`` compile (the fast tier's few, the system tier's all), made once for all."""
    from tests.toy import train_toy_model

    return made_once(tmp_path_factory, "one-layer-toy",
                     lambda directory: train_toy_model(300, layers=1))


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """One tiny trained run on the toy corpus, shared by the tests that only read it:
    (run_dir, its result)."""

    def train(directory: Path) -> tuple[Path, subprocess.CompletedProcess]:
        result = run_cli(tiny_train_args(directory / "run"))
        assert result.returncode == 0, result.stderr
        return directory / "run", result

    return made_once(tmp_path_factory, "tiny", train)


@pytest.fixture(scope="module")
def translator(trained_run):
    """The tiny run's best checkpoint as a :class:`Translator` on the CPU, one a module (a
    module's tests may patch it: the next module gets its own)."""
    from transformer_mt.translate import Translator

    return Translator.load(trained_run[0] / "best.pt", "cpu")


@pytest.fixture(scope="session")
def subword_run(tmp_path_factory):
    """A tiny run on the toy corpus with SentencePiece (400 pieces), trained for a few steps:
    its n-best holds texts in several segmentations."""

    def train(directory: Path) -> Path:
        result = run_cli(tiny_train_args(
            directory / "run", "data.tokenizer=sentencepiece", "data.vocab_size=400",
            "model.d_model=64", "train.max_steps=40", "train.warmup_steps=10",
            "train.max_tokens=1000"))
        assert result.returncode == 0, result.stderr
        return directory / "run"

    return made_once(tmp_path_factory, "subword", train)


CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, driven by Playwright (the page's tests, subtitles read as
    a video's text track); CI must have it (.ci/run installs it), elsewhere it is skipped."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("CI runs the browser tests: install Debian's chromium (.ci/run does)")
        pytest.skip("Debian's chromium is not installed (apt install chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str,
              make: Callable[[Path], T]) -> T:
    """``make(directory)``, once for the whole run: ``make test`` runs the modules in two
    processes (pytest-xdist's workers, one per core), and the second to ask waits for the
    first's and reads it back."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make(tmp_path_factory.mktemp(name))
    directory = tmp_path_factory.getbasetemp().parent / name  # the run's, shared by workers
    with file_lock(directory.with_suffix(".lock")):
        made = directory / "made.pt"
        if made.is_file():
            return torch.load(made, weights_only=False)  # written by a worker of this run
        directory.mkdir(exist_ok=True)
        value = make(directory)
        torch.save(value, made)
        return value
