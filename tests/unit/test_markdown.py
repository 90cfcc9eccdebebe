"""Markdown files (translate/markdown.py): only the texts change, every other byte stays, and
the translation renders as the source did, with the same elements, attributes, code and links,
by markdown-it-py (what reads it here, and renders Markdown in Python tools) and by GitHub's
cmark-gfm (cmarkgfm)."""

from __future__ import annotations

import html.parser

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

markdown_it = pytest.importorskip("markdown_it")
cmarkgfm = pytest.importorskip("cmarkgfm")

from transformer_mt.translate.documents import translate_split  # noqa: E402
from transformer_mt.translate.markdown import read_markdown  # noqa: E402

SAMPLE = """---
title: Ein Test
---
# Ein **großer** Titel #

## 1. Einleitung

Ein Mann mit *rotem* Hut geht über die [Straße](http://x.de "Titel").
Er trägt `Code` und \\*Sterne\\*, snake_case bleibt.<two spaces>
Eine neue Zeile &amp; mehr mit <kbd>Strg</kbd>.

> Ein Zitat mit
weiter darin.

- Ein Punkt
- Ein Punkt mit
  mehr Text.

1. Ein Hund schläft.

| Eine Spalte | Noch \\| eine |
|---|:---:|
| Ein Hund | ![Eine Katze](katze.png) |

Ein Titel
=========

<p align="center">Ein <b>Bild</b> hier.</p>

<div align="center">

Ein Absatz darin.

</div>

<details>
<summary>Mehr lesen</summary>

Siehe [Garten] oder <https://example.org> heute.

</details>

```python
x = "Ein Hund"
```

    eingerückter Code

[Garten]: http://g.de
""".replace("<two spaces>", "  ")  # (a hard line break)
KEPT = ["---", "title: Ein Test", "|---|:---:|", '<div align="center">', "</div>", "</details>",
        "```python", 'x = "Ein Hund"', "```", "    eingerückter Code", "[Garten]: http://g.de",
        "=========", "<details>"]


RENDERERS = {
    "markdown-it": lambda text: markdown_it.MarkdownIt("commonmark").enable(
        ["table", "strikethrough"]).render(text),
    "github": lambda text: cmarkgfm.github_flavored_markdown_to_html(
        text, options=cmarkgfm.cmark.Options.CMARK_OPT_UNSAFE  # (its HTML as it is)
        | cmarkgfm.cmark.Options.CMARK_OPT_FOOTNOTES)}


class Rendered(html.parser.HTMLParser):
    """A rendering's elements with their attributes, in order, and its text outside code
    (an image's text among it)."""

    def __init__(self, markdown: str, renderer: str = "markdown-it") -> None:
        super().__init__()
        self.tags: list[tuple] = []
        self.texts: list[str] = []
        self.code = 0
        self.feed(RENDERERS[renderer](markdown))

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, tuple((k, v) for k, v in attrs if k != "alt")))
        self.texts += [" ".join(v.split()) for k, v in attrs if k == "alt"]
        self.code += tag in ("code", "pre")

    def handle_endtag(self, tag):
        self.tags.append(("/" + tag,))
        self.code -= tag in ("code", "pre")

    def handle_data(self, data):
        if data.strip() and not self.code:
            self.texts.append(" ".join(data.split()))


def translated(source: str, translate=lambda sentences: [s.upper() for s in sentences]) -> str:
    documents, write = read_markdown("page.md", source, "de")
    return write(translate_split(documents, translate)).decode()


def test_only_the_texts_change_and_the_page_renders_as_the_source_did():
    out = translated(SAMPLE)
    assert [line for line in out.split("\n") if line in KEPT] == [
        line for line in SAMPLE.split("\n") if line in KEPT]  # each as it was, in its place
    assert out.count("\n") == SAMPLE.count("\n")
    assert "# EIN **GROSSER** TITEL #\n" in out and "## 1. EINLEITUNG\n" in out
    assert "[STRASSE](http://x.de \"Titel\")" in out and " `Code` " in out
    assert "\\*STERNE\\*" in out and "SNAKE_CASE" in out and " <kbd>Strg</kbd>.\n" in out
    assert "\\*, SNAKE_CASE BLEIBT.  \n" in out  # hard break
    assert "| EIN HUND | ![EINE KATZE](katze.png) |" in out and "NOCH &#124; EINE" in out
    assert "[Garten] ODER <https://example.org> HEUTE" in out  # a label and an autolink kept
    for renderer in RENDERERS:
        theirs, ours = Rendered(SAMPLE, renderer), Rendered(out, renderer)
        assert ours.tags == theirs.tags, renderer  # the same elements, attributes, links
        kept = {"title: Ein Test", "Garten", "https://example.org", "Strg"}  # front matter, ...
        assert all(text == text.upper() for text in ours.texts if text not in kept), renderer
    assert '<p align="center">EIN <b>BILD</b> HIER.</p>' in out  # an HTML block as HTML


