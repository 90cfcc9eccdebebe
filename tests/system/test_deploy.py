"""The deployment docs/serve.md shows, run as it ships: deploy/build.sh's image and
deploy/compose.yaml's two servers on one Redis, in containers (podman, podman-compose). A
translation made by one server is the other's cache hit; a client over the rate limit is
refused by either; the page and the files it loads are served as the package has them.

Building the image takes minutes, so this runs only when asked: ``MT_CONTAINER_TESTS=1``, as
root, with podman, runc and debootstrap installed (``apt install podman runc debootstrap``)
and podman-compose (``pip install podman-compose``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import REPO, assert_servers_agree, free_port

pytestmark = pytest.mark.skipif(
    os.environ.get("MT_CONTAINER_TESTS") != "1" or shutil.which("podman") is None,
    reason="builds a container image (minutes): set MT_CONTAINER_TESTS=1 where podman runs")

IMAGE = "localhost/transformer-mt:test"
SENTENCE = "Ein Mann fährt mit dem Fahrrad."
# what podman needs on VMs like these (hybrid cgroups, limits it may not set): runc, cgroupfs
CONTAINERS_CONF = '[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\n' \
    'runtime = "runc"\n'


def _up(url: str, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if json.loads(r.read())["status"] == "ok":
                    return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not come up")
        time.sleep(1)


def _serves_the_page(url: str) -> None:
    """The page and each file it loads, as the package has them (an installed package lacked
    look.js: GET /look.js was a 500)."""
    from transformer_mt.serve.routes import PAGE_FILES

    for name in ("", *PAGE_FILES):
        with urllib.request.urlopen(f"{url}/{name}", timeout=30) as r:
            served = r.read().decode()
        assert served == (REPO / "transformer_mt/serve" / (name or "page.html")).read_text(
            encoding="utf-8"), name


def test_two_containers_share_one_limit_and_one_cache(trained_run, tmp_path):
    conf = tmp_path / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    env = {**os.environ, "CONTAINERS_CONF": str(conf), "TAG": IMAGE}
    subprocess.run(["bash", "deploy/build.sh"], cwd=REPO, env=env, check=True, timeout=1800)
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(trained_run[0] / "best.pt", model / "model.pt")
    for path in (tmp_path, model, model / "model.pt"):  # the image's user reads it
        path.chmod(0o755 if path.is_dir() else 0o644)
    ports = [free_port(), free_port()]
    env.update(IMAGE=IMAGE, MODEL_DIR=str(model), MT1_PORT=str(ports[0]),
               MT2_PORT=str(ports[1]), RATE_LIMIT="4", ALLOWED_HOST="127.0.0.1")
    compose = [sys.executable, "-m", "podman_compose", "-f", "deploy/compose.yaml", "-p",
               f"mt{ports[0]}"]
    subprocess.run([*compose, "up", "-d"], cwd=REPO, env=env, check=True, timeout=300,
                   capture_output=True)
    try:
        a, b = (f"http://127.0.0.1:{p}" for p in ports)
        deadline = time.monotonic() + 180
        _up(a, deadline)
        _up(b, deadline)
        _serves_the_page(a)
        assert_servers_agree(a, b, SENTENCE, limit=4)
        for service in ("mt1", "mt2"):  # mt serve (pid 1) started again with the image's tcmalloc
            maps = subprocess.run([*compose, "exec", service, "cat", "/proc/1/maps"], cwd=REPO,
                                  env=env, capture_output=True, text=True, timeout=60)
            assert "libtcmalloc_minimal" in maps.stdout, maps.stderr[-500:]
    finally:
        logs = subprocess.run([*compose, "logs"], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=120)
        subprocess.run([*compose, "down"], cwd=REPO, env=env, capture_output=True, timeout=300)
        Path(tmp_path / "compose.log").write_text(logs.stdout + logs.stderr)
