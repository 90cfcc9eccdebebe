"""The machine a run meets (#22): missing packages, filesystems without locks, GPUs PyTorch
cannot use, TF32, and the install script that picks the torch build. Each case ends in one
line that names the cause and what to do, before anything is written."""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import portalocker
import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from tests.helpers import REPO, run_cli, tiny_train_args
from transformer_mt import device as device_module
from transformer_mt.errors import ConfigError, MTError
from transformer_mt.fileio import file_lock, run_lock
from transformer_mt.precision import autocast, fp32_matmul, resolve_precision


def _error_line(result) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


# ----------------------------------------------------------------------- missing packages

@pytest.mark.parametrize("package, overrides", [
    ("sacremoses", ()),
    ("spacy", ()),
    ("sentencepiece", ("data.tokenizer=sentencepiece", "data.vocab_size=300")),
    ("sacrebleu", ()),
])
def test_a_missing_package_is_named_before_step_one(tmp_path, monkeypatch, package, overrides):
    """sacremoses was needed only at the first validation, 200 steps in; spaCy's version was
    read outside the error guard (a traceback). Now every package is checked first."""
    monkeypatch.setitem(sys.modules, package, None)  # what an environment without it imports
    run_dir = tmp_path / "run"
    result = run_cli(tiny_train_args(run_dir, *overrides))
    line = _error_line(result)
    assert f"{package} is not installed" in line and "pip install" in line, line
    assert not run_dir.exists()  # nothing written, no step taken


def test_a_package_installed_but_not_importable_is_one_line(trained_run, monkeypatch,
                                                            tmp_path):
    """matplotlib 3.10 beside numpy 1.24 raises ImportError as it is imported (not
    ModuleNotFoundError): one line that says so and what to do, no traceback."""
    fake = tmp_path / "site" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("Matplotlib requires numpy>=1.25; '
                                      'you have 1.24.4")\n', encoding="utf-8")
    for name in [m for m in sys.modules if m.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    result = run_cli(["plot", str(trained_run[0]), "--output", str(tmp_path / "out")])
    line = _error_line(result)
    assert "installed but cannot be imported: Matplotlib requires numpy>=1.25" in line, line
    assert not (tmp_path / "out").exists()


def test_translating_without_sacremoses_says_so(trained_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "sacremoses", None)
    result = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"),
                      "Ein Hund läuft."])
    assert "sacremoses is not installed" in _error_line(result)


# ------------------------------------------------------------ filesystems without locks

def _no_locks(monkeypatch) -> None:
    def flock(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    if hasattr(portalocker.portalocker, "LOCKER"):  # (portalocker 2.10 on)
        monkeypatch.setattr(portalocker.portalocker, "LOCKER", flock)
    monkeypatch.setattr(fcntl, "flock", flock)  # (before: fcntl's, looked up as it locks)


def test_a_filesystem_without_locks_is_not_called_contention(tmp_path, monkeypatch):
    _no_locks(monkeypatch)
    for lock in (run_lock(tmp_path / "run"), file_lock(tmp_path / "cache.lock")):
        with pytest.raises(MTError) as info, lock:
            pass
        message = str(info.value)
        assert "does not support file locks" in message and "in use" not in message
        assert "MT_LOCKS=off" in message
    monkeypatch.setenv("MT_LOCKS", "off")
    with run_lock(tmp_path / "run"), file_lock(tmp_path / "cache.lock"):
        pass  # the user chose to go without


def test_contention_is_still_contention(tmp_path):
    with run_lock(tmp_path), pytest.raises(MTError, match="in use by another mt train"), \
            run_lock(tmp_path):
        pass


def test_training_on_a_filesystem_without_locks_says_what_to_do(tmp_path, monkeypatch):
    _no_locks(monkeypatch)
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))  # the data cache locks first
    result = run_cli(tiny_train_args(tmp_path / "run"))
    assert "does not support file locks" in _error_line(result)


# ----------------------------------------------------------------------- GPUs and TF32

