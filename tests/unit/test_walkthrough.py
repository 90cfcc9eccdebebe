"""docs/walkthrough.md's reading path: the pieces it lists exist, and it says how long they are."""

from __future__ import annotations

import ast
import re

from tests.helpers import REPO

PAGE = REPO / "docs" / "walkthrough.md"


def _reading_path() -> tuple[int, list[tuple[str, list[str]]]]:
    """The number of lines the page quotes, and its pieces: (file, names in it or [] for all)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Reading order"):]
    section = section[:section.index("\n## ", 3)]
    quoted = int(re.search(r"about ([\d,]+) lines", section)[1].replace(",", ""))
    items = re.findall(r"^\d+\. (.*(?:\n   .*)*)", section, re.M)
    pieces = []
    for item in items:
        for path, names in re.findall(r"`([\w/]+\.py)(?::\s*([\w., ]+))?`", item):
            pieces.append((path, [n.strip() for n in names.split(",")] if names else []))
    return quoted, pieces


def _lines(path: str, names: list[str]) -> int:
    source = (REPO / "transformer_mt" / path).read_text(encoding="utf-8")
    if not names:
        return len(source.splitlines())
    total = 0
    for name in names:
        body = ast.parse(source).body
        node = None
        for part in name.split("."):
            node = next(n for n in body if isinstance(
                n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part)
            body = node.body
        assert node is not None and node.end_lineno is not None
        total += node.end_lineno - min([node.lineno, *(d.lineno for d in node.decorator_list)]) + 1
    return total


def test_the_reading_path_is_as_long_as_the_page_says():
    quoted, pieces = _reading_path()
    assert len(pieces) >= 10  # the model, its config, vocab and batch, search, the step
    total = sum(_lines(path, names) for path, names in pieces)
    assert abs(total - quoted) <= 50, f"the reading path is {total} lines; the page says {quoted}"
