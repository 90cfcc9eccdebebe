"""From text to tokens and back: words (spaCy) or subword units (SentencePiece).

A :class:`Tokenizer` splits sentences into token strings and joins a model's output tokens back
into text. :class:`WordTokenizer` uses ``spacy.blank(lang)`` (rule-based, no model download) and
sacremoses' Moses detokenizer. :class:`SubwordTokenizer` uses a SentencePiece model (unigram or
BPE) learnt from the training corpus by :func:`train_sentencepiece`; its pieces are the
vocabulary, its specials sit at our fixed ids, byte fallback spells out any character it never
saw (so no input becomes ``<unk>``), and it detokenizes its own output.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import logging
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from itertools import chain, islice
from pathlib import Path
from typing import Any

from transformer_mt.config.data import DataConfig
from transformer_mt.data import word_worker, words
from transformer_mt.data.cache import cache_entry
from transformer_mt.data.corpus import Side
from transformer_mt.data.vocab import BOS, EOS, PAD, UNK, Vocab
from transformer_mt.data.words import HYPHEN, UNSPACED, WHOLE_WORDS
from transformer_mt.errors import DataError, MTError
from transformer_mt.packages import missing_error, require, tokenizer_packages

log = logging.getLogger(__name__)

SPM_SAMPLE = 1_000_000  # sentences SentencePiece learns from (sampled from larger corpora)

SAMPLE_CHUNK = 10_000  # sentences encoded at once; sampled ones draw from a generator per chunk
# fewer are encoded one by one: SentencePiece encodes a list in threads it starts for the call
POOLED = 64
# of the text every tokenizer reads (in the cache keys: ids made before differ)
NORMAL_FORM = "NFC, no soft hyphens, zero-width spaces or control characters"
# characters that show nothing and join a word's parts (a soft hyphen, a zero-width space, a
# word joiner, a byte-order mark: what text from web pages and PDFs holds), and C0/C1 control
# characters that are not spaces (a NUL, a bell, a terminal's escape): gone, as SentencePiece's
# nmt_nfkc removes most ("Hund\x00" is "Hund", not an unknown word copied with its NUL)
INVISIBLE = re.compile("[\u00ad\u200b\u2060\ufeff\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
# control characters that separate (a vertical tab, Word's line break in copied text; a form
# feed, a carriage return, the separators, a next-line): a space
SEPARATING = re.compile("[\x0b-\x0d\x1c-\x1f\x85]")
# Chinese characters and kana: scripts that run their words together (each is a word of its
# own where words are counted: alignments, inline markup, subtitles' lines)
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
CJK_CHARACTER = re.compile(f"[{CJK}]")
# Thai, Lao, Burmese and Khmer: their words run together too (their sentences are spaced)
SOUTHEAST_ASIAN = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
WORD_START = "\u2581"  # "▁": SentencePiece's mark of a piece that begins a word
MARKERS = 0xE000  # private-use characters: a kept span's place while detokenizing
MAX_LINE_CHARS = 20_000  # a line is cut here before tokenizing: a sentence is far shorter


def normalized(texts: Iterable[str]) -> Iterator[str]:
    """``texts`` as every tokenizer reads them, in training and translation alike: in Unicode
    NFC (an "ä" typed as "a" and a combining diaeresis is the one character "ä", so it is the
    same word, not an unknown one), without :data:`INVISIBLE` characters ("Fahrrad" with a soft
    hyphen, U+00AD, inside is "Fahrrad"), with :data:`SEPARATING` ones as spaces, and cut to
    :data:`MAX_LINE_CHARS` characters (a 100 MB line would otherwise become a token list of
    gigabytes before the length limits could drop it; a cut training line still has far more
    tokens than ``data.max_len``, so its pair is dropped and counted)."""
    cut = 0
    for text in texts:
        if len(text) > MAX_LINE_CHARS:
            cut += 1
            text = text[:MAX_LINE_CHARS]
        if not unicodedata.is_normalized("NFC", text):
            text = unicodedata.normalize("NFC", text)
        if INVISIBLE.search(text):
            text = INVISIBLE.sub("", text)
        if SEPARATING.search(text):
            text = SEPARATING.sub(" ", text)
        yield text
    if cut:
        log.warning("%d line(s) longer than %s characters were cut there before tokenizing (a "
                    "training pair with one is dropped as too long)", cut, f"{MAX_LINE_CHARS:,}")


class Tokenizer:
    """Text to token strings (:meth:`tokenize`) and output tokens to text (:meth:`detokenize`)."""

    subword = False  # whether a token may be part of a word (a piece without "▁" goes on one)

    def tokenize(self, texts: Iterable[str]) -> Iterator[list[str]]:
        raise NotImplementedError

    def detokenize(self, tokens: Sequence[str]) -> str:
        raise NotImplementedError

    def detokenize_keeping(self, tokens: Sequence[str],
                           spans: Sequence[tuple[int, int, str]]) -> str:
        """Tokens to text, each span ``(start, end, text)`` of them written as ``text``
        exactly (a glossary's term, a URL kept): a span is a marker token while detokenizing,
        and its text takes the marker's place after."""
        marked = list(tokens)
        for n, (start, end, _) in sorted(enumerate(spans), key=lambda s: -s[1][0]):
            marked[start:end] = [chr(MARKERS + n)]
        text = self.detokenize(marked)
        for n, (_, _, kept) in enumerate(spans):
            marker = chr(MARKERS + n)  # (written as nothing: with the space before, else after)
            gone = next((g for g in (f" {marker}", f"{marker} ") if g in text), marker)
            text = text.replace(marker if kept else gone, kept, 1)
        return text

    def words(self, tokens: Sequence[str]) -> list[int]:
        """The word (0, 1, ...) each token belongs to: here each token is a word."""
        return list(range(len(tokens)))

    @property
    def key(self) -> str:
        """Everything that changes the tokens, for cache keys."""
        raise NotImplementedError

    def fixed_vocab(self) -> Vocab | None:
        """The vocabulary the tokenizer brings (subword models), or None (built from counts)."""
        return None

    def prime(self, known: Sequence[str]) -> None:
        """Meet the words ``known`` now, where the tokenizer pays for a word the first time it
        sees it (a server primes its source vocabulary as it warms up)."""


class WordTokenizer(Tokenizer):
    """spaCy's rule-based word tokenizer for ``lang`` (whitespace tokens dropped; with
    ``mark_hyphens`` a hyphen inside a word is ``@-@``: ``words.py``). In ``mt translate``,
    spaCy and sacremoses may run in a process of their own (``word_worker.py``)."""

    def __init__(self, lang: str, lowercase: bool = False, mark_hyphens: bool = False) -> None:
        self.lang, self.lowercase, self.mark_hyphens = lang, lowercase, mark_hyphens

    def tokenize(self, texts: Iterable[str]) -> Iterator[list[str]]:
        texts, worker = normalized(texts), word_worker.current()
        found: Iterable[list[str]] | None = None
        if worker is not None:
            texts = list(texts)
            found = worker.ask({"op": "words", "lang": self.lang, "texts": texts,
                                "mark_hyphens": self.mark_hyphens})
            if not isinstance(found, list) or len(found) != len(texts):
                found = None  # no answer (or not one a text): the work is done here
        for tokens in (words.spacy_words(self.lang, texts, self.mark_hyphens) if found is None
                       else found):
            yield [t.lower() for t in tokens] if self.lowercase else tokens

    def prime(self, known: Sequence[str]) -> None:
        """spaCy makes a word's lexeme, and caches how it splits, the first time it meets the
        word (~25 us): a new sentence took 0.6 ms to tokenize, 0.09 ms once the 8,000 words
        of the Multi30k model's vocabulary had been met (in ~150 ms)."""
        lines = (" ".join(known[i:i + 100]) for i in range(0, len(known), 100))
        collections.deque(self.tokenize(lines), maxlen=0)

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Moses' rules and a few more (``words.written``); languages written without spaces
        are joined without them."""
        if self.lang in UNSPACED:
            return "".join(tokens)
        worker = word_worker.current()
        if worker is not None:
            text = worker.ask({"op": "text", "lang": self.lang, "tokens": list(tokens)})
            if isinstance(text, str):
                return text
        return words.written(self.lang, tokens)

    @property
    def key(self) -> str:
        try:
            spacy_version = version("spacy")
        except PackageNotFoundError as exc:
            raise missing_error(["spacy"]) from exc
        return json.dumps(["spacy", self.lang, self.lowercase, spacy_version, NORMAL_FORM,
                           WHOLE_WORDS, *([HYPHEN] if self.mark_hyphens else [])])


class SubwordTokenizer(Tokenizer):
    """A SentencePiece model (its serialized bytes) as a tokenizer. With ``sampling``
    (alpha, nbest, seed) it samples a segmentation of each sentence instead of taking the best
    one (subword regularization: ``data.sampling``): one of the model's ``nbest`` best, with
    probability proportional to exp(alpha * log-probability), as SentencePiece's own sampling
    does, but drawn with our random generator (seeded by ``seed`` and the sentence's place), so
    the same seed gives the same segmentations in any process. SentencePiece's own generator
    does not: its seed is not honoured across processes (sentencepiece 0.2.2+) or not per call
    (earlier)."""

    subword = True

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

    def __reduce__(self) -> tuple[type, tuple[bytes, bool, tuple[float, int, int] | None]]:
        return SubwordTokenizer, (self.model, self.lowercase, self.sampling)  # for a worker

    def tokenize(self, texts: Iterable[str]) -> Iterator[list[str]]:
        it = iter(normalized(texts))
        for k, chunk in enumerate(iter(lambda: list(islice(it, SAMPLE_CHUNK)), [])):
            if self.lowercase:
                chunk = [t.lower() for t in chunk]
            if self.sampling is not None:
                yield from self._sample(chunk, k, *self.sampling)
            else:  # a few one by one: ~6 us a sentence, against 0.1-1.1 ms for a list's pool
                yield from (self.processor.encode(chunk, out_type=str) if len(chunk) >= POOLED
                            else (self.processor.encode(text, out_type=str) for text in chunk))

    def _sample(self, chunk: list[str], k: int, alpha: float, nbest: int,
                seed: int) -> Iterator[list[str]]:
        """One segmentation of each sentence of the ``k``-th chunk, drawn from its n best by
        the Gumbel-max trick (argmax of alpha * score + Gumbel noise: a draw from the softmax)."""
        import numpy as np

        p = self.processor
        pieces = [p.id_to_piece(i) for i in range(p.get_piece_size())]
        # a segmentation's log-probability: the sum of its pieces' (unknown characters cost
        # the same in every segmentation, so their score cancels out)
        scores = np.array([p.get_score(i) for i in range(p.get_piece_size())])
        rng = np.random.default_rng([seed, k])
        for candidates in p.nbest_encode(chunk, nbest_size=nbest, out_type=int):
            if len(candidates) > 1:
                logp = np.array([scores[c].sum() for c in candidates])
                candidates = [candidates[int(np.argmax(alpha * logp
                                                       + rng.gumbel(size=len(logp))))]]
            yield [pieces[i] for i in candidates[0]] if candidates else []

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Pieces back to text, without surrounding whitespace (a lone ``▁`` piece at either
        end); an ``<unk>`` the model produced is left out. A piece the SentencePiece model
        lacks (an imported Marian model's vocabulary is both sides' pieces) is kept as it is
        by ``decode``: its ``▁`` is a space too, as transformers' MarianTokenizer reads it."""
        text = self.processor.decode([t for t in tokens if t != UNK])
        return text.replace(WORD_START, " ").strip()

    def detokenize_keeping(self, tokens: Sequence[str],
                           spans: Sequence[tuple[int, int, str]]) -> str:
        """As :meth:`Tokenizer.detokenize_keeping`, by pieces: the text between spans decoded
        on its own (a piece starting with ``▁`` is a space before it), each span's text as is."""
        def text(pieces: Sequence[str], kept: str | None = None) -> str:
            space = " " if pieces and pieces[0].startswith(WORD_START) and kept != "" else ""
            return space + (self.detokenize(pieces) if kept is None else kept)

        parts, at = [], 0
        for start, end, kept in sorted(spans):
            parts += [text(tokens[at:start]), text(tokens[start:end], kept)]
            at = end
        return "".join([*parts, text(tokens[at:])]).strip()

    def words(self, tokens: Sequence[str]) -> list[int]:
        """The word each piece belongs to: a piece that starts with ``▁`` starts a word, and
        in Chinese and Japanese, whose words run together, each piece is one."""
        out, word = [], -1
        for n, token in enumerate(tokens):
            word += n == 0 or token.startswith(WORD_START) or bool(
                CJK_CHARACTER.match(token) or CJK_CHARACTER.match(tokens[n - 1][-1:]))
            out.append(word)
        return out

    @property
    def key(self) -> str:
        key = ["sentencepiece", hashlib.sha256(self.model).hexdigest(), self.lowercase,
               NORMAL_FORM]
        return json.dumps(key if self.sampling is None
                          else [*key, "sampled from the n best, seeded per chunk",
                                SAMPLE_CHUNK, *self.sampling])

    def fixed_vocab(self) -> Vocab:
        p = self.processor
        return Vocab([p.id_to_piece(i) for i in range(p.get_piece_size())])


def tags(cfg: DataConfig) -> list[str]:
    """The training corpora's tags (``data.train[].tag``): tokens of their own in the
    vocabulary, which a subword model never splits."""
    return sorted({c.tag for c in cfg.training_corpora() if c.tag is not None})


def train_sentencepiece(texts: Iterable[str], cfg: DataConfig,
                        what: str = "the training corpora") -> bytes:
    """Learn a SentencePiece model (``cfg.subword``, ``cfg.vocab_size``) from ``texts``
    (``what``: their name in an error).

    Its specials are ours at our ids (``<unk> <pad> <bos> <eos>`` = 0-3), the corpora's tags
    pieces of their own. ``vocab_size`` is an upper bound: a small corpus gets the pieces it
    has.
    """
    import sentencepiece as spm

    failed: list[MTError] = []  # what a corpus said was wrong with it while read
    read = collections.Counter[str]()

    def lines() -> Iterator[str]:
        try:
            for t in texts:
                if t.strip():
                    read["lines"] += 1
                    yield t.lower() if cfg.lowercase else t
        except MTError as exc:  # SentencePiece would wrap it in its own, with a source line
            failed.append(exc)
            raise

    out = io.BytesIO()
    symbols: dict[str, Any] = {"user_defined_symbols": tags(cfg)} if tags(cfg) else {}
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=lines(), model_writer=out, vocab_size=cfg.vocab_size,
            model_type=cfg.subword, character_coverage=0.9995, byte_fallback=True,
            unk_id=0, pad_id=1, bos_id=2, eos_id=3, unk_piece=UNK, pad_piece=PAD, bos_piece=BOS,
            eos_piece=EOS, input_sentence_size=SPM_SAMPLE, shuffle_input_sentence=True,
            hard_vocab_limit=False, num_threads=os.cpu_count() or 1, minloglevel=2,
            **symbols)
    except RuntimeError as exc:
        if not failed and not read["lines"]:
            raise DataError(f"{what}: no text to learn a SentencePiece model from, every line "
                            "is empty (a TSV line is source<TAB>target)") from None
        if not failed:
            raise _learning_error(exc, cfg.vocab_size) from exc
    if failed:
        raise failed[0]
    return out.getvalue()


def _learning_error(exc: RuntimeError, vocab_size: int) -> DataError:
    """SentencePiece's refusal as ours: a vocabulary smaller than the pieces it must hold (its
    256 byte pieces, our 4 and the corpus's characters: "... required_chars. 100 vs 264 ...",
    with its own command-line advice) says the size to set."""
    found = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(exc))
    if found:
        return DataError(f"data.vocab_size {vocab_size:,} is too small for this corpus: its "
                         f"SentencePiece model needs at least {int(found[1]):,} pieces (256 "
                         "byte pieces, the 4 specials and the corpus's characters); set "
                         f"data.vocab_size to {int(found[1]):,} or more")
    return DataError(f"SentencePiece could not learn a model from the training corpus "
                     f"({str(exc).strip()}); change data.vocab_size or data.subword")


