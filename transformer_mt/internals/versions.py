"""Whether an installed package is a version its private APIs were tested on here."""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version

log = logging.getLogger("transformer_mt")

_warned: set[tuple[str, str]] = set()


def tested(package: str, versions: tuple[str, ...], feature: str, instead: str) -> bool:
    """Whether ``package`` is one of ``versions`` (``major.minor``); if not, one warning line
    (once a process for each feature) says that ``feature`` is off and what runs ``instead``."""
    try:
        installed = version(package)
    except PackageNotFoundError:
        return False
    if ".".join(installed.split("+")[0].split(".")[:2]) in versions:
        return True
    if (package, feature) not in _warned:
        _warned.add((package, feature))
        log.warning("%s %s is not a version %s was tested on (%s): %s", package, installed,
                    feature, ", ".join(versions), instead)
    return False