def _fake_nvidia_smi(tmp_path: Path, monkeypatch, cuda: str = "12.4") -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\nif [ \"$1\" = -L ]; then echo 'GPU 0: NVIDIA H100 (UUID: x)';"
                      f" exit 0; fi\necho '| NVIDIA-SMI 550.54   Driver Version: 550.54   "
                      f"CUDA Version: {cuda} |'\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.skipif(torch.cuda.is_available(), reason="PyTorch uses the GPU here")
def test_gpus_pytorch_cannot_use_are_explained(tmp_path, monkeypatch):
    """nvidia-smi lists GPUs, PyTorch sees none: say why (a CPU build; a driver older than the
    build's CUDA) instead of 'no CUDA GPU is visible'."""
    assert device_module.cuda_problem() is None or torch.version.cuda is not None
    _fake_nvidia_smi(tmp_path, monkeypatch, cuda="12.4")
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ConfigError, match=r"is a CPU build; scripts/install_torch\.sh"):
        device_module.pick_device("cuda")
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    with pytest.raises(ConfigError, match=r"built for CUDA 12.8, newer than the CUDA 12.4"):
        device_module.pick_device("cuda")
    assert device_module.pick_device("auto").type == "cpu"  # with a warning, not an error


def test_tf32_only_when_asked(monkeypatch):
    """pick_device turned TF32 on for every CUDA run: cached and uncached decoding then rounded
    differently. Now fp32 is IEEE fp32 unless precision is tf32, and the setting is restored."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    assert device_module.pick_device("cuda") == torch.device("cuda:0")
    assert matmul.fp32_precision == before and not matmul.allow_tf32
    cuda = torch.device("cuda:0")
    with fp32_matmul(cuda, "tf32"):
        assert matmul.fp32_precision == "tf32"
    with fp32_matmul(cuda, "fp32"):
        assert matmul.fp32_precision == "ieee"
    assert matmul.fp32_precision == before
    with pytest.raises(ConfigError, match="precision tf32 needs a CUDA GPU"):
        resolve_precision("tf32", torch.device("cpu"))


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_mixed_precision_on_a_gpu_keeps_attention_off_cudnn():
    """On an H200 (torch 2.11) masked bf16 attention went to cuDNN, which builds an execution
    plan for every new shape: a training step at a new batch shape took 0.4-2 s against 0.06 s,
    30 greedy steps 5.1 s against 0.4 s (docs/gpu.md). The mixed-precision context of every
    training and decoding step now leaves cuDNN's kernels out on a GPU, and only there, and puts
    torch's choice back afterwards."""
    backends = torch.backends.cuda
    before = (backends.cudnn_sdp_enabled(), backends.flash_sdp_enabled(),
              backends.mem_efficient_sdp_enabled(), backends.math_sdp_enabled())
    assert before[0], "torch's default allows cuDNN's attention"
    with autocast(torch.device("cuda:0"), "bf16"):
        assert not backends.cudnn_sdp_enabled()
        assert backends.flash_sdp_enabled() and backends.mem_efficient_sdp_enabled()
        assert backends.math_sdp_enabled()
    with autocast(torch.device("cpu"), "bf16"):
        assert backends.cudnn_sdp_enabled()
    assert (backends.cudnn_sdp_enabled(), backends.flash_sdp_enabled(),
            backends.mem_efficient_sdp_enabled(), backends.math_sdp_enabled()) == before


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_masked_bf16_attention_on_a_gpu_runs_no_cudnn_kernel():
    q = torch.randn(2, 4, 7, 64, device="cuda", dtype=torch.bfloat16)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool, device="cuda")
    mask[1, ..., 5:] = False
    with profile(activities=[ProfilerActivity.CPU]) as prof, autocast(q.device, "bf16"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    ops = {event.name for event in prof.events()}
    assert not any("cudnn" in op for op in ops), ops
    assert any("scaled_dot_product" in op for op in ops), ops


def test_fp16_decoding_runs_in_fp16(toy_model, monkeypatch):
    """decode.precision fp16 (GPUs without bf16) silently decoded in fp32. (fp16 is a GPU's;
    the CPU runs the same autocast here, the device check let through.)"""
    from transformer_mt.config import DecodeConfig
    from transformer_mt.decode import search

    monkeypatch.setattr(search, "resolve_precision", lambda precision, device: precision)
    dtypes = []
    layer = toy_model.decoder.layers[0].ffn.linear1
    hook = layer.register_forward_hook(lambda module, args, out: dtypes.append(out.dtype))
    try:
        for precision in ("fp16", "fp32"):
            search.decode_corpus(toy_model, [[4, 5, 6, 3]], DecodeConfig(beam_size=1,
                                 precision=precision), torch.device("cpu"))
            assert set(dtypes) == {torch.float16 if precision == "fp16" else torch.float32}
            dtypes.clear()
    finally:
        hook.remove()


# ------------------------------------------------------------------- the install script

def _fake_python(tmp_path: Path, torch_cuda: str | None) -> tuple[Path, Path]:
    """A 'python' for scripts/install_torch.sh: torch importable with ``torch_cuda`` (None: not
    installed; "cpu": a CPU build), and pip calls written to a log instead of run."""
    log = tmp_path / "pip.log"
    py = tmp_path / "python"
    if torch_cuda is None:
        probe = "exit 1"
    else:
        probe = f"echo {'None' if torch_cuda == 'cpu' else torch_cuda}"
    py.write_text(f"#!/bin/sh\nif [ \"$1\" = -c ]; then {probe}; fi\n"
                  f"if [ \"$1\" = -m ] && [ \"$2\" = pip ]; then shift 2; echo \"$@\" >> {log}; "
                  "case \"$1\" in download) exit 1;; esac; exit 0; fi\nexit 3\n")
    py.chmod(0o755)
    return py, log


def _install(tmp_path: Path, monkeypatch, torch_cuda: str | None, driver: str | None,
             ) -> tuple[subprocess.CompletedProcess, str]:
    py, log = _fake_python(tmp_path, torch_cuda)
    if driver is None:  # nvidia-smi without a driver to talk to (a machine with a real GPU too)
        smi = tmp_path / "bin" / "nvidia-smi"
        smi.parent.mkdir(exist_ok=True)
        smi.write_text("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate "
                       "with the NVIDIA driver.\"\nexit 9\n")
        smi.chmod(0o755)
        env = dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin")
    else:
        _fake_nvidia_smi(tmp_path, monkeypatch, cuda=driver)
        env = dict(os.environ)
    env.pop("WHEELHOUSE", None)
    result = subprocess.run(["bash", "scripts/install_torch.sh", str(py)], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    return result, log.read_text() if log.exists() else ""


@pytest.mark.parametrize("torch_cuda, driver, expected", [
    (None, "12.8", "torch==2.13.0+cu128 --index-url https://download.pytorch.org/whl/cu128"),
    (None, "12.7", "torch==2.13.0+cu126 --index-url https://download.pytorch.org/whl/cu126"),
    (None, "13.1", "torch==2.13.0+cu130 --index-url https://download.pytorch.org/whl/cu130"),
    ("cpu", "12.9", "torch==2.13.0+cu128 --index-url https://download.pytorch.org/whl/cu128"),
    ("13.0", "12.8", "torch==2.13.0+cu128 --index-url https://download.pytorch.org/whl/cu128"),
    ("12.6", "12.8", ""),  # a CUDA build the driver runs: kept
    ("cpu", None, ""),  # no GPU: the CPU build stays
    (None, None, "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"),
])
def test_install_torch_picks_the_build_the_driver_runs(tmp_path, monkeypatch, torch_cuda,
                                                       driver, expected):
    result, pip_calls = _install(tmp_path, monkeypatch, torch_cuda, driver)
    assert result.returncode == 0, result.stderr
    installs = [line for line in pip_calls.splitlines() if line.startswith("install")]
    if not expected:
        assert installs == [], pip_calls
    else:
        assert len(installs) == 1 and expected in installs[0], pip_calls
        assert "install_torch:" in result.stderr  # says which build, and why


def test_install_torch_refuses_a_driver_too_old_for_every_build(tmp_path, monkeypatch):
    result, pip_calls = _install(tmp_path, monkeypatch, None, "11.4")
    assert result.returncode != 0 and "install" not in pip_calls
    assert "CUDA 11.4" in result.stderr and "update the NVIDIA driver" in result.stderr
