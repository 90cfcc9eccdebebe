"""``mt translate --output FILE`` of many lines: translated ``PART`` lines at a time, each part's
output appended to ``FILE.partial`` as it ends, so that a run stopped on the way (Ctrl-C, a
crash, a machine taken back) goes on where it stopped when the same command runs again:
back-translating a million lines takes hours. ``FILE`` itself is written whole at the end, as
for fewer lines, and the partial files are removed.

``FILE.partial.json`` says what the partial output was made from (the input's lines, each
checkpoint's bytes, every flag that changes an output line, the version) and how much of it
counts: a crash between a part's lines and this record leaves lines that do not count, cut
off when the run goes on. A partial output made from anything else is never used: the run
starts over, and says so.

Each part is batched on its own (its lines sorted by length, then cut into batches), so a
sentence may meet other sentences in its batch than in one call: in bf16, 2 of 21,000
Multi30k sentences came out otherwise (near-ties that rounding decides), as with another
batch size (docs/measurements/notes-2026-12.md, session 107).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformer_mt import __version__
from transformer_mt.errors import MTError
from transformer_mt.fileio import atomic_write_text, sha256_of

log = logging.getLogger("transformer_mt.cli")

PART = 10_000  # input lines a part
# the flags that do not change an output line (where they are read from and written to, how
# many processes, what is logged)
NEUTRAL = {"func", "command", "input", "output", "workers", "quiet", "debug", "sentences"}

Translate = Callable[[list[str], int], list[str]]  # (a part's lines, the first's index) -> output


def in_parts(args: argparse.Namespace, lines: list[str]) -> bool:
    """Whether ``mt translate`` writes ``args.output`` a part at a time: more than a part's
    lines, to a file (not a device or a pipe, written through as they come)."""
    if not args.output or len(lines) <= PART:
        return False
    return not (os.path.exists(args.output) and not stat.S_ISREG(os.stat(args.output).st_mode))


def translate_in_parts(args: argparse.Namespace, lines: list[str], translate: Translate,
                       end: str = "\n") -> int:
    """``lines`` translated by ``translate`` a part at a time into ``args.output``, each
    ending in ``end`` (see the module's docstring); goes on from the partial output a stopped
    run of the same command left. A second run writing the same output meanwhile is refused
    in one line."""
    output = Path(args.output)
    partial, record = output.with_name(output.name + ".partial"), \
        output.with_name(output.name + ".partial.json")
    key = _key(args, lines)
    output.parent.mkdir(parents=True, exist_ok=True)  # (as a file written whole is)
    with open(partial, "ab") as out:
        _hold(out, output)
        done, size = _resumed(partial, record, key)
        if done:
            log.info("going on from line %d of %d: the lines before are in %s, from a run of "
                     "this command that stopped", done + 1, len(lines), partial)
        try:
            out.truncate(size)  # (lines a stop left after the record's count)
            for start in range(done, len(lines), PART):
                part = lines[start:start + PART]
                out.write("".join(line + end for line in translate(part, start)).encode())
                out.flush()
                os.fsync(out.fileno())
                done, size = start + len(part), out.tell()
                atomic_write_text(record, json.dumps({"key": key, "lines": done, "bytes": size}))
                log.info("%d of %d lines translated (%s)", done, len(lines), partial)
            atomic_write_text(output, partial.read_bytes().decode("utf-8"))  # (CRLF kept)
        except BaseException:  # Ctrl-C, an error: what is done stays for the next run
            if done:
                log.warning("stopped: the first %d of %d lines are translated, in %s; the "
                            "same command again goes on from there", done, len(lines), partial)
            else:
                partial.unlink(missing_ok=True)
                record.unlink(missing_ok=True)
            raise
        partial.unlink()
        record.unlink()
    log.info("wrote %d lines to %s", len(lines), output)
    return 0


def _hold(handle: Any, output: Path) -> None:
    """Lock the open partial output ``handle`` for this run, or refuse in one line where
    another run holds it (two runs appending to one file would mix their lines)."""
    import portalocker

    try:
        portalocker.lock(handle, portalocker.LockFlags.EXCLUSIVE
                         | portalocker.LockFlags.NON_BLOCKING)
    except portalocker.AlreadyLocked:
        raise MTError(f"another mt translate is writing {output} now (its partial output is "
                      "locked); wait for it to end, or choose another --output") from None


def _resumed(partial: Path, record: Path, key: str) -> tuple[int, int]:
    """The input lines a stopped run of the same command translated, and the bytes of
    ``partial`` they fill; (0, 0) where there is none, or it was made from anything else."""
    try:
        said = json.loads(record.read_text(encoding="utf-8"))
        if said["key"] == key and partial.stat().st_size >= said["bytes"]:
            return int(said["lines"]), int(said["bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        if not partial.exists() or partial.stat().st_size == 0:  # (none: this run's, opened)
            return 0, 0
    log.warning("%s was made from another input, checkpoint or flags: starting over", partial)
    return 0, 0


def _key(args: argparse.Namespace, lines: list[str]) -> str:
    """What an output line depends on: the input's lines, the checkpoints' bytes (each file of
    an export's folder), the glossary's and the memory's, every other flag's value and the
    version."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8", "surrogatepass") + b"\n")
    files = [*args.checkpoint, *(f for f in (args.glossary, args.memory) if f)]
    flags = {name: value for name, value in sorted(vars(args).items())
             if name not in NEUTRAL and isinstance(value, str | int | float | bool | list
                                                   | type(None))}
    made_of = {"lines": digest.hexdigest(), "files": [_bytes_of(Path(f)) for f in files],
               "flags": flags, "version": __version__}
    return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()


def _bytes_of(path: Path) -> list[str]:
    """The SHA-256 of a file's bytes, or of each file in a folder (an export), by name."""
    if path.is_dir():
        return [f"{p.relative_to(path)}:{sha256_of(p)}" for p in sorted(path.rglob("*"))
                if p.is_file()]
    return [sha256_of(path)]
