"""Markdown (``.md``, ``.markdown``), read by ``markdown-it-py`` (CommonMark with GitHub's
tables and strikethrough; the ``files`` extra): only the text of paragraphs, headings and table
cells is replaced, every other byte stays as it was (front matter, code blocks and fences, link
reference definitions, list and quote markers, indentation, line endings).

A paragraph's lines are read as one text (a hard line break is a line break in it, which ends
a sentence unless the line runs on: ``sentences.soft_breaks``; its marker stays), and each
part's translation wrapped on as many lines again (``markdown_lines.py``: fewer where it is
shorter, no line beginning with what would make it a list item, a heading or a quote).
Inline markup is kept around its words as an HTML page's is (``documents.split_flow``):
emphasis and strikethrough, inline HTML, links' and images' text translated and their
destinations kept; code spans and autolinks are
read in their sentence and come back as they were, and so does a link to a reference by its
label (``[Garten]``: the label names the reference). Text is unescaped for the model (``\\*``,
``&amp;``) and the translation's Markdown characters escaped. An HTML block with text is
translated as HTML (``documents.split_html``); the closing tags of elements it leaves open (for
Markdown between them) are not added.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from transformer_mt.errors import MTError
from transformer_mt.packages import imported
from transformer_mt.translate.documents import (
    Document,
    Held,
    Links,
    split_flow,
    split_html,
)
from transformer_mt.translate.html_text import KEPT_INLINE
from transformer_mt.translate.markdown_lines import Place, writer
from transformer_mt.translate.sentences import run_together

# inline markup, in the order tried: code spans, autolinks and GitHub's footnotes (``[^1]``, a
# definition's ``[^1]: ``) kept as they are; an escaped character or an entity (text); inline
# HTML; a link's or image's opening bracket, and its closing one with what follows
# (destination and title, or reference); delimiter runs
INLINE = re.compile(
    r"(?P<kept>(`+)(?:.+?)(?<!`)\2(?!`)|<[a-zA-Z][\w+.-]{1,31}:[^\s<>]*>|<[^\s<>@]+@[^\s<>]+>"
    r"|\[\^[^\]\s]+\](?::[ \t]*)?)"
    r"|(?P<text>\\[!-/:-@\[-`{-~]|&(?:#\d{1,7}|#[xX][\da-fA-F]{1,6}|[a-zA-Z][a-zA-Z\d]{1,31});)"
    r"|(?P<tag></?[a-zA-Z][^<>]*>|<!--.*?-->)"
    r"|(?P<open>!?\[)"
    r"|(?P<close>\]\(\s*(?:<[^<>\n]*>|(?:[^()\s]|\([^()\s]*\))*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)|\]\[[^\[\]]*\]|\])"
    r"|(?P<run>\*+|_+|~~)", re.S)
ELEMENT = re.compile(r"<(/?)([a-zA-Z][\w-]*)[^<>]*?(/?)>")  # an HTML tag: closing, name, empty
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                  "source", "track", "wbr"})  # elements without content: opened, never closed
LABEL = re.compile(r"([^\[\]]+)\](?:\[\])?(?![(\[])")  # after "[": a link by its label alone
# escaped in a translation (an underscore within a word is no emphasis: as it is), a pipe
# and an ampersand as entities (markdown-it reads a line with "\|" before "---" as a table)
ENTITIES = {"&": "&amp;", "|": "&#124;"}
SPECIAL = re.compile(r"[\\`*~\[\]<|]|(?<![^\W_])_|_(?![^\W_])|&(?=#?\w+;)")


def read_markdown(name: str, text: str, lang: str, target: str | None = None,
                  held: Held = None
                  ) -> tuple[list[Document[str]], Callable[[list[str]], bytes]]:
    """The texts of a Markdown file (each a :class:`Document` whose rebuilding gives its
    Markdown), and the function that writes the file with their translations in place
    (``target``, and where a memory gave them, ``held``: not said in Markdown)."""
    markdown_it = imported("markdown_it", "Markdown (.md)")
    parts = re.split(r"(\r\n|\r|\n)", text)
    lines, ends = parts[0::2], [*parts[1::2], ""]
    front = _front_matter(lines)  # read as blank lines: their numbers kept
    env: dict[str, Any] = {}
    tokens = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(
        "\n" * front + "\n".join(lines[front:]), env)
    labels = {key.upper() for key in env.get("references", {})}
    texts: list[tuple[Document[str], list[list[Place]], str]] = []
    row, at = -1, 0  # a table row's line and where its last cell ended
    for before, token in zip([None, *tokens], tokens, strict=False):
        if token.type == "html_block" and token.map:
            content = token.content.rstrip("\n").split("\n")
            places = [(n, _start(name, lines, n, piece), len(lines[n]))
                      for n, piece in zip(range(*token.map), content, strict=False)]
            texts.append((_html("\n".join(lines[n][a:] for n, a, _ in places), lang),
                          [places], "html"))
        elif token.type == "inline" and token.map and before is not None:
            if before.type in ("th_open", "td_open"):
                raw = token.content.replace("|", "\\|")
                at = lines[token.map[0]].find(raw, at if token.map[0] == row else 0)
                row = token.map[0]
                if at < 0:
                    raise MTError(f"'{name}': line {row + 1}: a table cell could not be placed")
                places, at = [(row, at, at + len(raw))], at + len(raw)
                texts.append((_split(raw, lang, labels), [places], "cell"))
            else:
                kind = "atx" if before.markup.startswith("#") else "paragraph"
                said, where = _segments(name, lines, token)
                texts.append((_split(said, lang, labels), where, kind))
    texts = [text for text in texts if text[0].sentences]  # (the others: as they were)
    return [document for document, _, _ in texts], writer(lines, ends, texts)


def _front_matter(lines: list[str]) -> int:
    """How many lines a YAML (``---``) or TOML (``+++``) front matter takes at the start."""
    fence = lines[0].rstrip() if lines else ""
    if fence in ("---", "+++"):
        for n, line in enumerate(lines[1:], 2):
            if line.rstrip() in (fence, "..."):
                return n
    return 0


def _segments(name: str, lines: list[str], token: Any) -> tuple[str, list[list[Place]]]:
    """A paragraph's or heading's text (its lines run together, a line break at each hard line
    break) and where each line of it stands, in parts up to each hard break: the parser's
    content is each line without its indentation and markers (the last without its trailing
    spaces), so it ends where the line ends."""
    parts: list[list[Place]] = [[]]
    words: list[list[str]] = [[]]
    content = token.content.split("\n")
    for n, (number, piece) in enumerate(zip(range(*token.map), content, strict=False)):
        start, piece = _start(name, lines, number, piece), piece.strip()
        hard = n + 1 < len(content) and (content[n].endswith("  ") or re.search(
            r"(?<!\\)(?:\\\\)*\\$", piece) is not None)
        end = start + len(piece) - (hard and piece.endswith("\\"))
        words[-1].append(lines[number][start:end])
        parts[-1].append((number, start, end))
        if not "".join(words[-1]).strip():  # a part without words stays as it was
            words[-1], parts[-1] = [], []
        elif hard:
            words.append([])
            parts.append([])
    if len(parts) > 1 and not parts[-1]:
        parts.pop()
        words.pop()
    return "\n".join(run_together([w.strip() for w in part if w.strip()]) for part in words
                     ), parts


def _start(name: str, lines: list[str], number: int, piece: str) -> int:
    """Where the parser's content of a line (``piece``: without the line's indentation and
    markers) begins in it, its own indentation left out: it ends where the line ends (but
    for trailing spaces, or an ATX heading's closing ``#``s)."""
    line, piece = lines[number].rstrip(), piece.strip()
    start = len(line) - len(piece) if line.endswith(piece) else line.rfind(piece)
    if start < 0:
        raise MTError(f"'{name}': line {number + 1}: its text could not be placed")
    return start


def _html(block: str, lang: str) -> Document[str]:
    """An HTML block as :func:`documents.split_html` reads it; rebuilt with the closing tags
    of elements it did not open (an earlier block did: the parser drops them; held meanwhile
    as comments) and without those the parser adds for the elements it leaves open (Markdown
    between them follows)."""
    stray: list[str] = []
    opened: list[str] = []

    def held(tag: re.Match[str]) -> str:
        name = tag[2].lower()
        if not tag[1]:
            opened.extend([name] if not tag[3] and name not in VOID else [])
        elif name in opened:
            del opened[len(opened) - 1 - opened[::-1].index(name):]
        else:
            stray.append(tag[0])
            return f"<!--mt-stray-{len(stray) - 1}-->"
        return tag[0]

    document = split_html(ELEMENT.sub(held, block), lang)

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> str:
        written = document.rebuild_with(translations, links).rstrip()
        for _ in opened:
            if (found := re.search(r"\s*</[a-zA-Z][^<>]*>\Z", written)) is None:
                break
            written = written[:found.start()]
        return re.sub(r"<!--mt-stray-(\d+)-->", lambda m: stray[int(m[1])], written)

    return Document(document.sentences, document.cuts, rebuild)


def _split(text: str, lang: str, labels: set[str]) -> Document[str]:
    """A text's sentences, read between its markup as one flow (:func:`split_flow`; the text
    outside markup ``bare``); rebuilding gives its Markdown: the markup as it was, the
    translation's special characters escaped."""
    pieces, markup, kept, bare = _marked(text, labels)
    flow = split_flow(pieces, lang, list(map(bool, kept)), bare)

    def rebuild(translations: Sequence[str], links: Sequence[Links]) -> str:
        out = flow.rebuild_with(translations, links)
        written = [k or _escape(p) for p, k in zip(out, kept, strict=True)]
        around = _around_words(out, markup)
        _hugged(written, around, kept)
        tags = ["".join(raw for raw, _ in m) for m in around]
        markdown = ""
        for piece, tag in zip(written, [*tags, ""], strict=True):
            markdown += piece
            if tag.startswith("[") and markdown.endswith("!"):  # a link, not an image
                markdown = markdown[:-1] + "\\!"
            markdown += tag
        return markdown.strip()

    return Document(flow.sentences, flow.cuts, rebuild)


def _escape(text: str) -> str:
    return SPECIAL.sub(lambda m: ENTITIES.get(m[0], "\\" + m[0]), text)


Markup = list[tuple[str, int]]  # markup between two pieces: each tag, and 1 (-1) where it is a
# delimiter run that opens (closes) emphasis


def _around_words(pieces: list[str], markup: list[Markup]) -> list[Markup]:
    """``markup`` without the emphasis around a piece the translation left without words
    (``****`` would show)."""
    markup = [list(m) for m in markup]
    for n in range(1, len(markup)):
        before, after = markup[n - 1], markup[n]
        while not pieces[n].strip() and before and after and before[-1][1] == 1 and \
                after[0][1] == -1 and before[-1][0][0] == after[0][0][0]:
            before.pop()
            after.pop(0)
    return markup


def _hugged(pieces: list[str], markup: list[Markup], kept: list[str]) -> None:
    """Spaces just inside emphasis moved out of it (``** word**`` is no emphasis): the
    translation's space between words may fall to either side of the markup."""
    for n, tags in enumerate(markup):
        if tags and tags[0][1] == -1 and not kept[n]:
            text = pieces[n].rstrip()
            pieces[n], pieces[n + 1] = text, pieces[n][len(text):] + pieces[n + 1]
        if tags and tags[-1][1] == 1 and not kept[n + 1]:
            text = pieces[n + 1].lstrip()
            pieces[n], pieces[n + 1] = pieces[n] + pieces[n + 1][:len(pieces[n + 1]) - len(
                text)], text


def _marked(text: str, labels: set[str]) -> tuple[list[str], list[Markup], list[str],
                                                   list[bool]]:
    """The pieces of a text between its markup (escapes and entities read as what they
    stand for; a code span, an autolink or a link by a label read as its text), the markup
    between them, each piece's Markdown where it is kept as it is ("" where it is not), and
    which pieces stand outside any markup."""
    pieces, kept, bare = [""], [""], [True]
    markup: list[Markup] = []
    depth, at, runs = 0, 0, list[str]()

    def tag(raw: str, change: int = 0, run: bool = False) -> None:  # a new piece after it
        nonlocal depth
        depth += change
        if pieces[-1] or kept[-1] or len(pieces) == 1:
            markup.append([])
            pieces.append("")
            kept.append("")
        markup[-1].append((raw, change if run else 0))
        bare[len(pieces) - 1:] = [depth <= 0]

    def keep(raw: str, shown: str) -> None:  # a piece kept as it is, read as ``shown``
        if pieces[-1] or kept[-1]:
            tag("")
        pieces[-1], kept[-1] = shown, raw
        tag("")

    while found := INLINE.search(text, at):
        pieces[-1] += text[at:found.start()]
        kind, raw, at = found.lastgroup, found[0], found.end()
        if whole := _kept(text, found, labels):
            at = found.start() + len(whole[0])
            keep(*whole)
        elif kind in ("tag", "open", "close"):
            element = ELEMENT.match(raw) if kind == "tag" else None
            opens = kind == "open" or (element is not None and not (
                element[1] or element[3] or element[2].lower() in VOID))
            tag(raw, opens - (kind == "close" or raw.startswith("</")))
        elif kind == "run" and (change := _run(text, found.start(), at, runs)):
            tag(raw, change, run=True)
        else:
            pieces[-1] += html.unescape(raw[1:] if raw.startswith("\\") else raw)
    pieces[-1] += text[at:]
    return pieces, markup, kept, bare


def _kept(text: str, found: re.Match[str], labels: set[str]) -> tuple[str, str] | None:
    """The Markdown kept as it is from ``found`` on, and the text it shows: a code span, an
    autolink, a link by a reference's label alone, inline code in HTML (``<kbd>Strg</kbd>``)."""
    kind, raw, at = found.lastgroup, found[0], found.end()
    if kind == "kept" and raw.startswith("[^"):  # a footnote's reference or label: no text
        return raw, ""
    if kind == "kept":
        code = raw.strip("`")
        return raw, (code[1:-1] if code[:1] == code[-1:] == " " and code.strip() else
                     code if raw[0] == "`" else raw[1:-1])
    label = LABEL.match(text, at) if kind == "open" else None
    if label and " ".join(label[1].split()).upper() in labels:
        return raw + label[0], label[1]
    element = ELEMENT.match(raw) if kind == "tag" else None
    if element and element[2].lower() in KEPT_INLINE and (end := re.compile(
            rf"</{element[2]}\s*>", re.I).search(text, at)):
        return text[found.start():end.end()], html.unescape(
            re.sub("<[^<>]*>", "", text[at:end.start()]))
    return None


def _run(text: str, a: int, b: int, open_runs: list[str]) -> int:
    """Whether the delimiter run ``text[a:b]`` opens emphasis (1), closes it (-1) or is text
    (0), by CommonMark's flanking rules (``_`` never within a word)."""
    before, after = text[a - 1] if a else " ", text[b] if b < len(text) else " "
    left = not after.isspace() and (not _punct(after) or before.isspace() or _punct(before))
    right = not before.isspace() and (not _punct(before) or after.isspace() or _punct(after))
    opens, closes = (left and (not right or _punct(before)), right and (
        not left or _punct(after))) if text[a] == "_" else (left, right)
    if closes and text[a] in open_runs:
        del open_runs[len(open_runs) - 1 - open_runs[::-1].index(text[a])]
        return -1
    if opens:
        open_runs.append(text[a])
    return int(opens)


def _punct(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"
