"""A command's input read once: ``-`` (standard input), a FIFO or a process substitution
(``<(zcat de.gz)``), plain or gzipped, gives what the same file gives (``mt translate --input``,
``mt evaluate``'s and ``mt score``'s --src/--ref/--hyp, ``mt serve --api-key-file``); a corpus,
which training reads more than once, must be a file. ``mt translate --output -`` is standard
output, and an output named ``*.gz`` is gzipped."""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path

import pytest

from tests.helpers import REPO, run_cli, tiny_train_args
from transformer_mt.cli.serve import _api_keys

TOY = REPO / "tests" / "data" / "toy-de-en"


def piped(tmp_path: Path, name: str, data: bytes) -> Path:
    """A named pipe that a thread fills with ``data`` once a reader opens it (as a shell's
    ``<(command)`` is filled by the command)."""
    path = tmp_path / name
    os.mkfifo(path)

    def fill() -> None:
        with open(path, "wb") as f:
            f.write(data)

    threading.Thread(target=fill, daemon=True).start()
    return path


@pytest.fixture(scope="module")
def sentences(tmp_path_factory) -> tuple[Path, Path]:
    """The toy test set's first 8 pairs, as files."""
    folder = tmp_path_factory.mktemp("toy")
    for side in ("de", "en"):
        lines = (TOY / f"test.{side}").read_text().splitlines(keepends=True)[:8]
        (folder / f"test.{side}").write_text("".join(lines))
    return folder / "test.de", folder / "test.en"


