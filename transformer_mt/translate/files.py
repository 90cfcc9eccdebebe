"""Whole files translated with their format kept: ``mt translate --input FILE`` and the
server's ``/translate_file``.

- Plain text (``.txt``): every line, blank line and space where it was; each line split into
  sentences, a sentence across lines read whole (``documents.py``).
- HTML (``.html``, ``.htm``): the markup as it was, text in ``translate="no"``, scripts and
  styles untouched (``documents.py``).
- Markdown (``.md``, ``.markdown``): only the text of paragraphs, headings, table cells and
  HTML blocks replaced, inline markup kept around its words, code and front matter as they
  were, each paragraph wrapped on as many lines (``markdown.py``).
- XLIFF (``.xlf``, ``.xliff``), 1.2 and 2.x: each unit's target made from its source, inline
  codes where they were; a translator's target and ``translate="no"`` kept (``xliff.py``).
- Gettext catalogues (``.po``, ``.pot``): each message without a translation given one marked
  ``fuzzy`` (to review), its placeholders (``%s``, ``{name}``) kept (``po.py``).
- Subtitles, SubRip (``.srt``), WebVTT (``.vtt``) and (Advanced) SubStation Alpha (``.ass``,
  ``.ssa``): each cue's number or identifier, timings, settings and style as they were, its
  lines joined and the translation wrapped on as many lines again, its tags (``<i>``,
  ``<font>``, ``{\\an8}``, ``<c.yellow>``, ``<v Anna>``, ``{\\i1}``) kept around their words, a
  dialogue's lines ("- Wohin?" / "- Nach Hause.") each translated on its line after its dash;
  a sentence that runs on into the next cues (up to 3, at most 2 s apart) translated whole
  and shared out among them along attention (each shows a part of it), not each fragment
  alone (``subtitles.py``); a WebVTT header's ``Language:`` the translation's.
- Word documents (``.docx``): every paragraph wherever it is (the body, tables, content
  controls, text boxes, every header and footer, footnotes, endnotes, comments; charts'
  titles and their categories' and series' names), with each run's formatting and what else
  it holds (a footnote's reference, a picture) kept between the words around it, as bookmarks
  and tracked deletions are, fields kept as they are (a page number; a link's text
  translated): a paragraph's runs, in groups formatted alike, read as one flow, a sentence
  across groups (a bold word in it) translated whole and shared out among them
  (``documents.split_flow``). Read and written by
  ``python-docx`` (the ``files`` extra), whose XML parser expands no entity; the zip's members
  may unpack to :data:`MOST_UNPACKED` bytes at most (a zip bomb is refused before it opens).
- Excel workbooks (``.xlsx``): every string of every sheet (shared, or a cell's own), of
  comments, charts and text boxes, rich text's runs as Word's; numbers, formulas and every
  other part as they were (``sheets.py``, lxml; the same limits).
- PowerPoint presentations (``.pptx``): every slide's text boxes and shapes (in groups too),
  tables, charts' titles and their categories' and series' names, SmartArt graphics and
  speaker notes, runs as for Word;
  ``python-pptx`` (the ``files`` extra), the same limits.
- OpenDocument texts (``.odt``), presentations (``.odp``) and spreadsheets (``.ods``): every
  paragraph and heading (body, tables, frames, notes, headers and footers; slides and their
  speaker notes; text cells and comments, not what a cell shows of a number, a date or a
  formula's result), spans formatted alike together, as for Word; ``odfpy`` (the ``files``
  extra), the same limits.
- EPUB books (``.epub``): each XHTML document of the book (its chapters, its navigation)
  translated as HTML read as XML (SVG's ``viewBox`` keeps its case), and the labels of an EPUB
  2 table of contents (``toc.ncx``: its entries', not the book's title or author), the
  package's language (``dc:language``) the translation's; every other member (styles, images)
  copied as it was; the same limits.
- PDF documents (``.pdf``): each text box read as one text, its translation drawn in its
  place, the page's own text taken out (``pdf.py``; pdfminer.six and pypdf, the ``files``
  extra).

A text file is read as UTF-8 (a byte-order mark is dropped); anything else, or a format not
listed here (older office formats, say), is refused in one line before anything is
translated.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import re
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformer_mt.errors import MTError
from transformer_mt.fileio import UTF16_BOMS, foreign
from transformer_mt.logs import PROGRESS_FROM
from transformer_mt.packages import imported
from transformer_mt.translate.documents import (
    Document,
    Held,
    split_document,
    split_flow,
    with_line_ends_of,
)
from transformer_mt.translate.language_tags import (
    relabel_epub,
    relabel_odf,
    relabel_slides,
    relabel_vtt,
    relabel_word,
)
from transformer_mt.translate.long_sentences import translate_documents
from transformer_mt.translate.markdown import read_markdown
from transformer_mt.translate.office import (
    SLIDE_PARTS,
    WORD_PARTS,
    Group,
    open_slides,
    open_word,
    slide_runs,
    word_runs,
)
from transformer_mt.translate.opendocument import odf_runs
from transformer_mt.translate.pdf import read_pdf
from transformer_mt.translate.po import read_po
from transformer_mt.translate.sheets import parse_parts, sheet_runs, written
from transformer_mt.translate.subtitles import READERS, Cues, running_on, split_tagged
from transformer_mt.translate.xliff import read_xliff

if TYPE_CHECKING:
    from transformer_mt.translate import Translator

FORMATS = {".txt": "text", ".html": "html", ".htm": "html", ".md": "markdown",
           ".markdown": "markdown", ".srt": "srt", ".vtt": "vtt", ".ass": "ass", ".ssa": "ass",
           ".xlf": "xliff", ".xliff": "xliff", ".po": "po", ".pot": "po", ".docx": "docx",
           ".xlsx": "xlsx",
           ".pptx": "pptx", ".odt": "odt", ".odp": "odp", ".ods": "ods", ".epub": "epub",
           ".pdf": "pdf"}
# the module each format needs (the files extra)
LIBRARIES = {"srt": "srt", "markdown": "markdown_it", "po": "polib", "docx": "docx",
             "pptx": "pptx", **dict.fromkeys(["odt", "odp", "ods"], "odf.opendocument"),
             **dict.fromkeys(["xlsx", "xliff", "epub"], "lxml"), "pdf": "pypdf"}
MOST_UNPACKED = 200 * 2**20  # bytes a zipped format (.docx, .xlsx, .epub, ...) unpacks to
XHTML = (".xhtml", ".html", ".htm")  # an EPUB's documents


@dataclass
class FileText:
    """A file's texts to translate, split into sentences (``documents.py``: texts, HTML,
    paragraphs in runs), how many characters they hold, and how to write the file back
    around them translated (each :class:`Document` rebuilt)."""

    documents: Sequence[Document[Any]]
    chars: int
    rebuild: Callable[[list[Any]], bytes]


def is_document(name: str | Path) -> bool:
    """Whether ``name`` is a file translated whole (its format kept) rather than line by line:
    HTML and subtitles (a ``.txt`` file is lines of text either way); or one refused whole
    (:func:`read_file`), a file of another format that is not text."""
    path = Path(name)
    if FORMATS.get(path.suffix.lower()) not in (None, "text"):
        return True
    if not path.is_file():  # (a regular file's first bytes only: a pipe's would be gone)
        return False
    with contextlib.suppress(OSError), path.open("rb") as f:
        return foreign(f.read(8)) is not None
    return False


def read_file(name: str, data: bytes, lang: str, target: str | None = None,
              kind: str | None = None, held: Held = None) -> FileText:
    """The texts of the file ``name`` holding ``data`` (in ``lang``, split into sentences; a
    page or book into ``target`` says so; ``kind``: one of :data:`FORMATS`', where the name
    does not say; ``held``: the sentences a memory translates, which an XLIFF or gettext file
    says need no review); a one-line :class:`MTError` for a format not translated here, or a
    file that is not what its name says (text that is not UTF-8, say)."""
    kind = kind or FORMATS.get(Path(name).suffix.lower())
    other = foreign(data[:8]) if kind in (None, "text") else None  # (not a zip's own format)
    if other == "a PDF":
        raise MTError(f"'{name}' is a PDF, not what its name says: name it .pdf")
    if kind is None or other:
        raise MTError(f"'{name}' is {other}, a format not translated here; translate "
                      f"{', '.join(FORMATS)} files" if other else f"'{name}': file format not "
                      f"supported; translate {', '.join(FORMATS)} files")
    if kind == "epub":
        return _epub(name, data, lang, target)
    if kind == "xlsx":
        return _workbook(name, data, lang)
    if kind in BINARY:
        found = _parsed(*BINARY[kind](name, data, lang, target, held))
        return _crlf_kept(data.decode("latin-1"), found) if kind == "xliff" else found
    if kind in OFFICE:
        return _office(name, data, kind, lang, target)
    try:  # UTF-8, or UTF-16 where a byte order mark says so (Windows' "Unicode" text)
        text = data.decode("utf-16" if data.startswith(UTF16_BOMS) else "utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MTError(f"'{name}' is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    if kind in READERS:
        found = _subtitles(READERS[kind](name, text), lang, target if kind == "vtt" else None)
    elif kind in PARSERS:
        found = _parsed(*PARSERS[kind](name, text, lang, target, held))
    else:
        found = FileText([split_document(text, lang, "html" if kind == "html" else "text",
                                         target)], len(text), lambda out: out[0].encode("utf-8"))
    return _crlf_kept(text, found)


def _crlf_kept(text: str, found: FileText) -> FileText:
    """``found`` written with CRLF line ends where each line of ``text`` ends so
    (:func:`~transformer_mt.translate.documents.with_line_ends_of`)."""
    return FileText(found.documents, found.chars, lambda out: with_line_ends_of(
        text, found.rebuild(out).decode("latin-1")).encode("latin-1"))  # (bytes as they are)


# the formats read by a parser of their own: their texts, and how to write the file (from
# their text, from their bytes)
PARSERS = {"markdown": read_markdown, "po": read_po}
BINARY: dict[str, Callable[[str, bytes, str, str | None, Held],
                           tuple[Sequence[Document[Any]], Any]]] = {"xliff": read_xliff,
                                                                     "pdf": read_pdf}


def _parsed(documents: Sequence[Document[Any]], write: Callable[[list[Any]], bytes]
            ) -> FileText:
    """A file's texts as its own parser read them (XLIFF's units, Markdown's paragraphs, a
    catalogue's messages), its size the text they hold."""
    return FileText(documents, sum(len(s) for d in documents for s in d.sentences), write)


