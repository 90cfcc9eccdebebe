"""From corpora to ids: :func:`prepare_data` turns the config's training corpora into a
:class:`TrainingSet` and its validation corpus into :class:`ParallelData` (memory-mapped ids,
see ``data/id_cache.py``), with the tokenizers and the vocabularies (built from the training
corpora, or a checkpoint's). Mixing and batching those ids is ``data/mixing.py`` and
``data/batching.py``'s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import chain, islice

import numpy as np

from transformer_mt.config import Config
from transformer_mt.config.data import MAX_NBEST, CorpusConfig, DataConfig
from transformer_mt.data.corpus import Corpus, Side
from transformer_mt.data.filters import describe_removed
from transformer_mt.data.id_cache import EncodedSide, encode_sides
from transformer_mt.data.mixing import TrainingCorpus, TrainingSet
from transformer_mt.data.pairs import ParallelData, pair_up
from transformer_mt.data.tokenize import (
    SubwordTokenizer,
    Tokenizer,
    cached_sentencepiece,
    make_tokenizer,
)
from transformer_mt.data.tokenize import tags as tokenizer_tags
from transformer_mt.data.vocab import Vocab
from transformer_mt.errors import ConfigError, DataError

log = logging.getLogger(__name__)

MAX_EPOCH_EXAMPLES = 100_000_000  # examples an epoch lays out (18 bytes each in memory)


Segmentation = tuple[Tokenizer, Tokenizer]  # a corpus's (src, tgt) tokenizers


def encode_corpora(corpora: Sequence[Corpus], segmentations: Sequence[Segmentation],
                   progress: bool = False) -> list[list[tuple[EncodedSide, EncodedSide]]]:
    """Both sides of each corpus in each segmentation as ids (from the cache, or tokenized now,
    side by side where there are several), checked parallel."""
    sides: tuple[Side, Side] = ("src", "tgt")
    jobs = [(corpus, side, tokenizer) for corpus in corpora for pair in segmentations
            for side, tokenizer in zip(sides, pair, strict=True)]
    done = iter(encode_sides(jobs, progress))
    encoded = [[(next(done), next(done)) for _ in segmentations] for _ in corpora]
    for corpus, pairs in zip(corpora, encoded, strict=True):
        for src, tgt in pairs:
            corpus.check_parallel(len(src), len(tgt))
            for side, ids in zip(sides, (src, tgt), strict=True):
                if not ids.offsets[-1]:  # (a side of empty lines: columns the other way round?)
                    raise DataError(f"{corpus.key}: every one of its {len(ids):,} {side} "
                                    f"sentences is empty ({corpus.describe()}); a pair needs "
                                    "text on both sides (a TSV line is source<TAB>target)")
    return encoded


def encode_corpus(corpus: Corpus, tokenizers: Segmentation,
                  progress: bool = False) -> tuple[EncodedSide, EncodedSide]:
    """Both sides of one corpus as ids, checked parallel."""
    return encode_corpora([corpus], [tokenizers], progress)[0][0]


def build_vocabs(cfg: DataConfig, sides: Sequence[tuple[EncodedSide, EncodedSide]],
                 tokenizers: tuple[Tokenizer, Tokenizer]) -> tuple[Vocab, Vocab]:
    """The vocabularies: a subword model's pieces, or the words counted ``data.min_freq`` times
    in the (first ``data.max_pairs`` of each corpus's) training pairs, the corpora's tags
    always in; one for both sides with shared_vocab."""
    fixed = (tokenizers[0].fixed_vocab(), tokenizers[1].fixed_vocab())
    if fixed[0] is not None and fixed[1] is not None:
        return fixed[0], fixed[1]
    src_counts: dict[str, int] = {}
    tgt_counts: dict[str, int] = {}
    for src, tgt in sides:
        for total, side in ((src_counts, src), (tgt_counts, tgt)):
            for t, c in side.type_counts(cfg.max_pairs).items():
                total[t] = total.get(t, 0) + c
    tags = tokenizer_tags(cfg)
    if cfg.shared_vocab:
        both = dict(src_counts)
        for t, c in tgt_counts.items():
            both[t] = both.get(t, 0) + c
        vocab = Vocab.from_counts(both, cfg.min_freq, cfg.max_vocab, tags)
        return vocab, vocab
    return (Vocab.from_counts(src_counts, cfg.min_freq, cfg.max_vocab, tags),
            Vocab.from_counts(tgt_counts, cfg.min_freq, cfg.max_vocab))


def corpus_of(cfg: DataConfig, key: str) -> Corpus:
    """The corpus of a config key: ``train`` (or ``train.N``), ``valid`` or the name of a test
    set."""
    training = dict(zip(cfg.training_keys(), cfg.training_corpora(), strict=True))
    entry: CorpusConfig | None = {**training, "valid": cfg.valid}.get(key)
    name = f"data.{key}"
    if entry is None:
        tests = cfg.test_sets()
        if key not in tests:
            known = ", ".join(["valid", *tests]) or "none"
            raise DataError(f"no test set named '{key}' in the config (known: {known}); add it "
                            "under data.test, or pass --src and --ref files")
        entry, name = tests[key], f"data.test.{key}"
    return Corpus.from_config(entry, name, cfg.src_lang, cfg.tgt_lang, cfg.data_dir)


def training_corpora(cfg: DataConfig) -> list[Corpus]:
    """The training corpora (``data.train``: one, or a list)."""
    return [corpus_of(cfg, key) for key in cfg.training_keys()]


def training_fingerprint(cfg: DataConfig) -> str:
    """What identifies the training corpora's text (both sides' SHA-256 of each): checkpoints
    carry it, and an exact resume refuses a corpus that has changed since."""
    return "|".join(f"{c.fingerprint('src')}+{c.fingerprint('tgt')}"
                    for c in training_corpora(cfg))


def subword_models(cfg: DataConfig, corpora: Sequence[Corpus], progress: bool = False
                   ) -> tuple[bytes, bytes]:
    """SentencePiece models learnt from the (first ``data.max_pairs`` of each) training pairs:
    one for both sides with ``shared_vocab``, else one per side (cached, see tokenize.py).
    Where one is learnt, the files' sides are first checked to have as many lines each (else
    that was said after the learning, minutes on a large corpus, and the tokenizing)."""
    checked: list[bool] = []

    def side(s: Side) -> Iterator[str]:  # (runs as SentencePiece starts reading it)
        if not checked:
            for c in corpora:
                if c.two_files:
                    c.check_parallel(*(sum(1 for _ in c.lines(t)) for t in ("src", "tgt")))
            checked.append(True)
        yield from chain.from_iterable(
            c.lines(s) if cfg.max_pairs is None
            else islice(c.lines(s), cfg.max_pairs) for c in corpora)

    def fingerprint(s: Side) -> str:
        return "|".join(c.fingerprint(s) for c in corpora)

    extra = f":first{cfg.max_pairs}" if cfg.max_pairs is not None else ""
    if cfg.shared_vocab:
        both = f"{fingerprint('src')}+{fingerprint('tgt')}{extra}"
        model = cached_sentencepiece(chain(side("src"), side("tgt")), cfg, both, progress)
        return model, model
    langs: dict[Side, str] = {"src": cfg.src_lang, "tgt": cfg.tgt_lang}
    src, tgt = (cached_sentencepiece(side(s), cfg, fingerprint(s) + extra, progress,
                                     f"the training corpora's {s} side ({langs[s]})")
                for s in langs)
    return src, tgt


@dataclass
class PreparedData:
    """What training needs from the data: pairs as ids, vocabularies, tokenizers."""

    train: TrainingSet
    valid: ParallelData
    src_vocab: Vocab
    tgt_vocab: Vocab
    tokenizers: tuple[Tokenizer, Tokenizer]
    subword_models: tuple[bytes, bytes] | None  # what the checkpoint must carry

    def fitted(self, cfg: Config) -> Config:
        """``cfg`` with ``decode.max_len_a`` raised, where it is lower, to what the training
        pairs need (:meth:`TrainingSet.output_ratio`, rounded up to a tenth): a target
        language written in more tokens than the source (English into Chinese characters, a
        larger subword vocabulary on one side) would otherwise be cut, in validation too."""
        decode = cfg.decode
        needed = math.ceil(round(self.train.output_ratio(decode.max_len_b) * 10, 6)) / 10
        if needed <= decode.max_len_a:
            return cfg
        log.info("decode.max_len_a %g -> %g: the training's targets need up to %g tokens a "
                 "source token (+ max_len_b %d; all but the longest thousandth)",
                 decode.max_len_a, needed, needed, decode.max_len_b)
        return replace(cfg, decode=replace(decode, max_len_a=needed))

    def describe(self, cfg: Config) -> str:
        data = cfg.data
        max_len = min(data.max_len, cfg.model.max_pair_tokens)
        vocab = (f"one shared vocabulary of {len(self.src_vocab)}" if data.shared_vocab else
                 f"vocabularies: {len(self.src_vocab)} {data.src_lang}, "
                 f"{len(self.tgt_vocab)} {data.tgt_lang}")
        several = len(self.train.corpora) > 1
        corpora = ", ".join(
            f"{len(c.pairs)} {'' if several else 'training '}pairs from {c.name} (" + (
                f"weight {c.weight:g}, " + (f"tag {c.tag}, " if c.tag else "") if several
                else "") + f"removed: {describe_removed(c.pairs.removed)}"
            + ("" if several else f"; too_long means over {max_len} tokens") + ")"
            for c in self.train.corpora)
        if several:
            corpora = (f"{len(self.train)} training pairs: {corpora}; too_long means over "
                       f"{max_len} tokens")
        sampled = (f", {data.sampling.copies} sampled segmentations of the training pairs "
                   f"(alpha {data.sampling.alpha:g})" if data.sampling.alpha is not None else "")
        return (f"{corpora}, {len(self.valid)} validation pairs; {data.tokenizer} "
                f"tokens{sampled}, {vocab}")


def languages_wrong(data: DataConfig, corpus: Corpus, progress: bool = False) -> np.ndarray:
    """``(n,)`` bool: the pairs with a side identified as another language than its own."""
    from transformer_mt.data.language_id import wrong_language

    return (wrong_language(corpus, "src", data.src_lang, progress)
            | wrong_language(corpus, "tgt", data.tgt_lang, progress))


def sampled_tokenizers(cfg: Config, models: tuple[bytes, bytes]
                       ) -> list[Segmentation]:
    """The tokenizers of ``data.sampling.copies`` sampled segmentations (seeded by the run's
    ``train.seed``, copy and side)."""
    s = cfg.data.sampling
    alpha = s.alpha
    assert alpha is not None
    if cfg.data.subword != "unigram" or s.nbest == -1:
        what = "BPE dropout" if cfg.data.subword != "unigram" else "data.sampling.nbest=-1"
        raise ConfigError(f"{what} samples with SentencePiece's own random generator, which "
                          "gives other segmentations for the same seed in another process; "
                          "use data.subword=unigram with data.sampling.nbest in [2, "
                          f"{MAX_NBEST}] (sampled reproducibly), or drop data.sampling.alpha")

    def copy(k: int) -> Segmentation:
        src, tgt = (SubwordTokenizer(model, cfg.data.lowercase,
                                     (alpha, s.nbest, cfg.train.seed * 1000 + 2 * k + i))
                    for i, model in enumerate(models))
        return src, tgt

    return [copy(k) for k in range(s.copies)]


def _training_set(data: DataConfig, corpora: list[Corpus],
                  encoded: list[list[tuple[EncodedSide, EncodedSide]]],
                  vocabs: tuple[Vocab, Vocab], max_len: int, progress: bool) -> TrainingSet:
    """The training corpora as pairs (one per segmentation), filtered and limited, with their
    weights and tags; refused where the weights lay out more examples than fit in memory."""
    src_vocab, tgt_vocab = vocabs
    train = TrainingSet([])
    for entry, corpus, copies in zip(data.training_corpora(), corpora, encoded, strict=True):
        wrong = languages_wrong(data, corpus, progress) if data.filter.language else None
        pairs = [pair_up(src, tgt, src_vocab, tgt_vocab, max_len, data.max_pairs,
                         rules=data.filter, wrong_language=wrong) for src, tgt in copies]
        tag_id = None
        if entry.tag is not None:
            tag_id = src_vocab.stoi.get(entry.tag)
            if tag_id is None:
                raise DataError(f"the tag {entry.tag} of {corpus.key} is not in the source "
                                "vocabulary (a checkpoint's, made without it); fine-tune "
                                "from a model that has it, or train from scratch")
        train.corpora.append(TrainingCorpus(corpus.describe(), pairs, entry.weight, entry.tag,
                                            tag_id))
    examples = sum(c.weight * len(c.pairs) for c in train.corpora)
    if examples > MAX_EPOCH_EXAMPLES:
        raise ConfigError(f"the weights of data.train lay out {examples:,.0f} examples an epoch "
                          f"(weight times pairs, summed), more than {MAX_EPOCH_EXAMPLES:,} "
                          "fit in memory; lower the weights (a weight is how often each pair "
                          "is seen an epoch)")
    return train


def read_through(corpus: Corpus) -> None:
    """A validation or test corpus (your own: not Multi30k's, checked by its sums) read
    through, so that what is wrong in its lines (one that is not UTF-8, a TSV line without two
    columns, sides of different lengths) is said before the training corpora are learnt from
    and tokenized, minutes on a large corpus."""
    if corpus.multi30k is None:
        corpus.check_parallel(*(sum(1 for _ in corpus.lines(s)) for s in ("src", "tgt")))


def prepare_data(cfg: Config, vocabs: tuple[Vocab, Vocab] | None = None,
                 models: tuple[bytes, bytes] | None = None,
                 progress: bool = False) -> PreparedData:
    """Read, check and encode the training and validation corpora. ``vocabs`` and ``models``
    (SentencePiece) come from a checkpoint to resume or fine-tune from; else they are built
    from the training corpora."""
    data = cfg.data
    corpora = training_corpora(data)
    valid = corpus_of(data, "valid")
    for name, corpus in data.test_sets().items():  # your test files are checked now, not later
        if corpus.multi30k is None:
            read_through(corpus_of(data, name))
    read_through(valid)
    if data.tokenizer == "sentencepiece" and models is None:
        models = subword_models(data, corpora, progress)
    if data.tokenizer != "sentencepiece":
        models = None
    tokenizers = (make_tokenizer(data, "src", models and models[0]),
                  make_tokenizer(data, "tgt", models and models[1]))
    segmentations = ([tokenizers] if data.sampling.alpha is None or models is None
                     else sampled_tokenizers(cfg, models))
    encoded = encode_corpora(corpora, segmentations, progress)
    if vocabs is not None:
        src_vocab, tgt_vocab = vocabs
    else:
        src_vocab, tgt_vocab = build_vocabs(data, [e[0] for e in encoded], tokenizers)
    max_len = min(data.max_len, cfg.model.max_pair_tokens)
    train = _training_set(data, corpora, encoded, (src_vocab, tgt_vocab), max_len, progress)
    v_src, v_tgt = encode_corpus(valid, tokenizers)
    refs = list(valid.lines("tgt"))
    valid_data = pair_up(v_src, v_tgt, src_vocab, tgt_vocab, cfg.model.max_pair_tokens,
                         data.valid_max_pairs, refs)
    if len(train) == 0:
        limit = (f"data.max_len={data.max_len}" if data.max_len == max_len else
                 f"{max_len} tokens (model.max_positions={cfg.model.max_positions} less "
                 "<bos> and <eos>)")
        raise DataError(f"no training pairs left after dropping those longer than {limit}; "
                        "raise that limit")
    if len(valid_data) == 0:
        raise DataError(f"no validation pairs in {data.valid.describe()} (or all are too long "
                        "for model.max_positions)")
    return PreparedData(train, valid_data, src_vocab, tgt_vocab, tokenizers, models)
