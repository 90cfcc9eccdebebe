"""What the tool replaces or deletes is only what it wrote (manifest.py): a run directory or
an export that holds the user's own files is refused in one line, and those files stay."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.helpers import run_cli, write_config, write_corpus


def _snapshot(directory) -> dict[str, str]:
    """Every file under ``directory`` with the SHA-256 of its bytes."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture()
def toy(tmp_path):
    """A folder with the user's own ``config.yaml`` (a toy run's) and corpus."""
    data = write_corpus(tmp_path / "corpus", "pair")
    write_config(tmp_path / "config.yaml", data, train={"max_steps": 3, "eval_every": 3})
    return tmp_path


def _error(result) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_training_in_the_folder_of_its_config_leaves_the_config_as_it_was(toy):
    """``mt train --config config.yaml --run-dir .`` once replaced the user's config (comments
    gone, --set values written in) with the resolved one."""
    before = _snapshot(toy)
    line = _error(run_cli(["train", "--config", "config.yaml", "--run-dir", ".", "--set",
                           "train.lr=0.001"], cwd=toy))
    assert "holds config.yaml, not written by a run" in line and "--run-dir" in line
    assert _snapshot(toy) == before  # nothing written, nothing replaced


@pytest.mark.parametrize("names", [("train.log",), ("config.yaml", "src_vocab.json")])
def test_start_overwrite_deletes_only_what_a_run_wrote(toy, names):
    """``--start overwrite`` in a folder that never held a run deleted any file with a run
    file's name; a ``src_vocab.json`` no run wrote was replaced without a word."""
    folder = toy / "mine"
    folder.mkdir()
    for name in names:
        (folder / name).write_text("the user's own\n")
    before = _snapshot(folder)
    line = _error(run_cli(["train", "--config", "config.yaml", "--run-dir", "mine",
                           "--start", "overwrite"], cwd=toy))
    assert f"holds {', '.join(names)}, not written by a run" in line
    assert _snapshot(folder) == before


def test_a_runs_own_files_are_its_own_to_replace_and_an_older_run_is_taken_as_one(toy):
    run = ["train", "--config", "config.yaml", "--run-dir", "run"]
    assert run_cli(run, cwd=toy).returncode == 0
    manifest = json.loads((toy / "run" / "manifest.json").read_text())
    assert manifest["kind"] == "run" and {"config.yaml", "last.pt", "train.log"} <= set(
        manifest["files"])
    # resumed from its own config.yaml (the run's file, listed): allowed
    result = run_cli(["train", "--config", "run/config.yaml", "--run-dir", "run", "--set",
                      "train.max_steps=5"], cwd=toy)
    assert result.returncode == 0, result.stderr
    # a run of a version without manifests: its last.pt makes it a run
    (toy / "run" / "manifest.json").unlink()
    result = run_cli([*run, "--set", "train.max_steps=6"], cwd=toy)
    assert result.returncode == 0, result.stderr
    assert (toy / "run" / "manifest.json").is_file()
    assert run_cli([*run, "--start", "overwrite"], cwd=toy).returncode == 0


def test_an_export_whose_model_bin_is_the_users_folder_is_not_replaced(toy):
    """The export check looked at names only: ``--overwrite`` replaced a directory whose
    ``model.bin`` was a folder of the user's files."""
    assert run_cli(["train", "--config", "config.yaml", "--run-dir", "run"],
                   cwd=toy).returncode == 0
    out = toy / "ct2"
    (out / "model.bin").mkdir(parents=True)
    (out / "model.bin" / "thesis.tex").write_text("years of work\n")
    (out / "transformer_mt.json").write_text("{}\n")
    before = _snapshot(out)
    line = _error(run_cli(["export", "run/best.pt", "ct2", "--overwrite"], cwd=toy))
    assert "holds files that are not an export" in line
    assert _snapshot(out) == before


@pytest.mark.parametrize("target", [".", ".."])
def test_exporting_into_the_current_directory_is_one_line(toy, target):
    """``mt export CKPT .`` was a traceback (``PosixPath('.') has an empty name``), also in an
    empty current directory."""
    empty = toy / "a" / "empty"
    empty.mkdir(parents=True)
    line = _error(run_cli(["export", str(toy / "config.yaml"), target], cwd=empty))
    assert "is the current directory" in line
    assert not any(empty.iterdir())
