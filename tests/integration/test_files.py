"""Files translated whole, their format kept (translate/files.py): text, HTML, subtitles,
with ``mt translate --input FILE`` and LibreTranslate's ``/translate_file`` (a multipart upload
as its clients send it) and ``/download_file``. Each output's structure is compared with the
input's, read by the format's own parser, and its texts with the library's translations."""

from __future__ import annotations

import html.parser
import io
import re
import zipfile

import pytest

from tests.helpers import billion_laughs, local_client, run_cli

pytest.importorskip("fastapi")
srt = pytest.importorskip("srt")
docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")
pysubs2 = pytest.importorskip("pysubs2")
markdown_it = pytest.importorskip("markdown_it")
openpyxl = pytest.importorskip("openpyxl")
etree = pytest.importorskip("lxml.etree")
polib = pytest.importorskip("polib")

from transformer_mt.serve.app import create_app  # noqa: E402
from transformer_mt.serve.settings import Limits, ServeOptions  # noqa: E402
from transformer_mt.translate.files import translate_file  # noqa: E402
from transformer_mt.translate.subtitles import read_vtt  # noqa: E402

TEXT = "Ein Hund läuft über die Wiese. Zwei Männer spielen.\n\n  Eine Frau liest ein Buch.\n"
HTML = ('<html><head><title>Hunde</title><style>p {color: red}</style></head><body>'
        '<h1>Ein Hund</h1><p>Ein Mann fährt <b>Fahrrad</b>. Zwei Hunde spielen.</p>'
        '<p translate="no">Ein Hund.</p><ul><li>Eine Frau liest.</li></ul></body></html>\n')
SRT = ("1\n00:00:01,000 --> 00:00:03,500\nEin Mann fährt\nmit dem Fahrrad.\n\n"
       "2\n00:00:04,000 --> 00:00:06,250\nZwei Hunde spielen im Schnee.\n\n"
       "7\n01:02:03,004 --> 01:02:05,000\nEine Frau liest ein Buch.\n\n")
VTT = ("WEBVTT\nKind: captions\nLanguage: de\n\nNOTE nicht übersetzt\n\n"
       "eins\n00:01.000 --> 00:03.500 align:start\n<v Anna>Ein Mann fährt\n\n"
       "00:03.600 --> 00:05.000\n<v Anna>mit dem <i>Fahrrad</i>.\n\n"
       "00:06.000 --> 00:08.250 line:0\nZwei Hunde &amp; eine Katze\nspielen im Schnee.\n")
ASS = ("[Script Info]\nScriptType: v4.00+\n\n[V4+ Styles]\nFormat: Name, Fontname, Fontsize\n"
       "Style: Default,Arial,20\n\n[Events]\n"
       "Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
       "Dialogue: 0,0:00:01.00,0:00:03.50,Default,Anna,0,0,0,,{\\i1}Ein Mann fährt\n"
       "Comment: 0,0:00:02.00,0:00:03.00,Default,,0,0,0,,Ein Kommentar.\n"
       "Dialogue: 0,0:00:03.60,0:00:05.00,Default,Anna,0,0,0,,mit dem Fahrrad.{\\i0}\n"
       "Dialogue: 0,0:00:06.00,0:00:08.25,Default,Ben,10,10,10,,Zwei Hunde, eine Katze\\N"
       "spielen im Schnee.\n")
MD = ("# Ein Hund\n\nEin Mann fährt\nmit dem **Fahrrad**. Zwei Hunde spielen.\n\n"
      "- Eine Frau liest ein Buch.\n\n```\nEin Hund.\n```\n")
XLF = ('<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:'
       'tc:xliff:document:1.2"><file original="a" source-language="de" datatype="plaintext">'
       '<body><trans-unit id="1"><source>Ein Mann fährt <g id="b">Fahrrad</g>. Zwei Hunde '
       'spielen.</source></trans-unit></body></file></xliff>\n')
PO = ('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n#, python-format\n'
      'msgid "Ein Mann mit %(farbe)s Hut fährt Fahrrad."\nmsgstr ""\n')
FILES = {"doc.txt": TEXT, "page.html": HTML, "film.srt": SRT, "film.vtt": VTT, "film.ass": ASS,
         "read.md": MD, "units.xlf": XLF, "app.po": PO}