def cached_sentencepiece(texts: Iterable[str], cfg: DataConfig, fingerprint: str,
                         progress: bool = False, what: str = "the training corpora") -> bytes:
    """:func:`train_sentencepiece` once per corpus and settings; later runs (and other ranks,
    which wait on the lock) read the model from the cache (checked: ``data/cache.py``)."""
    key_text = json.dumps([fingerprint, cfg.subword, cfg.vocab_size, cfg.lowercase,
                           version("sentencepiece"), SPM_SAMPLE, *tags(cfg)])

    def build(directory: Path) -> None:
        lines = iter(texts)
        first = list(islice(lines, 1))  # (a corpus says what is wrong with it as it is read)
        log.info("learning a %s SentencePiece model of %d pieces (cached in %s)", cfg.subword,
                 cfg.vocab_size, directory.parent)
        (directory / "spm.model").write_bytes(train_sentencepiece(chain(first, lines), cfg, what))

    directory = cache_entry("sentencepiece", key_text, build, ("spm.model",))
    model = (directory / "spm.model").read_bytes()
    SubwordTokenizer(model)  # a model SentencePiece reads, or a one-line error
    return model


def make_tokenizer(cfg: DataConfig, side: Side, model: bytes | None = None) -> Tokenizer:
    """The tokenizer of one side (``src`` or ``tgt``); a subword one needs its model's bytes."""
    require(tokenizer_packages(cfg))
    if cfg.tokenizer == "sentencepiece":
        if model is None:
            raise DataError(f"the {side} side needs its SentencePiece model")
        return SubwordTokenizer(model, cfg.lowercase)
    return WordTokenizer(cfg.src_lang if side == "src" else cfg.tgt_lang, cfg.lowercase,
                         cfg.mark_hyphens)
