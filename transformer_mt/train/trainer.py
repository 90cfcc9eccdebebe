"""The training loop: teacher forcing, label-smoothed cross-entropy, AdamW, warmup, validation,
checkpoints, exact resumption and data-parallel training.

A run directory holds everything about one run::

    config.yaml        the resolved config
    src_vocab.json     tgt_vocab.json
    metrics.jsonl      one JSON record per logged step and per validation
    train.log          the log
    last.pt            full state, for resuming (every train.save_every steps and at the end)
    best.pt            weights with the best val BLEU so far
    step_NNNNNNN.pt    the weights of the last train.keep_last saves (for checkpoint averaging)
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import yaml
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from transformer_mt.config import Config
from transformer_mt.data.loader import (
    build_vocabs,
    collate,
    encode_pairs,
    epoch_steps,
    iterate_batches,
    read_tokenized,
)
from transformer_mt.data.tokenize import detokenize
from transformer_mt.data.vocab import PAD_ID, Vocab
from transformer_mt.device import bound_cpu_kernel_caches, resolve_precision
from transformer_mt.errors import CheckpointError, ConfigError, TrainingError
from transformer_mt.evaluate import score
from transformer_mt.fileio import atomic_write_text
from transformer_mt.logs import PROGRESS_LOGGER, add_file_log, bars_enabled
from transformer_mt.model.transformer import Transformer, build_model
from transformer_mt.train import distributed
from transformer_mt.train.checkpoint import (
    load_checkpoint,
    make_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from transformer_mt.train.loss import label_smoothed_cross_entropy
from transformer_mt.train.schedule import inverse_sqrt_lr
from transformer_mt.translate import decode_corpus

log = logging.getLogger(__name__)
progress_log = logging.getLogger(PROGRESS_LOGGER)


class StopRequestedError(TrainingError):
    """Training stopped on SIGINT/SIGTERM after saving a checkpoint."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


