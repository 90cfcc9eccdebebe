"""Files translated whole, their format kept (translate/files.py): text, HTML and subtitles,
with ``mt translate --input FILE`` and LibreTranslate's ``/translate_file`` (a multipart upload
as its clients send it) and ``/download_file``. Each output's structure is compared with the
input's, read by the format's own parser, and its texts with the library's translations."""

from __future__ import annotations

import html.parser

import pytest

from tests.helpers import local_client, run_cli

pytest.importorskip("fastapi")
srt = pytest.importorskip("srt")

from transformer_mt.serve.app import create_app  # noqa: E402
from transformer_mt.serve.settings import Limits, ServeOptions  # noqa: E402
from transformer_mt.translate.files import translate_file  # noqa: E402

TEXT = "Ein Hund läuft über die Wiese. Zwei Männer spielen.\n\n  Eine Frau liest ein Buch.\n"
HTML = ('<html><head><title>Hunde</title><style>p {color: red}</style></head><body>'
        '<h1>Ein Hund</h1><p>Ein Mann fährt <b>Fahrrad</b>. Zwei Hunde spielen.</p>'
        '<p translate="no">Ein Hund.</p><ul><li>Eine Frau liest.</li></ul></body></html>\n')
SRT = ("1\n00:00:01,000 --> 00:00:03,500\nEin Mann fährt\nmit dem Fahrrad.\n\n"
       "2\n00:00:04,000 --> 00:00:06,250\nZwei Hunde spielen im Schnee.\n\n"
       "7\n01:02:03,004 --> 01:02:05,000\nEine Frau liest ein Buch.\n\n")
FILES = {"doc.txt": TEXT, "page.html": HTML, "film.srt": SRT}


@pytest.fixture(scope="module")
def translator(trained_run):
    from transformer_mt.translate import Translator

    return Translator.load(trained_run[0] / "best.pt", "cpu")


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


def test_each_format_keeps_its_structure_and_translates_every_text(translator):
    out = {name: translate_file(translator, name, text.encode()).decode()
           for name, text in FILES.items()}
    # text: the same lines, blank lines and leading spaces; each line as translate_text has it
    lines = out["doc.txt"].split("\n")
    assert len(lines) == len(TEXT.split("\n")) and lines[1] == "" and lines[2].startswith("  ")
    assert out["doc.txt"] == translator.translate_text([TEXT])[0]
    # HTML: the same tags and attributes in the same order; translate="no" and style as they were
    assert Tags(out["page.html"]).tags == Tags(HTML).tags
    assert '<p translate="no">Ein Hund.</p>' in out["page.html"]
    assert "p {color: red}" in out["page.html"] and "Ein Mann" not in out["page.html"]
    assert out["page.html"] == translator.translate_text([HTML], html=True)[0]
    # subtitles: numbers and timings as they were, each text the translation of its lines
    ours, theirs = list(srt.parse(out["film.srt"])), list(srt.parse(SRT))
    assert [(s.index, s.start, s.end) for s in ours] == [(s.index, s.start, s.end)
                                                         for s in theirs]
    expected = translator.translate_text([" ".join(s.content.split()) for s in theirs])
    assert [" ".join(s.content.split()) for s in ours] == expected
    assert ours[0].content.count("\n") == 1  # two lines in, two lines out


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
        settings = client.get("/frontend/settings").json()
        assert settings["filesTranslation"] and ".srt" in settings["supportedFilesFormat"]


@pytest.mark.parametrize("name, data, status, message", [
    (None, None, 400, "missing file parameter"),
    ("slides.pdf", b"%PDF-1.7", 400, "file format not supported"),
    ("page.html", b"<p>\xff\xfe</p>", 400, "is not UTF-8 text"),
    ("film.srt", b"not subtitles", 400, "is not a SubRip (.srt) file"),
    ("long.txt", b"Ein Hund. " * 30, 400, "at most 100 a file here"),
    ("big.txt", b"x" * 5_000, 413, ""),
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
