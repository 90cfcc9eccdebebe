"""The model a config and its vocabularies describe: freshly initialised (training), or with a
checkpoint's weights and tokenizers (translating, exporting, ``mt info``), or counted without
allocating anything (the trainer's memory check)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from transformer_mt.checkpoint import (
    checkpoint_config,
    first_line,
    subword_models_of,
    vocabs_of,
    weights_are_finite,
)
from transformer_mt.config import Config
from transformer_mt.data.tokenize import Tokenizer, make_tokenizer
from transformer_mt.data.vocab import PAD_ID, Vocab
from transformer_mt.errors import CheckpointError, DataError, MTError
from transformer_mt.model.transformer import Transformer
from transformer_mt.precision import use_precision_policy


def build_model(config: Config, src_vocab: Vocab, tgt_vocab: Vocab,
                initialise: bool = True) -> Transformer:
    """A freshly initialised model sized for these vocabularies (``<pad>`` is their PAD_ID);
    with ``data.shared_vocab``, one embedding matrix for both languages. Its attention follows
    the precision policy (fp32 attention for bf16 on the CPU). ``initialise=False`` leaves its
    weights as allocated, for a caller that sets every one of them (from a checkpoint)."""
    with contextlib.nullcontext() if initialise else NoInitialisation():
        model = Transformer(config.model, len(src_vocab), len(tgt_vocab), PAD_ID,
                            config.data.shared_vocab)
    return use_precision_policy(model)


class NoInitialisation(TorchFunctionMode):
    """Inside it, modules are built without drawing their initial weights: ``torch.nn.init``'s
    functions and the in-place fills they and the modules use (``uniform_``, ``normal_``,
    ``zero_``, ``fill_``) return their tensor untouched. Loading a checkpoint overwrites every
    weight anyway; drawing ~8M random numbers first took ~80 ms of a one-sentence
    ``mt translate``. Everything else (the positional table, a buffer) is computed as ever."""

    FILLS = frozenset({torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.zero_,
                       torch.Tensor.fill_})

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if func in self.FILLS or (getattr(func, "__module__", None) == "torch.nn.init"
                                  and name.endswith("_") and not name.startswith("_")):
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def check_weights(ckpt: dict[str, Any], config: Config, src_vocab: Vocab, tgt_vocab: Vocab,
                  path: str | Path = "checkpoint") -> None:
    """Refuse, before anything is built or written, weights that do not fit the model the
    config and vocabularies describe (a missing tensor, a wrong shape), or are NaN/inf."""
    with torch.device("meta"):
        model = Transformer(config.model, len(src_vocab), len(tgt_vocab), PAD_ID,
                            config.data.shared_vocab)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    weights = ckpt.get("model") or {}
    found = {k: tuple(v.shape) for k, v in weights.items() if isinstance(v, torch.Tensor)}
    missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    wrong = [k for k in expected if k in found and found[k] != expected[k]]
    if missing or extra or wrong:
        what = (f"lacks {missing[0]}" if missing else f"has an unexpected {extra[0]}" if extra
                else f"has {wrong[0]} of shape {found[wrong[0]]}, the model needs "
                f"{expected[wrong[0]]}")
        raise CheckpointError(f"the weights in '{path}' do not fit its config and vocabularies: "
                              f"it {what}; the file is damaged, use another checkpoint")
    if not weights_are_finite(weights.values()):
        raise CheckpointError(f"'{path}' holds NaN or infinite weights (the training diverged); "
                              "use an earlier checkpoint")


def count_parameters(config: Config, src_vocab_size: int, tgt_vocab_size: int) -> int:
    """The parameters of the model ``config`` builds, counted on the meta device (no memory)."""
    with torch.device("meta"):
        model = Transformer(config.model, src_vocab_size, tgt_vocab_size, PAD_ID,
                            config.data.shared_vocab)
    return model.num_parameters()


def tokenizers_from_checkpoint(ckpt: dict[str, Any], config: Config,
                               path: str | Path = "checkpoint") -> tuple[Tokenizer, Tokenizer]:
    """The source and target tokenizers a checkpoint was trained with."""
    models = subword_models_of(ckpt)
    if config.data.tokenizer == "sentencepiece" and models is None:
        raise CheckpointError(f"'{path}' was trained with SentencePiece but holds no "
                              "SentencePiece model; use another checkpoint")
    try:
        return (make_tokenizer(config.data, "src", models and models[0]),
                make_tokenizer(config.data, "tgt", models and models[1]))
    except DataError as exc:
        raise CheckpointError(f"'{path}': {exc}") from exc


def model_from_checkpoint(ckpt: dict[str, Any], path: str | Path = "checkpoint",
                          device: torch.device | str = "cpu"
                          ) -> tuple[Transformer, Config, Vocab, Vocab]:
    """Rebuild the model (in eval mode), its config and vocabularies from a loaded checkpoint."""
    config = checkpoint_config(ckpt, path)
    src_vocab, tgt_vocab = vocabs_of(ckpt, path)
    model = build_model(config, src_vocab, tgt_vocab, initialise=False)
    try:
        model.load_state_dict(ckpt["model"])
    except (RuntimeError, KeyError) as exc:
        raise CheckpointError(f"the weights in '{path}' do not fit its config and vocabularies: "
                              f"{first_line(exc)}") from exc
    if not weights_are_finite(model.state_dict().values()):
        raise CheckpointError(f"'{path}' holds NaN or infinite weights (the training diverged); "
                              "use an earlier checkpoint")
    return model.to(device).eval(), config, src_vocab, tgt_vocab


def check_ensemble(paths: Sequence[str | Path],
                   members: Sequence[tuple[Config, Vocab, Vocab]]) -> None:
    """Refuse, in one line, models that cannot decode as one ensemble (``members``: each
    checkpoint's config and vocabularies): other vocabularies, or the other direction (one joint
    vocabulary serves both ways)."""
    config, src_vocab, tgt_vocab = members[0]
    way = f"{config.data.src_lang}->{config.data.tgt_lang}"
    for path, (cfg, src, tgt) in zip(paths[1:], members[1:], strict=True):
        if (src, tgt) != (src_vocab, tgt_vocab):
            raise MTError(f"'{path}' has other vocabularies than '{paths[0]}'; an ensemble "
                          "needs models trained on the same vocabularies")
        if f"{cfg.data.src_lang}->{cfg.data.tgt_lang}" != way:
            raise MTError(f"'{path}' translates {cfg.data.src_lang}->{cfg.data.tgt_lang}, "
                          f"'{paths[0]}' {way}; an ensemble's models must translate the same way")
