"""From corpora to ids: :func:`prepare_data` turns the config's training and validation
corpora into :class:`ParallelData` (memory-mapped ids, see ``data/id_cache.py``), with the
tokenizers and the vocabularies (built from the training corpus, or a checkpoint's).
Batching those ids is ``data/batching.py``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from transformer_mt.config import Config, CorpusConfig, DataConfig, FilterConfig
from transformer_mt.data.corpus import Corpus
from transformer_mt.data.filters import describe_removed, keep_pairs
from transformer_mt.data.id_cache import EncodedSide, encode_side
from transformer_mt.data.tokenize import Tokenizer, cached_sentencepiece, make_tokenizer
from transformer_mt.data.vocab import BOS_ID, EOS_ID, UNK_ID, Vocab
from transformer_mt.errors import DataError

log = logging.getLogger(__name__)


@dataclass
class ParallelData:
    """Sentence pairs as ids: the pairs ``index`` of two encoded sides, whose type ids the
    lookup tables map into the vocabularies. A source gets ``<eos>``, a target ``<bos>`` and
    ``<eos>``, when a batch is built. ``references`` holds the raw target lines (validation and
    test sets only: a training corpus is never held as text)."""

    src: EncodedSide
    tgt: EncodedSide
    src_lookup: np.ndarray  # (types,) int64: type id -> vocabulary id
    tgt_lookup: np.ndarray
    index: np.ndarray  # (n,) int32: the pairs kept, as line numbers of the corpus
    lengths: np.ndarray  # (n, 2) int32: source tokens + <eos>, target tokens + <eos> (the loss's)
    references: list[str] | None = None
    removed: dict[str, int] = field(default_factory=dict)  # pairs each filter removed

    @property
    def n_dropped(self) -> int:
        return sum(self.removed.values())

    def __len__(self) -> int:
        return len(self.index)

    def source(self, k: int) -> np.ndarray:
        """``(S,)`` int64 ids of pair ``k``'s source, ending in ``<eos>``."""
        ids = self.src_lookup[self.src.sentence(int(self.index[k]))]
        return np.append(ids, EOS_ID)

    def target(self, k: int) -> np.ndarray:
        """``(T + 2,)`` int64 ids of pair ``k``'s target: ``<bos> y1 ... yn <eos>``."""
        ids = self.tgt_lookup[self.tgt.sentence(int(self.index[k]))]
        return np.concatenate([[BOS_ID], ids, [EOS_ID]])


def lookup_table(types: Sequence[str], vocab: Vocab) -> np.ndarray:
    """``(len(types),)`` int64: each type's vocabulary id (``<unk>``'s where it has none)."""
    return np.array([vocab.stoi.get(t, UNK_ID) for t in types], dtype=np.int64)


def pair_up(src: EncodedSide, tgt: EncodedSide, src_vocab: Vocab, tgt_vocab: Vocab,
            max_len: int | None = None, max_pairs: int | None = None,
            references: Sequence[str] | None = None,
            rules: FilterConfig | None = None) -> ParallelData:
    """The first ``max_pairs`` pairs, less those with a side longer than ``max_len`` tokens
    and those the filters ``rules`` remove (``data/filters.py``)."""
    n = len(src) if max_pairs is None else min(max_pairs, len(src))
    lengths = np.empty((n, 2), dtype=np.int32)  # 8 bytes a pair: all that planning needs
    lengths[:, 0] = src.lengths()[:n]
    lengths[:, 1] = tgt.lengths()[:n]
    index, removed = keep_pairs(src, tgt, lengths, max_len, rules)
    if len(index) < n:
        lengths = lengths[index]
    lengths += 1  # <eos> on either side (the target's <bos> is not predicted)
    refs = None
    if references is not None:
        refs = [references[i] for i in index.tolist()]
    return ParallelData(src, tgt, lookup_table(src.types, src_vocab),
                        lookup_table(tgt.types, tgt_vocab), index, lengths, refs, removed)


def encode_corpus(corpus: Corpus, tokenizers: tuple[Tokenizer, Tokenizer],
                  progress: bool = False) -> tuple[EncodedSide, EncodedSide]:
    """Both sides of a corpus as ids (from the cache, or tokenized now), checked parallel."""
    src = encode_side(corpus, "src", tokenizers[0], progress)
    tgt = encode_side(corpus, "tgt", tokenizers[1], progress)
    corpus.check_parallel(len(src), len(tgt))
    return src, tgt


def build_vocabs(cfg: DataConfig, src: EncodedSide, tgt: EncodedSide,
                 tokenizers: tuple[Tokenizer, Tokenizer]) -> tuple[Vocab, Vocab]:
    """The vocabularies: a subword model's pieces, or the words counted ``data.min_freq`` times
    in the (first ``data.max_pairs``) training pairs; one for both sides with shared_vocab."""
    fixed = (tokenizers[0].fixed_vocab(), tokenizers[1].fixed_vocab())
    if fixed[0] is not None and fixed[1] is not None:
        return fixed[0], fixed[1]
    src_counts = src.type_counts(cfg.max_pairs)
    tgt_counts = tgt.type_counts(cfg.max_pairs)
    if cfg.shared_vocab:
        both = dict(src_counts)
        for t, c in tgt_counts.items():
            both[t] = both.get(t, 0) + c
        vocab = Vocab.from_counts(both, cfg.min_freq, cfg.max_vocab)
        return vocab, vocab
    return (Vocab.from_counts(src_counts, cfg.min_freq, cfg.max_vocab),
            Vocab.from_counts(tgt_counts, cfg.min_freq, cfg.max_vocab))