def test_a_hard_line_break_inside_a_sentence_stays_inside_its_translation():
    """A paragraph's hard line break (two spaces, a backslash) where the line runs on: the
    sentence is read whole (each part was a text of its own: "Ein Mann ... fährt" alone),
    the break and its marker where the translation's words around it go; one after a line
    that ends a sentence, or before a name, ends it as ever."""
    source = ("Ein Mann in einem blauen Hemd fährt  \nmit dem Fahrrad. Ein Hund\\\n"
              "Eine Katze.\n")
    documents, _ = read_markdown("page.md", source, "de")
    assert [d.sentences for d in documents] == [[
        "Ein Mann in einem blauen Hemd fährt mit dem Fahrrad.", "Ein Hund", "Eine Katze."]]
    out = translated(source)
    assert out == ("EIN MANN IN EINEM BLAUEN HEMD FÄHRT  \nMIT DEM FAHRRAD. EIN HUND\\\n"
                   "EINE KATZE.\n")
    for renderer in RENDERERS:
        assert Rendered(out, renderer).tags == Rendered(source, renderer).tags


def test_line_endings_and_a_file_without_text_stay_as_they_were():
    assert translated(SAMPLE.replace("\n", "\r\n")) == translated(SAMPLE).replace("\n", "\r\n")
    code = "```\nEin Hund.\n```\n\n[Ein Link]: http://x\n"
    assert read_markdown("code.md", code, "de")[0] == [] and translated(code) == code


def test_a_chinese_paragraphs_lines_are_read_without_a_space_between_them():
    docs, write = read_markdown("zh.md", "狗在雪里\n玩。猫睡觉。\n\nA dog\nplays.\n", "zh")
    assert [d.sentences for d in docs] == [["狗在雪里玩。", "猫睡觉。"], ["A dog plays."]]
    out = write([d.rebuild(["A dog plays in the snow.", "A cat sleeps."][:len(d.sentences)])
                 for d in docs]).decode()
    assert out == "A dog plays in the\nsnow. A cat sleeps.\n\nA dog plays\nin the snow.\n"


BLOCKS = "# Titel\n\nEin Hund läuft über die Wiese und\nspringt.\n\n- Eine Katze\n  schläft.\n\n" \
         "> Ein Mann\n> liest.\n\n| Ein Hund |\n|---|\n| Eine Katze |\n\nEin Titel\n---\n"
MARKS = ["-", "+", "*", "1.", "2)", "#", "##", ">", "=", "==", "---", "***", "_", "`", "[", "]",
         "](x)", "<b>", "</b>", "<unk>", "|", "\\", "&amp;", "&", "~~~", "~~", "!", "Hund", "ein"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(MARKS), min_size=1, max_size=12))
@example(["-"]).via("a list item's marker, once")
@example(["|"]).via("a table's header, once")
def test_any_translation_shows_as_it_is_and_makes_no_block_of_its_own(words):
    """Whatever the model writes (list markers, #, >, a line of dashes, <unk>, backslashes,
    pipes) shows as the text it is, in the block of its source: never a list, a heading, a
    rule, a tag or a table cell of its own."""
    translation = " ".join(words)
    out = translated(BLOCKS, lambda sentences: [translation] * len(sentences))
    for renderer in RENDERERS:
        theirs, ours = Rendered(BLOCKS, renderer), Rendered(out, renderer)
        assert ours.tags == theirs.tags, (renderer, out)
        assert ours.texts == [" ".join(translation.split())] * len(theirs.texts), (renderer, out)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([*MARKS, "Garten", "Code", "x    y"]), min_size=1, max_size=16))
