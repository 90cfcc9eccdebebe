"""Outputs never destroy what sits at their path: devices, links, inputs; umask; stale files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.helpers import run_cli, tiny_train_args
from transformer_mt.errors import MTError
from transformer_mt.fileio import (
    atomic_write_text,
    refuse_same_file,
    remove_stale_temporaries,
    run_lock,
)


def test_a_device_is_written_through_not_replaced(tmp_path):
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    atomic_write_text(link, "gone\n")
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # still the device
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        atomic_write_text(fifo, "through the pipe\n")
        assert os.read(reader, 100) == b"through the pipe\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symlink_keeps_pointing_at_its_replaced_target(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    atomic_write_text(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "later.txt")
    atomic_write_text(dangling, "made\n")
    assert dangling.is_symlink() and (tmp_path / "later.txt").read_text() == "made\n"


def test_new_files_honour_the_umask_and_replaced_files_keep_their_mode(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "new.txt", "x")
        assert stat.S_IMODE(os.stat(tmp_path / "new.txt").st_mode) == 0o640
    finally:
        os.umask(old)
    kept = tmp_path / "kept.txt"
    kept.write_text("x")
    kept.chmod(0o604)
    atomic_write_text(kept, "y")
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o604


def test_an_output_where_no_file_can_be_made_names_the_users_path(tmp_path):
    """A folder that cannot be made (a part of its path is a file) or cannot hold files
    (/proc): the error names the output asked for, not the temporary file beside it."""
    (tmp_path / "a-file").write_text("x")
    for output, reason in ((tmp_path / "a-file" / "out.txt", "a part of this path is a file"),
                           (tmp_path / "a-file" / "deeper" / "out.txt", "a part of this"),
                           (Path("/proc/out.txt"), "No such file or directory")):
        with pytest.raises(MTError) as error:
            atomic_write_text(output, "x")
        assert str(error.value).startswith(f"could not write '{output}': {reason}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_an_output_that_is_an_input_is_refused(tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("keep\n")
    hard = tmp_path / "hard.txt"
    os.link(data, hard)  # another name, the same file
    for output in (data, hard):
        with pytest.raises(MTError, match="same file as the input"):
            refuse_same_file(output, [None, data])
    refuse_same_file(tmp_path / "other.txt", [data])  # a new path is fine
    refuse_same_file("/dev/null", ["/dev/null"])  # writing a device replaces nothing


def test_stale_temporaries_are_removed(tmp_path):
    (tmp_path / ".last.pt.abc123.tmp").write_bytes(b"half")
    (tmp_path / "last.pt").write_bytes(b"whole")
    removed = remove_stale_temporaries(tmp_path)
    assert [p.name for p in removed] == [".last.pt.abc123.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_a_held_run_directory_is_refused_with_the_holder(tmp_path):
    with run_lock(tmp_path):
        result = run_cli(tiny_train_args(tmp_path))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert "in use by another mt train" in line and f"pid {os.getpid()}" in line
    with run_lock(tmp_path):  # released: it can be taken again
        pass


def test_translate_and_average_refuse_to_overwrite_their_inputs(trained_run, tmp_path):
    run_dir, _ = trained_run
    ckpt = run_dir / "best.pt"
    before = ckpt.read_bytes()
    text = tmp_path / "de.txt"
    text.write_text("Ein Hund.\n")
    for args in (["translate", "--checkpoint", str(ckpt), "--input", str(text), "--output",
                  str(text)],
                 ["translate", "--checkpoint", str(ckpt), "--output", str(ckpt), "Ein Hund."],
                 ["evaluate", "--checkpoint", str(ckpt), "--output", str(ckpt)],
                 ["average", str(ckpt), str(run_dir / "last.pt"), "--output", str(ckpt)]):
        result = run_cli(args)
        assert result.returncode != 0, args
        assert "same file as the input" in result.stderr.strip().splitlines()[-1]
    assert text.read_text() == "Ein Hund.\n" and ckpt.read_bytes() == before
    # through /dev/stdout the translation reaches standard output
    result = run_cli(["translate", "--checkpoint", str(ckpt), "--output", "/dev/stdout",
                      "Ein Hund."], fresh_process=True)  # a real standard output
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_utf16_text_with_its_byte_order_mark_reads_as_its_utf8_does(tmp_path, encoding):
    """Windows' "Unicode" text and Excel's tab-separated export: UTF-16 with a BOM, CRLF
    lines; a line ending in U+0A0D (whose bytes hold "\\n") stays one line."""
    from transformer_mt.data.corpus import read_lines
    from transformer_mt.translate.files import read_file

    text = "Ein Hund läuft.\tA dog runs.\r\nਗ\u0a0d 狗\t𝄞 end\r\n\r\nlast"
    (tmp_path / "a.tsv").write_bytes(("\ufeff" + text).encode(encoding))
    (tmp_path / "b.tsv").write_text(text, encoding="utf-8", newline="")
    assert list(read_lines(tmp_path / "a.tsv")) == list(read_lines(tmp_path / "b.tsv")) == [
        "Ein Hund läuft.\tA dog runs.", "ਗ\u0a0d 狗\t𝄞 end", "", "last"]
    subtitle = "1\r\n00:00:01,000 --> 00:00:02,000\r\nEin Hund.\r\n"
    read = [read_file("a.srt", ("\ufeff" + subtitle).encode(e), "de").documents[0].sentences
            for e in (encoding, "utf-8")]
    assert read[0] == read[1] == ["Ein Hund."]
    (tmp_path / "c.txt").write_bytes("\ufeffEin Hund".encode(encoding)[:-1])  # cut short
    with pytest.raises(MTError, match=r"^'.*c.txt' is not valid UTF-16 after its byte order "):
        list(read_lines(tmp_path / "c.txt"))
