"""``--workers N``: a call's batches decoded by N processes translate as one process does
(``translate/processes.py``), and a process that dies costs nothing but its speed."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.helpers import REPO, TOY_DE_EN, in_the_foreground, run_cli
from tests.toy import toy_pairs, train_toy_model
from transformer_mt.config import DecodeConfig
from transformer_mt.errors import MTError
from transformer_mt.translate import processes
from transformer_mt.translate.engines import TorchEngine


@pytest.fixture(scope="module")
def sources() -> list[list[int]]:
    """Toy sources of 2 to 12 symbols (ids ending in <eos>), in no order."""
    return [p[0].tolist() for p in toy_pairs(90, torch.Generator().manual_seed(5), 2, 12)]


@pytest.fixture(scope="module")
def imperfect():
    """An undertrained toy model: its outputs differ from sentence to sentence in length and
    are not all right, so that a batch decoded elsewhere could show."""
    return train_toy_model(steps=40, seed=1)


@pytest.fixture(autouse=True)
def _threads():
    """This test process's thread count, as it was (an engine's call sets its own meanwhile)."""
    threads = torch.get_num_threads()
    yield
    assert torch.get_num_threads() == threads  # the engine put it back
    torch.set_num_threads(threads)


def _tokens_and_scores(hyps):
    return [[(h.tokens, h.score) for h in sentence] for sentence in hyps]


@pytest.mark.parametrize("beam, nbest", [(1, 1), (3, 2)])
def test_processes_translate_as_one_does(imperfect, sources, beam, nbest):
    cfg = DecodeConfig(beam_size=beam, batch_size=4)
    alone = TorchEngine([imperfect], torch.device("cpu")).decode(sources, cfg, nbest)
    shared = TorchEngine([imperfect], torch.device("cpu"), workers=3)
    for _ in range(3):  # the first call starts the processes; later ones find them waiting
        got = shared.decode(sources, cfg, nbest)
        assert [[h.tokens for h in s] for s in got] == [[h.tokens for h in s] for s in alone]
        for mine, theirs in zip(_tokens_and_scores(got), _tokens_and_scores(alone),
                                strict=True):
            assert [s for _, s in mine] == pytest.approx([s for _, s in theirs], abs=1e-4)
    assert shared._pool is not None and shared._pool.decoded_elsewhere > 0
    shared._pool.close()


def test_a_process_that_dies_leaves_its_batches_to_this_one(imperfect, sources, caplog):
    cfg = DecodeConfig(beam_size=2, batch_size=3)
    alone = TorchEngine([imperfect], torch.device("cpu")).decode(sources, cfg)
    shared = TorchEngine([imperfect], torch.device("cpu"), workers=2)
    shared.decode(sources, cfg)
    pool = shared._pool
    assert pool is not None and not pool.broken
    (process,) = pool._procs
    os.kill(process.pid, signal.SIGKILL)
    process.join(timeout=10)
    with caplog.at_level(logging.WARNING, logger="transformer_mt.translate.processes"):
        for _ in range(2):  # the failure found, then decoding here alone
            got = shared.decode(sources, cfg)
            assert [s[0].tokens for s in got] == [s[0].tokens for s in alone]
    assert pool.broken
    assert "decoding in this process alone from now on" in caplog.text


def test_spawned_processes_translate_as_one_does(imperfect, sources, monkeypatch):
    """macOS's and Windows' way: processes spawned (they import torch and get the models
    through shared memory), this one decoding meanwhile."""
    monkeypatch.setattr(processes, "START", "spawn")
    cfg = DecodeConfig(beam_size=2, batch_size=2)
    alone = TorchEngine([imperfect], torch.device("cpu")).decode(sources, cfg)
    shared = TorchEngine([imperfect], torch.device("cpu"), workers=2)
    deadline = time.monotonic() + 120
    while shared._pool is None or not shared._pool.decoded_elsewhere:
        assert time.monotonic() < deadline, "the spawned process decoded nothing in 2 minutes"
        got = shared.decode(sources, cfg)
        assert [s[0].tokens for s in got] == [s[0].tokens for s in alone]
    shared._pool.close()


def test_settings_that_need_this_process_decode_here(imperfect, sources):
    """A forced beginning (and a caller's stop) decode in this process: no pool starts."""
    from transformer_mt.decode.forcing import Forcing

    cfg = DecodeConfig(batch_size=4)
    forcing = Forcing.of([[5]] * len(sources))
    shared = TorchEngine([imperfect], torch.device("cpu"), workers=2)
    got = shared.decode(sources, cfg, forcing=forcing)
    assert shared._pool is None
    assert all(s[0].tokens[:1] == [5] for s in got)


def test_workers_are_for_the_cpu(imperfect):
    with pytest.raises(MTError, match="--workers 2 shares the CPU's cores"):
        TorchEngine([imperfect], torch.device("cuda"), workers=2)


def test_the_commands_translate_the_same_with_workers(trained_run, tmp_path):
    run_dir, _ = trained_run
    source = TOY_DE_EN / "test.de"
    outputs = {}
    for workers in (1, 2):
        out = tmp_path / f"translate-{workers}.en"
        result = run_cli(["translate", "--checkpoint", str(run_dir / "best.pt"), "--input",
                          str(source), "--output", str(out), "--beam-size", "3",
                          "--workers", str(workers)])
        assert result.returncode == 0, result.stderr
        outputs[workers] = out.read_text(encoding="utf-8")
    assert outputs[1] == outputs[2]
    assert len(outputs[2].splitlines()) == len(source.read_text(encoding="utf-8").splitlines())
    out = tmp_path / "evaluate-2.en"
    result = run_cli(["evaluate", "--checkpoint", str(run_dir / "best.pt"), "--src",
                      str(source), "--ref", str(TOY_DE_EN / "test.en"), "--beam-size", "3",
                      "--output", str(out), "--workers", "2"])
    assert result.returncode == 0, result.stderr
    assert out.read_text(encoding="utf-8") == outputs[1]
    bad = run_cli(["translate", "--checkpoint", str(run_dir / "best.pt"), "--workers", "0",
                   "x"])
    assert bad.returncode == 2
    assert "--workers: '0' is not a number of processes (1 or more)" in bad.stderr
    assert "Traceback" not in bad.stderr



def test_ctrl_c_stops_every_process_and_writes_nothing(trained_run, tmp_path):
    """Ctrl-C while the processes decode: exit 130 with one line, no output file, and none of
    the processes left behind."""
    run_dir, _ = trained_run
    source = tmp_path / "many.de"
    source.write_text((TOY_DE_EN / "test.de").read_text(encoding="utf-8") * 300,
                      encoding="utf-8")
    out = tmp_path / "many.en"
    proc = subprocess.Popen(
        [sys.executable, "-m", "transformer_mt", "translate", "--checkpoint",
         str(run_dir / "best.pt"), "--input", str(source), "--output", str(out),
         "--beam-size", "5", "--workers", "2"], cwd=REPO, stderr=subprocess.PIPE, text=True,
        preexec_fn=in_the_foreground)
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:  # the processes have started: decoding is under way
        lines.append(line)
        if "decoding the batches in 2 processes" in line:
            break
    children = [int(pid) for pid in subprocess.run(
        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()]
    assert children, "".join(lines)
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130, rest[-3000:]  # (what it said instead)
    assert rest.strip().splitlines()[-1] == "mt translate: interrupted"
    assert "Traceback" not in rest
    assert not out.exists()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children):
        assert time.monotonic() < deadline, f"left behind: {children}"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