def _subtitles(cues: Cues, lang: str, target: str | None) -> FileText:
    """Subtitles' cues, those that run on each a flow (``subtitles.py``); written saying they
    are in ``target`` where the file's header said ``lang`` (WebVTT's ``Language:``)."""
    def rebuild(out: list[list[str]]) -> bytes:
        written = cues.write([text for block in out for text in block])
        return (relabel_vtt(written, lang, target) if target else written).encode("utf-8")

    return FileText([split_tagged(cues.texts[a:b], lang, cues.escaped)
                     for a, b in running_on(cues.texts, cues.pauses)],
                    sum(map(len, cues.texts)), rebuild)


OFFICE = {"docx": "a Word document", "pptx": "a PowerPoint presentation",
          "xlsx": "an Excel workbook",
          "odt": "an OpenDocument text", "odp": "an OpenDocument presentation",
          "ods": "an OpenDocument spreadsheet", "epub": "an EPUB book"}
ODF = {kind: f"application/vnd.oasis.opendocument.{name}"
       for kind, name in (("odt", "text"), ("odp", "presentation"), ("ods", "spreadsheet"))}


def _opened(name: str, data: bytes, kind: str, open_: Callable[[io.BytesIO], Any]) -> Any:
    """``open_`` of a zipped document that unpacks to :data:`MOST_UNPACKED` bytes at most (a
    zip bomb is refused before it opens); one line for one that is not what its name says."""
    try:
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
        unpacked = sum(m.file_size for m in members)
        if unpacked > MOST_UNPACKED or len(members) > 10_000:
            raise MTError(f"'{name}' unpacks to {unpacked:,} bytes in {len(members):,} files; "
                          f"at most {MOST_UNPACKED:,} here")
        return open_(io.BytesIO(data))
    except MTError:
        raise
    except Exception as exc:  # not a zip, not such a document, damaged XML
        raise MTError(f"'{name}' is not {OFFICE[kind]} (.{kind}): "
                      f"{(str(exc).splitlines() or [type(exc).__name__])[0][:200]}") from None


