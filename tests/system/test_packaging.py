"""The package as ``pip install`` gives it (a wheel), not as the source tree has it: every file
of ``transformer_mt/`` that git tracks is in the wheel. The page's ``look.js`` was not (the
package data named its files one by one): an installed server, the container image's too,
answered ``GET /look.js`` with a 500 and its page could not look inside a translation."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.system


def test_the_wheel_holds_every_file_of_the_package(tmp_path):
    tracked = subprocess.run(["git", "ls-files", "transformer_mt"], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout: the package's files are not known")
    # built from the tracked files alone, as from a fresh clone: a tree's build/ and
    # *.egg-info/ (an editable install's) would lend the wheel files from earlier builds
    source = tmp_path / "source"
    for name in [*tracked, "pyproject.toml", "README.md"]:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, source / name)
    # setuptools from the environment (the dev extras have it): no download, ~1 s
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(tmp_path), str(source)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("transformer_mt-*.whl")
    with zipfile.ZipFile(wheel) as built:
        packed = {name for name in built.namelist() if name.startswith("transformer_mt/")}
    assert sorted(set(tracked) - packed) == []  # what an installed package would lack


def test_the_python_make_builds_with_is_not_the_one_the_scripts_run(tmp_path):
    """``make setup PYTHON=python3.13`` makes the venv from that Python; the scripts' PYTHON
    (the interpreter they run: the venv's unless set) stays unset in make's recipes, where
    ``make test PYTHON=python3.13`` once had the tests' ``scripts/gpu_check.sh`` run a bare
    python3.13 without torch."""
    if shutil.which("make") is None:
        pytest.skip("no make here")
    elsewhere = str(tmp_path / "bin" / "python3.13")
    plan = subprocess.run(["make", "-n", "setup", f"PYTHON={elsewhere}",
                           f"VENV={tmp_path / 'venv'}"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout
    assert f"{elsewhere} -m venv" in plan
    probe = subprocess.run(["make", "-s", "-f", "Makefile", "-f", "-", "probe",
                            f"PYTHON={elsewhere}"], input='probe:\n\t@echo "[$${PYTHON-unset}]"\n',
                           cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert probe.strip() == "[unset]"
