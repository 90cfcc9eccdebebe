"""The training loop: teacher forcing, label-smoothed cross-entropy, AdamW, warmup, validation,
checkpoints, exact resumption and data-parallel training.

What the run writes and how is ``run_dir.py``'s; what a resume or fine-tune may change and how
the state is restored is ``resume.py``'s; the loss training calls is ``loss.py``'s.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor
from tqdm.auto import tqdm

from transformer_mt.build import build_model, check_weights, count_parameters
from transformer_mt.checkpoint import subword_models_of, vocabs_of, weights_are_finite
from transformer_mt.config import START_MODES, Config, Start
from transformer_mt.data.batching import epoch_steps, iterate_batches
from transformer_mt.data.prepare import prepare_data, training_fingerprint
from transformer_mt.device import bound_cpu_kernel_caches, check_training_memory
from transformer_mt.errors import TrainingError
from transformer_mt.evaluate import decode_and_score
from transformer_mt.logs import PROGRESS_LOGGER, bars_enabled
from transformer_mt.packages import require, training_packages
from transformer_mt.precision import autocast, fp32_matmul, resolve_precision
from transformer_mt.training import distributed
from transformer_mt.training.loss import ModelLoss
from transformer_mt.training.resume import (
    checkpoint_to_resume,
    checkpoint_to_start_from,
    restore,
    rng_state,
    run_checkpoint,
    seed_everything,
)
from transformer_mt.training.run_dir import RunDir
from transformer_mt.training.schedule import learning_rate, make_optimizer
from transformer_mt.training.state import Progress, Run, warn_about_length
from transformer_mt.training.stop import StopSignals, TrainingClock
from transformer_mt.translate import Translator
from transformer_mt.translate.engines import TorchEngine

log = logging.getLogger(__name__)
progress_log = logging.getLogger(PROGRESS_LOGGER)


class Trainer:
    """Trains one run: ``Trainer(config, run_dir).train()``.

    :meth:`setup` builds the :class:`Run` in named stages (find the checkpoint to resume, open
    the run directory, load the data, build the model and optimizer, restore, wrap, write the
    run files); :meth:`train` then loops over :meth:`train_step` with logging, validation,
    saving and stopping as steps of their own.
    """

    def __init__(self, config: Config, run_dir: str | Path, start: Start = "auto",
                 progress: bool | None = None) -> None:
        if not isinstance(config, Config):
            raise TypeError(f"train takes a Config (e.g. load_config(\"config/quickstart.yaml\") "
                            f"or config_from_dict(data)), not {type(config).__name__}")
        if start not in START_MODES:
            raise ValueError(f"start must be one of {', '.join(START_MODES)}, not {start!r}")
        require(training_packages(config))  # before step 1, not at the first validation
        self.cfg = config
        self.run_dir = Path(run_dir)
        self.start = start
        self.show_bar = bars_enabled() if progress is None else progress
        self._started = False  # the constructor only checks: _start acts

    def _start(self) -> None:
        """The process group (under torchrun), the device, the CPU's kernel caches, the signal
        handlers and the run directory's owner: what :meth:`setup` and :meth:`train` act
        through, made once, there and not when the Trainer is made."""
        if self._started:
            return
        self.dist, self.device = distributed.init_distributed(self.cfg.train.device)
        self.precision = resolve_precision(self.cfg.train.precision, self.device)
        if self.device.type == "cpu":  # bf16 pads its products' rows (distributed.py)
            bound_cpu_kernel_caches(self.precision == "bf16" and not self.cfg.train.compile)
        self.is_main = self.dist.is_main
        self.stop = StopSignals(self.dist, self.device, self.cfg.train.log_every)
        self.clock = TrainingClock(self.dist, self.device, self.cfg.train.log_every)
        self.files = RunDir(self.run_dir, self.is_main)
        self._started = True

    # ------------------------------------------------------------------------- setup stages

    def setup(self) -> Run:
        """Build (or restore) everything the run needs, in order. The config's data are read
        and checked before the run directory is touched: a config that fails its checks
        leaves nothing behind."""
        self._start()
        if self.cfg.train.threads:
            torch.set_num_threads(self.cfg.train.threads)
        ckpt = checkpoint_to_resume(self.files, self.cfg, self.start, self.dist)
        init = checkpoint_to_start_from(self.cfg) if ckpt is None else None
        start = ckpt or init
        if start is not None:  # before anything is written: weights that fit, and are finite
            check_weights(start, self.cfg, *vocabs_of(start),
                          self.run_dir / "last.pt" if ckpt else str(self.cfg.train.init_from))
        data = prepare_data(self.cfg, vocabs_of(start) if start else None,
                            subword_models_of(start) if start else None,
                            self.show_bar and self.is_main)
        self.cfg = data.fitted(self.cfg)  # decoding's output limit (validation's too)
        check_training_memory(count_parameters(self.cfg, len(data.src_vocab),
                                               len(data.tgt_vocab)), self.device)
        self.files.claim(overwrite=self.start == "overwrite")
        distributed.barrier(self.dist)
        self.files.open()  # the directory, and its train.log (rank 0)
        distributed.barrier(self.dist)
        if self.dist.enabled:
            log.info("process %d of %d (%s)", self.dist.rank, self.dist.world_size, self.device)
        log.info("data: %s", data.describe(self.cfg))
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
                  loss_since_log=torch.zeros(2, device=self.device),
                  corpus=training_fingerprint(self.cfg.data))
        if ckpt is not None:
            restore(run, ckpt, self.run_dir / "last.pt", self.precision, self.dist.rank,
                    self.dist.world_size, self.device)
        cfg = self.cfg.model
        log.info("model: %s parameters, d_model=%d, %d+%d layers, %s-norm, device %s, %s",
                 f"{model.num_parameters():,}", cfg.d_model, cfg.n_encoder_layers,
                 cfg.n_decoder_layers, cfg.norm, self.device, self.precision)
        run.forward_model, run.ddp = distributed.wrap_for_training(
            run.loss, self.dist, self.device, self.precision, self.cfg.train.compile)
        if ckpt is not None:  # metrics cut back to the checkpoint
            run.metrics.truncate_after(run.progress.step)
        self.files.write_run_files(self.cfg, run.src_vocab, run.tgt_vocab)
        return run

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        return autocast(self.device, self.precision)

    # ---------------------------------------------------------------------------------- loop

    def train(self) -> Progress:
        """Run (or resume) training until ``max_steps``/``max_epochs`` or early stopping."""
        run: Run | None = None
        completed = False
        self._start()
        with self.stop.installed(), fp32_matmul(self.device, self.precision):
            try:
                run = self.setup()
                if run.progress.finished(self.cfg.train):
                    log.info("run in %s is already complete (step %d); nothing to do",
                             self.run_dir, run.progress.step)
                else:
                    self._loop(run)
                completed = True
                return run.progress
            finally:
                self.files.close_log()
                if run is not None:  # the DDP wrapper holds the process group: drop it first
                    run.forward_model, run.ddp = run.loss, None
                distributed.cleanup(self.dist, completed)
                self.files.release()

    def epoch_plan(self, run: Run, epoch: int) -> list[list[np.ndarray]]:
        """The steps of ``epoch``: for each, the batches of every rank and accumulation."""
        t = self.cfg.train
        run.epoch_data = run.train_data.epoch(t.seed, epoch)
        return epoch_steps(run.epoch_data.lengths, t.max_tokens, t.seed, epoch,
                           self.dist.world_size * t.accum_steps)

    def _loop(self, run: Run) -> None:
        t, p = self.cfg.train, run.progress
        run.model.train()
        self.stop.start_stepping()  # from here a signal stops after a step, with a save
        plan, bar = self._plan_first_epoch(run)
        last_log = (time.perf_counter(), p.step, 0)
        n_tokens_seen = 0
        last_eval_step = last_save_step = -1
        self.clock.start()
        try:
            while not p.finished(t):
                if p.epoch_step >= len(plan):  # epoch done: the next one is planned afresh
                    p.epoch, p.epoch_step = p.epoch + 1, 0
                    if p.finished(t):
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
                stop = self.stop.agreed(p.step)
                self.clock.tick(p)  # train.max_minutes (a validation counts at the next step)
                if p.step % t.eval_every == 0:
                    self._validate_and_keep_best(run)
                    last_eval_step = p.step
                scheduled = p.step % t.save_every == 0 or p.step in t.keep_steps
                if scheduled or stop:  # a stop's save: last.pt alone, no step file
                    self._save_last(run, scheduled)
                    last_save_step = p.step
                if stop:
                    raise self.stop.error(p.step, self.run_dir / "last.pt", self.start)
            if validated := p.step != last_eval_step:
                self._validate_and_keep_best(run)
            if validated or p.step != last_save_step:  # last.pt holds the final verdict too
                self._save_last(run, step_file=p.step != last_save_step)
            self._log_done(p)
        finally:
            bar.close()

    def _plan_first_epoch(self, run: Run) -> tuple[list[list[np.ndarray]], tqdm]:
        """The current epoch's plan and the progress bar (its total: the steps planned)."""
        t, p = self.cfg.train, run.progress
        plan = self.epoch_plan(run, p.epoch)
        planned_steps = t.total_steps(len(plan))
        if self.is_main:
            warn_about_length(t, planned_steps, len(plan))
        return plan, tqdm(total=planned_steps, initial=p.step, unit="step", desc="train",
                          disable=not (self.show_bar and self.is_main), dynamic_ncols=True)

    def _log_done(self, p: Progress) -> None:
        log.info("done at step %d (epoch %d, %.1f min of training%s); best val BLEU %.2f at "
                 "step %d; checkpoints in %s", p.step, p.epoch, p.seconds / 60,
                 ": train.max_minutes" if p.out_of_time(self.cfg.train) else "", p.best_bleu,
                 p.best_step, self.run_dir)

    def train_step(self, run: Run, step_batches: list[np.ndarray]) -> tuple[Tensor, int]:
        """One optimizer step over this rank's ``accum_steps`` batches of ``step_batches``.

        The loss is normalised by the target tokens of all ranks' batches together, so N ranks
        (or N accumulated batches) train exactly like one process with all N batches at once.
        Returns the gradient norm and this rank's target tokens.
        """
        t = self.cfg.train
        assert run.epoch_data is not None, "epoch_plan sets the epoch's examples first"
        tgt_lengths = run.epoch_data.lengths[:, 1]  # (n,) target tokens (the loss's)
        global_tokens = int(sum(tgt_lengths[b].sum() for b in step_batches))
        mine = step_batches[self.dist.rank * t.accum_steps:(self.dist.rank + 1) * t.accum_steps]
        acc = run.loss_since_log
        n_tokens = 0
        for j, indices in enumerate(mine):
            weight = 1.0
            if len(indices) == 0:  # the epoch's last step has no batch here: add nothing
                indices, weight = next(b for b in step_batches if len(b)), 0.0
            batch = run.epoch_data.batch(indices).to(self.device)
            sync = j == len(mine) - 1 or not self.dist.enabled  # DDP: all-reduce once per step
            with run.ddp.no_sync() if run.ddp is not None and not sync else \
                    contextlib.nullcontext():
                with self._autocast():
                    loss_sum = run.forward_model(batch.src, batch.tgt_in, batch.src_mask,
                                                 batch.tgt_out, t.label_smoothing, t.rdrop_alpha)
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
        t0, step0, tokens0 = last
        # the loss sums (since the last record, a resumed run's included) and the tokens this
        # process trained on since t0, all ranks' together
        sums = torch.cat([run.loss_since_log,
                          torch.tensor([n_tokens_seen - tokens0], device=self.device)])
        if self.dist.enabled:
            dist.all_reduce(sums)
        loss_sum, tokens, interval_tokens = sums.tolist()  # the hot loop's only host sync
        run.loss_since_log.zero_()
        loss = loss_sum / max(tokens, 1)
        if not math.isfinite(loss):
            raise TrainingError(f"the training loss became {loss} at step {run.progress.step}; "
                                f"stopping. {self.files.last_good()}")
        now = time.perf_counter()
        tok_per_s = interval_tokens / max(now - t0, 1e-9)
        lr = run.optimizer.param_groups[0]["lr"]
        p = run.progress
        record = {"type": "train", "step": p.step, "epoch": p.epoch, "loss": round(loss, 4),
                  "lr": lr, "tokens": int(tokens), "tokens_per_s": round(tok_per_s, 1),
                  "grad_norm": round(float(grad_norm), 4)}
        run.metrics.write(record)
        bar.set_postfix(epoch=p.epoch, loss=f"{loss:.3f}", lr=f"{lr:.2e}",
                        tok_s=f"{tok_per_s:,.0f}", refresh=False)
        left = p.time_left(self.cfg.train, bar.total, (now - t0) / max(p.step - step0, 1))
        progress_log.info("step %d epoch %d loss %.4f lr %.2e %.0f tok/s%s", p.step, p.epoch,
                          loss, lr, tok_per_s, f", ~{left} to go" if left else "")
        return now, p.step, n_tokens_seen

    # ---------------------------------------------------------------------------- validation

    @torch.no_grad()
    def validate(self, run: Run) -> dict[str, float]:
        """Validation loss and perplexity (no label smoothing), and BLEU/chrF of translations
        (as ``mt evaluate`` makes and scores them)."""
        model, data = run.model, run.valid_data
        model.eval()
        total, tokens = 0.0, 0
        for _, batch in iterate_batches(data, self.cfg.train.max_tokens):
            batch = batch.to(self.device)
            with self._autocast():
                total += float(run.loss(batch.src, batch.tgt_in, batch.src_mask,
                                        batch.tgt_out))  # eps 0: plain cross-entropy
            tokens += batch.n_tokens
        translator = Translator(TorchEngine([model], self.device, keep_copies=False), self.cfg,
                                run.src_vocab, run.tgt_vocab, run.tokenizers)
        sources = [data.source(k).tolist() for k in range(len(data))]
        words = [data.source_words(k) for k in range(len(data))]
        s = decode_and_score(translator, data.references or [], ids=sources, words=words,
                             beam_size=self.cfg.train.eval_beam_size).scores
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

    def _check_weights(self, run: Run) -> None:
        """Refuse to save NaN/inf weights: no checkpoint file ever holds them."""
        if not weights_are_finite(run.model.parameters()):
            raise TrainingError(f"the weights became NaN/inf by step {run.progress.step}; not "
                                f"saving them. {self.files.last_good()}")

    def _save_best(self, run: Run) -> None:
        self._check_weights(run)
        self.files.save_best(run_checkpoint(run, self.cfg, self.precision))

    def _save_last(self, run: Run, step_file: bool = True) -> None:
        """Write ``last.pt`` and, with ``train.keep_last`` and ``step_file``, a step file."""
        step = run.progress.step
        rng = distributed.gather_objects(rng_state(self.device), self.dist)  # every rank's
        self._check_weights(run)  # on every rank, so that all stop alike
        if self.is_main:
            self.files.save_last(run_checkpoint(run, self.cfg, self.precision, rng), step,
                                 self.cfg.train.keep_last if step_file else 0,
                                 step in self.cfg.train.keep_steps)
        distributed.barrier(self.dist)


def train(config: Config, run_dir: str | Path, start: Start = "auto",
          progress: bool | None = None) -> Progress:
    """Train (or resume) the run in ``run_dir`` (:class:`Trainer`). ``start``: ``auto`` resumes
    a run there or starts one; ``resume`` must; ``new`` refuses one; ``overwrite`` deletes it."""
    return Trainer(config, run_dir, start, progress).train()
