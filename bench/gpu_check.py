"""The first thing to run on a new GPU machine: does transformer_mt work there, and how fast.

    scripts/gpu_check.sh [--out gpu_check.json] [--smoke]

In a few minutes, each part a record of the JSON it prints (and writes to ``--out``):

1. ``environment``: GPU, driver, torch build and its CUDA, bf16, CPU flags; why PyTorch cannot
   use GPUs that ``nvidia-smi`` lists, where that happens.
2. ``attention_kernels``: which of PyTorch's attention kernels (flash, memory-efficient, cuDNN,
   math) the model's own calls (padding masks, causal decoder) can run on, forward and backward;
   ``ok`` when one of those training and decoding use (``used``: not cuDNN's) is fused.
3. ``host_syncs``: how often N training steps make the host wait for the GPU (must be 0: the
   loop reads nothing back between its log steps).
4. ``loss_parity``: the fused, chunked training loss against ``F.cross_entropy`` on the full
   logits, fp32 and bf16, on the device.
5. ``ddp_resume``: a one-process ``torchrun`` training (NCCL on a GPU, gloo on the CPU), stopped,
   and resumed.
6. ``speed``: tokens/s, MFU (against the measured matmul peak and the data sheet's), peak memory
   and warm-up (compilation) seconds of the training step, for the d256 model at 4k tokens and
   a d512 model (the former ``config/multi30k.yaml``'s) at 8k, without and with ``train.compile``.

Without a GPU, the GPU-only parts (2, 3, 6) say so and are skipped (``--smoke`` runs 6 at a tiny
size on the CPU); 4 and 5 run on the CPU. The exit code is 1 if any part failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import check_out, machine, matmul_flops, nominal_flops, write_out
from bench.train_speed import SIZES, SMOKE_SIZES, measure_training
from transformer_mt.config.file import config_from_dict
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.device import cuda_problem
from transformer_mt.precision import CUDA_ATTENTION_KERNELS

REPO = Path(__file__).resolve().parents[1]
NO_GPU = "skipped: no GPU found"
MULTI30K = ["model.d_model=512", "model.n_heads=8", "model.d_ff=2048", "model.dropout=0.3",
            "model.tie_embeddings=true", "data.min_freq=2"]
TINY_RUN = ["data.max_pairs=300", "data.valid_max_pairs=20", "data.min_freq=1",
            "model.d_model=32", "model.n_heads=2", "model.n_encoder_layers=1",
            "model.n_decoder_layers=1", "model.d_ff=64", "train.max_tokens=600",
            "train.warmup_steps=2", "train.log_every=2", "train.eval_every=4",
            "train.save_every=4", "decode.beam_size=1"]


def environment(device: torch.device) -> dict:
    info: dict = {"status": "ok", **machine(device), "torch_cuda": torch.version.cuda,
                  "cuda_available": torch.cuda.is_available()}
    if device.type == "cuda":
        info["bf16"] = torch.cuda.is_bf16_supported(including_emulation=False)
        info["capability"] = ".".join(map(str, torch.cuda.get_device_capability(device)))
        info["driver"] = _nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader")
        info["gpus"] = torch.cuda.device_count()
    problem = cuda_problem()
    if problem:
        info["status"], info["problem"] = "fail", problem
    return info


def _nvidia_smi(*args: str) -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def _tiny_model(device: torch.device, d_model: int = 256):
    from transformer_mt.build import build_model
    from transformer_mt.data.vocab import SPECIALS, Vocab
    from transformer_mt.training.loss import ModelLoss

    cfg = config_from_dict({}, [f"model.d_model={d_model}", "model.n_heads=4",
                                "model.n_encoder_layers=2", "model.n_decoder_layers=2",
                                f"model.d_ff={4 * d_model}", "model.dropout=0.0"])
    vocab = Vocab([*SPECIALS, *(f"w{i}" for i in range(996))])
    torch.manual_seed(0)
    return ModelLoss(build_model(cfg, vocab, vocab).to(device))


def _batch(device: torch.device, b: int = 16, s: int = 23, t: int = 19):
    """A padded batch: random ids, sentences of different lengths."""
    from transformer_mt.data.batch import source_mask

    gen = torch.Generator().manual_seed(1)
    src = torch.randint(4, 1000, (b, s), generator=gen)
    tgt = torch.randint(4, 1000, (b, t + 1), generator=gen)
    for i in range(b):
        src[i, s - i % 7:] = PAD_ID
        tgt[i, t + 1 - i % 5:] = PAD_ID
    src, tgt = src.to(device), tgt.to(device)
    return src, tgt[:, :-1], source_mask(src), tgt[:, 1:]


def attention_kernels(device: torch.device) -> dict:
    if device.type != "cuda":
        return {"status": NO_GPU}
    from torch.nn.attention import SDPBackend, sdpa_kernel

    loss = _tiny_model(device)
    batch = _batch(device)
    kernels = {}
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH):
        try:
            with sdpa_kernel([backend]), torch.autocast("cuda", torch.bfloat16):
                loss(*batch, 0.1).backward()
            kernels[backend.name.lower()] = "ok"
        except RuntimeError as exc:
            kernels[backend.name.lower()] = str(exc).strip().splitlines()[0][:160]
    # cuDNN's may run them, but training and decoding leave it out (precision.py)
    used = {b.name.lower() for b in CUDA_ATTENTION_KERNELS} - {"math"}
    fast = [k for k, v in kernels.items() if v == "ok" and k in used]
    return {"status": "ok" if fast else "fail", "kernels": kernels, "used": sorted(used),
            "note": "the model's calls reach a fused kernel" if fast else
            "only the math kernel runs the model's calls: attention is slow"}


def host_syncs(device: torch.device, steps: int) -> dict:
    if device.type != "cuda":
        return {"status": NO_GPU}
    from transformer_mt.training.trainer import Trainer

    cfg = config_from_dict({}, [*SIZES, "train.max_tokens=4096", "train.device=cuda"])
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, tmp, progress=False)
        run = trainer.setup()
        plan = trainer.epoch_plan(run, 0)
        for step in plan[:2]:  # first steps: lazy initialisation
            trainer.train_step(run, step)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for step in plan[2:2 + steps]:
                    trainer.train_step(run, step)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
    syncs = [str(w.message).splitlines()[0] for w in caught
             if "synchroniz" in str(w.message).lower()]
    return {"status": "ok" if not syncs else "fail", "steps": steps, "syncs": len(syncs),
            "first": syncs[:3]}


def loss_parity(device: torch.device) -> dict:
    from transformer_mt.precision import AUTOCAST_DTYPES

    loss = _tiny_model(device)
    src, tgt_in, mask, tgt_out = _batch(device)
    out: dict = {"status": "ok", "device": str(device)}
    precisions = ["fp32"]
    if device.type == "cuda" or "avx512_bf16" in machine()["cpu_flags"]:
        precisions.append("bf16")
    for precision in precisions:
        dtype = AUTOCAST_DTYPES.get(precision)
        with torch.no_grad(), torch.autocast(device.type, dtype=dtype or torch.float32,
                                             enabled=dtype is not None):
            ours = float(loss(src, tgt_in, mask, tgt_out, 0.1))
            logits = loss.model(src, tgt_in, mask).float()
            ref = float(F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(),
                                        ignore_index=PAD_ID, label_smoothing=0.1,
                                        reduction="sum"))
        rel = abs(ours - ref) / abs(ref)
        limit = 1e-5 if precision == "fp32" else 1e-2
        out[precision] = {"ours": ours, "cross_entropy": ref, "relative_difference": rel}
        if rel > limit:
            out["status"] = "fail"
    return out


def ddp_resume(device: torch.device) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        sets = [a for o in [*TINY_RUN, f"train.device={device.type}"] for a in ("--set", o)]
        base = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc_per_node=1", "-m", "transformer_mt", "--", "--quiet", "train", "--config",
                "config/quickstart.yaml", "--run-dir", str(run_dir), *sets]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        times, errors = [], []
        for max_steps, start in ((4, "new"), (8, "resume")):
            begin = time.perf_counter()
            proc = subprocess.run([*base, "--set", f"train.max_steps={max_steps}",
                                   "--start", start], cwd=REPO, env=env, capture_output=True,
                                  text=True, timeout=600)
            times.append(round(time.perf_counter() - begin, 1))
            if proc.returncode != 0:
                errors.append(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip()
                              else f"exit {proc.returncode}")
        step = None
        if not errors:
            step = torch.load(run_dir / "last.pt", weights_only=True)["progress"]["step"]
    backend = "nccl" if device.type == "cuda" else "gloo (no GPU found)"
    ok = not errors and step == 8
    return {"status": "ok" if ok else "fail", "backend": backend, "seconds": times,
            "resumed_to_step": step, "errors": errors}


def speed(device: torch.device, smoke: bool, steps: int) -> dict:
    if device.type != "cuda" and not smoke:
        return {"status": NO_GPU}
    models = {"d256_4k": [*SIZES, "train.max_tokens=4096"],
              "multi30k_8k": [*MULTI30K, "train.max_tokens=8192"]}
    if smoke:
        models = {"smoke": [*SMOKE_SIZES, "train.max_tokens=600"]}
    out: dict = {"status": "ok", "runs": {}}
    peaks: dict[str, float] = {}
    for name, sets in models.items():
        for compiled in (False,) if smoke else (False, True):  # compiling takes a minute
            sets_now = [*sets, f"train.device={device.type}", f"train.compile={compiled}"]
            try:
                # on a GPU, shapes seen before they are timed (each new one costs a step
                # ~0.4 s there: the warm-up, reported as warmup_s)
                r = measure_training(sets_now, steps, 2 if smoke else 5,
                                     seen_shapes=device.type == "cuda")
            except Exception as exc:  # a failing configuration is a finding, not the end
                out["runs"][f"{name}{'_compiled' if compiled else ''}"] = {
                    "error": str(exc).strip().splitlines()[0][:200]}
                out["status"] = "fail"
                continue
            precision = r["precision"]
            if precision not in peaks:
                peaks[precision] = matmul_flops(precision, device,
                                                **({"n": 256, "seconds": 0.1} if smoke else {}))
            nominal = nominal_flops(device, precision)
            out["runs"][f"{name}{'_compiled' if compiled else ''}"] = {
                "tokens_per_s": round(r["tokens_per_s"]), "precision": precision,
                "mfu": round(r["model_flops_per_s"] / peaks[precision], 4),
                "mfu_nominal": None if nominal is None else round(
                    r["model_flops_per_s"] / nominal, 4),
                "peak_memory_mib": round(r["peak_memory_mib"]),
                "warmup_s": round(r["warmup_s"], 1), "padding": round(r["padding"], 3)}
    out["peak_matmul_flops_per_s"] = peaks
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the JSON here (after each part: "
                        "a run cut short keeps the parts it finished, the rest in parts_to_come)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per speed run")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes; the speed part runs on the CPU too (for the tests)")
    args = parser.parse_args(argv)
    check_out(parser, args.out)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    steps = 3 if args.smoke else args.steps
    report: dict = {"check": "gpu_check", "date": time.strftime("%Y-%m-%d"),
                    "device": str(device)}
    parts = [("environment", lambda: environment(device)),
             ("attention_kernels", lambda: attention_kernels(device)),
             ("host_syncs", lambda: host_syncs(device, 20)),
             ("loss_parity", lambda: loss_parity(device)),
             ("ddp_resume", lambda: ddp_resume(device)),
             ("speed", lambda: speed(device, args.smoke, steps))]
    for i, (name, part) in enumerate(parts):
        begin = time.perf_counter()
        try:
            report[name] = part()
        except Exception as exc:  # one broken part must not hide the others' results
            report[name] = {"status": "fail", "error": f"{type(exc).__name__}: {exc}"[:300]}
        report[name]["seconds"] = round(time.perf_counter() - begin, 1)
        print(f"gpu_check: {name}: {report[name]['status']}", file=sys.stderr, flush=True)
        write_out(args.out, report, [later for later, _ in parts[i + 1:]])
    print(json.dumps(report, indent=2, default=str))
    failed = [name for name, _ in parts if report[name]["status"] == "fail"]
    if failed:
        print(f"gpu_check: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
