"""The size limits, for `make lint`: no file over 400 lines, no function over 60
(docs/architecture.md), in the package or in the folder given (`make lint` checks bench/ and
tests/ too). Prints the total, for the package held to a budget of 12,000 lines (a warning, not
yet an error: the package is above it). Exits 1 naming each file or function over its limit."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_FILE, MAX_FUNCTION, BUDGET = 400, 60, 12_000


def over_limits(root: Path) -> tuple[int, list[str]]:
    """The package's lines, and each file and function over its limit."""
    total, found = 0, []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.count("\n")
        total += lines
        if lines > MAX_FILE:
            found.append(f"{path}: {lines} lines (at most {MAX_FILE} a file)")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION:
                    found.append(f"{path}:{node.lineno} {node.name}: {length} lines (at most "
                                 f"{MAX_FUNCTION} a function)")
    return total, found


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "transformer_mt")
    total, found = over_limits(root)
    for line in found:
        print(line)
    package = root.resolve().name == "transformer_mt"  # the budget is the package's
    budget = "" if total <= BUDGET or not package else f" (over the budget of {BUDGET:,})"
    print(f"{root}: {total:,} lines{budget}; files and functions within their limits"
          if not found else f"{len(found)} over the size limits")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
