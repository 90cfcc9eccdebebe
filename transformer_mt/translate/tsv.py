"""The tab-separated files a user gives ``mt translate`` and ``mt serve``: a glossary's
(``glossary.py``) and a memory's (``memory.py``) lines."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from transformer_mt.errors import MTError


def tsv_rows(path: str | Path, what: str) -> Iterator[tuple[int, list[str]]]:
    """Each line of the TSV file at ``path`` but blank and ``#`` ones: (its number, its
    fields; no quoting, a byte order mark dropped); a one-line error where the file (``what``:
    "glossary") does not read as UTF-8."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            for n, row in enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE),
                                    start=1):
                if row and "".join(row).strip() and not row[0].startswith("#"):
                    yield n, row
    except (OSError, UnicodeDecodeError) as exc:
        raise MTError(f"cannot read the {what} {path}: "
                      f"{getattr(exc, 'strerror', None) or exc}") from None
