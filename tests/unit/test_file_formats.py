"""What each file format needs: without its library (the ``files`` extra), one line that names
the package and the install command, never a traceback from deep inside."""

from __future__ import annotations

import sys

import pytest

from transformer_mt.packages import MissingPackageError
from transformer_mt.translate.files import FORMATS, LIBRARIES, read_file


@pytest.mark.parametrize("name", ["book.epub", "table.xlsx", "units.xlf", "app.po", "read.md",
                                  "film.srt", "letter.docx", "talk.pptx", "text.odt"])
def test_a_format_without_its_library_says_which_to_install(name, monkeypatch):
    module = LIBRARIES[FORMATS[name[name.rindex("."):]]]
    monkeypatch.setitem(sys.modules, module, None)  # (as if it were not installed)
    monkeypatch.setitem(sys.modules, module.split(".")[0], None)
    with pytest.raises(MissingPackageError, match=r"transformer_mt\[files\]") as caught:
        read_file(name, b"PK\x03\x04 whatever it holds", "de", "en")
    assert module.split(".")[0] in str(caught.value) and "\n" not in str(caught.value)
