"""``mt translate --output FILE`` of many lines (``cli/parts.py``): written a part at a time, so
that a run stopped on the way goes on where it stopped when the same command runs again, with
the translation one run gives; a partial output made from another input, checkpoint or flag is
never used. (Parts of 7 lines here, for a part's 10,000.)"""

from __future__ import annotations

import pytest

from tests.helpers import REPO, run_cli
from transformer_mt.cli import EXIT_ERROR, parts
from transformer_mt.cli import translate as translate_command
from transformer_mt.translate import Translator

TOY = REPO / "tests" / "data" / "toy-de-en"


@pytest.fixture
def many(tmp_path, monkeypatch):
    """30 toy sentences in a file (more than a part of 7), and an output path."""
    monkeypatch.setattr(parts, "PART", 7)
    source = tmp_path / "in.de"
    lines = (TOY / "test.de").read_text(encoding="utf-8").splitlines()
    source.write_text("\n".join((lines * 4)[:30]) + "\n", encoding="utf-8")
    return source, tmp_path / "out.en"


def _translate(checkpoint, source, output, *flags: str):
    return run_cli(["translate", "--checkpoint", str(checkpoint), "--input", str(source),
                    "--output", str(output), *flags])


def test_a_file_in_parts_is_translated_as_in_one_and_leaves_no_partial_file(trained_run, many):
    source, output = many
    checkpoint = trained_run[0] / "best.pt"
    result = _translate(checkpoint, source, output, "--beam-size", "2")
    assert result.returncode == 0, result.stderr
    assert "28 of 30 lines translated" in result.stderr  # (parts of 7 lines)
    assert "WARNING" not in result.stderr  # (no partial output: nothing to say of one)
    lines = source.read_text(encoding="utf-8").splitlines()
    assert output.read_text(encoding="utf-8").splitlines() == \
        Translator.load(checkpoint).translate(lines, beam_size=2)
    assert sorted(p.name for p in output.parent.iterdir()) == ["in.de", "out.en"]


class Stopping:
    """``mt translate``'s translation of lines, counting the lines each call is asked for, and
    raising KeyboardInterrupt (Ctrl-C) at call ``at`` while ``stop``."""

    def __init__(self, monkeypatch, at: int = 3) -> None:
        self.asked: list[int] = []
        self.stop = True
        real = translate_command._translations

        def translations(translator, args, lines, *rest):
            self.asked.append(len(lines))
            if len(self.asked) == at and self.stop:
                raise KeyboardInterrupt
            return real(translator, args, lines, *rest)

        monkeypatch.setattr(translate_command, "_translations", translations)

    def stopped(self, checkpoint, source, output) -> None:
        """A run of :func:`_translate` stopped in its third part: two parts kept, and the
        user told so."""
        result = _translate(checkpoint, source, output)
        assert result.returncode == 130
        assert "the first 14 of 30 lines are translated, in" in result.stderr
        assert "the same command again goes on from there" in result.stderr
        partial = output.with_name(output.name + ".partial")
        assert not output.exists() and len(partial.read_text(encoding="utf-8").splitlines()) == 14
        self.stop, self.asked[:] = False, []


def test_a_run_stopped_in_its_first_part_leaves_nothing(trained_run, many, monkeypatch):
    source, output = many
    Stopping(monkeypatch, at=1)
    assert _translate(trained_run[0] / "best.pt", source, output).returncode == 130
    assert sorted(p.name for p in output.parent.iterdir()) == ["in.de"]


def test_a_stopped_run_goes_on_where_it_stopped(trained_run, many, monkeypatch):
    """Ctrl-C in the third part: two parts kept; the same command again translates the rest
    only, and the output is what one run writes. A partial file with lines after its
    record's count (a stop between the two) is cut back to the count."""
    source, output = many
    checkpoint = trained_run[0] / "best.pt"
    calls = Stopping(monkeypatch)
    calls.stopped(checkpoint, source, output)
    partial = output.with_name("out.en.partial")
    with open(partial, "a", encoding="utf-8") as f:
        f.write("a line of a part whose record was never written\n")
    result = _translate(checkpoint, source, output)
    assert result.returncode == 0, result.stderr
    assert "going on from line 15 of 30" in result.stderr
    assert calls.asked == [7, 7, 2]  # the lines not translated before, and no more
    assert output.read_text(encoding="utf-8").splitlines() == \
        Translator.load(checkpoint).translate(_lines(source))
    assert not partial.exists()


