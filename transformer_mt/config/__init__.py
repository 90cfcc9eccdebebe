"""One strict, typed configuration for data, model, training and decoding: the schema.

Nested dataclasses, one per section, each with its defaults (commented: docs/config.md is the
reference) and a ``validate`` that checks every value's range once, here, at the edge: a bad
value raises :class:`ConfigError` with a one-line message naming the key. Reading YAML, type
checks and ``--set`` overrides are ``config/file.py``'s.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from transformer_mt.config.data import PLAIN_NAME, DataConfig
from transformer_mt.errors import ensure, ensure_positive, ensure_range


@dataclass
class ModelConfig:
    """Sizes and wiring of the encoder-decoder Transformer."""

    d_model: int = 256
    n_heads: int = 4
    n_encoder_layers: int = 3
    n_decoder_layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1
    attention_dropout: float = 0.0  # on attention weights
    activation_dropout: float = 0.0  # inside the feed-forward network, after the activation
    activation: Literal["relu", "gelu", "silu"] = "relu"  # silu (swish): OPUS-MT's
    norm: Literal["pre", "post"] = "pre"  # pre-norm trains more stably; post-norm is the paper's
    tie_embeddings: bool = True  # share the target embedding and the output projection
    max_positions: int = 512
    attention: Literal["sdpa", "plain"] = "sdpa"  # plain = softmax(QK^T/sqrt(d))V written out

    # The length limits that follow from max_positions, computed here and nowhere else.
    @property
    def max_source_tokens(self) -> int:
        """Source tokens the encoder takes: one position is left for ``<eos>``."""
        return self.max_positions - 1

    @property
    def max_output_tokens(self) -> int:
        """Tokens decoding may produce before ``<eos>``: ``<bos>`` takes the first position."""
        return self.max_positions - 1

    @property
    def max_pair_tokens(self) -> int:
        """Tokens per side of a training pair: room for both ``<bos>`` and ``<eos>``."""
        return self.max_positions - 2

    def validate(self) -> None:
        ensure_positive(self, "model", ["d_model", "n_heads", "n_encoder_layers",
                                        "n_decoder_layers", "d_ff", "max_positions"])
        ensure(self.max_positions >= 3, "model.max_positions",
               f"must be at least 3 (<bos>, a token, <eos>), got {self.max_positions}")
        ensure(self.d_model % self.n_heads == 0, "model.n_heads",
               f"must divide model.d_model ({self.d_model} % {self.n_heads} != 0)")
        for key in ("dropout", "attention_dropout", "activation_dropout"):
            value = getattr(self, key)
            ensure(0.0 <= value < 1.0, f"model.{key}", f"must be in [0, 1), got {value}")


# how `mt train --start` / train(start=) begins a run: resume what --run-dir holds, or not
Start = Literal["auto", "resume", "new", "overwrite"]
START_MODES: tuple[Start, ...] = typing.get_args(Start)


@dataclass
class TrainConfig:
    """The optimisation loop."""

    seed: int = 1234
    # auto (CUDA, else Apple's MPS, when present, else the CPU), cpu, cuda, cuda:N, mps
    device: str = "auto"
    # auto: bf16 autocast where the hardware does bf16 natively (CUDA with bf16, CPUs with
    # AVX512-BF16 or AMX); fp16 with a loss scaler on GPUs without native bf16; else fp32.
    # tf32: fp32 with TF32 matrix products (CUDA GPUs since Ampere); fp32 is IEEE fp32
    precision: Literal["auto", "fp32", "tf32", "bf16", "fp16"] = "auto"
    compile: bool = False  # torch.compile the model
    threads: int | None = None  # torch CPU threads; default: torch's choice
    # padded tokens per optimizer step, all processes together: N GPUs (or accum_steps) split
    # each step's batch, so a recipe trains the same on 1 or N GPUs
    max_tokens: int = 4096
    accum_steps: int = 1  # pieces per process and optimizer step (gradient accumulation)
    max_steps: int | None = None
    max_epochs: int | None = 20
    # a budget in time: stop after this many minutes of training (steps, validations, saves;
    # summed over resumes), at whichever of the three limits comes first; ends as max_steps does
    max_minutes: float | None = None
    lr: float = 7e-4  # peak learning rate, reached at the end of warmup
    warmup_steps: int = 1000
    # after warmup: inverse_sqrt (decays as 1/sqrt(step), open-ended) or linear (falls in a
    # straight line to zero at train.max_steps: for a fixed budget of steps)
    lr_schedule: Literal["inverse_sqrt", "linear"] = "inverse_sqrt"
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    # R-Drop (Liang et al., 2021): each batch through the model twice (two dropout masks) and
    # rdrop_alpha x their symmetric KL added to the loss; 0 = off (one pass, as without it)
    rdrop_alpha: float = 0.0
    clip_grad_norm: float | None = 1.0
    log_every: int = 50
    eval_every: int = 500
    save_every: int = 500
    keep_last: int = 2  # step checkpoints kept besides last.pt and best.pt (for averaging)
    # steps whose weights are kept for good as kept_NNNNNNN.pt (saved there whatever save_every
    # says), e.g. [50, 100, 200] to watch a sentence across training: mt trace --run-dir
    keep_steps: list[int] = field(default_factory=list)
    patience: int | None = None  # stop after this many validations without a better val BLEU
    eval_beam_size: int = 1  # beam used for val BLEU during training (1 = greedy)
    tensorboard: bool = False  # also log metrics for TensorBoard (needs the tensorboard package)
    # fine-tuning: start from this checkpoint's weights, vocabularies and tokenizers (the model
    # and tokenizer settings must match); the optimizer and the step count start afresh
    init_from: str | None = None

    def total_steps(self, steps_per_epoch: int) -> int | None:
        """The steps the run takes (``max_steps``, or ``max_epochs`` of ``steps_per_epoch``);
        None for a budget in time alone (``max_minutes``)."""
        by_epochs = self.max_epochs * steps_per_epoch if self.max_epochs is not None else math.inf
        by_steps = self.max_steps if self.max_steps is not None else math.inf
        steps = min(by_epochs, by_steps)
        return None if steps == math.inf else int(steps)

    def validate(self) -> None:
        ensure(any(v is not None for v in (self.max_steps, self.max_epochs, self.max_minutes)),
               "train.max_steps", "set train.max_steps, train.max_epochs or train.max_minutes, "
               "or training never stops")
        ensure_positive(self, "train", ["max_tokens", "accum_steps", "log_every", "eval_every",
                                        "save_every", "eval_beam_size"])
        ensure_positive(self, "train", ["max_steps", "max_epochs", "max_minutes", "threads",
                                        "patience"],
                        optional=True)
        ensure(self.lr > 0, "train.lr", f"must be positive, got {self.lr}")
        ensure(self.adam_eps > 0, "train.adam_eps", f"must be positive, got {self.adam_eps}")
        ensure(self.weight_decay >= 0, "train.weight_decay",
               f"must be >= 0, got {self.weight_decay}")
        ensure(0 <= self.seed < 2**32, "train.seed", f"must be in [0, 2^32), got {self.seed}")
        ensure(self.warmup_steps >= 0, "train.warmup_steps", "must be >= 0")
        ensure(self.lr_schedule != "linear" or self.max_steps is not None, "train.lr_schedule",
               "linear decays to zero at train.max_steps: set train.max_steps")
        ensure(self.lr_schedule != "linear" or self.max_steps is None
               or self.max_steps > self.warmup_steps, "train.lr_schedule",
               "linear decays after warmup: train.max_steps must exceed train.warmup_steps")
        ensure(self.keep_last >= 0, "train.keep_last", "must be >= 0")
        ensure(all(step >= 1 for step in self.keep_steps), "train.keep_steps",
               "must be steps (1 or more)")
        ensure(0.0 <= self.label_smoothing < 1.0, "train.label_smoothing", "must be in [0, 1)")
        ensure(0.0 <= self.rdrop_alpha <= 100.0, "train.rdrop_alpha", "must be in [0, 100]")
        ensure(all(0.0 <= b < 1.0 for b in self.betas), "train.betas", "must be in [0, 1)")
        if self.clip_grad_norm is not None:
            ensure(self.clip_grad_norm > 0, "train.clip_grad_norm", "must be positive or null")
        dev = self.device
        ensure(dev in ("auto", "cpu", "cuda", "mps")
               or (dev.startswith("cuda:") and dev[5:].isdigit()),
               "train.device", f"must be auto, cpu, cuda, cuda:N or mps, got {dev!r}")


def per_call(default: Any, help: str, alias: str | None = None) -> Any:
    """A decoding setting a call may change (see :class:`DecodeConfig`): its default, what it
    does, and the older short name that stays an alias."""
    return field(default=default, metadata={"help": help, "alias": alias})


@functools.cache
def field_types(cls: type) -> Mapping[str, Any]:
    """A config section's fields' types, by name (``typing.get_type_hints``, read once: it
    evaluates each annotation's text, ~0.2 ms for :class:`DecodeConfig`, which every
    translation's settings are checked against)."""
    return types.MappingProxyType(typing.get_type_hints(cls))


def per_call_settings() -> list[dataclasses.Field]:
    """The fields of :class:`DecodeConfig` a call may change, in declaration order."""
    return [f for f in dataclasses.fields(DecodeConfig) if "help" in f.metadata]


@dataclass
class DecodeConfig:
    """How translations are searched for. The settings declared with :func:`per_call` may
    also be changed for one call: they are ``mt translate``'s flags (``--beam-size``), the
    server's request fields and :meth:`Translator.settings`' keywords, each by its name here
    (an older short name stays an alias: ``--beam``, ``"beam"``)."""

    beam_size: int = per_call(5, "beam size (1 = greedy)", alias="beam")
    alpha: float = per_call(0.6, "length penalty ((5 + len) / 6) ** alpha (GNMT); 0 = none")
    max_len_a: float = per_call(1.5, "output at most a * source length + b tokens")
    max_len_b: int = per_call(10, "see max_len_a")
    # a loop a model falls into ("a tall tall tall tree") cut: no output writes an n-gram of
    # this size twice (decode/repeats.py); 0 = off
    no_repeat_ngram_size: int = per_call(0, "the length of a run of tokens no translation "
                                         "writes twice (a model's loop: 'tall tall tall'); "
                                         "0 = off")
    batch_size: int = 64  # sentences per decoding batch (a GPU takes at least 512)
    # auto: bf16 autocast where the hardware does bf16 natively (1.2-1.5x faster on an
    # AVX512-BF16 CPU; rounding may change a rare translation), fp16 on GPUs without bf16,
    # else fp32
    precision: Literal["auto", "fp32", "bf16", "fp16"] = per_call(
        "auto", "auto (bf16 where the hardware computes it natively), fp32 (what an export "
        "computes), bf16 or fp16 (a CUDA GPU)")
    # the most tokens of a sentence the model reads at once: a longer one is translated in
    # parts (translate/long_sentences.py), or cut off where it is read alone (an n-best list)
    max_input_tokens: int = 250
    max_sentence_tokens: int = per_call(
        0, "a longer sentence is translated in parts, cut at its clauses; 0: as long as the "
        "training's sources are, all but their longest thousandth (mt train records it), "
        "else max_input_tokens")
    # a word-level model's <unk>: written as the source word it attends to most (a name, a
    # number, a rare word), where the source has unknown words among those (translate/unknown.py)
    replace_unk: bool = per_call(True, "write each <unk> of the output as the source word it "
                                 "attends to most (a name or rare word the model cannot write)")
    # the model's final full stop left out where the source ends with a word (a title, a
    # caption), written as the source's comma, colon, semicolon, question or exclamation mark
    # where it ends with one (a long sentence's part, a question): translate/endings.py
    end_as_source: bool = per_call(True, "end each translation as its source ends: no full "
                                   "stop where the source ends with a word (a title, an item), "
                                   "its comma, colon, semicolon, question or exclamation mark "
                                   "where it ends with one")
    # what the model must not translate, kept exactly (translate/glossary.py's KEPT): on the
    # sentences that hold such spans the search is constrained to write them; where it cannot
    # be (sampling, a prefix, a CTranslate2 export) translated without, unless asked for there
    keep_spans: bool = per_call(True, "keep URLs, e-mail addresses, placeholders ({name}, "
                                "printf's), numbers (with their sign, a currency, percent "
                                "or degree sign or a unit beside them) and telephone "
                                "numbers exactly as the source writes "
                                "them, and write no number it lacks (the search constrained "
                                "on the sentences that hold them; not with sampling, a "
                                "prefix or a CTranslate2 export)")
    localize_numbers: bool = per_call(True, "write a kept number's decimal and thousands "
                                      "separators as the target language does (German's "
                                      "\"1,75\" and \"1.000\" in English: \"1.75\", "
                                      "\"1,000\"); with keep_spans")
    # sampling instead of search (e.g. for back-translation): draw each token from the
    # sample_topk most probable ones (0 = all) and/or from the nucleus, the fewest most probable
    # ones whose probability adds up to top_p (1 = all), their probabilities sharpened or
    # flattened by temperature first, with a generator seeded by sample_seed
    sample_topk: int = per_call(0, "sample each token from the K most probable instead of "
                                "searching (e.g. for back-translation); 0 = search")
    top_p: float = per_call(1.0, "nucleus sampling: sample each token from the fewest most "
                            "probable ones whose probability adds up to P; 1 = search (or "
                            "top-k alone)")
    temperature: float = per_call(1.0, "sampling temperature")
    sample_seed: int = per_call(0, "seed of the sampling", alias="seed")

    @property
    def samples(self) -> bool:
        """Whether tokens are drawn (top-k or nucleus sampling) instead of searched for."""
        return self.sample_topk > 0 or self.top_p < 1.0

    def validate(self) -> None:
        ensure(not self.samples or self.beam_size == 1,
               "decode.sample_topk" if self.sample_topk else "decode.top_p",
               "draws tokens instead of searching: use it with beam size 1 (n-best: n draws)")
        ensure(0 <= self.sample_seed < 2**63, "decode.sample_seed", "must be in [0, 2^63)")
        ensure_range(self, "decode", DECODE_RANGES)


@dataclass
class Config:
    """The whole run: what a YAML file holds and what every checkpoint stores."""

    name: str = "run"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def validate(self) -> None:
        ensure(bool(PLAIN_NAME.fullmatch(self.name)), "name",
               f"must be a plain name (letters, digits, '.', '_', '-'; it names the run "
               f"directory runs/<name>), got {self.name!r}; use --run-dir for a path")
        for section in (self.data, self.model, self.train, self.decode):
            section.validate()

    def to_dict(self) -> dict[str, Any]:
        plain = to_plain(dataclasses.asdict(self))
        data = plain["data"]  # a corpus lists only the keys it uses (a weight not 1, numbers)
        plain_corpus = {"weight": 1.0, "numbers": 0}

        def used(corpus: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in corpus.items() if v is not None and v != plain_corpus.get(k)}

        data["train"] = ([used(c) for c in data["train"]] if isinstance(data["train"], list)
                         else used(data["train"]))
        data["valid"] = used(data["valid"])
        if data["test"] is not None:
            data["test"] = {name: used(corpus) for name, corpus in data["test"].items()}
        return plain


def to_plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value


# bounds of the decoding settings, wherever they come from (a config, the CLI, the API): beyond
# them a setting means nothing (the output length is capped by model.max_positions anyway) or
# overflows (a temperature of 1e-300 turns every logit into inf)
DECODE_RANGES = {"beam_size": (1, 1000), "alpha": (0.0, 10.0), "max_len_a": (0.0, 1000.0),
                 "max_len_b": (0, 1_000_000), "batch_size": (1, 100_000),
                 "max_input_tokens": (1, 1_000_000), "max_sentence_tokens": (0, 1_000_000),
                 "sample_topk": (0, 1_000_000), "no_repeat_ngram_size": (0, 1000),
                 "temperature": (0.01, 100.0), "top_p": (1e-6, 1.0)}
