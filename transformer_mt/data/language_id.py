"""Which language each line of a corpus side is in, for ``data.filter.language``.

py3langid (langid.py's model, shipped inside the package: nothing is downloaded) names the most
likely of its 97 languages for each line, at a few thousand lines a second. That is slow next to
the other filters, so it runs only when the filter is on, once per file: the labels are cached
(keyed by the file's SHA-256 and py3langid's version, checked on every read: ``data/cache.py``)
beside the token ids, and a later run, or a change of other settings, reads them back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from importlib.metadata import version
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from transformer_mt.data.cache import cache_entry
from transformer_mt.data.corpus import Corpus, Side
from transformer_mt.data.tokenize import NORMAL_FORM, normalized
from transformer_mt.errors import DataError
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
    key_text = json.dumps([corpus.fingerprint(side), version("py3langid"), NORMAL_FORM])

    def build(directory: Path) -> None:
        codes, classify = _classify()
        log.info("identifying the language of each line of %s (%s side; cached in %s)",
                 corpus.describe(), side, directory.parent)
        lines: Iterable[str] = normalized(corpus.lines(side))
        if progress:
            lines = tqdm(lines, desc=f"language {side}", unit="sent", leave=False)
        index = {code: i for i, code in enumerate(codes)}
        labels = np.array([index[classify(text)] for text in lines], dtype=np.uint8)
        np.save(directory / "labels.npy", labels)
        (directory / "codes.json").write_text(json.dumps(codes), encoding="utf-8")

    directory = cache_entry("langid", key_text, build, ("labels.npy", "codes.json"))
    try:
        codes = json.loads((directory / "codes.json").read_text(encoding="utf-8"))
        return codes, np.load(directory / "labels.npy")
    except (OSError, ValueError) as exc:
        raise DataError(f"the cache entry {directory} is damaged ({exc}); delete it and run "
                        "again") from exc
