"""One strict, typed configuration for data, model, training and decoding: the schema.

Nested dataclasses, one per section, each with its defaults (commented: docs/config.md is the
reference) and a ``validate`` that checks every value's range once, here, at the edge: a bad
value raises :class:`ConfigError` with a one-line message naming the key. Reading YAML, type
checks and ``--set`` overrides are ``config_file.py``'s.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from transformer_mt.errors import ConfigError
from transformer_mt.languages import check_language

MULTI30K_SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr")
MULTI30K_LANGS = ("de", "en")
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a run's or a test set's name
TAG = re.compile(r"<[A-Za-z0-9_-]+>")  # a corpus tag: one token, as SentencePiece keeps it


MAX_WEIGHT = 1000.0  # a training corpus's weight: each pair seen at most this often an epoch


@dataclass
class CorpusConfig:
    """One parallel corpus: a Multi30k split, two line-parallel text files, or one TSV file.

    Files may be gzipped (``.gz``); relative paths are taken from the working directory.
    """

    multi30k: str | None = None  # a Multi30k split: train, val, test_2016_flickr, test_2017_flickr
    src: str | None = None  # the source side, one sentence per line
    tgt: str | None = None  # the target side, line by line parallel to src
    tsv: str | None = None  # one file of "source<TAB>target" lines
    # training corpora only: how often each pair is seen an epoch (2 = twice, 0.5 = a different
    # half every epoch), and a token put before each source (e.g. <bt> for back-translations)
    weight: float = 1.0
    tag: str | None = None

    def validate(self, key: str) -> None:
        _check(math.isfinite(self.weight) and 0 < self.weight <= MAX_WEIGHT, f"{key}.weight",
               f"must be a positive number up to {MAX_WEIGHT:g} (times each pair is seen an "
               f"epoch), got {self.weight:g}")
        if self.tag is not None:
            _check(TAG.fullmatch(self.tag) is not None, f"{key}.tag",
                   f"must look like <name> (letters, digits, '_', '-'), got {self.tag!r}")
        forms = [name for name in ("multi30k", "tsv") if getattr(self, name) is not None]
        if self.src is not None or self.tgt is not None:
            forms.append("src/tgt")
            _check(self.src is not None and self.tgt is not None, key,
                   "needs both src and tgt files (or one tsv file, or a multi30k split)")
        _check(len(forms) == 1, key, "must name exactly one corpus: a multi30k split, src and "
               f"tgt files, or a tsv file (got {', '.join(forms) or 'none'})")
        if self.multi30k is not None:
            _check(self.multi30k in MULTI30K_SPLITS, f"{key}.multi30k",
                   f"must be one of {', '.join(MULTI30K_SPLITS)}, got {self.multi30k!r}")

    def describe(self) -> str:
        if self.multi30k is not None:
            return f"Multi30k {self.multi30k}"
        return self.tsv if self.tsv is not None else f"{self.src} + {self.tgt}"


def _default_tests() -> dict[str, CorpusConfig]:
    return {name: CorpusConfig(multi30k=name) for name in MULTI30K_SPLITS[2:]}


@dataclass
class FilterConfig:
    """What cleaning removes from the training pairs (each off by default). Checked against
    facts the token-id cache keeps per line, so it costs nothing after the first tokenizing;
    what each filter removed is logged and kept in checkpoints (``mt info``)."""

    drop_empty: bool = False  # a side without tokens (empty, or whitespace only)
    max_chars: int | None = None  # a side longer than this many characters
    max_ratio: float | None = None  # the longer side over the shorter, in tokens
    drop_control: bool = False  # a side with control characters (tabs are fine)
    # a side py3langid identifies as another language than data.src_lang / data.tgt_lang
    # (needs the package: pip install 'transformer_mt[langid]')
    language: bool = False
    drop_copies: bool = False  # the source is the target, character for character
    dedup: bool = False  # a pair seen before, exactly (the first is kept)

    def validate(self) -> None:
        if self.max_chars is not None:
            _check(self.max_chars > 0, "data.filter.max_chars",
                   f"must be positive or null, got {self.max_chars}")
        if self.max_ratio is not None:
            _check(math.isfinite(self.max_ratio) and self.max_ratio >= 1,
                   "data.filter.max_ratio", f"must be at least 1 or null, got {self.max_ratio}")


MAX_NBEST = 512  # the most segmentations SentencePiece's n-best search returns


@dataclass
class SamplingConfig:
    """Subword regularization (SentencePiece only): each training epoch reads one of ``copies``
    segmentations of the training corpora, each sampled once (seeded) and cached like the
    plain one, so epochs see different segmentations and a run still resumes exactly. unigram:
    sampled from the ``nbest`` best segmentations (-1: all), smoothed by ``alpha``; bpe: BPE
    dropout with probability ``alpha``. Validation and translation use the plain one."""

    alpha: float | None = None  # null: off; e.g. 0.1
    nbest: int = 64
    copies: int = 8

    def validate(self, tokenizer: str) -> None:
        if self.alpha is None:
            return
        _check(tokenizer == "sentencepiece", "data.sampling.alpha",
               "samples subword segmentations: it needs data.tokenizer=sentencepiece")
        _check(0 < self.alpha <= 1, "data.sampling.alpha", f"must be in (0, 1], got {self.alpha}")
        _check(self.nbest == -1 or 1 < self.nbest <= MAX_NBEST, "data.sampling.nbest",
               f"must be in [2, {MAX_NBEST}] (SentencePiece's limit), got {self.nbest}")
        _check(1 <= self.copies <= 100, "data.sampling.copies",
               f"must be in [1, 100], got {self.copies}")


@dataclass
class DataConfig:
    """Where the corpora come from and how text is turned into ids."""

    src_lang: str = "de"  # any language spaCy knows (ISO code: de, fr, zh, ...)
    tgt_lang: str = "en"
    # the training corpus, or a list of them (each with its weight and tag), mixed every epoch
    train: CorpusConfig | list[CorpusConfig] = field(
        default_factory=lambda: CorpusConfig(multi30k="train"))
    valid: CorpusConfig = field(default_factory=lambda: CorpusConfig(multi30k="val"))
    # named test sets for `mt evaluate --split NAME`; default: Multi30k's two when training on it
    test: dict[str, CorpusConfig] | None = None
    data_dir: str | None = None  # local Multi30k copy; else MT_DATA_DIR, the cache, then download
    # spacy: words (spaCy's rule-based tokenizer); sentencepiece: subword units learnt from the
    # training corpus (the model travels inside the checkpoint)
    tokenizer: Literal["spacy", "sentencepiece"] = "spacy"
    subword: Literal["unigram", "bpe"] = "unigram"  # sentencepiece's algorithm
    vocab_size: int = 8000  # sentencepiece pieces per vocabulary (specials included)
    # one vocabulary for both languages; the source embedding, the target embedding and (with
    # model.tie_embeddings) the output projection are then one matrix
    shared_vocab: bool = False
    max_pairs: int | None = None  # use only the first N training pairs
    valid_max_pairs: int | None = None  # use only the first N validation pairs
    max_len: int = 100  # training pairs with a longer side (in tokens) are dropped and counted
    filter: FilterConfig = field(default_factory=FilterConfig)  # cleaning the training pairs
    sampling: SamplingConfig = field(default_factory=SamplingConfig)  # subword regularization
    min_freq: int = 2  # spacy: words seen fewer times are <unk>
    max_vocab: int | None = None  # spacy: per vocabulary, specials included
    lowercase: bool = False

    def validate(self) -> None:
        for key in ("src_lang", "tgt_lang"):
            check_language(getattr(self, key), f"data.{key}")
        _check(self.src_lang != self.tgt_lang, "data.tgt_lang", "must differ from data.src_lang")
        _check_positive(self, "data", ["max_len", "min_freq"])
        self.filter.validate()
        self.sampling.validate(self.tokenizer)
        _check(bool(self.training_corpora()), "data.train", "must name at least one corpus")
        tags = [c.tag for c in self.training_corpora() if c.tag is not None]
        _check(len(self.training_corpora()) > 1 or not tags, "data.train.tag",
               "marks one corpus among several; with one training corpus it tells nothing")
        _check_positive(self, "data", ["max_pairs", "valid_max_pairs"], optional=True)
        _check(16 <= self.vocab_size <= 1_000_000, "data.vocab_size",
               f"must be in [16, 1000000], got {self.vocab_size}")
        if self.max_vocab is not None:
            _check(self.max_vocab > 4, "data.max_vocab", "must be greater than 4 (the specials)")
        for key, corpus in self.corpora().items():
            corpus.validate(f"data.{key}")
            _check(key.startswith("train") or (corpus.weight == 1.0 and corpus.tag is None),
                   f"data.{key}", "has a weight or a tag: those belong to training corpora "
                   "(data.train) only")
            if corpus.multi30k is not None:
                for lang in (self.src_lang, self.tgt_lang):
                    _check(lang in MULTI30K_LANGS, f"data.{key}",
                           f"is a Multi30k split, which has {' and '.join(MULTI30K_LANGS)} "
                           f"only, not {lang!r}; name your own files (data.{key}.src and "
                           f"data.{key}.tgt, or data.{key}.tsv)")

    def test_sets(self) -> dict[str, CorpusConfig]:
        """The named test sets: ``data.test``, or Multi30k's when training on Multi30k."""
        if self.test is not None:
            return self.test
        multi = any(c.multi30k is not None for c in self.training_corpora())
        return _default_tests() if multi else {}

    def training_corpora(self) -> list[CorpusConfig]:
        """``data.train`` as a list (one corpus, or several)."""
        return list(self.train) if isinstance(self.train, list) else [self.train]

    def training_keys(self) -> list[str]:
        """The config key of each training corpus: ``train``, or ``train.0``, ``train.1``..."""
        if isinstance(self.train, list):
            return [f"train.{i}" for i in range(len(self.train))]
        return ["train"]

    def corpora(self) -> dict[str, CorpusConfig]:
        """Every corpus of the config by its key: train (or train.N), valid and test.NAME."""
        named = dict(zip(self.training_keys(), self.training_corpora(), strict=True))
        named["valid"] = self.valid
        named.update({f"test.{name}": corpus for name, corpus in self.test_sets().items()})
        return named


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
    activation: Literal["relu", "gelu"] = "relu"
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
        _check_positive(self, "model", ["d_model", "n_heads", "n_encoder_layers",
                                        "n_decoder_layers", "d_ff", "max_positions"])
        _check(self.max_positions >= 3, "model.max_positions",
               f"must be at least 3 (<bos>, a token, <eos>), got {self.max_positions}")
        _check(self.d_model % self.n_heads == 0, "model.n_heads",
               f"must divide model.d_model ({self.d_model} % {self.n_heads} != 0)")
        for key in ("dropout", "attention_dropout", "activation_dropout"):
            value = getattr(self, key)
            _check(0.0 <= value < 1.0, f"model.{key}", f"must be in [0, 1), got {value}")


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
    lr: float = 7e-4  # peak learning rate, reached at the end of warmup
    warmup_steps: int = 1000
    # after warmup: inverse_sqrt (decays as 1/sqrt(step), open-ended) or linear (falls in a
    # straight line to zero at train.max_steps: for a fixed budget of steps)
    lr_schedule: Literal["inverse_sqrt", "linear"] = "inverse_sqrt"
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_grad_norm: float | None = 1.0
    log_every: int = 50
    eval_every: int = 500
    save_every: int = 500
    keep_last: int = 2  # step checkpoints kept besides last.pt and best.pt (for averaging)
    patience: int | None = None  # stop after this many validations without a better val BLEU
    eval_beam_size: int = 1  # beam used for val BLEU during training (1 = greedy)
    tensorboard: bool = False  # also log metrics for TensorBoard (needs the tensorboard package)
    # fine-tuning: start from this checkpoint's weights, vocabularies and tokenizers (the model
    # and tokenizer settings must match); the optimizer and the step count start afresh
    init_from: str | None = None

    def total_steps(self, steps_per_epoch: int) -> int:
        """The steps the run takes (``max_steps``, or ``max_epochs`` of ``steps_per_epoch``)."""
        by_epochs = self.max_epochs * steps_per_epoch if self.max_epochs is not None else math.inf
        by_steps = self.max_steps if self.max_steps is not None else math.inf
        return int(min(by_epochs, by_steps))

    def validate(self) -> None:
        _check(self.max_steps is not None or self.max_epochs is not None, "train.max_steps",
               "set train.max_steps or train.max_epochs, or training never stops")
        _check_positive(self, "train", ["max_tokens", "accum_steps", "log_every", "eval_every",
                                        "save_every", "eval_beam_size"])
        _check_positive(self, "train", ["max_steps", "max_epochs", "threads", "patience"],
                        optional=True)
        _check(self.lr > 0, "train.lr", f"must be positive, got {self.lr}")
        _check(self.adam_eps > 0, "train.adam_eps", f"must be positive, got {self.adam_eps}")
        _check(self.weight_decay >= 0, "train.weight_decay",
               f"must be >= 0, got {self.weight_decay}")
        _check(0 <= self.seed < 2**32, "train.seed", f"must be in [0, 2^32), got {self.seed}")
        _check(self.warmup_steps >= 0, "train.warmup_steps", "must be >= 0")
        _check(self.lr_schedule != "linear" or self.max_steps is not None, "train.lr_schedule",
               "linear decays to zero at train.max_steps: set train.max_steps")
        _check(self.lr_schedule != "linear" or self.max_steps is None
               or self.max_steps > self.warmup_steps, "train.lr_schedule",
               "linear decays after warmup: train.max_steps must exceed train.warmup_steps")
        _check(self.keep_last >= 0, "train.keep_last", "must be >= 0")
        _check(0.0 <= self.label_smoothing < 1.0, "train.label_smoothing", "must be in [0, 1)")
        _check(all(0.0 <= b < 1.0 for b in self.betas), "train.betas", "must be in [0, 1)")
        if self.clip_grad_norm is not None:
            _check(self.clip_grad_norm > 0, "train.clip_grad_norm", "must be positive or null")
        dev = self.device
        _check(dev in ("auto", "cpu", "cuda", "mps")
               or (dev.startswith("cuda:") and dev[5:].isdigit()),
               "train.device", f"must be auto, cpu, cuda, cuda:N or mps, got {dev!r}")


