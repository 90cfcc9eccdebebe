"""Training throughput: our model and trainer vs a torch.nn.Transformer tutorial-style baseline.

Both train the same sizes (d_model 256, 3+3 layers, 4 heads, FFN 1024 by default) on the same
Multi30k batches' worth of tokens, in one run, each in its own subprocess so that peak memory is
measured separately. Prints one JSON record:

    python bench/train_speed.py [--quick] [--steps N] [--precision auto|fp32|bf16]
                                [--device cpu|cuda] [--without row-buckets cpu-dropout]

(a) ``ours``: the Trainer's own step (token-budget batches, length bucketing, fused AdamW, our
    loss, bf16 autocast where the hardware has it), as ``mt train`` runs it (with its
    allocator: tcmalloc where installed; each side's ``allocator`` is recorded).
(b) ``baseline``: ``torch.nn.Transformer`` fed batches of a fixed number of sentences in random
    order, padded to the longest (the PyTorch translation tutorial's way), fp32,
    ``F.cross_entropy`` with label smoothing, Adam; the system's malloc, as a script runs.

``--without NAME``: also ours without that fast path of CPU training, and ours' ratio to it
(``<name>_ratio``): ``row-buckets`` (``training/row_buckets.py``, bf16: every new shape a new
oneDNN kernel), ``cpu-dropout`` (``training/cpu_dropout.py``: torch's own dropout masks).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    as_mt_starts,
    environment,
    machine,
    matmul_flops,
    nominal_flops,
    peak_matmul_size,
    peak_memory_mib,
    start_as_mt,
    synchronize,
)
from transformer_mt.__main__ import allocator_in_use
from transformer_mt.config.file import config_from_dict
from transformer_mt.data.vocab import PAD_ID
from transformer_mt.device import pick_device
from transformer_mt.model.embedding import PositionalEncoding

FAST_PATHS = ["row-buckets", "cpu-dropout"]  # --without: CPU training's, each turned off alone
SIZES = ["model.d_model=256", "model.n_heads=4", "model.n_encoder_layers=3",
         "model.n_decoder_layers=3", "model.d_ff=1024", "model.dropout=0.1"]
# --smoke: the same code paths at a size that runs in seconds (the test suite runs it)
SMOKE_SIZES = ["model.d_model=32", "model.n_heads=2", "model.n_encoder_layers=1",
               "model.n_decoder_layers=1", "model.d_ff=64", "model.dropout=0.1",
               "data.max_pairs=300", "data.valid_max_pairs=20", "data.min_freq=1"]


def sizes(args) -> list[str]:
    return SMOKE_SIZES if args.smoke else SIZES


def model_flops_per_token_pair(cfg, src_tokens: int, tgt_tokens: int, vocab: int,
                               src_len: float, tgt_len: float) -> float:
    """Training FLOPs (3x forward) of the matmuls and attention for the given real tokens."""
    d, f = cfg.d_model, cfg.d_ff
    enc_layer = 4 * d * d + 2 * d * f  # QKV + out, FFN
    dec_layer = 8 * d * d + 2 * d * f  # self QKV + out, cross Q + KV + out, FFN
    forward = 2 * (cfg.n_encoder_layers * enc_layer * src_tokens
                   + cfg.n_decoder_layers * dec_layer * tgt_tokens + d * vocab * tgt_tokens)
    forward += 4 * d * (cfg.n_encoder_layers * src_tokens * src_len
                        + cfg.n_decoder_layers * tgt_tokens * (tgt_len / 2 + src_len))
    return 3 * forward


def run_ours(args) -> dict:
    from transformer_mt.training import distributed

    if args.off == "row-buckets":  # as before training/row_buckets.py: oneDNN's kernels rebuilt
        import os

        os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = "8"
        distributed.bucket_rows = lambda loss: 0
    elif args.off == "cpu-dropout":  # torch's own dropout masks
        distributed.draw_bits_with_numpy = lambda model: 0
    overrides = [*sizes(args), f"train.precision={args.precision}",
                 f"train.max_tokens={600 if args.smoke else 4096}",
                 f"train.device={args.device}",
                 "train.threads=" + str(torch.get_num_threads()),
                 f"train.compile={str(args.compile).lower()}"]
    return measure_training(overrides, args.steps, args.warmup, args.seen_shapes)


def measure_training(overrides: list[str], steps: int, warmup: int,
                     seen_shapes: bool = False) -> dict:
    """Time ``steps`` of the Trainer's own step (after ``warmup`` untimed ones) for the default
    config with ``overrides``: target tokens/s, padding, model FLOP/s, peak memory, and the
    seconds the warm-up steps took (with ``train.compile``, the compilation). ``seen_shapes``:
    the warm-up is the timed steps themselves, run once before (a GPU prepares kernels for
    each new shape, ~0.4 s a step on an H100: unseen shapes time that, not the training)."""
    from transformer_mt.training.trainer import Trainer

    cfg = config_from_dict({}, overrides)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, tmp, progress=False)
        run = trainer.setup()
        plan = trainer.epoch_plan(run, 0)
        plan = plan * (1 + (warmup + steps) // max(len(plan), 1))
        if seen_shapes:
            plan, warmup = plan[:steps] * 2, steps
        else:
            plan = plan[: warmup + steps]
        data = run.epoch_data
        tgt_tokens = src_tokens = padded = 0
        device = trainer.device
        synchronize(device)
        begin = start = time.perf_counter()
        for i, step in enumerate(plan):
            if i == warmup:
                synchronize(device)
                start = time.perf_counter()
            trainer.train_step(run, step)
            if i >= warmup:
                for idx in step:  # every piece of the step (ranks, accumulation)
                    if len(idx) == 0:
                        continue
                    lengths = data.lengths[idx]  # (n, 2): source + <eos>, target + <eos>
                    src_tokens += int(lengths[:, 0].sum())
                    tgt_tokens += int(lengths[:, 1].sum())
                    padded += len(idx) * int(lengths[:, 0].max() + lengths[:, 1].max())
        synchronize(device)
        elapsed = time.perf_counter() - start
        real = src_tokens + tgt_tokens
        flops = model_flops_per_token_pair(cfg.model, src_tokens, tgt_tokens,
                                           len(run.tgt_vocab), src_tokens / len(data),
                                           tgt_tokens / len(data))
        return {"tokens_per_s": tgt_tokens / elapsed, "tgt_tokens_per_step": tgt_tokens /
                steps, "padding": 1 - real / padded, "precision": trainer.precision,
                "model_flops_per_s": flops / elapsed, "dtype": trainer.precision,
                "warmup_s": start - begin, "peak_memory_mib": peak_memory_mib(device)}


class TutorialModel(nn.Module):
    """The PyTorch translation tutorial's model: nn.Transformer between embeddings."""

    def __init__(self, src_vocab: int, tgt_vocab: int, cfg) -> None:
        super().__init__()
        self.src_emb = nn.Embedding(src_vocab, cfg.d_model)
        self.tgt_emb = nn.Embedding(tgt_vocab, cfg.d_model)
        self.pos = PositionalEncoding(cfg.d_model, 512, cfg.dropout)
        self.transformer = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_encoder_layers,
                                          cfg.n_decoder_layers, cfg.d_ff, cfg.dropout,
                                          batch_first=True)
        self.generator = nn.Linear(cfg.d_model, tgt_vocab)
        self.scale = math.sqrt(cfg.d_model)

    def forward(self, src, tgt_in):
        t = tgt_in.size(1)
        causal = self.transformer.generate_square_subsequent_mask(t, device=tgt_in.device)
        src_pad, tgt_pad = src == PAD_ID, tgt_in == PAD_ID
        out = self.transformer(self.pos(self.src_emb(src) * self.scale),
                               self.pos(self.tgt_emb(tgt_in) * self.scale), tgt_mask=causal,
                               src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                               memory_key_padding_mask=src_pad)
        return self.generator(out)