def corpus_of(cfg: DataConfig, key: str) -> Corpus:
    """The corpus of a config key: ``train``, ``valid`` or the name of a test set."""
    entry: CorpusConfig | None = {"train": cfg.train, "valid": cfg.valid}.get(key)
    name = f"data.{key}"
    if entry is None:
        tests = cfg.test_sets()
        if key not in tests:
            known = ", ".join(["valid", *tests]) or "none"
            raise DataError(f"no test set named '{key}' in the config (known: {known}); add it "
                            "under data.test, or pass --src and --ref files")
        entry, name = tests[key], f"data.test.{key}"
    return Corpus.from_config(entry, name, cfg.src_lang, cfg.tgt_lang, cfg.data_dir)


def training_fingerprint(cfg: DataConfig) -> str:
    """What identifies the training corpus's text (both sides' SHA-256): checkpoints carry it,
    and an exact resume refuses a corpus that has changed since."""
    train = corpus_of(cfg, "train")
    return f"{train.fingerprint('src')}+{train.fingerprint('tgt')}"


def subword_models(cfg: DataConfig, train: Corpus, progress: bool = False
                   ) -> tuple[bytes, bytes]:
    """SentencePiece models learnt from the (first ``data.max_pairs``) training pairs: one
    for both sides with ``shared_vocab``, else one per side (cached, see tokenize.py)."""
    def side(s: str) -> Iterator[str]:
        lines = train.lines(s)  # type: ignore[arg-type]
        return lines if cfg.max_pairs is None else (x for _, x in zip(range(cfg.max_pairs), lines))

    extra = f":first{cfg.max_pairs}" if cfg.max_pairs is not None else ""
    if cfg.shared_vocab:
        fingerprint = f"{train.fingerprint('src')}+{train.fingerprint('tgt')}{extra}"
        model = cached_sentencepiece(chain(side("src"), side("tgt")), cfg, fingerprint, progress)
        return model, model
    return tuple(cached_sentencepiece(side(s), cfg, train.fingerprint(s) + extra,  # type: ignore
                                      progress) for s in ("src", "tgt"))


@dataclass
class PreparedData:
    """What training needs from the data: pairs as ids, vocabularies, tokenizers."""

    train: ParallelData
    valid: ParallelData
    src_vocab: Vocab
    tgt_vocab: Vocab
    tokenizers: tuple[Tokenizer, Tokenizer]
    subword_models: tuple[bytes, bytes] | None  # what the checkpoint must carry

    def describe(self, cfg: Config) -> str:
        data = cfg.data
        vocab = (f"one shared vocabulary of {len(self.src_vocab)}" if data.shared_vocab else
                 f"vocabularies: {len(self.src_vocab)} {data.src_lang}, "
                 f"{len(self.tgt_vocab)} {data.tgt_lang}")
        return (f"{len(self.train)} training pairs from {data.train.describe()} (removed: "
                f"{describe_removed(self.train.removed)}; too_long means over "
                f"{min(data.max_len, cfg.model.max_pair_tokens)} tokens), "
                f"{len(self.valid)} validation pairs; {data.tokenizer} tokens, {vocab}")


def prepare_data(cfg: Config, vocabs: tuple[Vocab, Vocab] | None = None,
                 models: tuple[bytes, bytes] | None = None,
                 progress: bool = False) -> PreparedData:
    """Read, check and encode the training and validation corpora. ``vocabs`` and ``models``
    (SentencePiece) come from a checkpoint to resume or fine-tune from; else they are built
    from the training corpus."""
    data = cfg.data
    train = corpus_of(data, "train")
    valid = corpus_of(data, "valid")
    for name, corpus in data.test_sets().items():  # your test files are checked now, not later
        if corpus.multi30k is None:
            corpus_of(data, name)
    if data.tokenizer == "sentencepiece" and models is None:
        models = subword_models(data, train, progress)
    if data.tokenizer != "sentencepiece":
        models = None
    tokenizers = (make_tokenizer(data, "src", models and models[0]),
                  make_tokenizer(data, "tgt", models and models[1]))
    src, tgt = encode_corpus(train, tokenizers, progress)
    if vocabs is not None:
        src_vocab, tgt_vocab = vocabs
    else:
        src_vocab, tgt_vocab = build_vocabs(data, src, tgt, tokenizers)
    max_len = min(data.max_len, cfg.model.max_pair_tokens)
    train_data = pair_up(src, tgt, src_vocab, tgt_vocab, max_len, data.max_pairs,
                         rules=data.filter)
    v_src, v_tgt = encode_corpus(valid, tokenizers)
    refs = list(valid.lines("tgt"))
    valid_data = pair_up(v_src, v_tgt, src_vocab, tgt_vocab, cfg.model.max_pair_tokens,
                         data.valid_max_pairs, refs)
    if len(train_data) == 0:
        limit = (f"data.max_len={data.max_len}" if data.max_len == max_len else
                 f"{max_len} tokens (model.max_positions={cfg.model.max_positions} less "
                 "<bos> and <eos>)")
        raise DataError(f"no training pairs left after dropping those longer than {limit}; "
                        "raise that limit")
    if len(valid_data) == 0:
        raise DataError(f"no validation pairs in {data.valid.describe()} (or all are too long "
                        "for model.max_positions)")
    return PreparedData(train_data, valid_data, src_vocab, tgt_vocab, tokenizers, models)