def per_call(default: Any, help: str, alias: str | None = None) -> Any:
    """A decoding setting a call may change (see :class:`DecodeConfig`): its default, what it
    does, and the older short name that stays an alias."""
    return field(default=default, metadata={"help": help, "alias": alias})


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
    batch_size: int = 64  # sentences per decoding batch (a GPU takes at least 512)
    # auto: bf16 autocast where the hardware does bf16 natively (1.2-1.5x faster on an
    # AVX512-BF16 CPU; rounding may change a rare translation), fp16 on GPUs without bf16,
    # else fp32
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    max_input_tokens: int = 250  # longer inputs are truncated with a warning
    # sampling instead of search (e.g. for back-translation): draw each token from the
    # sample_topk most probable ones (0 = off), their probabilities sharpened or flattened by
    # temperature, with a generator seeded by sample_seed
    sample_topk: int = per_call(0, "sample each token from the K most probable instead of "
                                "searching (e.g. for back-translation); 0 = search")
    temperature: float = per_call(1.0, "sampling temperature")
    sample_seed: int = per_call(0, "seed of the sampling", alias="seed")

    def validate(self) -> None:
        _check(self.sample_topk == 0 or self.beam_size == 1, "decode.sample_topk",
               "samples one translation per sentence: use it with beam size 1")
        _check(0 <= self.sample_seed < 2**63, "decode.sample_seed", "must be in [0, 2^63)")
        _check_range(self, "decode", DECODE_RANGES)