@dataclass
class Progress:
    """Where a run stands; stored in every checkpoint."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # current epoch (0-based)
    epoch_step: int = 0  # steps of the current epoch already done
    best_bleu: float = -1.0
    best_step: int = 0
    bad_evals: int = 0  # validations since the best one (for train.patience)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class MetricsLog:
    """``metrics.jsonl``: appended one record at a time, flushed, so a crash loses nothing.

    With ``tensorboard``, every number is also written as a TensorBoard scalar
    (``<type>/<name>``) under ``RUN_DIR/tensorboard``.
    """

    def __init__(self, path: Path, enabled: bool = True, tensorboard: bool = False) -> None:
        self.path, self.enabled = path, enabled
        self.writer = None
        if enabled and tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise ConfigError("train.tensorboard needs the tensorboard package: "
                                  "pip install 'transformer_mt[tensorboard]'") from exc
            self.writer = SummaryWriter(str(path.parent / "tensorboard"))

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for key, value in record.items():
                if key not in ("step", "type") and isinstance(value, (int, float)):
                    self.writer.add_scalar(f"{record['type']}/{key}", value, record["step"])
            self.writer.flush()

    def truncate_after(self, step: int) -> None:
        """Drop records of steps after ``step`` (written after the checkpoint we resume from)."""
        if not (self.enabled and self.path.exists()):
            return
        kept = [line for line in self.path.read_text(encoding="utf-8").splitlines()
                if line.strip() and _record_step(line) <= step]
        atomic_write_text(self.path, "".join(line + "\n" for line in kept))


def _record_step(line: str) -> int:
    try:
        return int(json.loads(line).get("step", 0))
    except (ValueError, AttributeError):
        return 0


class Trainer:
    """Trains one run; ``Trainer(config, run_dir).train()``."""

    def __init__(self, config: Config, run_dir: str | Path, resume: bool = True,
                 progress: bool | None = None) -> None:
        self.cfg = config
        self.run_dir = Path(run_dir)
        self.resume_allowed = resume
        self.show_bar = bars_enabled() if progress is None else progress
        self.dist, self.device = distributed.init_distributed(config.train.device)
        if self.device.type == "cpu":
            bound_cpu_kernel_caches()
        self.precision = resolve_precision(config.train.precision, self.device)
        self.is_main = self.dist.is_main
        self.progress = Progress()
        self._acc = torch.zeros(2, device=self.device)  # (loss sum, target tokens) since log
        self._stop_signal: int | None = None
        self._file_log: logging.Handler | None = None

    # --------------------------------------------------------------------------------- setup

    def _setup(self) -> dict[str, Any] | None:
        cfg = self.cfg
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        ckpt_path = self.run_dir / "last.pt"
        ckpt = None
        if ckpt_path.exists():
            if not self.resume_allowed:
                raise TrainingError(f"'{self.run_dir}' already holds a run (last.pt); resume it "
                                    "(drop --no-resume) or choose a new --run-dir")
            ckpt = load_checkpoint(ckpt_path)
            if "training_state" not in ckpt:
                raise CheckpointError(f"'{ckpt_path}' holds no training state to resume from")
            self._check_compatible(ckpt)
        if self.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._file_log = add_file_log(self.run_dir / "train.log")
        distributed.barrier(self.dist)
        if self.dist.enabled:
            log.info("process %d of %d (%s)", self.dist.rank, self.dist.world_size, self.device)
        if ckpt is not None:
            log.info("resuming from %s at step %d", ckpt_path, ckpt["progress"]["step"])
        seed_everything(cfg.train.seed)

        # Data: tokenized once (cached on disk), vocabularies from the training side.
        src_raw, tgt_raw, src_tok, tgt_tok = read_tokenized(cfg.data, cfg.data.train_split,
                                                            cfg.data.max_pairs, self.show_bar)
        if ckpt is not None:
            self.src_vocab, self.tgt_vocab = Vocab(ckpt["src_vocab"]), Vocab(ckpt["tgt_vocab"])
        else:
            self.src_vocab, self.tgt_vocab = build_vocabs(cfg.data, src_tok, tgt_tok)
        max_len = min(cfg.data.max_len, cfg.model.max_positions - 2)
        self.train_data = encode_pairs(src_tok, tgt_tok, self.src_vocab, self.tgt_vocab,
                                       src_raw, tgt_raw, max_len)
        v_raw_src, v_raw_tgt, v_src, v_tgt = read_tokenized(cfg.data, cfg.data.valid_split,
                                                            cfg.data.valid_max_pairs)
        self.valid_data = encode_pairs(v_src, v_tgt, self.src_vocab, self.tgt_vocab, v_raw_src,
                                       v_raw_tgt, cfg.model.max_positions - 2)
        if len(self.train_data) == 0:
            raise TrainingError(f"no training pairs left after dropping those longer than "
                                f"data.max_len={cfg.data.max_len}")
        self.tgt_tokens_per_example = [t for _, t in self.train_data.lengths]
        log.info("data: %d training pairs (%d longer than %d tokens dropped), %d validation "
                 "pairs; vocabularies: %d %s, %d %s", len(self.train_data),
                 self.train_data.n_dropped, max_len, len(self.valid_data), len(self.src_vocab),
                 cfg.data.src_lang, len(self.tgt_vocab), cfg.data.tgt_lang)

        # Model and optimizer.
        self.model: Transformer = build_model(cfg.model, len(self.src_vocab),
                                              len(self.tgt_vocab)).to(self.device)
        self.optimizer = self._make_optimizer()
        self.scaler = torch.amp.GradScaler(
            "cuda", enabled=self.precision == "fp16")
        if ckpt is not None:
            self.model.load_state_dict(ckpt["model"])
            state = ckpt["training_state"]
            self.optimizer.load_state_dict(state["optimizer"])
            self.scaler.load_state_dict(state["scaler"])
            self.progress = Progress(**ckpt["progress"])
            set_rng_state(state["rng"])
            # the partial sums of the interrupted log interval, so its record is exact too
            self._acc = state["loss_since_log"].to(self.device)
        log.info("model: %s parameters, d_model=%d, %d+%d layers, %s-norm, device %s, %s",
                 f"{self.model.num_parameters():,}", cfg.model.d_model,
                 cfg.model.n_encoder_layers, cfg.model.n_decoder_layers, cfg.model.norm,
                 self.device, self.precision)
        self.forward_model: torch.nn.Module = self.model
        if cfg.train.compile:
            self.forward_model = torch.compile(self.model, dynamic=True)
        if self.dist.enabled:
            self.forward_model = DistributedDataParallel(
                self.forward_model,
                device_ids=[self.device.index] if self.device.type == "cuda" else None)

        self.metrics = MetricsLog(self.run_dir / "metrics.jsonl", enabled=self.is_main,
                                  tensorboard=cfg.train.tensorboard)
        if ckpt is not None:
            self.metrics.truncate_after(self.progress.step)
        if self.is_main:
            atomic_write_text(self.run_dir / "config.yaml",
                              yaml.safe_dump(cfg.to_dict(), sort_keys=False))
            self.src_vocab.save(self.run_dir / "src_vocab.json")
            self.tgt_vocab.save(self.run_dir / "tgt_vocab.json")
        return ckpt

    def _check_compatible(self, ckpt: dict[str, Any]) -> None:
        """Resuming with another model or data config would silently train something else."""
        stored = ckpt["config"]
        current = self.cfg.to_dict()
        for section in ("model", "data"):
            for key, value in current[section].items():
                if section == "data" and key == "data_dir":
                    continue
                if stored.get(section, {}).get(key) != value:
                    raise CheckpointError(
                        f"the run in '{self.run_dir}' was trained with {section}.{key}="
                        f"{stored.get(section, {}).get(key)!r}, the config now says {value!r}; "
                        "use the run's config or a new --run-dir")

    def _make_optimizer(self) -> torch.optim.Optimizer:
        t = self.cfg.train
        kwargs: dict[str, Any] = dict(lr=t.lr, betas=t.betas, eps=t.adam_eps,
                                      weight_decay=t.weight_decay)
        try:
            return torch.optim.AdamW(self.model.parameters(), fused=True, **kwargs)
        except (RuntimeError, TypeError):  # fused kernels not available for this device
            return torch.optim.AdamW(self.model.parameters(), foreach=True, **kwargs)

    @property
    def _autocast_dtype(self) -> torch.dtype | None:
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        dtype = self._autocast_dtype
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=dtype)

    # ---------------------------------------------------------------------------------- loop

    def train(self) -> Progress:
        """Run (or resume) training until ``max_steps``/``max_epochs`` or early stopping."""
        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not in the main thread
                previous[signum] = signal.signal(signum, self._on_signal)
        try:
            self._setup()
            if self._finished():
                log.info("run in %s is already complete (step %d); nothing to do",
                         self.run_dir, self.progress.step)
                return self.progress
            self._loop()
            return self.progress
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if self._file_log is not None:
                logging.getLogger("transformer_mt").removeHandler(self._file_log)
                self._file_log.close()

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._stop_signal is not None:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        self._stop_signal = signum
        log.warning("received %s: finishing the current step, then saving",
                    signal.Signals(signum).name)

    def _finished(self) -> bool:
        t, p = self.cfg.train, self.progress
        if t.max_steps is not None and p.step >= t.max_steps:
            return True
        if t.max_epochs is not None and p.epoch >= t.max_epochs:
            return True
        return t.patience is not None and p.bad_evals >= t.patience

    def _total_steps(self, steps_per_epoch: int) -> int:
        t = self.cfg.train
        by_epochs = t.max_epochs * steps_per_epoch if t.max_epochs is not None else math.inf
        by_steps = t.max_steps if t.max_steps is not None else math.inf
        return int(min(by_epochs, by_steps))

    def _loop(self) -> None:
        cfg, p = self.cfg, self.progress
        self.model.train()
        lengths = self.train_data.lengths
        per_step = self.dist.world_size * cfg.train.accum_steps
        plan = epoch_steps(lengths, cfg.train.max_tokens, cfg.train.seed, p.epoch, per_step)
        bar = tqdm(total=self._total_steps(len(plan)), initial=p.step, unit="step",
                   desc="train", disable=not (self.show_bar and self.is_main), dynamic_ncols=True)
        acc = self._acc  # (loss sum, target tokens) since the last log record
        last_log = (time.perf_counter(), p.step, 0)
        n_tokens_seen = 0
        grad_norm = torch.zeros((), device=self.device)
        last_eval_step = last_save_step = -1
        try:
            while not self._finished():
                if p.epoch_step >= len(plan):  # epoch done: the next one is planned afresh
                    p.epoch, p.epoch_step = p.epoch + 1, 0
                    if self._finished():
                        break
                    plan = epoch_steps(lengths, cfg.train.max_tokens, cfg.train.seed, p.epoch,
                                       per_step)
                    continue
                step_batches = plan[p.epoch_step]
                grad_norm, n_tok = self._step(step_batches, acc)
                n_tokens_seen += n_tok
                p.step += 1
                p.epoch_step += 1
                bar.update(1)
                if p.step % cfg.train.log_every == 0:
                    last_log = self._log_step(acc, grad_norm, last_log, n_tokens_seen, bar)
                    acc.zero_()
                stop = self._stop_signal is not None
                if self.dist.enabled and p.step % cfg.train.log_every == 0:
                    stop = self._any_rank(stop)
                elif self.dist.enabled:
                    stop = False  # ranks agree on stopping only at log steps
                if p.step % cfg.train.eval_every == 0:
                    self._validate_and_keep_best()
                    last_eval_step = p.step
                if p.step % cfg.train.save_every == 0 or stop:
                    self._save_last()
                    last_save_step = p.step
                if stop:
                    name = signal.Signals(self._stop_signal or signal.SIGTERM).name
                    raise StopRequestedError(
                        f"stopped by {name} at step {p.step}; checkpoint saved to "
                        f"{self.run_dir / 'last.pt'}; run the same command again to resume",
                        self._stop_signal or signal.SIGTERM)
            if p.step != last_eval_step:
                self._validate_and_keep_best()
            if p.step != last_save_step:
                self._save_last()
            log.info("done at step %d (epoch %d); best val BLEU %.2f at step %d; checkpoints "
                     "in %s", p.step, p.epoch, p.best_bleu, p.best_step, self.run_dir)
        finally:
            bar.close()

    def _any_rank(self, flag: bool) -> bool:
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def _step(self, step_batches: list[list[int]], acc: torch.Tensor) -> tuple[torch.Tensor, int]:
        """One optimizer step over this rank's ``accum_steps`` batches of ``step_batches``.

        The loss is normalised by the target tokens of all ranks' batches together, so N ranks
        (or N accumulated batches) train exactly like one process with all N batches at once.
        """
        cfg = self.cfg.train
        global_tokens = sum(self.tgt_tokens_per_example[i] for b in step_batches for i in b)
        accum = cfg.accum_steps
        mine = step_batches[self.dist.rank * accum:(self.dist.rank + 1) * accum]
        n_tokens = 0
        for j, indices in enumerate(mine):
            weight = 1.0
            if not indices:  # the epoch's last step has no batch here: contribute nothing
                indices, weight = next(b for b in step_batches if b), 0.0
            batch = collate(self.train_data, indices).to(self.device)
            sync = j == len(mine) - 1 or not self.dist.enabled  # DDP: all-reduce once per step
            with contextlib.nullcontext() if sync else self.forward_model.no_sync():
                with self._autocast():
                    hidden = self.forward_model(batch.src, batch.tgt_in, batch.src_mask,
                                                project=False)  # (B, T, D)
                loss_sum = label_smoothed_cross_entropy(
                    hidden.flatten(0, 1), self.model.decoder.project.weight,
                    batch.tgt_out.flatten(), cfg.label_smoothing, PAD_ID, self._autocast_dtype)
                loss = loss_sum * (weight * self.dist.world_size / global_tokens)
                self.scaler.scale(loss).backward()
            acc[0] += loss_sum.detach() * weight
            acc[1] += batch.n_tokens * weight
            n_tokens += int(batch.n_tokens * weight)
        self.scaler.unscale_(self.optimizer)
        grad_norm = torch.zeros((), device=self.device)
        if cfg.clip_grad_norm is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                       cfg.clip_grad_norm)
        lr = inverse_sqrt_lr(self.progress.step + 1, cfg.lr, cfg.warmup_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm, n_tokens

    def _log_step(self, acc: torch.Tensor, grad_norm: torch.Tensor,
                  last: tuple[float, int, int], n_tokens_seen: int,
                  bar: tqdm) -> tuple[float, int, int]:
        if self.dist.enabled:
            dist.all_reduce(acc)
        loss_sum, tokens = acc.tolist()  # the only host sync of the hot loop, every log_every
        loss = loss_sum / max(tokens, 1)
        if not math.isfinite(loss):
            raise TrainingError(f"the training loss became {loss} at step {self.progress.step}; "
                                "stopping. The last good checkpoint is "
                                f"{self.run_dir / 'last.pt'}; lower train.lr or raise "
                                "train.warmup_steps, then resume or start again")
        now = time.perf_counter()
        t0, _, tokens0 = last
        tok_per_s = (n_tokens_seen - tokens0) * self.dist.world_size / max(now - t0, 1e-9)
        lr = self.optimizer.param_groups[0]["lr"]
        p = self.progress
        record = {"type": "train", "step": p.step, "epoch": p.epoch, "loss": round(loss, 4),
                  "lr": lr, "tokens_per_s": round(tok_per_s, 1),
                  "grad_norm": round(float(grad_norm), 4)}
        self.metrics.write(record)
        bar.set_postfix(epoch=p.epoch, loss=f"{loss:.3f}", lr=f"{lr:.2e}",
                        tok_s=f"{tok_per_s:,.0f}", refresh=False)
        progress_log.info("step %d epoch %d loss %.4f lr %.2e %.0f tok/s", p.step, p.epoch,
                          loss, lr, tok_per_s)
        return now, p.step, n_tokens_seen

    # ---------------------------------------------------------------------------- validation

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        """Validation loss and perplexity (no label smoothing), and BLEU/chrF of translations."""
        model, data = self.model, self.valid_data
        model.eval()
        total, tokens = 0.0, 0
        for _, batch in iterate_batches(data, self.cfg.train.max_tokens):
            batch = batch.to(self.device)
            with self._autocast():
                hidden = model(batch.src, batch.tgt_in, batch.src_mask, project=False)
            total += float(label_smoothed_cross_entropy(  # eps 0: plain cross-entropy, chunked
                hidden.flatten(0, 1), model.decoder.project.weight, batch.tgt_out.flatten(), 0.0,
                PAD_ID, self._autocast_dtype))
            tokens += batch.n_tokens
        hyps = decode_corpus(model, [s.tolist() for s in data.src_ids], self.cfg.decode,
                             self.device, beam_size=self.cfg.train.eval_beam_size)
        lang = self.cfg.data.tgt_lang
        texts = [detokenize(self.tgt_vocab.decode(h[0].tokens), lang) for h in hyps]
        refs = [r.lower() for r in data.tgt_raw] if self.cfg.data.lowercase else data.tgt_raw
        s = score(texts, refs)
        model.train()
        val_loss = total / max(tokens, 1)
        return {"val_loss": round(val_loss, 4), "val_ppl": round(math.exp(min(val_loss, 50)), 3),
                "val_bleu": round(s.bleu, 2), "val_chrf": round(s.chrf, 2)}

    def _validate_and_keep_best(self) -> None:
        p = self.progress
        if self.is_main:
            started = time.perf_counter()
            result = self.validate()
            improved = result["val_bleu"] > p.best_bleu
            if improved:
                p.best_bleu, p.best_step, p.bad_evals = result["val_bleu"], p.step, 0
                self._save_weights(self.run_dir / "best.pt")
            else:
                p.bad_evals += 1
            self.metrics.write({"type": "valid", "step": p.step, "epoch": p.epoch, **result})
            log.info("validation at step %d: loss %.3f ppl %.2f BLEU %.2f chrF %.2f%s (%.1fs)",
                     p.step, result["val_loss"], result["val_ppl"], result["val_bleu"],
                     result["val_chrf"], " (best)" if improved else "",
                     time.perf_counter() - started)
        if self.dist.enabled:  # every rank learns rank 0's verdict (for early stopping)
            state = torch.tensor([p.best_bleu, p.best_step, p.bad_evals], dtype=torch.float64,
                                 device=self.device)
            dist.broadcast(state, src=0)
            p.best_bleu, p.best_step, p.bad_evals = state[0].item(), int(state[1]), int(state[2])

    # --------------------------------------------------------------------------- checkpoints

    def _checkpoint(self, full: bool) -> dict[str, Any]:
        training_state = None
        if full:
            training_state = {"optimizer": self.optimizer.state_dict(),
                              "scaler": self.scaler.state_dict(), "rng": rng_state(),
                              "loss_since_log": self._acc.detach().cpu().clone()}
        return make_checkpoint(self.model, self.cfg, self.src_vocab, self.tgt_vocab,
                               asdict(self.progress), training_state)

    def _save_weights(self, path: Path) -> None:
        save_checkpoint(self._checkpoint(full=False), path)

    def _save_last(self) -> None:
        """Write ``last.pt`` (and a step checkpoint), unless the weights went bad."""
        if not all(torch.isfinite(p).all() for p in self.model.parameters()):
            raise TrainingError(f"the weights became NaN/inf by step {self.progress.step}; not "
                                f"saving them. The last good checkpoint is "
                                f"{self.run_dir / 'last.pt'}; lower train.lr and resume")
        if self.is_main:
            save_checkpoint(self._checkpoint(full=True), self.run_dir / "last.pt")
            keep = self.cfg.train.keep_last
            if keep > 0:
                self._save_weights(self.run_dir / f"step_{self.progress.step:07d}.pt")
                for old in sorted(self.run_dir.glob("step_*.pt"))[:-keep]:
                    old.unlink()
            log.debug("saved %s at step %d", self.run_dir / "last.pt", self.progress.step)
        distributed.barrier(self.dist)


def train(config: Config, run_dir: str | Path, resume: bool = True,
          progress: bool | None = None) -> Progress:
    """Train (or resume) the run in ``run_dir``; see :class:`Trainer`."""
    return Trainer(config, run_dir, resume, progress).train()
