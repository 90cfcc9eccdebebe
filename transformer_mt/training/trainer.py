"""The training loop: teacher forcing, label-smoothed cross-entropy, AdamW, warmup, validation,
checkpoints, exact resumption and data-parallel training.

What the run writes and how is ``run_dir.py``'s; what a resume or fine-tune may change and how
the state is restored is ``resume.py``'s; the loss training calls is ``loss.py``'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from transformer_mt.checkpoint import (
    build_model,
    make_checkpoint,
    subword_models_of,
    vocabs_of,
    weights_are_finite,
)
from transformer_mt.config import Config, TrainConfig
from transformer_mt.data.loader import (
    ParallelData,
    PreparedData,
    collate,
    epoch_steps,
    iterate_batches,
    prepare_data,
)
from transformer_mt.data.tokenize import Tokenizer
from transformer_mt.data.vocab import Vocab
from transformer_mt.decode.search import decode_corpus
from transformer_mt.device import bound_cpu_kernel_caches, device_memory
from transformer_mt.errors import TrainingError
from transformer_mt.evaluate import score
from transformer_mt.logs import PROGRESS_LOGGER, bars_enabled
from transformer_mt.model.transformer import Transformer
from transformer_mt.precision import autocast, resolve_precision
from transformer_mt.training import distributed
from transformer_mt.training.loss import ModelLoss
from transformer_mt.training.resume import (
    checkpoint_to_resume,
    checkpoint_to_start_from,
    restore,
    rng_state,
)
from transformer_mt.training.run_dir import MetricsLog, RunDir
from transformer_mt.training.schedule import learning_rate

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


def make_optimizer(model: torch.nn.Module, t: TrainConfig) -> torch.optim.Optimizer:
    """AdamW; weight decay on the weight matrices only, not on embeddings, norms and biases."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (decay if param.dim() >= 2 and "embed" not in name else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": t.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    kwargs: dict[str, Any] = dict(lr=t.lr, betas=t.betas, eps=t.adam_eps)
    try:
        return torch.optim.AdamW(groups, fused=True, **kwargs)
    except (RuntimeError, TypeError):  # fused kernels not available for this device
        return torch.optim.AdamW(groups, foreach=True, **kwargs)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass
class Run:
    """Everything one training run holds, made by :meth:`Trainer.setup` before the first step."""

    train_data: ParallelData
    valid_data: ParallelData
    src_vocab: Vocab
    tgt_vocab: Vocab
    tokenizers: tuple[Tokenizer, Tokenizer]
    subword_models: tuple[bytes, bytes] | None  # SentencePiece models, carried by checkpoints
    model: Transformer
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    metrics: MetricsLog
    # the model and its loss (validation calls it)
    loss: ModelLoss
    # the loss as training calls it: the same module, compiled and/or wrapped for DDP
    forward_model: torch.nn.Module
    progress: Progress = field(default_factory=Progress)
    # (loss sum, target tokens) since the last log record; saved, so a resumed record is exact
    loss_since_log: Tensor = field(default_factory=lambda: torch.zeros(2))
    tgt_lengths: np.ndarray = field(init=False)  # (n,) target tokens (the loss's) per pair

    def __post_init__(self) -> None:
        self.tgt_lengths = self.train_data.lengths[:, 1]


