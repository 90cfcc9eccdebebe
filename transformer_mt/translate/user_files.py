"""The files a user gives ``mt translate`` and ``mt serve`` beside the model: a glossary
(``glossary.py``, a termbase: ``tbx.py``) and a translation memory (``memory.py``), as TSV
lines, or in the model's languages."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

from transformer_mt.data.tmx import is_tmx
from transformer_mt.errors import MTError
from transformer_mt.translate.tbx import is_tbx


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


def file_languages(path: str | Path, checkpoint: str | Path) -> tuple[str, str]:
    """The languages a glossary's or a memory's file is read in: a termbase's and a TMX
    file's the model's (a checkpoint's, an export's folder's: read before the model loads),
    a TSV file's none."""
    if not (is_tbx(path) or is_tmx(path)):
        return "", ""
    if Path(checkpoint).is_dir():  # mt export's (CTranslate2's) folder: its config's
        from transformer_mt.config.file import config_from_dict
        from transformer_mt.formats.ctranslate2 import CONFIG_NAME

        try:
            data = config_from_dict(json.loads((Path(checkpoint) / CONFIG_NAME).read_text(
                encoding="utf-8"))).data
        except (OSError, ValueError) as exc:
            raise MTError(f"'{checkpoint}' is not a complete export ({exc}); export the "
                          "checkpoint again with mt export") from None
        return data.src_lang, data.tgt_lang
    from transformer_mt.checkpoint import languages_of

    return languages_of(checkpoint)
