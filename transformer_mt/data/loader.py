"""From corpora to batches: the corpora as ids, and token-budget batches with length bucketing.

:func:`prepare_data` turns the config's training and validation corpora into
:class:`ParallelData` (memory-mapped ids, see ``data/encoded.py``), with the tokenizers and the
vocabularies. Batches are planned from the sentence lengths alone. The order of batches in an
epoch is a pure function of ``(seed, epoch)``. That makes resumption exact (a run stores only
``epoch`` and the index of the next step) and lets every distributed rank build the same plan
and take its own share without talking to the others.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import torch

from transformer_mt.config import Config, CorpusConfig, DataConfig
from transformer_mt.data.batch import Batch
from transformer_mt.data.corpus import Corpus
from transformer_mt.data.encoded import EncodedSide, encode_side
from transformer_mt.data.tokenize import Tokenizer, cached_sentencepiece, make_tokenizer
from transformer_mt.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab
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
    n_dropped: int = 0  # pairs removed for being longer than data.max_len
    references: list[str] | None = None

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
            references: Sequence[str] | None = None) -> ParallelData:
    """The first ``max_pairs`` pairs, less those with a side longer than ``max_len`` tokens."""
    n = len(src) if max_pairs is None else min(max_pairs, len(src))
    lengths = np.empty((n, 2), dtype=np.int32)  # 8 bytes a pair: all that planning needs
    lengths[:, 0] = src.lengths()[:n]
    lengths[:, 1] = tgt.lengths()[:n]
    if max_len is not None and int(lengths.max(initial=0)) > max_len:
        index = np.flatnonzero((lengths <= max_len).all(axis=1)).astype(np.int32)
        lengths = lengths[index]
    else:
        index = np.arange(n, dtype=np.int32)
    lengths += 1  # <eos> on either side (the target's <bos> is not predicted)
    refs = None
    if references is not None:
        refs = [references[i] for i in index.tolist()]
    return ParallelData(src, tgt, lookup_table(src.types, src_vocab),
                        lookup_table(tgt.types, tgt_vocab), index, lengths, n - len(index), refs)


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


def prepare_data(cfg: Config, vocabs: tuple[Vocab, Vocab] | None = None,
                 models: tuple[bytes, bytes] | None = None,
                 progress: bool = False) -> PreparedData:
    """Read, check and encode the training and validation corpora. ``vocabs`` and ``models``
    (SentencePiece) come from a checkpoint to resume or fine-tune from; else they are built
    from the training corpus."""
    data = cfg.data
    train = corpus_of(data, "train")
    valid = corpus_of(data, "valid")
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
    train_data = pair_up(src, tgt, src_vocab, tgt_vocab, max_len, data.max_pairs)
    v_src, v_tgt = encode_corpus(valid, tokenizers)
    refs = list(valid.lines("tgt"))
    valid_data = pair_up(v_src, v_tgt, src_vocab, tgt_vocab, cfg.model.max_pair_tokens,
                         data.valid_max_pairs, refs)
    return PreparedData(train_data, valid_data, src_vocab, tgt_vocab, tokenizers, models)


def make_batches(lengths: np.ndarray | Sequence[tuple[int, int]], max_tokens: int, seed: int,
                 epoch: int, shuffle: bool = True) -> list[np.ndarray]:
    """Group example indices into batches of at most ``max_tokens`` padded tokens.

    ``lengths`` is ``(n, 2)``: each example's source and target length. Examples are shuffled,
    then stably sorted by (target, source) length, so each batch holds sentences of nearly equal
    length (little padding) and ties are broken differently every epoch. A batch costs
    ``n * max(longest source, longest target)`` tokens. The batch order is shuffled too. Only
    arrays are built (no Python object per example), so millions of pairs plan in seconds.
    """
    lengths = np.asarray(lengths).reshape(-1, 2)
    n = len(lengths)
    gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = (torch.randperm(n, generator=gen).numpy() if shuffle
             else np.arange(n)).astype(np.int32)  # 4 bytes an example: corpora are large
    order = order[np.lexsort((lengths[order, 0], lengths[order, 1]))]  # stable
    sizes = lengths.max(axis=1)[order]
    starts: list[int] = []  # where each batch but the first begins in ``order``
    count = longest = 0
    chunk = 1 << 16
    for offset in range(0, n, chunk):  # as Python ints a chunk at a time: fast, little memory
        for j, size in enumerate(sizes[offset:offset + chunk].tolist(), start=offset):
            if count and (count + 1) * max(longest, size) > max_tokens:
                starts.append(j)
                count = longest = 0
            count += 1
            longest = max(longest, size)
    batches = np.split(order, starts) if n else []
    if shuffle:
        perm = torch.randperm(len(batches), generator=gen).tolist()
        batches = [batches[i] for i in perm]
    return batches


def epoch_steps(lengths: np.ndarray | Sequence[tuple[int, int]], max_tokens: int, seed: int,
                epoch: int, parts: int = 1) -> list[list[np.ndarray]]:
    """The optimizer steps of one epoch: each step is one batch of at most ``max_tokens``
    padded tokens, split into ``parts`` (ranks x accumulation steps) consecutive pieces.

    ``max_tokens`` is thus the budget of a whole optimizer step: 1 process or N ranks (or N
    accumulated pieces) take the same steps over the same examples, and the number of GPUs only
    decides how a step is shared. A batch of fewer examples than parts leaves some pieces empty:
    their rank contributes no loss for that step.
    """
    return [split_batch(batch, parts) for batch in make_batches(lengths, max_tokens, seed, epoch)]


def split_batch(batch: np.ndarray, parts: int) -> list[np.ndarray]:
    """``parts`` consecutive pieces of ``batch`` whose sizes differ by at most one."""
    size, extra = divmod(len(batch), parts)
    pieces, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        pieces.append(batch[start:end])
        start = end
    return pieces


def collate(data: ParallelData, indices: Sequence[int] | np.ndarray) -> Batch:
    """The batch of examples ``indices``: sources (``... <eos>``) and targets (``<bos> ...
    <eos>``) padded with ``<pad>``, gathered from the memory-mapped ids in a few array
    operations, whatever the batch size."""
    indices = np.asarray(indices, dtype=np.int64)
    rows = data.index[indices].astype(np.int64)  # line numbers in the corpus
    lengths = data.lengths[indices].astype(np.int64)  # (B, 2), each with its <eos>
    src = _padded(data.src, data.src_lookup, rows, lengths[:, 0] - 1, lead=0)  # (B, S)
    tgt = _padded(data.tgt, data.tgt_lookup, rows, lengths[:, 1] - 1, lead=1)  # (B, T + 1)
    n_src, n_tgt = lengths.sum(axis=0).tolist()
    return Batch(torch.from_numpy(src), torch.from_numpy(tgt), n_tgt, n_src)


def _padded(side: EncodedSide, lookup: np.ndarray, rows: np.ndarray, n: np.ndarray,
            lead: int) -> np.ndarray:
    """``(B, lead + max(n) + 1)`` int64: ``lead`` x ``<bos>``, each row's ``n`` ids (as
    vocabulary ids), ``<eos>``, then ``<pad>``."""
    b = len(rows)
    out = np.full((b, lead + int(n.max(initial=0)) + 1), PAD_ID, dtype=np.int64)
    first = np.cumsum(n) - n  # where each row's ids start in the gathered run
    column = np.arange(int(n.sum())) - np.repeat(first, n)  # (total,) position in its row
    ids = side.take(np.repeat(side.starts(rows), n) + column)  # (total,) type ids
    out[np.repeat(np.arange(b), n), column + lead] = lookup[ids]
    out[np.arange(b), n + lead] = EOS_ID
    if lead:
        out[:, 0] = BOS_ID
    return out


def iterate_batches(data: ParallelData, max_tokens: int) -> Iterator[tuple[np.ndarray, Batch]]:
    """Batches in length order without shuffling (for validation), with their example indices."""
    for indices in make_batches(data.lengths, max_tokens, seed=0, epoch=0, shuffle=False):
        yield indices, collate(data, indices)
