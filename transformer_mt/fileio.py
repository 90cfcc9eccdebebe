"""Files that are never half-written, outputs that never replace inputs, and locks.

The guarantees, in one place:

- :func:`atomic_write` writes a regular file (or a new path) through a temporary file in the
  same directory, fsynced and renamed: the file appears whole or not at all, and a failure
  leaves the previous one unchanged. A symlink is followed and its target replaced (the link
  stays); a device, a FIFO or ``/dev/stdout`` is written through, never replaced. New files
  get the permissions the umask allows, as ``open`` would give them; a replaced file keeps its.
- :func:`refuse_same_file` stops an output that is one of the inputs (same device and inode).
- :func:`open_input` reads a command's input once: a regular file, standard input (``-``) or a
  pipe (a FIFO, a process substitution such as ``<(zcat x.gz)``); :func:`not_an_input` says
  why a path is none of these, :func:`not_a_file` why it is no regular file (a corpus, a
  checkpoint: read more than once).
- :func:`own_folder` makes a process's folder of temporary files, removing first those that
  processes killed outright left behind.
- :func:`run_lock` holds a run directory for one process; :func:`file_lock` serialises work
  that several processes may start at once (a download, a tokenization cache).
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import io
import itertools
import os
import socket
import stat
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from transformer_mt.errors import MTError, os_reason

if TYPE_CHECKING:
    import portalocker

TMP_SUFFIX = ".tmp"


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write ``path`` through ``write(fileobj)`` so that it either appears whole or not at all.

    On any failure (a full disk, say) the temporary file is removed, the previous ``path``
    stays as it was, and an :class:`MTError` says what happened.
    """
    path = Path(path)
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        _write_through(path, write)  # a device, a FIFO, /dev/stdout: write into it
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))  # replace the link's target, keep the link
    with beside(path):
        mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else 0o666 & ~_umask()
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise MTError(f"could not write '{path}': {exc.strerror or exc}; "
                      "the previous file (if any) is unchanged. Free disk space or choose "
                      "another directory.") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@contextlib.contextmanager
def beside(path: Path) -> Iterator[None]:
    """Make ``path``'s folder (if need be) for what the block makes beside ``path`` (a
    temporary file or folder, renamed into place later); an OSError meanwhile (a folder that
    cannot be made or written in) is an :class:`MTError` naming ``path``, not the temporary."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield
    except OSError as exc:
        raise MTError(f"could not write '{path}': {os_reason(exc)}") from exc


def _write_through(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    try:
        with open(path, "wb") as f:
            write(f)
    except OSError as exc:
        raise MTError(f"could not write '{path}': {exc.strerror or exc}") from exc


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | Path, text: str) -> None:
    """``text`` in UTF-8, gzipped where the name ends in ``.gz`` (as inputs are read)."""
    data = text.encode("utf-8")
    if Path(path).name.lower().endswith(".gz"):
        import gzip

        data = gzip.compress(data, mtime=0)
    atomic_write_bytes(path, data)


def remove_stale_temporaries(directory: str | Path) -> list[Path]:
    """Delete the temporary files that a killed :func:`atomic_write` left in ``directory``.

    Call it only while no other process can be writing there (e.g. under :func:`run_lock`).
    """
    removed = []
    for tmp in Path(directory).glob(f".*{TMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    return removed


def own_folder(prefix: str) -> Path:
    """A new folder of this process in the temporary folder, ``{prefix}{pid}-*``; first, those
    of the prefix that processes killed outright left (SIGKILL, the OOM killer: no clean-up
    ran), whose process has ended, are removed (:func:`sweep_ended`)."""
    sweep_ended(Path(tempfile.gettempdir()), prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def sweep_ended(directory: Path, prefix: str) -> None:
    """Remove this user's folders ``{prefix}{pid}-*`` in ``directory`` whose process (the pid
    in the name) is no longer running; a running one's stays."""
    import shutil

    for path in directory.glob(f"{prefix}*-*"):
        pid = path.name[len(prefix):].split("-")[0]
        with contextlib.suppress(OSError):
            if pid.isdigit() and path.stat().st_uid == os.getuid() and not _running(int(pid)):
                shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def refuse_same_file(output: str | Path | None, inputs: Iterable[str | Path | None],
                     option: str = "--output") -> None:
    """Refuse an ``output`` that is the same file as one of ``inputs`` (by device and inode)."""
    if output is None or not os.path.exists(output):
        return
    out = os.stat(output)
    if not stat.S_ISREG(out.st_mode):
        return  # /dev/null and friends: writing there replaces nothing
    for item in inputs:
        if item is not None and os.path.exists(item) and os.path.samestat(out, os.stat(item)):
            raise MTError(f"{option} '{output}' is the same file as the input '{item}'; writing "
                          "it would destroy the input. Choose another output path")


