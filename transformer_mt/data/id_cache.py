"""A corpus side as token ids in a memory-mapped file, written once into the data cache.

Tokenizing is the slow part of preparing a corpus, and the ids of a large corpus do not fit in
memory as Python lists. :func:`encode_side` streams one side of a corpus through its tokenizer
and writes, in a directory of the cache keyed by the file's SHA-256 and the tokenizer's settings:

    ids.bin      every token as an int32 id into ``types``, sentence after sentence
    offsets.npy  (n + 1,) int64: sentence i is ids[offsets[i]:offsets[i + 1]]
    types.json   the distinct token strings, in order of first appearance
    counts.npy   (len(types),) int64: how often each occurs
    chars.npy, hashes.npy, control.npy
                 (n,) facts about each line's text for the filters (``data/filters.py``): its
                 characters, a 64-bit hash, whether it holds a control character
    sha256.json  the SHA-256 of each file above, written last (``data/cache.py``: the entry
                 counts only once it is complete, and is checked whenever it is opened; a
                 damaged entry is rebuilt, with a warning, never trained on)

The ids are "type ids": the vocabulary is chosen later (from the counts, or from a subword
model), and a lookup table maps type ids to vocabulary ids when batches are built. A second
run, or another rank of a distributed run (which waits on the lock), reads the directory back;
``ids.bin`` is memory-mapped, so only the pages batches touch are read into memory.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import mmap
import os
import pickle
import re
import subprocess
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from transformer_mt.data.cache import CHECKSUMS, cache_entry
from transformer_mt.data.corpus import Corpus, Side
from transformer_mt.data.tokenize import Tokenizer, normalized
from transformer_mt.errors import DataError
from transformer_mt.fileio import cache_dir, cache_key

log = logging.getLogger(__name__)

CACHE_FORMAT = 4  # 4: per-line facts for the filters (chars, hashes, control characters)
FILES = ("ids.bin", "offsets.npy", "types.json", "counts.npy", "chars.npy", "hashes.npy",
         "control.npy")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0/C1 controls but tab (and line ends)


def line_hash(text: str) -> int:
    """A 64-bit hash of a line's text (exact duplicates, and copies across the sides)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "little")
FLUSH_IDS = 1 << 20  # ids buffered in memory before they are appended to ids.bin
RELEASE_ABOVE = 16 << 20  # bytes of ids above which reads release the file's pages
PARALLEL_FROM_BYTES = 1 << 18  # sides of smaller files are tokenized in this process


@dataclass
class EncodedSide:
    """One side of a corpus: ``len(self)`` sentences of type ids (see the module docstring)."""

    ids: np.ndarray  # (total,) int32, memory-mapped
    offsets: np.ndarray  # (n + 1,) int64
    types: list[str]
    counts: np.ndarray  # (len(types),) int64
    # facts about each line's text, for the filters (data/filters.py)
    chars: np.ndarray | None = None  # (n,) int32 characters
    hashes: np.ndarray | None = None  # (n,) uint64 a hash of the text
    control: np.ndarray | None = None  # (n,) bool: holds a control character

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        """``(n,)`` int32 tokens per sentence."""
        out = np.empty(len(self), dtype=np.int32)
        for start in range(0, len(self), 1 << 20):  # a chunk at a time: no int64 copy of all
            chunk = np.asarray(self.offsets[start:start + (1 << 20) + 1])
            out[start:start + len(chunk) - 1] = np.diff(chunk)
        self._release()
        return out

    def type_counts(self, first: int | None = None) -> dict[str, int]:
        """How often each token occurs (in the first ``first`` sentences only, if given)."""
        counts = self.counts
        if first is not None and first < len(self):
            counts = np.bincount(self.ids[:self.offsets[first]], minlength=len(self.types))
        return {t: int(c) for t, c in zip(self.types, counts.tolist(), strict=True) if c}

    def sentence(self, i: int) -> np.ndarray:
        return np.array(self.ids[self.offsets[i]:self.offsets[i + 1]])

    def take(self, positions: np.ndarray) -> np.ndarray:
        """A copy of the ids at ``positions``, then the file's pages let go of.

        A batch reads sentences scattered over the file, and the kernel maps in the
        neighbours of every page read (fault-around): a few steps would map the whole file
        into this process. For files over :data:`RELEASE_ABOVE` the mapping is dropped after
        each read: the pages stay in the page cache (shared, reclaimable, mapped again at the
        cost of a minor fault, ~2 ms a 4,096-token batch), and the process keeps only what it
        copied. Smaller files stay mapped (the faster way: 0.3-0.8 ms a batch).
        """
        out = self.ids[positions]
        self._release()
        return out

    def starts(self, rows: np.ndarray) -> np.ndarray:
        """Where sentences ``rows`` start in :attr:`ids`."""
        out = self.offsets[rows]
        self._release()
        return out

    def _release(self) -> None:
        for mapped in (self.ids, self.offsets):
            mapping = getattr(mapped, "_mmap", None)
            if (mapping is not None and mapped.nbytes > RELEASE_ABOVE
                    and hasattr(mmap, "MADV_DONTNEED")):
                mapping.madvise(mmap.MADV_DONTNEED)