def zipfile_bytes(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def word_document() -> bytes:
    """A .docx with a header, a paragraph with a bold word, a link-free table (one merged
    cell, one empty) and a footer."""
    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = "Ein Hund läuft."
    document.sections[0].footer.paragraphs[0].text = "Zwei Hunde spielen."
    paragraph = document.add_paragraph("Ein Mann fährt ")
    paragraph.add_run("Fahrrad").bold = True
    paragraph.add_run(". Zwei Hunde spielen im Schnee.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Eine Frau liest ein Buch."
    table.cell(1, 0).merge(table.cell(1, 1)).text = "Zwei Männer spielen Fußball."
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def slides() -> bytes:
    """A .pptx with a title, a body with a bold word, a table and speaker notes."""
    from pptx.util import Inches

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = "Ein Hund läuft über die Wiese."
    body = slide.placeholders[1].text_frame
    body.text = "Zwei Hunde spielen im Schnee."
    paragraph = body.add_paragraph()
    paragraph.add_run().text = "Ein Mann fährt "
    bold = paragraph.add_run()
    bold.text, bold.font.bold = "Fahrrad", True
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    table.cell(0, 0).text = "Eine Frau liest ein Buch."
    slide.notes_slide.notes_text_frame.text = "Zwei Männer spielen Fußball."
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def slide_texts(data: bytes) -> tuple[list, list[str]]:
    """A .pptx's runs' formatting, and its texts, shape by shape, notes last."""
    slide = pptx.Presentation(io.BytesIO(data)).slides[0]
    paragraphs = [p for shape in slide.shapes if shape.has_text_frame
                  for p in shape.text_frame.paragraphs]
    paragraphs += [p for shape in slide.shapes if shape.has_table
                   for cell in shape.table.iter_cells() for p in cell.text_frame.paragraphs]
    paragraphs += list(slide.notes_slide.notes_text_frame.paragraphs)
    return ([[r.font.bold for r in p.runs] for p in paragraphs],
            ["".join(r.text for r in p.runs) for p in paragraphs])


def word_texts(data: bytes) -> tuple[list, list[str]]:
    """A .docx's structure (each paragraph's runs' formatting, the table's shape, header and
    footer present) and its texts in order."""
    document = docx.Document(io.BytesIO(data))
    section = document.sections[0]
    paragraphs = [*section.header.paragraphs, *document.paragraphs,
                  *(p for row in document.tables[0].rows for c in row.cells
                    for p in c.paragraphs), *section.footer.paragraphs]
    shape = [[(r.bold, r.italic) for r in p.runs] for p in paragraphs]
    return [shape, len(document.tables[0].rows)], [p.text for p in paragraphs]


class Tags(html.parser.HTMLParser):
    """The tags of a page, in order, with their attributes; and the untranslated parts."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(("start", tag, tuple(attrs)))

    def handle_endtag(self, tag):
        self.tags.append(("end", tag))


def _shown(inline) -> str:
    """The text a Markdown paragraph shows (its line breaks as spaces)."""
    return "".join(c.content if c.type in ("text", "code_inline") else " " * (
        c.type == "softbreak") for c in inline.children)


def test_each_format_keeps_its_structure_and_translates_every_text(translator):
    out = {name: translate_file(translator, name, text.encode()).decode()
           for name, text in FILES.items()}
    # text: the same lines, blank lines and leading spaces; each line as form="text" has it
    lines = out["doc.txt"].split("\n")
    assert len(lines) == len(TEXT.split("\n")) and lines[1] == "" and lines[2].startswith("  ")
    assert out["doc.txt"] == translator.translate([TEXT], form="text")[0]
    # HTML: the same tags and attributes in the same order; translate="no" and style as they were
    assert Tags(out["page.html"]).tags == Tags(HTML).tags
    assert '<p translate="no">Ein Hund.</p>' in out["page.html"]
    assert "p {color: red}" in out["page.html"] and "Ein Mann" not in out["page.html"]
    assert out["page.html"] == translator.translate([HTML], form="html")[0]
    # subtitles: numbers and timings as they were, each text the translation of its lines
    ours, theirs = list(srt.parse(out["film.srt"])), list(srt.parse(SRT))
    assert [(s.index, s.start, s.end) for s in ours] == [(s.index, s.start, s.end)
                                                         for s in theirs]
    expected = translator.translate([" ".join(s.content.split()) for s in theirs], form="text")
    assert [" ".join(s.content.split()) for s in ours] == expected
    assert ours[0].content.count("\n") == 1  # two lines in, two lines out
    # WebVTT: every byte but the cues' text and the header's language as it was; a sentence
    # across two cues translated whole, the text between tags unescaped for the model and
    # escaped back
    ours, theirs = read_vtt("", out["film.vtt"]), read_vtt("", VTT)
    assert theirs.write(ours.texts).replace("Language: de\n", "Language: en\n", 1) == \
        out["film.vtt"]
    shown = [html.unescape(re.sub(r"<[^>]+>", "", text)) for text in ours.texts]
    assert [" ".join(shown[:2]), shown[2]] == translator.translate(
        ["Ein Mann fährt mit dem Fahrrad.", "Zwei Hunde & eine Katze spielen im Schnee."])
    assert all(text.startswith("<v Anna>") for text in ours.texts[:2])
    assert "<i>" in ours.texts[1] and out["film.vtt"].count("\n") == VTT.count("\n")
    # SubStation Alpha, as pysubs2 (subtitle tools' library) reads it: the same events, but
    # the dialogues' text; the comment as it was
    ours, theirs = (pysubs2.SSAFile.from_string(text) for text in (out["film.ass"], ASS))
    assert [(e.type, e.start, e.end, e.style, e.name, e.marginl) for e in ours] == [
        (e.type, e.start, e.end, e.style, e.name, e.marginl) for e in theirs]
    assert ours[1].text == "Ein Kommentar." and ours[0].text.startswith("{\\i1}")
    assert "\\N" in ours[3].text  # two lines in, two out
    shown = [" ".join(e.plaintext.split()) for e in ours if e.type == "Dialogue"]
    assert [" ".join(shown[:2]), shown[2]] == translator.translate(
        ["Ein Mann fährt mit dem Fahrrad.", "Zwei Hunde, eine Katze spielen im Schnee."])


def test_word_and_powerpoint_keep_their_runs_tables_and_notes(translator):
    # Word: the same paragraphs, runs (bold where it was), table and header; every text
    # translated, the sentence the bold word is in whole, its translation shared out among
    # the runs (the bold one given a word)
    source = word_document()
    translated = translate_file(translator, "letter.docx", source)
    (shape, rows), texts = word_texts(translated)
    (their_shape, their_rows), _ = word_texts(source)
    assert (shape, rows) == (their_shape, their_rows) and (True, None) in shape[1]
    segments = ["Ein Hund läuft.", "Ein Mann fährt Fahrrad. Zwei Hunde spielen im Schnee.",
                "Eine Frau liest ein Buch.", "Zwei Männer spielen Fußball.", "Zwei Hunde spielen."]
    expected = translator.translate(segments, form="text")
    assert texts[0] == expected[0] and texts[1] == expected[1]
    assert texts[-1] == expected[-1] and expected[2] in texts and texts.count("") == 1
    bold = [r.text for r in docx.Document(io.BytesIO(translated)).paragraphs[0].runs if r.bold]
    assert len(bold) == 1 and bold[0].strip()
    # PowerPoint: the same shapes, runs (the bold word bold), table and notes, all translated
    translated = translate_file(translator, "talk.pptx", slides())
    shape, texts = slide_texts(translated)
    their_shape, their_texts = slide_texts(slides())
    assert shape == their_shape and [t == "" for t in texts] == [t == "" for t in their_texts]
    expected = translator.translate([t for t in their_texts if t], form="text")
    assert [t for t in texts if t] == expected
    bold = [r.text for shape in pptx.Presentation(io.BytesIO(translated)).slides[0].shapes
            if shape.has_text_frame for p in shape.text_frame.paragraphs for r in p.runs
            if r.font.bold]
    assert len(bold) == 1 and bold[0].strip()


def test_markdown_xliff_and_gettext_keep_their_structure_and_translate_every_text(translator):
    out = {name: translate_file(translator, name, FILES[name].encode()).decode()
           for name in ("read.md", "units.xlf", "app.po")}
    # Markdown, as markdown-it-py reads it: the same blocks, the bold word bold, the code as
    # it was; each paragraph's text the translation of its lines
    theirs, ours = (markdown_it.MarkdownIt().parse(text) for text in (MD, out["read.md"]))
    assert [(t.type, t.tag) for t in ours] == [(t.type, t.tag) for t in theirs]
    bold = [n for n, c in enumerate(ours[4].children) if c.type == "strong_open"]
    assert len(bold) == 1 and ours[4].children[bold[0] + 1].content.strip()  # a word in it
    assert [_shown(t) for t in ours if t.type == "inline"] == translator.translate(
        ["Ein Hund", "Ein Mann fährt mit dem Fahrrad. Zwei Hunde spielen.",
         "Eine Frau liest ein Buch."], form="text")
    assert out["read.md"].endswith("```\nEin Hund.\n```\n")
    # XLIFF: the unit's target the translation of its source, the code around a word of it
    target = etree.fromstring(out["units.xlf"].encode()).find(".//{*}target")
    assert "".join(target.itertext()) == translator.translate(
        ["Ein Mann fährt Fahrrad. Zwei Hunde spielen."], form="text")[0]
    assert target.find("{*}g").get("id") == "b" and target.find("{*}g").text.strip()
    # gettext: the message translated, its placeholder kept, marked for review
    message = polib.pofile(out["app.po"])[0]
    assert message.msgstr.count("%(farbe)s") == 1 and message.flags == ["fuzzy", "python-format"]
    assert message.msgstr.replace("%(farbe)s", "").split() and message.msgstr != message.msgid
    assert out["app.po"].startswith('msgid ""\n')  # no header comment: none written (polib's "#")


def test_a_workbooks_strings_are_translated_its_numbers_and_formulas_kept(translator):
    """An .xlsx (strings shared, as Excel writes them) through /translate_file, read back by
    openpyxl: each string the library's translation, the bold word bold, the rest as it was."""
    from tests.unit.test_sheets import shared, workbook

    source = shared(workbook())
    with local_client(create_app(translator, ServeOptions())) as client:
        answer = client.post("/translate_file", data={"source": "de", "target": "en"},
                             files={"file": ("tiere.xlsx", source)})
        assert answer.status_code == 200, answer.text
        out = client.get(answer.json()["translatedFileUrl"]).content
    assert out == translate_file(translator, "tiere.xlsx", source)
    book = openpyxl.load_workbook(io.BytesIO(out), rich_text=True)["Tiere"]
    texts = ["Ein Hund läuft.", "Ein Mann fährt Fahrrad. Zwei Hunde spielen.", "Zwei Katzen"]
    expected = translator.translate(texts, form="text")
    assert [book["A1"].value, str(book["A2"].value), book["A3"].value.strip()] == expected
    assert [book["B1"].value, book["C1"].value, book["A1"].font.italic] == [42, "=B1*2", True]
    assert any(getattr(part, "font", None) and part.font.b and part.text.strip()
               for part in book["A2"].value)  # the bold word: bold, a word in it


def test_mt_translate_input_file_writes_the_same_file(trained_run, translator, tmp_path):
    for name, text in FILES.items():
        source = tmp_path / name
        source.write_text(text, encoding="utf-8")
        result = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"),
                          "--input", str(source), "--output", str(tmp_path / f"out.{name}")])
        assert result.returncode == 0, result.stderr
        written = (tmp_path / f"out.{name}").read_bytes()
        if name.endswith(".txt"):  # a text file is translated line by line, as ever
            assert written.decode().splitlines() == translator.translate(text.splitlines())
        else:
            assert written == translate_file(translator, name, text.encode())
    printed = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"), "--input",
                       str(tmp_path / "film.srt")])  # no --output: to stdout
    assert printed.returncode == 0 and printed.stdout == translate_file(
        translator, "film.srt", SRT.encode()).decode()
    (tmp_path / "letter.docx").write_bytes(word_document())
    result = run_cli(["translate", "--checkpoint", str(trained_run[0] / "best.pt"), "--input",
                      str(tmp_path / "letter.docx"), "--output", str(tmp_path / "out.docx")])
    assert result.returncode == 0, result.stderr
    assert word_texts((tmp_path / "out.docx").read_bytes()) == word_texts(
        translate_file(translator, "letter.docx", word_document()))