@contextlib.contextmanager
def file_lock(path: str | Path, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on ``path`` (a ``.lock`` file) across processes; others wait.
    With ``wait=False`` the block runs at once, given False if another holds the lock (and
    then without it)."""
    import portalocker  # imported when a lock is taken: ~0.1 s (it imports redis)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = portalocker.LockFlags.EXCLUSIVE
    with open(path, "a", encoding="utf-8") as handle:
        try:
            held = _lock(handle, flags if wait else flags | portalocker.LockFlags.NON_BLOCKING,
                         path)
        except portalocker.AlreadyLocked:
            yield False
            return
        try:
            yield True
        finally:
            if held:
                with contextlib.suppress(Exception):
                    portalocker.unlock(handle)


@contextlib.contextmanager
def run_lock(directory: str | Path) -> Iterator[None]:
    """Hold ``directory/.lock`` for as long as the block runs; a second holder is refused.

    The lock file names its holder (host and process id), so the refusal can say who it is.
    The operating system releases the lock when the process ends, even by ``kill -9``.
    """
    import portalocker

    path = Path(directory) / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held for the block)
    held = False
    try:
        try:
            held = _lock(handle, portalocker.LockFlags.EXCLUSIVE
                         | portalocker.LockFlags.NON_BLOCKING, path)
        except portalocker.AlreadyLocked as exc:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise MTError(f"'{directory}' is in use by another mt train ({holder}); wait for it "
                          "to finish, or choose another --run-dir") from exc
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        yield
    finally:
        if held:
            with contextlib.suppress(Exception):
                portalocker.unlock(handle)
        handle.close()


LOCKS_OFF = "MT_LOCKS"  # MT_LOCKS=off: no file locks (a filesystem without them; one run only)


def _lock(handle: IO[str], flags: portalocker.LockFlags, path: Path) -> bool:
    """Lock ``handle``; False where the user turned locks off. Contention raises
    ``portalocker.AlreadyLocked``; a filesystem that cannot lock, a one-line :class:`MTError`."""
    import portalocker

    if os.environ.get(LOCKS_OFF, "").lower() in ("off", "0", "no", "false"):
        return False
    try:
        portalocker.lock(handle, flags)
    except portalocker.AlreadyLocked:
        raise
    except portalocker.LockException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, OSError) and cause.errno in (errno.EAGAIN, errno.EACCES):
            raise portalocker.AlreadyLocked(cause) from exc  # (held: portalocker < 2.10
            # says so only as the operating system's error)
        raise MTError(
            f"cannot lock '{path}': the filesystem there does not support file locks ({cause}). "
            "NFS without its lock service, Lustre mounted without -o flock and some FUSE "
            "filesystems have none. Mount it with locks, or keep the run directory and "
            f"MT_CACHE_DIR on one that has them; or set {LOCKS_OFF}=off to go without "
            "(then nothing stops two runs from writing the same files)") from exc
    return True


def cache_dir() -> Path:
    """The user cache directory: ``MT_CACHE_DIR``, else ``$XDG_CACHE_HOME/transformer_mt``."""
    if os.environ.get("MT_CACHE_DIR"):
        return Path(os.environ["MT_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "transformer_mt"


def cache_key(description: str) -> str:
    """A short file name for a cache entry: a hash of everything that determines its content."""
    return hashlib.sha256(description.encode()).hexdigest()[:24]


def sha256_of(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def text_lines(stream: Iterable[bytes], name: str,
               ends: Counter[str] | None = None) -> Iterator[str]:
    """The lines of a UTF-8 byte stream (or UTF-16, where a byte order mark says so: Windows'
    "Unicode" text, Excel's tab-separated export), without line ends (counted in ``ends``,
    given: :func:`line_end`) and without a leading BOM; a line that is not UTF-8 is named, by
    number, in a one-line error, as a stream of another format (a PDF, say: :data:`FOREIGN`)
    is."""
    stream = iter(stream)
    first = next(stream, b"")
    lines = _from_utf16(first, stream, name) if first.startswith(UTF16_BOMS) else itertools.chain(
        [first] if first else [], stream)
    for n, raw in enumerate(lines, start=1):
        if n == 1 and foreign(raw):
            raise MTError(f"{name} is {foreign(raw)}, not lines of text")
        if ends is not None and raw.endswith(b"\n"):
            ends["\r\n" if raw.endswith(b"\r\n") else "\n"] += 1
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            raise MTError(f"{name}, line {n}: not valid UTF-8 ({exc.reason} at byte "
                          f"{exc.start}); convert it to UTF-8 (e.g. with iconv)") from exc
        if line.count("\r") > 1:  # "\r" alone ends no line here: old Mac files read as one
            raise MTError(f"{name}, line {n}: holds {line.count(chr(13)):,} carriage returns "
                          "(CR-only line ends?); lines must end in LF or CRLF: convert it, e.g. "
                          "tr '\\r' '\\n' < FILE > FILE.lf")
        yield line.removeprefix("\ufeff") if n == 1 else line


def line_end(ends: Counter[str]) -> str:
    """The line end to write lines with whose source's line ends were counted in ``ends``
    (:func:`text_lines`): CRLF where each line that ended did so (Windows' text), else LF."""
    return "\r\n" if ends["\r\n"] and not ends["\n"] else "\n"


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # how UTF-16 text begins (little, big endian)


def _from_utf16(first: bytes, rest: Iterator[bytes], name: str) -> Iterator[bytes]:
    """The lines (each ending in ``\\n`` but the last) of UTF-16 text cut at its ``\\n``
    bytes, which are not its line ends, as UTF-8."""
    decoder, held = codecs.getincrementaldecoder("utf-16")(errors="strict"), ""
    try:
        for raw in itertools.chain([first], rest):
            *lines, held = (held + decoder.decode(raw)).split("\n")
            yield from (line.encode("utf-8") + b"\n" for line in lines)
        held += decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise MTError(f"{name} is not valid UTF-16 after its byte order mark ({exc.reason}); "
                      "convert it to UTF-8 (e.g. with iconv)") from exc
    if held:
        yield held.encode("utf-8")
# how files of other kinds begin, whose bytes read as lines of text would be garbage
FOREIGN = {b"%PDF-": "a PDF", b"PK\x03\x04": "a zip archive",
           b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1": "an older Office document (.doc, .xls, .ppt)",
           b"{\\rtf": "an RTF document"}


def foreign(head: bytes) -> str | None:
    """What a file that begins with ``head`` is, where that is not text (:data:`FOREIGN`)."""
    return next((what for magic, what in FOREIGN.items() if head.startswith(magic)), None)


STD_STREAM = "-"  # a file flag's value for standard input or output (``./-``: a file "-")


def open_input(path: Path) -> IO[bytes]:
    """``path`` opened to read bytes from its start, seekable: a regular file as it is;
    standard input (``-``) or a pipe read whole first, since it can be read only once."""
    if str(path) == STD_STREAM:
        return io.BytesIO(sys.stdin.buffer.read())
    f = open(path, "rb")  # noqa: SIM115 (returned open, or closed below)
    if f.seekable():
        return f
    with f:
        return io.BytesIO(f.read())


def not_an_input(path: Path) -> str | None:
    """Why ``path`` cannot be read once as a command's input (:func:`not_a_file`'s reasons), or
    None for a regular file, ``-`` (standard input) or a pipe (a FIFO, ``<(command)``)."""
    if str(path) == STD_STREAM:
        return None
    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(path.stat().st_mode):
            return None
    return not_a_file(path)


def not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file ("not found", "is a directory", "is a FIFO", ...),
    or None for a regular file (or a link to one)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "is a broken symbolic link" if path.is_symlink() else "not found"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a loop of symbolic links"
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (a named pipe), not a file"
    return "is a device or socket, not a file"