class Trainer:
    """Trains one run: ``Trainer(config, run_dir).train()``.

    :meth:`setup` builds the :class:`Run` in named stages (find the checkpoint to resume, open
    the run directory, load the data, build the model and optimizer, restore, wrap, write the
    run files); :meth:`train` then loops over :meth:`train_step` with logging, validation,
    saving and stopping as steps of their own.
    """

    def __init__(self, config: Config, run_dir: str | Path, resume: bool = True,
                 progress: bool | None = None, overwrite: bool = False) -> None:
        self.cfg = config
        self.run_dir = Path(run_dir)
        self.resume_allowed, self.overwrite = resume, overwrite
        self.show_bar = bars_enabled() if progress is None else progress
        self.dist, self.device = distributed.init_distributed(config.train.device)
        if self.device.type == "cpu":
            bound_cpu_kernel_caches()
        self.precision = resolve_precision(config.train.precision, self.device)
        self.is_main = self.dist.is_main
        self._stop_signal: int | None = None
        self.files = RunDir(self.run_dir, self.is_main)

    # ------------------------------------------------------------------------- setup stages

    def setup(self) -> Run:
        """Build (or restore) everything the run needs, in order. The config's data are read
        and checked before the run directory is touched: a config that fails its checks
        leaves nothing behind."""
        if self.cfg.train.threads:
            torch.set_num_threads(self.cfg.train.threads)
        ckpt = None if self.overwrite else checkpoint_to_resume(
            self.run_dir, self.cfg, self.files.results(), self.resume_allowed)
        init = checkpoint_to_start_from(self.cfg) if ckpt is None else None
        data = self._load_data(ckpt or init)
        self._check_memory(len(data.src_vocab), len(data.tgt_vocab))
        self.files.claim(self.overwrite)
        distributed.barrier(self.dist)
        self._open_run_dir()
        self._describe_data(data)
        if ckpt is not None:
            log.info("resuming from %s at step %d", self.run_dir / "last.pt",
                     ckpt["progress"]["step"])
        seed_everything(self.cfg.train.seed + self.dist.rank)  # each rank its own dropout
        model = build_model(self.cfg, data.src_vocab, data.tgt_vocab).to(self.device)
        if init is not None:
            model.load_state_dict(init["model"])
            log.info("fine-tuning: weights of %s (step %d)", self.cfg.train.init_from,
                     init["progress"].get("step", 0))
        optimizer = make_optimizer(model, self.cfg.train)
        scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        metrics = self.files.metrics_log(self.cfg.train.tensorboard)
        run = Run(data.train, data.valid, data.src_vocab, data.tgt_vocab, data.tokenizers,
                  data.subword_models, model, optimizer, scaler, metrics,
                  loss=ModelLoss(model), forward_model=model,
                  loss_since_log=torch.zeros(2, device=self.device))
        if ckpt is not None:
            restore(run, ckpt, self.run_dir / "last.pt", self.precision, self.dist.rank,
                    self.dist.world_size, self.device)
        cfg = self.cfg.model
        log.info("model: %s parameters, d_model=%d, %d+%d layers, %s-norm, device %s, %s",
                 f"{model.num_parameters():,}", cfg.d_model, cfg.n_encoder_layers,
                 cfg.n_decoder_layers, cfg.norm, self.device, self.precision)
        run.forward_model = self._wrap(run.loss)
        self._write_run_files(run, resumed=ckpt is not None)
        return run

    def _open_run_dir(self) -> None:
        """Create the run directory and log to its ``train.log`` (rank 0 only)."""
        self.files.open()
        distributed.barrier(self.dist)
        if self.dist.enabled:
            log.info("process %d of %d (%s)", self.dist.rank, self.dist.world_size, self.device)

    def _load_data(self, ckpt: dict[str, Any] | None) -> PreparedData:
        """Training and validation pairs as ids; vocabularies and subword models from the
        checkpoint (resumed or fine-tuned from), else built from the training corpus."""
        cfg = self.cfg
        vocabs = vocabs_of(ckpt) if ckpt is not None else None
        models = subword_models_of(ckpt) if ckpt is not None else None
        data = prepare_data(cfg, vocabs, models, self.show_bar and self.is_main)
        max_len = min(cfg.data.max_len, cfg.model.max_pair_tokens)
        if len(data.train) == 0:
            limit = (f"data.max_len={cfg.data.max_len}" if cfg.data.max_len == max_len else
                     f"{max_len} tokens (model.max_positions={cfg.model.max_positions} less "
                     "<bos> and <eos>)")
            raise TrainingError(f"no training pairs left after dropping those longer than "
                                f"{limit}; raise that limit")
        if len(data.valid) == 0:
            raise TrainingError(f"no validation pairs in {cfg.data.valid.describe()} (or all "
                                "are too long for model.max_positions)")
        return data

    def _describe_data(self, data: PreparedData) -> None:
        cfg = self.cfg.data
        vocab = (f"one shared vocabulary of {len(data.src_vocab)}" if cfg.shared_vocab else
                 f"vocabularies: {len(data.src_vocab)} {cfg.src_lang}, "
                 f"{len(data.tgt_vocab)} {cfg.tgt_lang}")
        log.info("data: %d training pairs from %s (%d longer than %d tokens dropped), %d "
                 "validation pairs; %s tokens, %s", len(data.train), cfg.train.describe(),
                 data.train.n_dropped, min(cfg.max_len, self.cfg.model.max_pair_tokens),
                 len(data.valid), cfg.tokenizer, vocab)

    def _check_memory(self, src_vocab_size: int, tgt_vocab_size: int) -> None:
        """Refuse, before allocating, a model whose training state cannot fit in memory."""
        if self.cfg.data.shared_vocab:
            src_vocab_size = 0  # the source embedding is the target's
        params = self.cfg.model.num_parameters(src_vocab_size, tgt_vocab_size)
        need = params * 4 * 4  # fp32 weights, gradients and AdamW's two moments
        have = device_memory(self.device)
        if have is not None and need > have:
            raise TrainingError(
                f"the model has {params:,} parameters: training needs about {need / 2**30:,.1f} "
                f"GiB for its weights, gradients and optimizer state, and {self.device} has "
                f"{have / 2**30:,.1f} GiB; make model.d_model, model.d_ff or the layer counts "
                "smaller")

    def _wrap(self, model: ModelLoss) -> torch.nn.Module:
        """The module training calls: DDP-wrapped (torchrun), then compiled (train.compile),
        so that the compiled graph lets DDP's all-reduce overlap the backward."""
        wrapped: torch.nn.Module = model
        if self.dist.enabled:
            wrapped = DistributedDataParallel(
                wrapped, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                broadcast_buffers=False)  # the only buffers, positional tables, never change
        if self.cfg.train.compile:
            # the chunked loss is a Python loop over chunks: run as it is
            model.loss_fn = torch.compiler.disable(model.loss_fn)
            wrapped = torch.compile(wrapped, dynamic=True)
        return wrapped

    def _write_run_files(self, run: Run, resumed: bool) -> None:
        """``config.yaml`` and the vocabularies; on resume, metrics cut back to the checkpoint."""
        if resumed:
            run.metrics.truncate_after(run.progress.step)
        self.files.write_run_files(self.cfg, run.src_vocab, run.tgt_vocab)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        return autocast(self.device, self.precision)

    # ---------------------------------------------------------------------------------- loop

    def train(self) -> Progress:
        """Run (or resume) training until ``max_steps``/``max_epochs`` or early stopping."""
        run: Run | None = None
        completed = False
        with self._stop_signals():
            try:
                run = self.setup()
                if self._finished(run.progress):
                    log.info("run in %s is already complete (step %d); nothing to do",
                             self.run_dir, run.progress.step)
                else:
                    self._loop(run)
                completed = True
                return run.progress
            finally:
                self.files.close_log()
                if run is not None:  # the DDP wrapper holds the process group: drop it first
                    run.forward_model = run.model
                distributed.cleanup(self.dist, completed)
                self.files.release()

    @contextlib.contextmanager
    def _stop_signals(self) -> Iterator[None]:
        """SIGINT/SIGTERM ask the loop to save and stop after the current step."""
        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not in the main thread
                previous[signum] = signal.signal(signum, self._on_signal)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._stop_signal is not None:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        self._stop_signal = signum
        log.warning("received %s: finishing the current step, then saving",
                    signal.Signals(signum).name)

    def _finished(self, p: Progress) -> bool:
        t = self.cfg.train
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

    def epoch_plan(self, run: Run, epoch: int) -> list[list[np.ndarray]]:
        """The steps of ``epoch``: for each, the batches of every rank and accumulation."""
        t = self.cfg.train
        return epoch_steps(run.train_data.lengths, t.max_tokens, t.seed, epoch,
                           self.dist.world_size * t.accum_steps)

    def _loop(self, run: Run) -> None:
        t, p = self.cfg.train, run.progress
        run.model.train()
        plan = self.epoch_plan(run, p.epoch)
        bar = tqdm(total=self._total_steps(len(plan)), initial=p.step, unit="step",
                   desc="train", disable=not (self.show_bar and self.is_main), dynamic_ncols=True)
        last_log = (time.perf_counter(), p.step, 0)
        n_tokens_seen = 0
        last_eval_step = last_save_step = -1
        try:
            while not self._finished(p):
                if p.epoch_step >= len(plan):  # epoch done: the next one is planned afresh
                    p.epoch, p.epoch_step = p.epoch + 1, 0
                    if self._finished(p):
                        break
                    plan = self.epoch_plan(run, p.epoch)
                    continue
                grad_norm, n_tok = self.train_step(run, plan[p.epoch_step])
                n_tokens_seen += n_tok
                p.step += 1
                p.epoch_step += 1
                bar.update(1)
                if p.step % t.log_every == 0:
                    last_log = self._log_step(run, grad_norm, last_log, n_tokens_seen, bar)
                stop = self._stop_agreed(p.step)
                if p.step % t.eval_every == 0:
                    self._validate_and_keep_best(run)
                    last_eval_step = p.step
                if p.step % t.save_every == 0 or stop:
                    self._save_last(run)
                    last_save_step = p.step
                if stop:
                    raise self._stopped(p.step)
            if p.step != last_eval_step:
                self._validate_and_keep_best(run)
            if p.step != last_save_step:
                self._save_last(run)
            log.info("done at step %d (epoch %d); best val BLEU %.2f at step %d; checkpoints "
                     "in %s", p.step, p.epoch, p.best_bleu, p.best_step, self.run_dir)
        finally:
            bar.close()

    def _stop_agreed(self, step: int) -> bool:
        """Whether to stop now: a signal arrived (on any rank; ranks agree at log steps only)."""
        stop = self._stop_signal is not None
        if not self.dist.enabled:
            return stop
        if step % self.cfg.train.log_every:
            return False
        flag = torch.tensor([1.0 if stop else 0.0], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def _stopped(self, step: int) -> StopRequestedError:
        signum = self._stop_signal or signal.SIGTERM
        return StopRequestedError(
            f"stopped by {signal.Signals(signum).name} at step {step}; checkpoint saved to "
            f"{self.run_dir / 'last.pt'}; run the same command again to resume", signum)

    def train_step(self, run: Run, step_batches: list[list[int]]) -> tuple[Tensor, int]:
        """One optimizer step over this rank's ``accum_steps`` batches of ``step_batches``.

        The loss is normalised by the target tokens of all ranks' batches together, so N ranks
        (or N accumulated batches) train exactly like one process with all N batches at once.
        Returns the gradient norm and this rank's target tokens.
        """
        t = self.cfg.train
        global_tokens = int(sum(run.tgt_lengths[b].sum() for b in step_batches))
        mine = step_batches[self.dist.rank * t.accum_steps:(self.dist.rank + 1) * t.accum_steps]
        acc = run.loss_since_log
        n_tokens = 0
        for j, indices in enumerate(mine):
            weight = 1.0
            if len(indices) == 0:  # the epoch's last step has no batch here: add nothing
                indices, weight = next(b for b in step_batches if len(b)), 0.0
            batch = collate(run.train_data, indices).to(self.device)
            sync = j == len(mine) - 1 or not self.dist.enabled  # DDP: all-reduce once per step
            with contextlib.nullcontext() if sync else run.forward_model.no_sync():
                with self._autocast():
                    loss_sum = run.forward_model(batch.src, batch.tgt_in, batch.src_mask,
                                                 batch.tgt_out, t.label_smoothing)
                loss = loss_sum * (weight * self.dist.world_size / global_tokens)
                run.scaler.scale(loss).backward()
            acc[0] += loss_sum.detach() * weight
            acc[1] += batch.n_tokens * weight
            n_tokens += int(batch.n_tokens * weight)
        run.scaler.unscale_(run.optimizer)
        grad_norm = torch.zeros((), device=self.device)
        if t.clip_grad_norm is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), t.clip_grad_norm)
        lr = learning_rate(run.progress.step + 1, t.lr, t.warmup_steps, t.lr_schedule,
                           t.max_steps)
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        run.scaler.step(run.optimizer)
        run.scaler.update()
        run.optimizer.zero_grad(set_to_none=True)
        return grad_norm, n_tokens

    def _log_step(self, run: Run, grad_norm: Tensor, last: tuple[float, int, int],
                  n_tokens_seen: int, bar: tqdm) -> tuple[float, int, int]:
        """Write the log interval's record (mean loss, lr, tokens/s) and start a new interval."""
        acc = run.loss_since_log
        if self.dist.enabled:
            dist.all_reduce(acc)
        loss_sum, tokens = acc.tolist()  # the only host sync of the hot loop, every log_every
        acc.zero_()
        loss = loss_sum / max(tokens, 1)
        if not math.isfinite(loss):
            raise TrainingError(f"the training loss became {loss} at step {run.progress.step}; "
                                f"stopping. {self.files.last_good()}")
        now = time.perf_counter()
        t0, _, tokens0 = last
        tok_per_s = (n_tokens_seen - tokens0) * self.dist.world_size / max(now - t0, 1e-9)
        lr = run.optimizer.param_groups[0]["lr"]
        p = run.progress
        record = {"type": "train", "step": p.step, "epoch": p.epoch, "loss": round(loss, 4),
                  "lr": lr, "tokens_per_s": round(tok_per_s, 1),
                  "grad_norm": round(float(grad_norm), 4)}
        run.metrics.write(record)
        bar.set_postfix(epoch=p.epoch, loss=f"{loss:.3f}", lr=f"{lr:.2e}",
                        tok_s=f"{tok_per_s:,.0f}", refresh=False)
        progress_log.info("step %d epoch %d loss %.4f lr %.2e %.0f tok/s", p.step, p.epoch,
                          loss, lr, tok_per_s)
        return now, p.step, n_tokens_seen

    # ---------------------------------------------------------------------------- validation

    @torch.no_grad()
    def validate(self, run: Run) -> dict[str, float]:
        """Validation loss and perplexity (no label smoothing), and BLEU/chrF of translations."""
        model, data = run.model, run.valid_data
        model.eval()
        total, tokens = 0.0, 0
        for _, batch in iterate_batches(data, self.cfg.train.max_tokens):
            batch = batch.to(self.device)
            with self._autocast():
                total += float(run.loss(batch.src, batch.tgt_in, batch.src_mask,
                                        batch.tgt_out))  # eps 0: plain cross-entropy
            tokens += batch.n_tokens
        decode = self.cfg.decode
        if self.device.type == "cuda":  # a GPU decodes far more sentences at once
            decode = dataclasses.replace(decode, batch_size=max(decode.batch_size, 512))
        sources = [data.source(k).tolist() for k in range(len(data))]
        hyps = decode_corpus(model, sources, decode, self.device,
                             beam_size=self.cfg.train.eval_beam_size, scores=False)
        detokenize = run.tokenizers[1].detokenize
        texts = [detokenize(run.tgt_vocab.decode(h[0].tokens)) for h in hyps]
        refs = data.references or []
        refs = [r.lower() for r in refs] if self.cfg.data.lowercase else refs
        s = score(texts, refs, self.cfg.data.tgt_lang)
        model.train()
        val_loss = total / max(tokens, 1)
        return {"val_loss": round(val_loss, 4), "val_ppl": round(math.exp(min(val_loss, 50)), 3),
                "val_bleu": round(s.bleu, 2), "val_chrf": round(s.chrf, 2)}

    def _validate_and_keep_best(self, run: Run) -> None:
        p = run.progress
        if self.is_main:
            started = time.perf_counter()
            result = self.validate(run)
            improved = result["val_bleu"] > p.best_bleu
            if improved:
                p.best_bleu, p.best_step, p.bad_evals = result["val_bleu"], p.step, 0
                self._save_best(run)
            else:
                p.bad_evals += 1
            run.metrics.write({"type": "valid", "step": p.step, "epoch": p.epoch, **result})
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

    def _checkpoint(self, run: Run, rng: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """A checkpoint of the run; with every rank's ``rng``, resumable (``last.pt``)."""
        training_state = None
        if rng is not None:
            training_state = {"optimizer": run.optimizer.state_dict(),
                              "scaler": run.scaler.state_dict(), "precision": self.precision,
                              "rng": {"ranks": rng},
                              "loss_since_log": run.loss_since_log.detach().cpu().clone()}
        return make_checkpoint(run.model, self.cfg, run.src_vocab, run.tgt_vocab,
                               asdict(run.progress), training_state, run.subword_models)

    def _check_weights(self, run: Run) -> None:
        """Refuse to save NaN/inf weights: no checkpoint file ever holds them."""
        if not weights_are_finite(run.model.parameters()):
            raise TrainingError(f"the weights became NaN/inf by step {run.progress.step}; not "
                                f"saving them. {self.files.last_good()}")

    def _save_best(self, run: Run) -> None:
        self._check_weights(run)
        self.files.save_best(self._checkpoint(run))

    def _save_last(self, run: Run) -> None:
        """Write ``last.pt`` and, with ``train.keep_last``, a step checkpoint (its weights)."""
        step = run.progress.step
        rng = distributed.gather_objects(rng_state(self.device), self.dist)  # every rank's
        self._check_weights(run)  # on every rank, so that all stop alike
        if self.is_main:
            self.files.save_last(self._checkpoint(run, rng), step, self.cfg.train.keep_last)
        distributed.barrier(self.dist)


def train(config: Config, run_dir: str | Path, resume: bool = True,
          progress: bool | None = None, overwrite: bool = False) -> Progress:
    """Train (or resume) the run in ``run_dir``; see :class:`Trainer`."""
    return Trainer(config, run_dir, resume, progress, overwrite).train()