def encode_side(corpus: Corpus, side: Side, tokenizer: Tokenizer,
                progress: bool = False) -> EncodedSide:
    """The side's ids from the cache, tokenizing the text first if no run did before."""

    def build(directory: Path) -> None:
        log.info("tokenizing %s (%s side; cached in %s)", corpus.describe(), side,
                 directory.parent)
        _build(corpus, side, tokenizer, directory, progress)

    return _load(cache_entry("corpus", _key_text(corpus, side, tokenizer), build, FILES))


Job = tuple[Corpus, Side, Tokenizer]


def encode_sides(jobs: Sequence[Job], progress: bool = False) -> list[EncodedSide]:
    """:func:`encode_side` of each job. Sides not yet in the cache are first tokenized side by
    side in processes of their own, one a core (subword regularization's sampled
    segmentations: Multi30k's 8 copies of 2 sides took ~20 s each, ~5 minutes one after
    another on a 2-core CPU): the same tokenizer on the same text, so the same entries. A
    worker that fails leaves its side to this process, which then meets (and reports) the
    same error itself."""
    missing = [job for job in jobs if not (_entry_of(*job) / CHECKSUMS).is_file()]
    workers = min(len(missing), _cores())
    if workers > 1 and sum(_bytes_of(corpus) for corpus, _, _ in missing) >= PARALLEL_FROM_BYTES:
        log.info("tokenizing %d corpus sides in %d processes (cached in %s)", len(missing),
                 workers, cache_dir() / "corpus")
        with ThreadPoolExecutor(workers) as pool:  # each thread waits on its process
            list(pool.map(_tokenize_apart, missing))
    return [encode_side(corpus, side, tokenizer, progress) for corpus, side, tokenizer in jobs]


