"""What a training run holds: :class:`Progress` (stored in every checkpoint) and :class:`Run`
(the data, model, optimizer and logs :meth:`Trainer.setup` builds before the first step); and
what its length means (:func:`warn_about_length`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from transformer_mt.config import TrainConfig
from transformer_mt.data.mixing import EpochData, TrainingSet
from transformer_mt.data.pairs import ParallelData
from transformer_mt.data.tokenize import Tokenizer
from transformer_mt.data.vocab import Vocab
from transformer_mt.model.transformer import Transformer
from transformer_mt.training.loss import ModelLoss
from transformer_mt.training.run_dir import MetricsLog

log = logging.getLogger(__name__)


@dataclass
class Progress:
    """Where a run stands; stored in every checkpoint."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # current epoch (0-based)
    epoch_step: int = 0  # steps of the current epoch already done
    best_bleu: float = -1.0
    best_step: int = 0
    bad_evals: int = 0  # validations since the best one (for train.patience)
    seconds: float = 0.0  # training time so far (steps, validations, saves), over resumes

    def finished(self, t: TrainConfig) -> bool:
        """Whether the run is done: ``max_steps``, ``max_epochs``, ``max_minutes`` or
        ``patience`` reached."""
        if t.max_steps is not None and self.step >= t.max_steps:
            return True
        if t.max_epochs is not None and self.epoch >= t.max_epochs:
            return True
        if self.out_of_time(t):
            return True
        return t.patience is not None and self.bad_evals >= t.patience

    def out_of_time(self, t: TrainConfig) -> bool:
        """Whether ``train.max_minutes`` of training are spent."""
        return t.max_minutes is not None and self.seconds >= 60 * t.max_minutes

    def time_left(self, t: TrainConfig, total: float | None, seconds_a_step: float) -> str:
        """How long the run has to go at ``seconds_a_step``: to its planned step ``total``,
        or to ``train.max_minutes`` where that comes first ("1.2 h", "25 min", "40 s"); ""
        where neither is known."""
        left = [(total - self.step) * seconds_a_step] if total else []
        if t.max_minutes is not None:
            left.append(60 * t.max_minutes - self.seconds)
        if not left:
            return ""
        s = max(min(left), 0.0)
        return f"{s / 3600:.1f} h" if s >= 5400 else f"{s / 60:.0f} min" if s >= 90 else \
            f"{s:.0f} s"


@dataclass
class Run:
    """Everything one training run holds, made by :meth:`Trainer.setup` before the first step."""

    train_data: TrainingSet
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
    forward_model: Callable[..., Tensor]
    ddp: DistributedDataParallel | None = None  # the DDP wrapper, under torchrun
    progress: Progress = field(default_factory=Progress)
    # (loss sum, target tokens) since the last log record; saved, so a resumed record is exact
    loss_since_log: Tensor = field(default_factory=lambda: torch.zeros(2))
    # the current epoch's examples (data/mixing.py), set when the epoch is planned
    epoch_data: EpochData | None = None
    corpus: str | None = None  # the training corpus's fingerprint, carried by checkpoints


def warn_about_length(t: TrainConfig, total: int | None, per_epoch: int) -> None:
    """Say when ``train.max_epochs`` ends the run before ``train.max_steps`` (whichever comes
    first: a small corpus takes few steps an epoch), and warn when it ends soon after warmup:
    a bigger train.max_tokens (say, for more GPUs) means fewer steps an epoch, and a budget in
    epochs ends inside the warmup. ``total``: the steps planned (None: a budget in time)."""
    if t.max_minutes is not None:
        log.info("train.max_minutes=%g: the run ends after %g minutes of training%s",
                 t.max_minutes, t.max_minutes,
                 f" or {total} steps, whichever comes first" if total else "")
    if total is None:
        return
    if t.max_steps is not None and total < t.max_steps:  # (max_epochs')
        log.info("train.max_epochs=%s ends this run after ~%d steps, before "
                 "train.max_steps=%d (%d steps an epoch at train.max_tokens=%d; with "
                 "train.max_epochs=null it trains all %d)", t.max_epochs, total,
                 t.max_steps, per_epoch, t.max_tokens, t.max_steps)
    if total < 2 * t.warmup_steps:
        log.warning(
            "this run plans %d steps (%d an epoch at train.max_tokens=%d), fewer than twice "
            "its %d warmup steps: the learning rate hardly leaves warmup and the model will "
            "be under-trained. Give the budget in steps (train.max_steps, several times the "
            "warmup), or lower train.warmup_steps or train.max_tokens (docs/gpu.md)",
            total, per_epoch, t.max_tokens, t.warmup_steps)