def _office(name: str, data: bytes, kind: str, lang: str, target: str | None) -> FileText:
    """A Word document, a PowerPoint presentation or an OpenDocument text: its paragraphs'
    runs, in groups formatted alike (``office.py``); written saying it is in ``target``
    (``language_tags.py``)."""
    library = imported(LIBRARIES[kind], f"{OFFICE[kind]} (.{kind})")
    if kind in ODF:
        document = _opened(name, data, kind, library.load)
        if document.mimetype != ODF[kind]:
            raise MTError(f"'{name}' is not {OFFICE[kind]} (.{kind}): its type is "
                          f"{document.mimetype or 'not given'}")
        paragraphs, relabel, save = odf_runs(document), relabel_odf, document.write
    elif kind == "docx":
        document = _opened(name, data, kind, open_word)
        paragraphs, save = word_runs(document), document.save
        relabel = functools.partial(relabel_word, parts=WORD_PARTS)
    else:
        document = _opened(name, data, kind, open_slides)
        paragraphs, save = slide_runs(document), document.save
        relabel = functools.partial(relabel_slides, parts=SLIDE_PARTS)

    def saved(out: io.BytesIO) -> None:
        if target:
            relabel(document, lang=lang, target=target)
        save(out)

    return _in_runs(paragraphs, "data" if kind in ODF else "text", saved, lang)