def _tokenize_apart(job: Job) -> None:
    """Tokenize one side into the cache in a Python process of its own (started afresh: no
    fork of a process that holds threads, and no re-run of the caller's script as
    multiprocessing's spawn does)."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    code = ("import gc; gc.disable(); "  # (tokenize_stdin_job())
            "from transformer_mt.data.id_cache import tokenize_stdin_job; tokenize_stdin_job()")
    try:
        done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(job), env=env,
                              capture_output=True, check=False)
    except OSError as exc:
        log.debug("no tokenizing process could start: %s", exc)
        return
    if done.returncode:
        log.debug("a tokenizing process failed (exit %d): %s", done.returncode,
                  done.stderr.decode(errors="replace")[-2000:])
        return
    for name, level, message in pickle.loads(done.stdout):  # what it warned of, said here
        logging.getLogger(name).log(level, message)


def tokenize_stdin_job() -> None:
    """A worker of :func:`encode_sides`: the pickled job on standard input, into the cache;
    its warnings (a line cut, say) on standard output, pickled, for the caller to log."""
    warned: list[tuple[str, int, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warned.append((record.name, record.levelno, record.getMessage()))

    from transformer_mt.__main__ import collector_waiting

    root = logging.getLogger()
    root.addHandler(Keep(logging.WARNING))
    root.setLevel(logging.WARNING)
    with collector_waiting():  # its libraries loaded unscanned (_tokenize_apart stopped it)
        corpus, side, tokenizer = pickle.load(sys.stdin.buffer)
        collections.deque(tokenizer.tokenize(["."]), maxlen=0)  # (spaCy: loaded)
    encode_side(corpus, side, tokenizer)
    sys.stdout.buffer.write(pickle.dumps(warned))


def _key_text(corpus: Corpus, side: Side, tokenizer: Tokenizer) -> str:
    return json.dumps([CACHE_FORMAT, corpus.fingerprint(side), tokenizer.key])


def _entry_of(corpus: Corpus, side: Side, tokenizer: Tokenizer) -> Path:
    return cache_dir() / "corpus" / cache_key(_key_text(corpus, side, tokenizer))


def _bytes_of(corpus: Corpus) -> int:
    """A side's share of the corpus files' bytes (compressed, for gzipped ones)."""
    return sum(path.stat().st_size for path in corpus.paths) // 2


def _cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


class _Facts:
    """Each line's facts for the filters, taken as the text goes by: whether it holds a control
    character as written, its characters and hash as the tokenizer reads it."""

    def __init__(self) -> None:
        self.chars, self.hashes, self.control = array("i"), array("Q"), array("b")

    def as_written(self, texts: Iterable[str]) -> Iterator[str]:
        for text in texts:
            self.control.append(CONTROL.search(text) is not None)
            yield text

    def as_read(self, texts: Iterable[str]) -> Iterator[str]:
        for text in texts:
            self.chars.append(len(text))
            self.hashes.append(line_hash(text))
            yield text

    def save(self, directory: Path) -> None:
        np.save(directory / "chars.npy", np.frombuffer(self.chars, dtype=np.int32))
        np.save(directory / "hashes.npy", np.frombuffer(self.hashes, dtype=np.uint64))
        np.save(directory / "control.npy",
                np.frombuffer(self.control, dtype=np.int8).astype(bool))


def _build(corpus: Corpus, side: Side, tokenizer: Tokenizer, tmp: Path,
           progress: bool) -> None:
    type_of: dict[str, int] = {}
    types: list[str] = []
    counts = np.zeros(0, dtype=np.int64)
    offsets = array("q", [0])
    buffer = array("i")
    total = 0
    lines: Iterable[str] = corpus.lines(side)
    if progress:
        lines = tqdm(lines, desc=f"tokenize {side}", unit="sent", leave=False)
    facts = _Facts()
    lines = facts.as_read(normalized(facts.as_written(lines)))
    with open(tmp / "ids.bin", "wb") as f:

        def flush() -> np.ndarray:
            chunk = np.frombuffer(buffer, dtype=np.int32)
            f.write(chunk.tobytes())
            return np.bincount(chunk, minlength=len(types))

        for tokens in tokenizer.tokenize(lines):
            for token in tokens:
                i = type_of.get(token)
                if i is None:
                    i = type_of[token] = len(types)
                    types.append(token)
                buffer.append(i)
            total += len(tokens)
            offsets.append(total)
            if len(buffer) >= FLUSH_IDS:
                counts = _add(counts, flush())
                del buffer[:]
        counts = _add(counts, flush())
        f.flush()
        os.fsync(f.fileno())
    np.save(tmp / "offsets.npy", np.frombuffer(offsets, dtype=np.int64))
    (tmp / "types.json").write_text(json.dumps(types, ensure_ascii=False), encoding="utf-8")
    np.save(tmp / "counts.npy", _add(counts, np.zeros(len(types), dtype=np.int64)))
    facts.save(tmp)


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sum of two count vectors of possibly different lengths."""
    if len(a) < len(b):
        a, b = b, a
    out = a.astype(np.int64, copy=True)
    out[:len(b)] += b
    return out


def _load(directory: Path) -> EncodedSide:
    try:
        offsets = np.load(directory / "offsets.npy", mmap_mode="r")
        types = json.loads((directory / "types.json").read_text(encoding="utf-8"))
        counts = np.load(directory / "counts.npy")
        facts = [np.load(directory / f"{name}.npy", mmap_mode="r")
                 for name in ("chars", "hashes", "control")]
        total = int(offsets[-1])
        ids = (np.memmap(directory / "ids.bin", dtype=np.int32, mode="r", shape=(total,))
               if total else np.zeros(0, dtype=np.int32))

    except (OSError, ValueError, IndexError) as exc:
        raise DataError(f"the data cache entry {directory} is damaged ({exc}); delete it and "
                        "run again") from exc
    return EncodedSide(ids, offsets, types, counts, *facts)
