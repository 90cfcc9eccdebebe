"""The data section of the configuration: the corpora (:class:`CorpusConfig`: Multi30k, text
files or TSV, with a weight and a tag when training), the cleaning filters, subword sampling,
and :class:`DataConfig`, which holds them with the tokenizer and vocabulary settings. The
rest of the schema, and what every section shares, is ``config/__init__.py``'s."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from transformer_mt.config.languages import check_language
from transformer_mt.errors import ensure, ensure_positive

MULTI30K_SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr")
MULTI30K_LANGS = ("de", "en")
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a run's or a test set's name
TAG = re.compile(r"<[A-Za-z0-9_-]+>")  # a corpus tag: one token, as SentencePiece keeps it


MAX_WEIGHT = 1000.0  # a training corpus's weight: each pair seen at most this often an epoch
MAX_NUMBERS = 100  # a training corpus's variants of each pair with numbers


@dataclass
class CorpusConfig:
    """One parallel corpus: a Multi30k split, two line-parallel text files, one TSV file, a
    translation memory (TMX), or the suggestions users sent to ``mt serve --suggestions`` (or
    to LibreTranslate).

    Files may be gzipped (``.gz``); relative paths are taken from the working directory.
    """

    multi30k: str | None = None  # a Multi30k split: train, val, test_2016_flickr, test_2017_flickr
    src: str | None = None  # the source side, one sentence per line
    tgt: str | None = None  # the target side, line by line parallel to src
    tsv: str | None = None  # one file of "source<TAB>target" lines
    tmx: str | None = None  # a translation memory: its units' data.src_lang and tgt_lang segments
    suggestions: str | None = None  # an SQLite store of suggestions (data.src_lang -> tgt_lang)
    # training corpora only: how often each pair is seen an epoch (2 = twice, 0.5 = a different
    # half every epoch), and a token put before each source (e.g. <bt> for back-translations)
    weight: float = 1.0
    tag: str | None = None
    # training corpora only: for each pair whose sides share a number, this many variants with
    # other numbers in its place (data/numbers.py: a model learns to copy numbers it rarely saw)
    numbers: int = 0

    def validate(self, key: str) -> None:
        ensure(0 <= self.numbers <= MAX_NUMBERS, f"{key}.numbers", "must be from 0 to "
               f"{MAX_NUMBERS} (variants of each pair with numbers), got {self.numbers}")
        ensure(math.isfinite(self.weight) and 0 < self.weight <= MAX_WEIGHT, f"{key}.weight",
               f"must be a positive number up to {MAX_WEIGHT:g} (times each pair is seen an "
               f"epoch), got {self.weight:g}")
        if self.tag is not None:
            ensure(TAG.fullmatch(self.tag) is not None, f"{key}.tag",
                   f"must look like <name> (letters, digits, '_', '-'), got {self.tag!r}")
        forms = [name for name in ("multi30k", "tsv", "tmx", "suggestions")
                 if getattr(self, name) is not None]
        if self.src is not None or self.tgt is not None:
            forms.append("src/tgt")
            ensure(self.src is not None and self.tgt is not None, key,
                   "needs both src and tgt files (or one tsv or tmx file, or a multi30k split)")
        alone = "" if forms or not key.startswith("data.train") else (
            f"; a --set of {key}.numbers, weight or tag alone replaces the default corpus: "
            f"name it too, e.g. --set {key}.multi30k=train")
        ensure(len(forms) == 1, key, "must name exactly one corpus: a multi30k split, src and "
               f"tgt files, a tsv or tmx file or a suggestions store (got "
               f"{', '.join(forms) or 'none'}"
               f"){alone}")
        if self.multi30k is not None:
            ensure(self.multi30k in MULTI30K_SPLITS, f"{key}.multi30k",
                   f"must be one of {', '.join(MULTI30K_SPLITS)}, got {self.multi30k!r}")

    def describe(self) -> str:
        if self.multi30k is not None:
            found = f"Multi30k {self.multi30k}"
        elif self.suggestions is not None:
            found = f"suggestions in {self.suggestions}"
        else:
            found = self.tsv or self.tmx or f"{self.src} + {self.tgt}"
        return with_numbers(found, self.numbers)


def with_numbers(corpus: str, numbers: int) -> str:
    """A corpus's description, and its variants with numbers (``CorpusConfig.numbers``)."""
    return f"{corpus} with {numbers} variants of each pair with numbers" if numbers else corpus


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
            ensure(self.max_chars > 0, "data.filter.max_chars",
                   f"must be positive or null, got {self.max_chars}")
        if self.max_ratio is not None:
            ensure(math.isfinite(self.max_ratio) and self.max_ratio >= 1,
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
        ensure(tokenizer == "sentencepiece", "data.sampling.alpha",
               "samples subword segmentations: it needs data.tokenizer=sentencepiece")
        ensure(0 < self.alpha <= 1, "data.sampling.alpha", f"must be in (0, 1], got {self.alpha}")
        ensure(self.nbest == -1 or 1 < self.nbest <= MAX_NBEST, "data.sampling.nbest",
               f"must be in [2, {MAX_NBEST}] (SentencePiece's limit), got {self.nbest}")
        ensure(1 <= self.copies <= 100, "data.sampling.copies",
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
    # spacy: a hyphen spaCy splits out of a word ("t-shirt": t, -, shirt; "dit-elle": dit,
    # -elle) is the token @-@, which the translation writes joined ("t-shirt", not "t - shirt");
    # checkpoints made before it have false
    mark_hyphens: bool = True
    lowercase: bool = False

    def validate(self) -> None:
        for key in ("src_lang", "tgt_lang"):
            check_language(getattr(self, key), f"data.{key}", self.tokenizer == "sentencepiece")
        ensure(self.src_lang != self.tgt_lang, "data.tgt_lang", "must differ from data.src_lang")
        ensure_positive(self, "data", ["max_len", "min_freq"])
        self.filter.validate()
        self.sampling.validate(self.tokenizer)
        ensure(bool(self.training_corpora()), "data.train", "must name at least one corpus")
        tags = [c.tag for c in self.training_corpora() if c.tag is not None]
        ensure(len(self.training_corpora()) > 1 or not tags, "data.train.tag",
               "marks one corpus among several; with one training corpus it tells nothing")
        ensure_positive(self, "data", ["max_pairs", "valid_max_pairs"], optional=True)
        ensure(16 <= self.vocab_size <= 1_000_000, "data.vocab_size",
               f"must be in [16, 1000000], got {self.vocab_size}")
        if self.max_vocab is not None:
            ensure(self.max_vocab > 4, "data.max_vocab", "must be greater than 4 (the specials)")
        for key, corpus in self.corpora().items():
            corpus.validate(f"data.{key}")
            ensure(key.startswith("train") or (corpus.weight == 1.0 and corpus.tag is None
                                               and not corpus.numbers),
                   f"data.{key}", "has a weight, a tag or numbers: those belong to training "
                   "corpora (data.train) only")
            if corpus.multi30k is not None:
                for lang in (self.src_lang, self.tgt_lang):
                    ensure(lang in MULTI30K_LANGS, f"data.{key}",
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