def run_baseline(args) -> dict:
    from transformer_mt.data.batch import collate
    from transformer_mt.data.prepare import prepare_data

    cfg = config_from_dict({}, sizes(args))
    prepared = prepare_data(cfg)
    sv, tv, data = prepared.src_vocab, prepared.tgt_vocab, prepared.train.corpora[0].pairs
    torch.manual_seed(0)
    device = pick_device(args.device)
    model = TutorialModel(len(sv), len(tv), cfg.model).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(0)).tolist()
    n = args.sentences
    tgt_tokens = real = padded = 0
    batches, warmup = list(range(args.warmup + args.steps)), args.warmup
    if args.seen_shapes:  # as for ours: the timed batches, once untimed first
        batches, warmup = list(range(args.steps)) * 2, args.steps
    for i, j in enumerate(batches):
        idx = order[j * n:(j + 1) * n]
        batch = collate(data, idx).to(device)
        if i == warmup:
            synchronize(device)
            start = time.perf_counter()
        logits = model(batch.src, batch.tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1),
                               ignore_index=PAD_ID, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= warmup:
            tgt_tokens += batch.n_tokens
            real += batch.n_tokens + batch.n_src_tokens
            padded += batch.src.numel() + batch.tgt_out.numel()
    synchronize(device)
    elapsed = time.perf_counter() - start
    src_tokens = real - tgt_tokens
    flops = model_flops_per_token_pair(cfg.model, src_tokens, tgt_tokens, len(tv),
                                       src_tokens / (n * args.steps),
                                       tgt_tokens / (n * args.steps))
    return {"tokens_per_s": tgt_tokens / elapsed, "tgt_tokens_per_step": tgt_tokens / args.steps,
            "padding": 1 - real / padded, "precision": "fp32", "dtype": "fp32",
            "model_flops_per_s": flops / elapsed, "peak_memory_mib": peak_memory_mib(device)}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (about 2 minutes)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--sentences", type=int, default=0,
                        help="baseline batch size in sentences (default: same tokens as ours)")
    parser.add_argument("--compile", action="store_true",
                        help="ours with train.compile=true (torch.compile; the warm-up steps "
                        "absorb the compilation)")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny model and a few steps: checks that the benchmark works")
    parser.add_argument("--seen-shapes", action="store_true",
                        help="run the timed steps once untimed first, so that every shape is "
                        "seen before it is timed (always on a GPU, which prepares kernels per "
                        "new shape)")
    parser.add_argument("--without", nargs="+", default=[], choices=FAST_PATHS,
                        help="also ours without these fast paths of CPU training, and ours' "
                        "ratio to each")
    parser.add_argument("--variant", choices=["ours", "baseline"], help=argparse.SUPPRESS)
    parser.add_argument("--off", choices=FAST_PATHS, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    args.seen_shapes = args.seen_shapes or args.device.startswith("cuda")
    if args.quick:
        args.steps = min(args.steps, 12)
    if args.smoke:
        args.steps, args.warmup = min(args.steps, 3), min(args.warmup, 1)
    if args.variant:
        if args.variant == "ours":
            start_as_mt()  # as mt train runs: with its allocator (tcmalloc where installed)
        result = run_ours(args) if args.variant == "ours" else run_baseline(args)
        print(json.dumps({**result, "allocator": allocator_in_use()}))
        return

    def child(variant: str, *extra: str) -> dict:
        cmd = [sys.executable, __file__, "--variant", variant, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--precision", args.precision,
               "--device", args.device, *extra, *(["--smoke"] if args.smoke else []),
               *(["--compile"] if args.compile else []),
               *(["--seen-shapes"] if args.seen_shapes else [])]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    with environment(as_mt_starts()):  # as mt train starts: with its allocator
        ours = child("ours")
        without = {name: child("ours", "--off", name) for name in args.without}
    per_sentence = 13.9  # mean target tokens (with <eos>) of a Multi30k training pair
    sentences = args.sentences or max(1, round(ours["tgt_tokens_per_step"] / per_sentence))
    with environment({"LD_PRELOAD": None}):  # as a tutorial's script runs: the system's malloc
        base = child("baseline", "--sentences", str(sentences))
    device = pick_device(args.device)
    peaks = {name: matmul_flops(name, device, **({"n": 256, "seconds": 0.1} if args.smoke
                                                 else {}))
             for name in {ours["dtype"], "fp32"}}
    for r in (ours, base, *without.values()):
        r["peak_matmul_flops_per_s"] = peaks[r["dtype"]]
        r["mfu"] = r["model_flops_per_s"] / peaks[r["dtype"]]  # of the measured matmul peak
        nominal = nominal_flops(device, r["dtype"])
        r["nominal_peak_flops_per_s"] = nominal
        r["mfu_nominal"] = None if nominal is None else r["model_flops_per_s"] / nominal
    record = {"benchmark": "train_speed", "machine": machine(device),
              "peak_matmul_size": 256 if args.smoke else peak_matmul_size(device),
              "device": args.device, "steps": args.steps, "seen_shapes": args.seen_shapes,
              "date": time.strftime("%Y-%m-%d"), "ours": _rounded(ours),
              "baseline": _rounded(base), "baseline_sentences_per_batch": sentences,
              "compile": args.compile,
              "ratio": round(ours["tokens_per_s"] / base["tokens_per_s"], 2)}
    for name, plain in without.items():
        key = name.replace("-", "_")
        record[f"ours_without_{key}"] = _rounded(plain)
        record[f"{key}_ratio"] = round(ours["tokens_per_s"] / plain["tokens_per_s"], 2)
    print(json.dumps(record, indent=2))


def _rounded(result: dict) -> dict:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}


if __name__ == "__main__":
    main()
