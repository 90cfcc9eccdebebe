"""A process's folder of temporary files (fileio.own_folder): the test suite's own private
cache (tests/conftest.py), ``--compile``'s model file, ``mt serve --workers``' downloads. A
process killed outright leaves its folder (the suite's: ~0.4 GB of compiled graphs) behind,
and the next process to make one of the kind removes it, never one that a process still
running uses."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from tests.conftest import CACHE_PREFIX
from transformer_mt.fileio import own_folder, sweep_ended


def test_a_killed_sessions_cache_goes_and_a_running_ones_stays(tmp_path):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # its pid: a session that no longer runs
    stale = tmp_path / f"{CACHE_PREFIX}{ended.pid}-k1ll3d"
    (stale / "compiled" / "graph").mkdir(parents=True)
    (stale / "compiled" / "graph" / "step.pt2").write_bytes(b"\0" * 1024)
    running = tmp_path / f"{CACHE_PREFIX}{os.getpid()}-l1ve"  # this session's kind of name
    (running / "tmp").mkdir(parents=True)
    unnamed = tmp_path / f"{CACHE_PREFIX}0ld4bcd"  # no pid in its name: whose it is is unknown
    unnamed.mkdir()
    other = tmp_path / "not-ours-123-4"
    other.mkdir()

    sweep_ended(tmp_path, CACHE_PREFIX)

    assert not stale.exists()
    assert (running / "tmp").is_dir() and unnamed.is_dir() and other.is_dir()


def test_this_sessions_cache_names_its_pid():
    """The cache this session made (or its controller, for a pytest-xdist worker) carries the
    pid that the sweep checks, and that process is running."""
    name = os.path.basename(os.environ["MT_TEST_CACHE_DIR"])
    assert name.startswith(CACHE_PREFIX)
    pid = int(name[len(CACHE_PREFIX):].split("-")[0])
    assert pid in (os.getpid(), os.getppid()) or os.path.exists(f"/proc/{pid}")
    os.kill(pid, 0)  # raises if it is not running


def test_a_processs_folder_names_its_pid_and_sweeps_those_of_ended_ones(tmp_path, monkeypatch):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    left = tmp_path / f"mt-compile-{ended.pid}-abc"  # a compile killed outright
    left.mkdir()
    (left / "model.pt").write_bytes(b"\0" * 1024)
    served = tmp_path / f"mt-serve-files-{ended.pid}-abc"  # (another kind: not this one's)
    served.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = own_folder("mt-compile-")
    assert made.is_dir() and made.parent == tmp_path
    assert made.name.startswith(f"mt-compile-{os.getpid()}-")
    assert not left.exists() and served.is_dir()
    again = own_folder("mt-compile-")  # this process's own stays
    assert made.is_dir() and again != made