def test_translate_file_as_libretranslate_answers_it(translator):
    with local_client(create_app(translator, ServeOptions())) as client:
        for name, text in FILES.items():
            answer = client.post("/translate_file", data={"source": "de", "target": "en"},
                                 files={"file": (name, text.encode(), "application/octet-stream")})
            assert answer.status_code == 200, answer.text
            url = answer.json()["translatedFileUrl"]
            assert url.startswith("http://localhost/download_file/") and url.endswith(name)
            download = client.get(url)
            assert download.status_code == 200
            assert download.content == translate_file(translator, name, text.encode())
            assert f'filename="{name}"' in download.headers["content-disposition"]
        answer = client.post("/translate_file", data={"source": "de", "target": "en"},
                             files={"file": ("letter.docx", word_document())})
        download = client.get(answer.json()["translatedFileUrl"])
        assert word_texts(download.content) == word_texts(
            translate_file(translator, "letter.docx", word_document()))
        settings = client.get("/frontend/settings").json()
        assert settings["filesTranslation"] and {".srt", ".vtt", ".ass", ".md", ".docx"} <= set(
            settings["supportedFilesFormat"])


@pytest.mark.parametrize("name, data, status, message", [
    (None, None, 400, "missing file parameter"),
    ("slides.pdf", b"%PDF-1.7", 400, "'slides.pdf' is not a PDF that can be read"),
    ("notes.txt", b"%PDF-1.7", 400, "is a PDF, not what its name says: name it .pdf"),
    ("letter.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\0", 400,
     "'letter.doc' is an older Office document (.doc, .xls, .ppt), a format not translated"),
    ("letter.rtf", b"{\\rtf1\\ansi Ein Hund.}", 400, "is an RTF document, a format not"),
    ("page.html", b"<p>\xff\xfe</p>", 400, "is not UTF-8 text"),
    ("film.srt", b"not subtitles", 400, "is not a SubRip (.srt) file"),
    ("film.vtt", b"not subtitles", 400, "is not a WebVTT (.vtt) file"),
    ("film.ass", b"not subtitles", 400, "is not an Advanced SubStation Alpha (.ass) file"),
    ("long.txt", b"Ein Hund. " * 30, 400, "at most 100 a file here"),
    ("big.txt", b"x" * 5_000, 413, ""),
    ("letter.docx", b"PK\x03\x04 not a zip", 400, "is not a Word document (.docx)"),
    ("table.xlsx", zipfile_bytes({"a.txt": b"x"}), 400, "is not an Excel workbook (.xlsx)"),
    ("units.xlf", b"<html><body>Ein Hund.</body></html>", 400, "is not an XLIFF file"),
    ("units.xlf", XLF.replace('plaintext"', 'plaintext" target-language="fr"').encode(), 400,
     'asks for target-language="fr"; this model translates de into en'),
    ("talk.pptx", zipfile_bytes({"a.txt": b"x"}), 400, "is not a PowerPoint presentation"),
])
def test_files_that_cannot_be_translated_get_a_4xx(translator, name, data, status, message):
    options = ServeOptions(Limits(max_file_chars=100, max_body_bytes=4_000))
    with local_client(create_app(translator, options)) as client:
        files = None if name is None else {"file": (name, data, "application/octet-stream")}
        answer = client.post("/translate_file", data={"source": "de", "target": "en"},
                             files=files)
        assert answer.status_code == status, answer.text
        assert message in answer.json()["error"] and "\n" not in answer.json()["error"]
        for key in ("0" * 32 + ".x.txt", "..%2F..%2Fetc%2Fpasswd", "nothing"):
            assert client.get(f"/download_file/{key}").status_code == 404
        assert client.post("/v1/translate", json={"text": "Ein Hund."}).status_code == 200


