"""Which language each line of a corpus side is in, for ``data.filter.language``.

py3langid (langid.py's model, shipped inside the package: nothing is downloaded) names the most
likely of its 97 languages for each line, at a few thousand lines a second. That is slow next to
the other filters, so it runs only when the filter is on, once per file: the labels are cached
(keyed by the file's SHA-256 and py3langid's version) beside the token ids, and a later run, or
a change of other settings, reads them back.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable
from importlib.metadata import version

import numpy as np
from tqdm.auto import tqdm

from transformer_mt.data.corpus import Corpus, Side
from transformer_mt.data.tokenize import bounded
from transformer_mt.errors import DataError
from transformer_mt.fileio import atomic_write, cache_dir, cache_key, file_lock
from transformer_mt.packages import require

log = logging.getLogger(__name__)


def _classify() -> tuple[list[str], Callable[[str], str]]:
    """The languages py3langid knows (its public ``rank`` lists them all), and its
    most-likely-language function."""
    require({"py3langid": "data.filter.language"})
    import py3langid

    codes = sorted({code for code, _ in py3langid.rank("")})
    return codes, lambda text: py3langid.classify(text)[0]


def wrong_language(corpus: Corpus, side: Side, lang: str, progress: bool = False) -> np.ndarray:
    """``(n,)`` bool: the lines of ``side`` identified as another language than ``lang``."""
    codes, labels = identify(corpus, side, progress)
    if lang not in codes:
        raise DataError(f"data.filter.language: py3langid does not know the language '{lang}' "
                        f"({corpus.key}); turn the filter off for this pair of languages")
    return labels != codes.index(lang)


def identify(corpus: Corpus, side: Side, progress: bool = False
             ) -> tuple[list[str], np.ndarray]:
    """The language codes py3langid knows, and each line's label (an index into them)."""
    key = cache_key(json.dumps([corpus.fingerprint(side), version("py3langid")]))
    path = cache_dir() / "langid" / f"{key}.npz"
    with file_lock(path.with_suffix(".lock")):
        if path.is_file():
            try:
                with np.load(path) as stored:
                    return json.loads(str(stored["codes"])), stored["labels"]
            except (OSError, ValueError, KeyError) as exc:
                log.warning("the cached language labels %s are damaged (%s); identifying again",
                            path, exc)
        codes, classify = _classify()
        log.info("identifying the language of each line of %s (%s side; cached in %s)",
                 corpus.describe(), side, path.parent)
        lines = bounded(corpus.lines(side))
        if progress:
            lines = tqdm(lines, desc=f"language {side}", unit="sent", leave=False)
        index = {code: i for i, code in enumerate(codes)}
        labels = np.array([index[classify(text)] for text in lines],
                          dtype=np.uint8)
        buffer = io.BytesIO()
        np.savez(buffer, codes=np.array(json.dumps(codes)), labels=labels)
        atomic_write(path, lambda f: f.write(buffer.getvalue()))
        return codes, labels