def _in_runs(paragraphs: list[list[Group]], attribute: str,
             save: Callable[[io.BytesIO], object], lang: str) -> FileText:
    """A document's paragraphs as groups of runs (each run's text its ``attribute``), each
    paragraph a flow of its groups' texts (``documents.split_flow``: a sentence across groups,
    a bold word in it say, is translated whole and shared out among them; those formatted as
    most of it are ``bare``): the translation of a group goes into its first run, the others
    are emptied, and ``save`` writes the document."""
    paragraphs = [p for p in paragraphs if p]
    texts = [["".join(getattr(run, attribute) for run in group) for group in groups]
             for groups in paragraphs]

    def rebuild(translations: list[list[str]]) -> bytes:
        for groups, pieces in zip(paragraphs, translations, strict=True):
            for group, translation in zip(groups, pieces, strict=True):
                setattr(group[0], attribute, translation)
                for run in group[1:]:
                    setattr(run, attribute, "")
        out = io.BytesIO()
        save(out)
        return out.getvalue()

    return FileText([split_flow(pieces, lang, [getattr(g[0], "kept", False) for g in groups],
                                [g.bare for g in groups])
                     for pieces, groups in zip(texts, paragraphs, strict=True)],
                    sum(len(t) for pieces in texts for t in pieces), rebuild)


def _epub(name: str, data: bytes, lang: str, target: str | None) -> FileText:
    """An EPUB book: its XHTML documents as HTML; the zip rewritten with each member as it was
    (``mimetype`` first, stored), those documents translated and its package's language
    ``target`` where it was ``lang``."""
    imported(LIBRARIES["epub"], f"{OFFICE['epub']} (.epub)")  # (its XHTML read as XML)
    book = _opened(name, data, "epub", zipfile.ZipFile)
    if "mimetype" not in book.namelist() or book.read("mimetype").strip() != \
            b"application/epub+zip":
        raise MTError(f"'{name}' is not an EPUB book (.epub): its mimetype is not "
                      "application/epub+zip")
    documents = [m for m in book.infolist() if m.filename.lower().endswith((*XHTML, ".ncx"))]
    try:
        texts = [book.read(m).decode("utf-8-sig") for m in documents]
    except UnicodeDecodeError:
        raise MTError(f"'{name}' holds a document that is not UTF-8") from None
    contents = [m.filename.lower().endswith(".ncx") for m in documents]

    def rebuild(translations: list[str]) -> bytes:
        translated = {m.filename: _labels_back(text, t) if ncx else t for m, text, t, ncx
                      in zip(documents, texts, translations, contents, strict=True)}
        for member in book.namelist() if target else []:
            if member.lower().endswith(".opf"):
                translated[member] = relabel_epub(book.read(member).decode("utf-8-sig"), lang,
                                                 str(target))
        return _rezipped(book, {member: text.encode("utf-8")
                                for member, text in translated.items()})

    pages = [_labels_page(t) if ncx else t for t, ncx in zip(texts, contents, strict=True)]
    return FileText([split_document(page, lang, "xhtml", target) for page in pages],
                    sum(map(len, pages)), rebuild)


