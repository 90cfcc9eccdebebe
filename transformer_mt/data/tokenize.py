"""Word tokenization with spaCy's rule-based tokenizers, a disk cache, and detokenization.

``spacy.blank("de")`` and ``spacy.blank("en")`` tokenize exactly as the ``*_core_*_sm`` pipelines
do, with no model download. English output is turned back into plain text with sacremoses'
Moses detokenizer before it is printed or scored.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from importlib.metadata import version
from typing import Any

from tqdm.auto import tqdm

from transformer_mt.fileio import atomic_write, cache_dir, file_lock

log = logging.getLogger(__name__)

CACHE_FORMAT = 1


@functools.lru_cache(maxsize=4)
def _spacy_tokenizer(lang: str):
    import spacy  # imported lazily: spaCy takes a second to import

    return spacy.blank(lang).tokenizer


def tokenize(texts: Sequence[str], lang: str, lowercase: bool = False,
             progress: bool = False) -> list[list[str]]:
    """Split each text into tokens (whitespace tokens dropped), in batches."""
    tokenizer = _spacy_tokenizer(lang)
    docs = tokenizer.pipe(texts, batch_size=1000)
    if progress:
        docs = tqdm(docs, total=len(texts), desc=f"tokenize {lang}", unit="sent", leave=False)
    out = []
    for doc in docs:
        tokens = [t.text for t in doc if not t.is_space]
        out.append([t.lower() for t in tokens] if lowercase else tokens)
    return out


def tokenize_cached(texts: Sequence[str], lang: str, file_sha256: str, lowercase: bool = False,
                    progress: bool = False) -> list[list[str]]:
    """Tokenize a whole corpus file's lines, reusing an earlier result from the disk cache.

    The cache key is the file's SHA-256 plus everything that changes the output: language,
    lowercasing, spaCy's version and this cache's format. Several processes may ask at once: one
    tokenizes under a file lock, the others wait and read its result.
    """
    key_text = json.dumps([CACHE_FORMAT, file_sha256, lang, lowercase, version("spacy"),
                           len(texts)])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:24]
    path = cache_dir() / "tokens" / f"{lang}-{key}.json.gz"
    with file_lock(path.with_suffix(".lock")):
        if path.is_file():
            try:
                with gzip.open(path, "rt", encoding="utf-8") as f:
                    cached = json.load(f)
                if isinstance(cached, list) and len(cached) == len(texts):
                    log.debug("tokenized %s corpus read from %s", lang, path)
                    return cached
            except (OSError, EOFError, ValueError):
                pass
            log.warning("token cache %s is unreadable; tokenizing again", path)
        log.info("tokenizing %d %s sentences (cached in %s)", len(texts), lang, path.parent)
        tokens = tokenize(texts, lang, lowercase, progress)
        payload = gzip.compress(json.dumps(tokens, ensure_ascii=False).encode("utf-8"),
                                compresslevel=1)
        atomic_write(path, lambda f: f.write(payload))
        return tokens


@functools.lru_cache(maxsize=4)
def _detokenizer(lang: str) -> Any:
    from sacremoses import MosesDetokenizer  # imported lazily, like spaCy: training needs neither

    return MosesDetokenizer(lang=lang)


def detokenize(tokens: Iterable[str], lang: str) -> str:
    """Join tokens into plain text (``man 's`` becomes ``man's``, ``( x )`` becomes ``(x)``)."""
    return _detokenizer(lang).detokenize(list(tokens))
