"""Translated files kept for their download (``serve/file_store.py``): found under their name
until they are :data:`KEEP_S` old, then never again; the directory looked through for old
files at most every :data:`SWEEP_S`, not at every file kept."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

from transformer_mt.serve import file_store
from transformer_mt.serve.file_store import KEEP_S, SWEEP_S, FileStore


def aged(store: FileStore, key: str, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(store.directory / key, (then, then))


def test_a_file_is_found_until_it_is_too_old_then_removed(tmp_path):
    store = FileStore(str(tmp_path))
    key = store.put("../brief an Anna.docx", b"translated")
    assert key.endswith(".brief_an_Anna.docx") and store.get(key) == b"translated"
    aged(store, key, KEEP_S - 60)
    assert store.get(key) == b"translated"
    aged(store, key, KEEP_S + 1)
    assert store.get(key) is None
    assert not (tmp_path / key).exists()  # (removed as it was found too old)


def test_old_files_are_swept_at_most_every_sweep_s(tmp_path, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(file_store, "time", SimpleNamespace(time=time.time,
                                                           monotonic=lambda: now[0]))
    store = FileStore(str(tmp_path))
    first, second = store.put("a.txt", b"a"), store.put("b.txt", b"b")  # (a look at the first)
    (tmp_path / "notes.txt").write_text("not ours")
    aged(store, first, KEEP_S + 1)
    aged(store, second, KEEP_S + 1)
    os.utime(tmp_path / "notes.txt", (0, 0))
    now[0] += SWEEP_S - 1
    third = store.put("c.txt", b"c")
    assert (tmp_path / first).exists() and (tmp_path / second).exists()  # (no look yet)
    assert store.get(first) is None  # (but too old to be found)
    now[0] += 1
    fourth = store.put("d.txt", b"d")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([third, fourth, "notes.txt"])
    assert store.get(third) == b"c" and store.get(fourth) == b"d"
