"""mt serve as a user runs it: a real process on a free port. SIGTERM lets the requests in
flight finish and exits 0. (The page in a real browser: tests/system/test_page.py.)"""

from __future__ import annotations

import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import post, run_cli, start_server

pytest.importorskip("fastapi")


def test_sigterm_finishes_what_is_in_flight_and_exits_0(trained_run):
    proc, url = start_server(trained_run[0] / "best.pt", "--grace", "60")
    sentences = [f"Ein Hund läuft {i} mal über die große grüne Wiese." for i in range(96)]
    answer: list = []
    sender = threading.Thread(target=lambda: answer.append(
        post(url + "/v1/translate", {"text": sentences, "beam": 5})))
    sender.start()
    time.sleep(0.5)  # the request is in flight (it takes seconds)
    proc.send_signal(signal.SIGTERM)
    sender.join(120)
    _, err = proc.communicate(timeout=120)
    assert answer and answer[0][0] == 200, (answer, err)
    assert len(answer[0][1]["translations"]) == 96
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    with pytest.raises(urllib.error.URLError):  # and it no longer listens
        urllib.request.urlopen(url + "/health", timeout=2)


def test_sigterm_while_compiling_stops_the_compilers_and_exits_0(trained_run, tmp_path):
    """SIGTERM during a first ``--compile`` (minutes) ends the process within seconds, its
    compiler processes with it (they ran on for a minute, and the server after them)."""
    import os
    import subprocess
    import sys

    from tests.helpers import REPO, free_port
    from transformer_mt.internals import torch_private

    if not torch_private.compile_usable():  # nothing would compile: the server would serve
        pytest.skip("--compile is off on this torch (internals/torch_private.py)")
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "transformer_mt", "serve", "--checkpoint",
                             str(trained_run[0] / "best.pt"), "--device", "cpu", "--compile",
                             "--port", str(free_port())], cwd=REPO, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, MT_CACHE_DIR=str(cache),
                                                PYTHONUNBUFFERED="1"))
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:  # until a graph is being compiled (or, failing that, it serves)
        said.append(line)
        if "compiling the" in line or " serving " in line:
            break
    time.sleep(2)  # export and the C++ compiler at work
    building = [pid for pid in _children(proc.pid)  # the compiling processes
                if "transformer_mt.decode.compilers" in " ".join(_command(pid))]
    assert building, said
    groups = {os.getpgid(pid) for pid in building}  # each, and the C++ compilers it ran
    model_files = [Path(_command(pid)[-4]) for pid in building]  # the model each compiles
    assert all(path.is_file() for path in model_files), model_files
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "SIGTERM while starting" in err
    time.sleep(0.5)
    assert not _in_groups(groups) and not any(path.exists() for path in model_files)
    assert not [p for p in (cache / "compiled").iterdir() if p.is_dir()]  # nothing half-built


def _processes():
    """(pid, its /proc entry) of each process (Linux)."""
    return [(int(e.name), e) for e in Path("/proc").iterdir() if e.name.isdigit()]


def _children(parent: int) -> list[int]:
    """The live processes ``parent`` started."""
    found = []
    for pid, entry in _processes():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == parent:
            found.append(pid)
    return found


def _command(pid: int) -> list[str]:
    """A process's command line, its arguments."""
    return Path(f"/proc/{pid}/cmdline").read_text(errors="replace").split("\0")[:-1]


def _in_groups(groups: set[int]) -> list[int]:
    """The live processes (not zombies) of these process groups."""
    found = []
    for pid, entry in _processes():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) in groups:
            found.append(pid)
    return found


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_that_is_taken_is_one_line_before_the_model_loads(trained_run, workers):
    """Another server on the port: ``mt serve`` says so in one line and exits 2 as it starts,
    not after loading and warming the model up (uvicorn's "ERROR: [Errno 98]" and exit 3)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(["serve", "--checkpoint", str(trained_run[0] / "best.pt"), "--port",
                          str(port), "--workers", workers], fresh_process=True, timeout=120)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().splitlines() == [
            f"mt serve: error: cannot listen on 127.0.0.1:{port}: Address already in use"]