def test_a_server_with_keys_takes_the_key_in_the_form(translator):
    options = ServeOptions(api_keys=("k1",))
    with local_client(create_app(translator, options)) as client:
        form = {"source": "de", "target": "en"}
        upload = {"file": ("doc.txt", TEXT.encode(), "text/plain")}
        assert client.post("/translate_file", data=form, files=upload).status_code == 403
        answer = client.post("/translate_file", data={**form, "api_key": "k1"}, files=upload)
        assert answer.status_code == 200, answer.text
        wrong = client.post("/translate_file", data={**form, "target": "fr", "api_key": "k1"},
                            files=upload)
        assert wrong.status_code == 400 and "not de into fr" in wrong.json()["error"]


def test_hostile_word_documents_are_refused_quickly(translator, monkeypatch):
    """A zip bomb (members that unpack far past the limit) is refused before it is opened; an
    XML entity bomb (billion laughs) is not expanded: one line either way, within seconds."""
    import time

    from transformer_mt.errors import MTError
    from transformer_mt.translate import files

    monkeypatch.setattr(files, "MOST_UNPACKED", 2**20)
    bomb = zipfile_bytes({"word/document.xml": b"\0" * (4 * 2**20)})
    with pytest.raises(MTError, match=r"unpacks to 4,194,304 bytes in 1 files; at most"):
        files.read_file("bomb.docx", bomb, "de")
    laughs = billion_laughs('<w:document xmlns:w="http://schemas.openxmlformats.org/'
                            'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&lol9;</w:t>'
                            '</w:r></w:p></w:body></w:document>')
    real = zipfile.ZipFile(io.BytesIO(word_document()))
    members = {m: real.read(m) for m in real.namelist()}
    members["word/document.xml"] = laughs
    start = time.monotonic()
    try:
        doc = files.read_file("laughs.docx", zipfile_bytes(members), "de")
        assert all(len(t) < 1000 for d in doc.documents for t in d.sentences)  # not expanded
    except MTError as exc:
        assert "is not a Word document" in str(exc)
    assert time.monotonic() - start < 10
