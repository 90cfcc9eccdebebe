"""From text to tokens and back: words (spaCy) or subword units (SentencePiece).

A :class:`Tokenizer` splits sentences into token strings and joins a model's output tokens back
into text. :class:`WordTokenizer` uses ``spacy.blank(lang)`` (rule-based, no model download) and
sacremoses' Moses detokenizer. :class:`SubwordTokenizer` uses a SentencePiece model (unigram or
BPE) learnt from the training corpus by :func:`train_sentencepiece`; its pieces are the
vocabulary, its specials sit at our fixed ids, byte fallback spells out any character it never
saw (so no input becomes ``<unk>``), and it detokenizes its own output.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from itertools import islice
from typing import Any

from transformer_mt.config import DataConfig
from transformer_mt.data.vocab import BOS, EOS, PAD, UNK, Vocab
from transformer_mt.errors import DataError
from transformer_mt.fileio import atomic_write, cache_dir, cache_key, file_lock
from transformer_mt.packages import missing_error, require, tokenizer_packages

log = logging.getLogger(__name__)

# languages written without spaces between words: word tokens are joined without them
UNSPACED = ("zh", "ja", "th", "lo", "km", "my", "bo")
SPM_SAMPLE = 1_000_000  # sentences SentencePiece learns from (sampled from larger corpora)


MAX_LINE_CHARS = 20_000  # a line is cut here before tokenizing: a sentence is far shorter


def bounded(texts: Iterable[str]) -> Iterator[str]:
    """``texts``, each cut to :data:`MAX_LINE_CHARS` characters: a 100 MB line would otherwise
    become a token list of gigabytes before the length limits could drop it. A cut training
    line still has far more tokens than ``data.max_len``, so its pair is dropped and counted."""
    cut = 0
    for text in texts:
        if len(text) > MAX_LINE_CHARS:
            cut += 1
            text = text[:MAX_LINE_CHARS]
        yield text
    if cut:
        log.warning("%d line(s) longer than %s characters were cut there before tokenizing (a "
                    "training pair with one is dropped as too long)", cut, f"{MAX_LINE_CHARS:,}")


class Tokenizer:
    """Text to token strings (:meth:`tokenize`) and output tokens to text (:meth:`detokenize`)."""

    def tokenize(self, texts: Iterable[str]) -> Iterator[list[str]]:
        raise NotImplementedError

    def detokenize(self, tokens: Sequence[str]) -> str:
        raise NotImplementedError

    @property
    def key(self) -> str:
        """Everything that changes the tokens, for cache keys."""
        raise NotImplementedError

    def fixed_vocab(self) -> Vocab | None:
        """The vocabulary the tokenizer brings (subword models), or None (built from counts)."""
        return None


@functools.lru_cache(maxsize=8)
def _spacy_tokenizer(lang: str) -> Any:
    import spacy  # imported lazily: spaCy takes a second to import

    try:
        return spacy.blank(lang).tokenizer
    except (ImportError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"spaCy cannot tokenize '{lang}' here ({first}); install what it asks "
                        "for, or use data.tokenizer=sentencepiece") from exc


@functools.lru_cache(maxsize=8)
def _moses_detokenizer(lang: str) -> Any:
    from sacremoses import MosesDetokenizer  # imported lazily, like spaCy: training needs neither

    return MosesDetokenizer(lang=lang)


class WordTokenizer(Tokenizer):
    """spaCy's rule-based word tokenizer for ``lang`` (whitespace tokens dropped)."""

    def __init__(self, lang: str, lowercase: bool = False) -> None:
        self.lang, self.lowercase = lang, lowercase

    def tokenize(self, texts: Iterable[str]) -> Iterator[list[str]]:
        for doc in _spacy_tokenizer(self.lang).pipe(bounded(texts), batch_size=1000):
            tokens = [t.text for t in doc if not t.is_space]
            yield [t.lower() for t in tokens] if self.lowercase else tokens

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Moses rules (``man 's`` becomes ``man's``, ``( x )`` becomes ``(x)``); languages
        written without spaces are joined without them."""
        if self.lang in UNSPACED:
            return "".join(tokens)
        return _moses_detokenizer(self.lang).detokenize(list(tokens))

    @property
    def key(self) -> str:
        try:
            spacy_version = version("spacy")
        except PackageNotFoundError as exc:
            raise missing_error(["spacy"]) from exc
        return json.dumps(["spacy", self.lang, self.lowercase, spacy_version])


class SubwordTokenizer(Tokenizer):
    """A SentencePiece model (its serialized bytes) as a tokenizer. With ``sampling``
    (alpha, nbest, seed) it samples a segmentation of each sentence instead of taking the best
    one (subword regularization: ``data.sampling``), the same ones for the same seed."""

    def __init__(self, model: bytes, lowercase: bool = False,
                 sampling: tuple[float, int, int] | None = None) -> None:
        import sentencepiece as spm

        self.model, self.lowercase, self.sampling = bytes(model), lowercase, sampling
        try:
            self.processor = spm.SentencePieceProcessor(model_proto=self.model)
        except (RuntimeError, OSError) as exc:
            raise DataError(f"not a SentencePiece model ({exc})") from exc
        if self.processor.get_piece_size() == 0:
            raise DataError("the SentencePiece model is empty")

    def tokenize(self, texts: Iterable[str]) -> Iterator[list[str]]:
        it = iter(bounded(texts))
        options: dict[str, Any] = {}
        if self.sampling is not None:  # one thread: the draws follow the seed, in order
            import sentencepiece as spm

            alpha, nbest, seed = self.sampling
            spm.set_random_generator_seed(seed)
            options = {"enable_sampling": True, "alpha": alpha, "nbest_size": nbest,
                       "num_threads": 1}
        while chunk := list(islice(it, 10_000)):
            if self.lowercase:
                chunk = [t.lower() for t in chunk]
            yield from self.processor.encode(chunk, out_type=str, **options)

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Pieces back to text; an ``<unk>`` the model produced is left out."""
        return self.processor.decode([t for t in tokens if t != UNK])

    @property
    def key(self) -> str:
        key = ["sentencepiece", hashlib.sha256(self.model).hexdigest(), self.lowercase]
        return json.dumps(key if self.sampling is None else [*key, "sampled", *self.sampling])

    def fixed_vocab(self) -> Vocab:
        p = self.processor
        return Vocab([p.id_to_piece(i) for i in range(p.get_piece_size())])