def _workbook(name: str, data: bytes, lang: str) -> FileText:
    """An Excel workbook: the strings of its cells, comments, charts and text boxes
    (``sheets.py``) as paragraphs of runs; written with the parts they changed replaced, every
    other member as it was."""
    imported(LIBRARIES["xlsx"], f"{OFFICE['xlsx']} (.xlsx)")

    def opened(stream: io.BytesIO) -> tuple[zipfile.ZipFile, dict[str, Any]]:
        book = zipfile.ZipFile(stream)
        book.getinfo("xl/workbook.xml")  # (a KeyError where there is none)
        return book, parse_parts(book.read)

    book, parts = _opened(name, data, "xlsx", opened)
    before = written(parts)

    def save(out: io.BytesIO) -> None:  # (a part without text translated: as it was)
        out.write(_rezipped(book, {name: part for name, part in written(parts).items()
                                   if part != before[name]}))

    return _in_runs(sheet_runs(parts), "text", save, lang)


def _rezipped(book: zipfile.ZipFile, replaced: dict[str, bytes]) -> bytes:
    """The zip ``book`` again, its members in their order, each as it was but those
    ``replaced``."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as rezipped:
        for member in book.infolist():
            new = replaced.get(member.filename)
            rezipped.writestr(member, book.read(member) if new is None else new)
    return out.getvalue()


# an entry's label in an EPUB 2 table of contents (toc.ncx), its text escaped as XML; and that
# text as a paragraph of the page its labels are translated in
NCX_LABEL = re.compile(r"(<navLabel\b[^>]*>\s*<text\b[^>]*>)(.*?)(</text>)", re.S)
PAGE_LABEL = re.compile(r'<p id="label-(\d+)">(.*?)</p>', re.S)


def _labels_page(ncx: str) -> str:
    """A table of contents' labels, each a paragraph of an XHTML page (translated as a
    chapter is: a label is text, not an XML document)."""
    labels = "".join(f'<p id="label-{i}">{match.group(2)}</p>'
                     for i, match in enumerate(NCX_LABEL.finditer(ncx)))
    return f'<html xmlns="http://www.w3.org/1999/xhtml"><body>{labels}</body></html>'


def _labels_back(ncx: str, page: str) -> str:
    """The table of contents ``ncx`` with its labels' translations from ``page``."""
    found, count = dict(PAGE_LABEL.findall(page)), itertools.count()
    if len(found) != len(NCX_LABEL.findall(ncx)):
        raise MTError("the translated labels of the book's toc.ncx could not be put back")
    return NCX_LABEL.sub(lambda m: m.group(1) + found[str(next(count))] + m.group(3), ncx)


def translate_file(translator: Translator, name: str, data: bytes, kind: str | None = None,
                   progress: bool = False, **settings: Any) -> bytes:
    """The file ``name`` (``data``; ``kind``: its format, where its name does not say) in
    translation, as :func:`read_file` reads it (``settings``: :meth:`Translator.settings`')."""
    doc = read_file(name, data, translator.config.data.src_lang, translator.config.data.tgt_lang,
                    kind, translator.memory.holds if translator.memory else None)
    many = sum(len(d.sentences) for d in doc.documents) > PROGRESS_FROM
    return doc.rebuild(translate_documents(translator, doc.documents, translator.settings(
        **settings), progress=progress and many))
