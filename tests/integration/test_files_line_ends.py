"""Windows' text: a file, or an HTML text, whose lines end in CRLF is translated into one
whose lines do, where the format's parser reads CRLF as LF and writes LF (HTML's and XML's,
srt, polib); each compared with its LF version's translation."""

from __future__ import annotations

import pytest

from tests.integration.test_files import FILES
from transformer_mt.translate.files import translate_file


@pytest.mark.parametrize("name", FILES)
def test_a_file_of_crlf_lines_is_translated_into_one(translator, name):
    """Windows' text: a file whose lines end in CRLF is translated into the file its LF
    version is, each line ending in CRLF (HTML's and XML's parsers, srt and polib write LF)."""
    windows = FILES[name].replace("\n", "\r\n").encode()
    assert translate_file(translator, name, windows) == translate_file(
        translator, name, FILES[name].encode()).replace(b"\n", b"\r\n")


def test_html_of_crlf_lines_is_translated_into_crlf_lines(translator):
    """As a server's ``/translate`` takes HTML (``format: html``): Python's HTML parser reads
    CRLF as LF."""
    page = "<p>Ein Mann fährt Fahrrad.</p>\n<p>Zwei Hunde spielen.</p>\n"
    ours = translator.translate([page.replace("\n", "\r\n"), page], form="html")
    assert ours[0] == ours[1].replace("\n", "\r\n") and "\r" not in ours[1]