@example(["!"]).via("an image, once")
@example(["~~~", "-"]).via("strikethrough, once")
def test_any_translation_keeps_the_pages_links_images_code_and_blocks(words):
    """The same for the sample page: its elements, links, images and code stay whatever the
    translation holds (a "!" before a link does not make it an image); only emphasis around a
    piece left without words goes."""
    out = translated(SAMPLE, lambda sentences: [" ".join(words)] * len(sentences))
    for renderer in RENDERERS:
        theirs, ours = Rendered(SAMPLE, renderer), Rendered(out, renderer)
        assert [t for t in ours.tags if t[0].strip("/") not in ("em", "strong")] == [
            t for t in theirs.tags if t[0].strip("/") not in ("em", "strong")], (renderer, out)


def test_emphasis_around_no_words_is_left_out_not_shown():
    out = translated("Ein **großer** Titel und *noch* mehr `x` [Link](http://a)\n",
                     lambda sentences: ["Title"])
    for renderer in RENDERERS:
        shown = " ".join(Rendered(out, renderer).texts)
        assert shown.startswith("Title") and "*" not in shown  # not "Title******"
    assert "`x`" in out and "](http://a)" in out


PARTS = ["Ein Hund", " läuft", " *rote* ", " **Zwei** ", " `x` ", " [Link](/a) ", " [Garten] ",
         " <b>Hut</b> ", "\\*", " &amp; ", "  ", "\t", "# ", "- ", "1. ", "> ", "    ", "---",
         "```\nx\n```\n", "Zwei Katzen.", "<div>", "</div>", "  \n", "\\\n", "\n", "\n\n",
         "\n[Garten]: /y\n", "\n\n| a | b |\n|---|---|\n| c | d |\n\n", "~~weg~~", "</details>\n",
         "<details>\n<summary>Mehr</summary>\n\n"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(PARTS), min_size=1, max_size=24).map("".join))
@example("</details>\nEin Hund</details>\n").via("a closing tag the block did not open, once")
@example("1. </details>\n").via("an HTML block in a list item, once")
@example("Ein Hund  \n\t</details>\nEin Hund").via("a line's indentation, once")
@example(" *rote* </details>\nEin Hund").via("a line that would begin with a tag, once")
@example("~~weg~~</div>~~weg~~Ein Hund").via("a tag the words before it ran past, once")
def test_any_page_keeps_its_blocks_links_code_and_html(source):
    """Pages drawn from Markdown's pieces keep their elements when translated (emphasis
    aside: around a piece the translation leaves without a word it goes)."""
    out = translated(source)
    for renderer in RENDERERS:
        theirs, ours = Rendered(source, renderer), Rendered(out, renderer)
        assert [t for t in ours.tags if t[0].strip("/") not in ("em", "strong", "s", "del")] == [
            t for t in theirs.tags if t[0].strip("/") not in ("em", "strong", "s", "del")], out


def test_footnotes_keep_their_references_and_labels_out_of_the_model():
    """GitHub's footnotes: a reference (``[^hund]``) and a definition's label (``[^hund]: ``)
    are no text to translate (the model would read "^hund"), and come back as they were."""
    source = "Ein Hund läuft[^hund] über die Wiese.\n\n[^hund]: Ein Hinweis zum Hund.\n"
    documents, _ = read_markdown("page.md", source, "de")
    assert [d.sentences for d in documents] == [["Ein Hund läuft über die Wiese."],
                                                ["Ein Hinweis zum Hund."]]
    out = translated(source)
    assert out == "EIN HUND LÄUFT[^hund] ÜBER DIE WIESE.\n\n[^hund]: EIN HINWEIS ZUM HUND.\n"
    assert Rendered(out, "github").tags == Rendered(source, "github").tags


def test_spaces_the_translation_puts_just_inside_emphasis_move_out_of_it():
    from transformer_mt.translate.markdown import _hugged

    pieces, markup = ["Ein", " Hund ", " läuft"], [[("**", 1)], [("**", -1)]]
    _hugged(pieces, markup, ["", "", ""])  # "Ein** Hund **läuft": no emphasis
    assert pieces == ["Ein ", "Hund", "  läuft"]
