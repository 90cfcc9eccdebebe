"""Whole files translated with their format kept: ``mt translate --input FILE`` and the
server's ``/translate_file``.

- Plain text (``.txt``): every line, blank line and space where it was; each line split into
  sentences (``documents.py``).
- HTML (``.html``, ``.htm``): the markup as it was, text in ``translate="no"``, scripts and
  styles untouched (``documents.py``).
- SubRip subtitles (``.srt``): each subtitle's number and timings as they were, its text
  translated whole (its lines joined, and the translation wrapped on as many lines again);
  read and written by the ``srt`` package (the ``files`` extra).

A file is read as UTF-8 (a byte-order mark is dropped); anything else, or a format not listed
here (office documents, PDF), is refused in one line before anything is translated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformer_mt.errors import MTError
from transformer_mt.packages import imported

if TYPE_CHECKING:
    from transformer_mt.translate import Translator

FORMATS = {".txt": "text", ".html": "html", ".htm": "html", ".srt": "srt"}


@dataclass
class FileText:
    """A file's texts to translate (plain, or HTML), and how to write the file back around
    their translations (one a text)."""

    texts: list[str]
    html: bool
    rebuild: Callable[[list[str]], bytes]


def is_document(name: str | Path) -> bool:
    """Whether ``name`` is a file translated whole (its format kept) rather than line by line:
    HTML and subtitles (a ``.txt`` file is lines of text either way)."""
    return FORMATS.get(Path(name).suffix.lower()) in ("html", "srt")


def read_file(name: str, data: bytes) -> FileText:
    """The texts of the file ``name`` holding ``data``; a one-line :class:`MTError` for a
    format not translated here, bytes that are not UTF-8 or a subtitle file that is not one."""
    kind = FORMATS.get(Path(name).suffix.lower())
    if kind is None:
        raise MTError(f"'{name}': file format not supported; translate "
                      f"{', '.join(FORMATS)} files")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MTError(f"'{name}' is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    if kind == "srt":
        return _subtitles(name, text)
    return FileText([text], kind == "html", lambda out: out[0].encode("utf-8"))


def _subtitles(name: str, text: str) -> FileText:
    srt = imported("srt", "subtitles (.srt)")
    try:
        subtitles = list(srt.parse(text))
    except (srt.SRTParseError, ValueError) as exc:
        raise MTError(f"'{name}' is not a SubRip (.srt) file: "
                      f"{str(exc).splitlines()[0]}") from None

    def rebuild(translations: list[str]) -> bytes:
        out = [srt.Subtitle(s.index, s.start, s.end, _wrap(t, s.content.count("\n") + 1),
                            s.proprietary) for s, t in zip(subtitles, translations, strict=True)]
        return str(srt.compose(out, reindex=False)).encode("utf-8")

    return FileText([" ".join(s.content.split()) for s in subtitles], False, rebuild)


def _wrap(text: str, lines: int) -> str:
    """``text`` on at most ``lines`` lines of about equal length, broken between words."""
    words, out = text.split(), []
    for n in range(lines, 0, -1):
        left = len(" ".join(words))
        line: list[str] = []
        while words and (not line or len(" ".join(line)) < left / n):
            line.append(words.pop(0))
        out.append(" ".join(line))
    return "\n".join(line for line in out if line) or text


def translate_file(translator: Translator, name: str, data: bytes, **settings: Any) -> bytes:
    """The file ``name`` (holding ``data``) translated, its format kept (``settings`` as for
    :meth:`Translator.translate`)."""
    doc = read_file(name, data)
    return doc.rebuild(translator.translate_text(doc.texts, html=doc.html, **settings))