def tags(cfg: DataConfig) -> list[str]:
    """The training corpora's tags (``data.train[].tag``): tokens of their own in the
    vocabulary, which a subword model never splits."""
    return sorted({c.tag for c in cfg.training_corpora() if c.tag is not None})


def train_sentencepiece(texts: Iterable[str], cfg: DataConfig) -> bytes:
    """Learn a SentencePiece model (``cfg.subword``, ``cfg.vocab_size``) from ``texts``.

    Its specials are ours at our ids (``<unk> <pad> <bos> <eos>`` = 0-3), the corpora's tags
    pieces of their own. ``vocab_size`` is an upper bound: a small corpus gets the pieces it
    has.
    """
    import sentencepiece as spm

    def lines() -> Iterator[str]:
        for t in texts:
            if t.strip():
                yield t.lower() if cfg.lowercase else t

    out = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=lines(), model_writer=out, vocab_size=cfg.vocab_size,
            model_type=cfg.subword, character_coverage=0.9995, byte_fallback=True,
            unk_id=0, pad_id=1, bos_id=2, eos_id=3, unk_piece=UNK, pad_piece=PAD, bos_piece=BOS,
            eos_piece=EOS, input_sentence_size=SPM_SAMPLE, shuffle_input_sentence=True,
            hard_vocab_limit=False, num_threads=os.cpu_count() or 1, minloglevel=2,
            **({"user_defined_symbols": tags(cfg)} if tags(cfg) else {}))
    except RuntimeError as exc:
        raise DataError(f"SentencePiece could not learn a model from the training corpus "
                        f"({str(exc).strip()}); change data.vocab_size or data.subword") from exc
    return out.getvalue()


def cached_sentencepiece(texts: Iterable[str], cfg: DataConfig, fingerprint: str,
                         progress: bool = False) -> bytes:
    """:func:`train_sentencepiece` once per corpus and settings; later runs (and other ranks,
    which wait on the lock) read the model from the cache."""
    key_text = json.dumps([fingerprint, cfg.subword, cfg.vocab_size, cfg.lowercase,
                           version("sentencepiece"), SPM_SAMPLE, *tags(cfg)])
    path = cache_dir() / "sentencepiece" / f"{cache_key(key_text)}.model"
    with file_lock(path.with_suffix(".lock")):
        if path.is_file():
            model = path.read_bytes()
            try:
                SubwordTokenizer(model)
                log.debug("SentencePiece model read from %s", path)
                return model
            except DataError as exc:
                log.warning("the cached SentencePiece model %s is damaged (%s); learning it "
                            "again", path, exc)
        log.info("learning a %s SentencePiece model of %d pieces (cached in %s)", cfg.subword,
                 cfg.vocab_size, path.parent)
        model = train_sentencepiece(texts, cfg)
        atomic_write(path, lambda f: f.write(model))
        return model


def make_tokenizer(cfg: DataConfig, side: str, model: bytes | None = None) -> Tokenizer:
    """The tokenizer of one side (``src`` or ``tgt``); a subword one needs its model's bytes."""
    require(tokenizer_packages(cfg))
    if cfg.tokenizer == "sentencepiece":
        if model is None:
            raise DataError(f"the {side} side needs its SentencePiece model")
        return SubwordTokenizer(model, cfg.lowercase)
    return WordTokenizer(cfg.src_lang if side == "src" else cfg.tgt_lang, cfg.lowercase)
