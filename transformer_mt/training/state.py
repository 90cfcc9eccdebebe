"""What a training run holds: :class:`Progress` (stored in every checkpoint) and :class:`Run`
(the data, model, optimizer and logs :meth:`Trainer.setup` builds before the first step)."""

from __future__ import annotations

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


@dataclass
class Progress:
    """Where a run stands; stored in every checkpoint."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # current epoch (0-based)
    epoch_step: int = 0  # steps of the current epoch already done
    best_bleu: float = -1.0
    best_step: int = 0
    bad_evals: int = 0  # validations since the best one (for train.patience)

    def finished(self, t: TrainConfig) -> bool:
        """Whether the run is done: ``max_steps``, ``max_epochs`` or ``patience`` reached."""
        if t.max_steps is not None and self.step >= t.max_steps:
            return True
        if t.max_epochs is not None and self.epoch >= t.max_epochs:
            return True
        return t.patience is not None and self.bad_evals >= t.patience


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
