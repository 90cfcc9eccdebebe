"""What search decodes with, and what it asks of a decoding state: the interface between the
reference search (``decode/search.py``) and whatever computes the steps (the reference
``PrefixState``, the incremental decoder, an ensemble, ``--compile``'s graphs)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol

from torch import Tensor, nn

from transformer_mt.config import ModelConfig
from transformer_mt.decode.beam_step import Choice
from transformer_mt.decode.ensemble import Ensemble
from transformer_mt.model.transformer import Transformer


class DecodingState(Protocol):
    """What search asks of a decoding state (:class:`PrefixState`, the incremental decoder's
    ``DecoderState``, an ``EnsembleState``): the next-token logits of the prefixes, keeping
    and reordering rows, and beam search's choice (``beam_step.StepByStep``). A state that can
    run a step together with its choice (``fused``: ``--compile``'s) does so in
    ``pick_next``/``choose_next``, or returns None there and search steps as ever."""

    @property
    def fused(self) -> bool: ...

    def next_logits(self, prefix: Tensor) -> Tensor: ...

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None: ...

    def choose(self, z: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor,
               step: int | Tensor, barred: Tensor | None = None) -> Choice: ...

    def pick_next(self, prefix: Tensor, limits: Tensor,
                  barred: Tensor | None) -> tuple[Tensor, Tensor] | None: ...

    def choose_next(self, prefix: Tensor, scores: Tensor, n_finished: Tensor, limits: Tensor,
                    barred: Tensor | None) -> tuple[Choice, Tensor] | None: ...


class DecodingModel(nn.Module, ABC):
    """A model that brings its own decoding state (``decode/compiled.py``'s)."""

    cfg: ModelConfig
    tgt_vocab_size: int

    @abstractmethod
    def start_decoding(self, src: Tensor, src_mask: Tensor,
                       group: int = 1) -> DecodingState: ...


# what search decodes with: a model, an ensemble of models, or a model with its own state
Decodable = Transformer | Ensemble | DecodingModel
