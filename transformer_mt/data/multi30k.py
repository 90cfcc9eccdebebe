"""The Multi30k Task 1 corpus (raw, German and English): find, download and verify its files.

Files are looked for in this order: an explicit data directory (``--data-dir`` or
``data.data_dir``), ``MT_DATA_DIR``, then the user cache (``~/.cache/transformer_mt/multi30k``).
A file found nowhere is downloaded into the cache from the official ``multi30k/dataset`` GitHub
repository. Every file is checked against its known SHA-256 before it is used.
"""

from __future__ import annotations

import hashlib
import logging
import os
import urllib.error
import urllib.request
from pathlib import Path

from transformer_mt.errors import DataError
from transformer_mt.fileio import atomic_write_bytes, cache_dir, file_lock, sha256_of

log = logging.getLogger(__name__)

URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw/{name}"

SHA256 = {
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2017_flickr.de.gz": "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee",
    "test_2017_flickr.en.gz": "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
}


def search_dirs(data_dir: str | Path | None = None) -> list[Path]:
    """The directories searched for the raw files, in order."""
    dirs = []
    if data_dir:
        dirs.append(Path(data_dir).expanduser())
    if os.environ.get("MT_DATA_DIR"):
        dirs.append(Path(os.environ["MT_DATA_DIR"]).expanduser())
    dirs.append(cache_dir() / "multi30k")
    return dirs


def _download(name: str, dest: Path, timeout: float = 60.0) -> None:
    url = URL.format(name=name)
    log.info("downloading %s", url)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            payload = response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DataError(f"could not download {url}: {exc}") from exc
    actual = hashlib.sha256(payload).hexdigest()
    if actual != SHA256[name]:
        raise DataError(f"downloaded {url} has SHA-256 {actual}, expected {SHA256[name]}; "
                        "the file was not saved. Try again, or pass --data-dir with a good copy.")
    atomic_write_bytes(dest, payload)


def locate(name: str, data_dir: str | Path | None = None) -> Path:
    """Return the path of a verified raw file such as ``train.de.gz``, downloading it if needed."""
    if name not in SHA256:
        raise DataError(f"unknown Multi30k file '{name}'; known: {', '.join(sorted(SHA256))}")
    dirs = search_dirs(data_dir)
    cache = dirs[-1]
    for d in dirs[:-1]:
        candidate = d / name
        if candidate.is_file():
            actual = sha256_of(candidate)
            if actual != SHA256[name]:
                raise DataError(f"'{candidate}' is corrupt (SHA-256 {actual[:12]}…, expected "
                                f"{SHA256[name][:12]}…); replace it with the official file "
                                "or remove it so that it can be downloaded again")
            return candidate
    target = cache / name
    with file_lock(cache / ".lock"):  # several ranks or runs may start at once: one downloads
        if target.is_file():
            if sha256_of(target) == SHA256[name]:
                return target
            log.warning("cached %s is corrupt; downloading it again", target)
            target.unlink()
        try:
            _download(name, target)
        except DataError as exc:
            looked = ", ".join(str(d) for d in dirs)
            raise DataError(f"Multi30k file '{name}' not found (looked in {looked}) and the "
                            f"download failed ({exc}). Point --data-dir or MT_DATA_DIR at a local "
                            "copy of the Multi30k task1 raw files.") from exc
    return target
