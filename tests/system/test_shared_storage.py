"""Servers that agree (#58): with ``--shared-storage redis://...`` the rate limits and the
translation cache live in a real Redis (Debian's redis-server, started here), so two server
processes count one limit per client and read one cache; Redis going away costs no request
(each process falls back to its own memory, and goes back to Redis when it returns)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.helpers import (
    REPO,
    assert_servers_agree,
    free_port,
    local_client,
    post,
    run_cli,
    start_server,
)

pytest.importorskip("fastapi")
pytest.importorskip("redis")

from transformer_mt.serve import storage
from transformer_mt.serve.app import create_app
from transformer_mt.serve.settings import ServeOptions

SENTENCE = "Zwei Hunde spielen im Park."


def _start_redis(port: int, directory) -> subprocess.Popen:
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI runs the shared-storage tests: install Debian's redis-server "
                        "(.ci/run does)")
        pytest.skip("Debian's redis-server is not installed (apt install redis-server)")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(directory)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    pytest.fail("redis-server did not start")


@pytest.fixture
def redis_server(tmp_path):
    port = free_port()
    proc = _start_redis(port, tmp_path)
    yield port, proc
    proc.kill()
    proc.wait()


def _app(translator, port: int, model_id: str = "tiny", **options):
    return create_app(translator, ServeOptions(shared_storage=f"redis://127.0.0.1:{port}/0",
                                               model_id=model_id, **options))


def _hits(client) -> float:
    text = client.get("/metrics").text
    return float(next(line.split()[1] for line in text.splitlines()
                      if line.startswith("mt_cache_hits_total")))


def test_two_servers_count_one_limit_and_read_one_cache(translator, redis_server):
    port, _ = redis_server
    with local_client(_app(translator, port, rate_limit=3)) as one, \
            local_client(_app(translator, port, rate_limit=3)) as two, \
            local_client(_app(translator, port, model_id="another")) as other:
        first = one.post("/v1/translate", json={"text": SENTENCE})
        assert first.status_code == 200 and _hits(one) == 0
        again = two.post("/v1/translate", json={"text": SENTENCE})  # decoded by the first
        assert again.json() == first.json() and _hits(two) == 1
        other.post("/v1/translate", json={"text": SENTENCE})
        assert _hits(other) == 0  # another model never reads this one's translations
        # the same client: three requests a minute over both servers, the fourth refused
        assert two.post("/v1/translate", json={"text": "Ein Hund."}).status_code == 200
        refused = one.post("/v1/translate", json={"text": "Ein Hund."})
        assert refused.status_code == 429 and "a minute" in refused.json()["error"]


def test_redis_going_away_costs_no_request(translator, redis_server, tmp_path, monkeypatch,
                                           caplog):
    port, proc = redis_server
    monkeypatch.setattr(storage, "RETRY_S", 0.5)
    with local_client(_app(translator, port, rate_limit=100)) as client:
        assert client.post("/v1/translate", json={"text": SENTENCE}).status_code == 200
        proc.kill()
        proc.wait()
        start = time.monotonic()
        with caplog.at_level("WARNING", logger="transformer_mt.serve"):
            for _ in range(3):
                answer = client.post("/v1/translate", json={"text": SENTENCE})
                assert answer.status_code == 200
        assert time.monotonic() - start < 5  # no hang: one short timeout, then memory
        assert sum("is not answering" in r.message for r in caplog.records) == 1
        assert _hits(client) == 2  # decoded again once, then from this process's memory
        back = _start_redis(port, tmp_path)  # Redis returns, empty: used again
        try:
            time.sleep(0.6)
            client.post("/v1/translate", json={"text": "Ein Mann liest."})
            import redis

            assert redis.Redis(port=port).dbsize() > 0
        finally:
            back.kill()
            back.wait()


def test_a_redis_that_cannot_be_reached_is_refused_in_one_line(trained_run):
    result = run_cli(["serve", "--checkpoint", str(trained_run[0] / "best.pt"),
                      "--shared-storage", f"redis://127.0.0.1:{free_port()}/0"])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "cannot reach Redis there" in result.stderr.strip().splitlines()[-1]


def test_two_server_processes_agree(trained_run, redis_server):
    """Two ``mt serve`` processes on one Redis, as behind a load balancer."""
    port, _ = redis_server
    shared = ["--shared-storage", f"redis://127.0.0.1:{port}/0", "--rate-limit", "4"]
    servers = [start_server(trained_run[0] / "best.pt", *shared) for _ in range(2)]
    try:
        (_, a), (_, b) = servers
        assert_servers_agree(a, b, SENTENCE, limit=4)
    finally:
        for proc, _ in servers:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
        return [int(p) for p in f.read().split()]


def _running(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie nobody reaped here has ended)."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def test_workers_share_the_port_and_with_redis_one_limit(trained_run, redis_server, tmp_path):
    """``--workers 2``: two processes, each with its model, on one port; a client's limit
    holds over both; the keys, read from a pipe once, hold in both; SIGTERM stops them all
    (exit 0, no process left)."""
    port, _ = redis_server
    keys = tmp_path / "keys"  # as --api-key-file <(pass show mt) gives them
    os.mkfifo(keys)

    def fill() -> None:
        for _ in range(3):  # start_server may start the server again on another port
            with contextlib.suppress(BrokenPipeError), open(keys, "w") as f:
                f.write("key-1\n")
            time.sleep(0.5)  # the reader closes first (else the next open finds it still there)

    threading.Thread(target=fill, daemon=True).start()
    proc, url = start_server(trained_run[0] / "best.pt", "--workers", "2", "--rate-limit", "6",
                             "--shared-storage", f"redis://127.0.0.1:{port}/0",
                             "--api-key-file", str(keys))
    try:
        workers = _children(proc.pid)  # the two, and multiprocessing's resource tracker
        assert len(workers) == 3
        statuses = [post(url + "/translate", {"q": f"Ein Hund {i}.", "source": "de",
                                              "target": "en", "api_key": "key-1"})[0]
                    for i in range(8)]  # a connection each: the kernel picks the worker
        assert statuses == [200] * 6 + [429] * 2
        assert [post(url + "/translate", {"q": "Ein Hund.", "source": "de", "target": "en"})[0]
                for _ in range(2)] == [403, 403]  # no key, in either worker
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    # each stops as a server does, or, still loading its model, at once
    assert err.count("INFO stopped") + err.count("stopped while starting") == 2, err
    assert "with 2 worker processes" in err
    deadline = time.monotonic() + 10
    while _running(workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(workers)  # none left behind


def test_workers_stopped_while_loading_stop_cleanly(trained_run):
    """SIGTERM before the workers are ready (they are still loading the model): each one
    stops at once, the server says so for each and exits 0."""
    proc = subprocess.Popen([sys.executable, "-m", "transformer_mt", "serve", "--checkpoint",
                             str(trained_run[0] / "best.pt"), "--device", "cpu", "--port",
                             str(free_port()), "--workers", "2"], cwd=REPO,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert proc.stderr is not None
    assert "with 2 worker processes" in proc.stderr.readline()  # the workers just started
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "worker mt-serve-0 stopped while starting" in err
    assert "worker mt-serve-1 stopped while starting" in err


def test_workers_whose_first_process_is_killed_stop(trained_run):
    """``kill -9`` of the first process (the OOM killer's choice, a supervisor's): its workers
    stop as on SIGTERM, not serve on with the old model on a port no restart could bind."""
    proc, url = start_server(trained_run[0] / "best.pt", "--workers", "2")
    workers = _children(proc.pid)
    proc.kill()
    _, err = proc.communicate(timeout=60)  # (the workers hold its stderr until they end)
    # (each stops as a server does, or, still loading its model when /health first answered,
    # at once)
    assert err.count("the server's first process is gone: this worker stops") == 2, err
    deadline = time.monotonic() + 10
    while _running(workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(workers)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/health", timeout=2)