def ok(args: list[str], stdin: str | None = None) -> str:
    result = run_cli(args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_translate_reads_a_pipe_and_standard_input_as_it_reads_the_file(trained_run,
                                                                          sentences, tmp_path):
    translate = ["translate", "--checkpoint", str(trained_run[0] / "best.pt"), "--input"]
    source = sentences[0].read_bytes()
    expected = ok([*translate, str(sentences[0])])
    assert len(expected.splitlines()) == 8
    assert ok([*translate, str(piped(tmp_path, "plain", source))]) == expected
    assert ok([*translate, str(piped(tmp_path, "gzipped", gzip.compress(source)))]) == expected
    assert ok([*translate, "-"], stdin=source.decode()) == expected
    assert ok([*translate, "-", "--output", "-"], stdin=source.decode()) == expected
    assert not (REPO / "-").exists()  # (run_cli runs mt in the repository)
    ok([*translate, str(sentences[0]), "--output", str(tmp_path / "out.en.gz")])
    assert gzip.decompress((tmp_path / "out.en.gz").read_bytes()).decode() == expected
    first = source.decode().splitlines()[0]  # what takes sentences reads '-' whole
    alternatives = [*translate[:-1], "--alternatives", "2"]
    assert ok([*alternatives, "--input", "-"], stdin=first + "\n") \
        == ok([*alternatives, first])


OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(56)  # how a .doc, .xls or .ppt begins


def test_a_file_of_another_format_is_refused_in_one_line_not_read_as_lines(trained_run,
                                                                          tmp_path):
    """A document of a format not translated here (a .doc, an RTF, a PDF named .txt, a zip
    archive) is refused in one line that says what it is, named as it is or piped, plain or
    gzipped: not its bytes "translated" line by line (an RTF's control words, say)."""
    translate = ["translate", "--checkpoint", str(trained_run[0] / "best.pt"), "--input"]
    (tmp_path / "letter.doc").write_bytes(OLE2)
    (tmp_path / "letter.rtf").write_bytes(b"{\\rtf1\\ansi\n{\\b Ein Hund.}\n}\n")
    (tmp_path / "scan.txt").write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    for given, says in (
            ("letter.doc", "'{}' is an older Office document (.doc, .xls, .ppt), a format "
                           "not translated here; translate .txt, .html"),
            ("letter.rtf", "'{}' is an RTF document, a format not translated here"),
            ("scan.txt", "'{}' is a PDF, not what its name says: name it .pdf")):
        result = run_cli([*translate, str(tmp_path / given), "--output", str(tmp_path / "o")])
        assert result.returncode != 0 and "Traceback" not in result.stderr
        assert says.format(tmp_path / given) in result.stderr.strip().splitlines()[-1]
        assert not (tmp_path / "o").exists()
    pdf = piped(tmp_path, "pdf", gzip.compress(b"%PDF-1.7\n"))
    for source, stdin, says in (("-", OLE2, "an older Office document (.doc, .xls, .ppt)"),
                                (str(pdf), b"", "a PDF")):
        result = run_cli([*translate, source], stdin=stdin)
        error = result.stderr.decode()
        assert result.returncode != 0 and "Traceback" not in error
        assert error.strip().splitlines()[-1].endswith(f"is {says}, not lines of text")


def test_evaluate_and_score_read_standard_input_and_pipes(trained_run, sentences, tmp_path):
    ckpt = str(trained_run[0] / "best.pt")
    src, ref = (str(p) for p in sentences)
    hyp = tmp_path / "hyp.en"
    hyp.write_text(ok(["translate", "--checkpoint", ckpt, "--input", src]))
    evaluate = ["evaluate", "--ref", ref, "--json", "--hyp"]
    expected = json.loads(ok([*evaluate, str(hyp)]))
    fifo = str(piped(tmp_path, "hyp", hyp.read_bytes()))
    for name, given, stdin in (("standard input", "-", hyp.read_text()), (fifo, fifo, None)):
        assert json.loads(ok([*evaluate, given], stdin=stdin)) \
            == {**expected, "hypotheses": name}
    score = ["score", "--checkpoint", ckpt, "--json"]
    expected_scores = ok([*score, "--src", src, "--hyp", str(hyp)])
    assert len(expected_scores.splitlines()) == 8
    fifo = str(piped(tmp_path, "src", sentences[0].read_bytes()))
    assert ok([*score, "--src", fifo, "--hyp", "-"], stdin=hyp.read_text()) == expected_scores
    for args, message in (
            (["evaluate", "--checkpoint", ckpt, "--src", "-", "--ref", "-"], "is read once"),
            ([*score, "--src", "-", "--hyp", "-"], "is read once"),
            ([*evaluate[:-1], "--hyp", str(hyp), "--output", "-"], "give it a file's name")):
        result = run_cli(args, stdin=sentences[0].read_text())
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert message in result.stderr.splitlines()[-1]


def test_keys_read_from_a_pipe(tmp_path):
    assert _api_keys(str(piped(tmp_path, "keys", b"# ours\nkey-1\n\nkey-2\n"))) \
        == ("key-1", "key-2")


def test_a_corpus_in_a_pipe_is_refused_before_a_run_directory_exists(tmp_path):
    fifo = tmp_path / "train.de"
    os.mkfifo(fifo)  # no writer: a read would wait for ever
    result = run_cli(tiny_train_args(tmp_path / "run",
                                     f"data.train={{src: {fifo}, tgt: {TOY / 'train.en'}}}"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "data.train.src" in result.stderr and "is a FIFO" in result.stderr
    assert not (tmp_path / "run").exists()


def test_whole_reads_a_text_as_one_as_the_server_reads_a_txt(trained_run, translator, tmp_path):
    """``--whole``: a text file (any name), a pipe (gzipped too) or standard input read as one
    text, a sentence across lines read whole, as ``/translate_file`` reads a .txt, every line
    break kept; without it each line is a sentence (a corpus); given sentences or nothing, a
    one-line error."""
    from transformer_mt.translate.documents import split_text
    from transformer_mt.translate.files import translate_file

    text = "Ein Mann fährt\nmit dem Fahrrad.\nZwei Hunde spie-\nlen im Schnee.\n"
    assert len(split_text(text, "de").sentences) == 2  # (four lines, two sentences)
    expected = translate_file(translator, "brief.txt", text.encode()).decode()
    assert expected.count("\n") == 4
    (tmp_path / "brief.de").write_text(text)
    whole = ["translate", "--checkpoint", str(trained_run[0] / "best.pt"), "--whole"]
    assert ok([*whole, "--input", str(tmp_path / "brief.de")]) == expected
    assert ok(whole, stdin=text) == expected
    assert ok([*whole, "--input", str(piped(tmp_path, "gz", gzip.compress(text.encode())))]) \
        == expected
    ok([*whole, "--input", str(tmp_path / "brief.de"), "--output", str(tmp_path / "o.en.gz")])
    assert gzip.decompress((tmp_path / "o.en.gz").read_bytes()).decode() == expected
    lines = ok([*whole[:-1], "--input", str(tmp_path / "brief.de")])
    assert lines.splitlines() == translator.translate(text.splitlines())
    for args, stdin, says in (([*whole, "Ein Hund."], "", "the sentences given are each read"),
                              (whole, "\n \n", "the input (standard input) is empty")):
        result = run_cli(args, stdin=stdin)
        assert result.returncode != 0 and "Traceback" not in result.stderr
        assert says in result.stderr.strip().splitlines()[-1]


def test_a_file_of_many_sentences_shows_its_progress_and_the_same_translation(translator,
                                                                             capsys):
    """``translate_file(..., progress=True)`` (what ``mt translate`` asks where stderr is a
    terminal): a bar past ``PROGRESS_FROM`` sentences, none for fewer; the same bytes."""
    from transformer_mt.logs import PROGRESS_FROM
    from transformer_mt.translate.files import translate_file

    lines = (TOY / "test.de").read_text().splitlines()
    many = "\n".join(lines[:PROGRESS_FROM + 1]).encode()
    few = "\n".join(lines[:3]).encode()
    for data, shown in ((many, True), (few, False)):
        out = translate_file(translator, "a.txt", data, progress=True)
        assert ("translate:" in capsys.readouterr().err) == shown
        assert out == translate_file(translator, "a.txt", data)