@pytest.mark.parametrize("change", ["flag", "input"])
def test_a_partial_output_of_another_command_is_never_used(trained_run, many, monkeypatch,
                                                           change):
    """A run stopped, then the command run again with another beam, or after its input
    changed: translated from the start, as a run of that command alone."""
    source, output = many
    checkpoint = trained_run[0] / "best.pt"
    calls = Stopping(monkeypatch)
    calls.stopped(checkpoint, source, output)
    flags = ["--beam-size", "3"] if change == "flag" else []
    if change == "input":
        source.write_text(source.read_text(encoding="utf-8").replace("Ein ", "Eine ", 1),
                          encoding="utf-8")
    result = _translate(checkpoint, source, output, *flags)
    assert result.returncode == 0, result.stderr
    assert "was made from another input, checkpoint or flags: starting over" in result.stderr
    assert calls.asked == [7, 7, 7, 7, 2]
    beam = {"beam_size": 3} if flags else {}
    assert output.read_text(encoding="utf-8").splitlines() == \
        Translator.load(checkpoint).translate(_lines(source), **beam)


def _lines(source) -> list[str]:
    return source.read_text(encoding="utf-8").splitlines()


def test_a_second_run_writing_the_same_output_is_refused(trained_run, many, monkeypatch):
    """Another run writing the output now (its partial output locked): refused in one line,
    what that run wrote untouched."""
    import portalocker

    source, output = many
    partial = output.with_name("out.en.partial")
    partial.write_text("a line of the other run\n", encoding="utf-8")
    with open(partial, "ab") as held:
        portalocker.lock(held, portalocker.LockFlags.EXCLUSIVE)
        result = _translate(trained_run[0] / "best.pt", source, output)
    assert result.returncode == EXIT_ERROR
    assert result.stderr.strip().splitlines()[-1] == (
        f"mt translate: error: another mt translate is writing {output} now (its partial "
        "output is locked); wait for it to end, or choose another --output")
    assert partial.read_text(encoding="utf-8") == "a line of the other run\n"
    assert not output.exists()


@pytest.mark.parametrize("end", ["\r\n", "\n"])
def test_the_translation_ends_its_lines_as_the_input_does(trained_run, many, end):
    """A file of Windows' CRLF lines is translated into one (written whole, in parts, or to
    standard output, as a pipe's lines come); LF lines, or a mix, into LF lines."""
    source, output = many
    checkpoint = trained_run[0] / "best.pt"
    lines = source.read_text(encoding="utf-8").splitlines()
    source.write_bytes("".join(line + end for line in lines).encode())
    translations = [line + end for line in Translator.load(checkpoint).translate(lines)]
    expected = "".join(translations).encode()
    assert _translate(checkpoint, source, output).returncode == 0  # in parts of 7 lines
    assert output.read_bytes() == expected
    few = source.with_name("few.de")
    few.write_bytes("".join(line + end for line in lines[:3]).encode())
    assert _translate(checkpoint, few, output).returncode == 0  # written whole
    assert output.read_bytes() == "".join(translations[:3]).encode()
    for given in (["--input", str(source)], ["--input", "-"]):  # to standard output
        result = run_cli(["translate", "--checkpoint", str(checkpoint), *given],
                         stdin=source.read_bytes())
        assert result.returncode == 0 and result.stdout == expected
    mixed = source.read_bytes().replace(b"\r\n", b"\n", 1) if end == "\r\n" else b""
    if mixed:
        result = run_cli(["translate", "--checkpoint", str(checkpoint), "--input", "-"],
                         stdin=mixed)
        assert result.stdout == expected.replace(b"\r\n", b"\n")