@dataclass
class Config:
    """The whole run: what a YAML file holds and what every checkpoint stores."""

    name: str = "run"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def validate(self) -> None:
        _check(bool(PLAIN_NAME.fullmatch(self.name)), "name",
               f"must be a plain name (letters, digits, '.', '_', '-'; it names the run "
               f"directory runs/<name>), got {self.name!r}; use --run-dir for a path")
        for section in (self.data, self.model, self.train, self.decode):
            section.validate()

    def to_dict(self) -> dict[str, Any]:
        plain = to_plain(dataclasses.asdict(self))
        data = plain["data"]  # a corpus lists only the keys it uses (and a weight not 1)

        def used(corpus: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in corpus.items()
                    if v is not None and not (k == "weight" and v == 1.0)}

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


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"config key '{key}' {message}")


# bounds of the decoding settings, wherever they come from (a config, the CLI, the API): beyond
# them a setting means nothing (the output length is capped by model.max_positions anyway) or
# overflows (a temperature of 1e-300 turns every logit into inf)
DECODE_RANGES = {"beam_size": (1, 1000), "alpha": (0.0, 10.0), "max_len_a": (0.0, 1000.0),
                 "max_len_b": (0, 1_000_000), "batch_size": (1, 100_000),
                 "max_input_tokens": (1, 1_000_000), "sample_topk": (0, 1_000_000),
                 "temperature": (0.01, 100.0)}


def _check_range(obj: Any, section: str, ranges: dict[str, tuple[float, float]]) -> None:
    for key, (low, high) in ranges.items():
        value = getattr(obj, key)
        _check(low <= value <= high, f"{section}.{key}", f"must be in [{low}, {high}], got "
               f"{value}")


def _check_positive(obj: Any, section: str, keys: list[str], optional: bool = False) -> None:
    for key in keys:
        value = getattr(obj, key)
        if optional and value is None:
            continue
        _check(value > 0, f"{section}.{key}", f"must be positive, got {value}")
