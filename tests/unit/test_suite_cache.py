"""The test suite's own private cache (tests/conftest.py): a session killed outright leaves
its cache (~0.4 GB of compiled graphs) behind, and the next session removes it, never a cache
that a session still running uses."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import CACHE_PREFIX, sweep_stale_caches


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

    sweep_stale_caches(tmp_path)

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
