"""The ``mt`` program; ``python -m transformer_mt`` is the same.

It runs :func:`transformer_mt.cli.main` in a process of its own, started its own way.
Importing torch makes ~1M objects that live as long as the process, and Python's garbage
collector went over all of them again and again while they were made and once more at exit:
~0.4 s of a one-sentence ``mt translate`` of ~1.6 s (docs/benchmarks.md). So the
collector waits until torch is imported, just before the command runs, and what was made until
then is set aside for good (``gc.freeze``); it collects what the command makes as ever. ``mt
--help`` and a mistyped command end before torch is imported. ``cli.main`` called from Python
(the tests, a user's script) leaves the caller's collector alone.

And ``mt translate`` of a word (spaCy) model starts spaCy in a process of its own first
(``data/word_worker.py``), which imports it while this one imports torch.

And where gperftools' tcmalloc is installed (Debian's and Ubuntu's ``libtcmalloc-minimal4``,
Fedora's ``gperftools-libs``, conda's ``gperftools``), ``mt`` first starts again with it
preloaded (``LD_PRELOAD``), as PyTorch's own CPU launcher does (``torch.backends.xeon.run_cpu``):
decoding allocates and frees many tensors a step, and glibc's malloc spent ~7 % of a step in
itself (``perf``). On a 2-core Xeon the bf16 decoding loop ran 26-31 % faster with it (fp32
eager no faster), ``mt translate`` of a test set ~15 %, and training took ~30 % less memory
in the same time (docs/benchmarks.md, ``bench/allocator.py``). ``MT_ALLOCATOR=system``
keeps the system's malloc; ``MT_ALLOCATOR=PATH`` preloads that library instead (jemalloc,
say); an allocator already in ``LD_PRELOAD`` is kept. Its children (the workers, the
compilers) inherit it.

And a Ctrl-C while ``mt`` starts (the allocator's restart, torch's imports) waits until torch
is imported, then ends the command as one in it does (exit 130, one line): landing inside
those imports, it was lost where a library catches what its import raised and goes on without
it (numpy's C module failing so left torch without NumPy, and ``mt train`` trained on), or
aborted the process from C++ ("terminate called after throwing an instance of
... KeyboardInterrupt"); landing just before the restart, it was lost with the process image.
(Ctrl-C in the first ~50 ms, while Python itself starts, ends in Python's traceback.)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import sys
import sysconfig
from collections.abc import Iterator

TCMALLOC = ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4")  # gperftools' (minimal: no profiler)
NO_REPORTS = str(2**62)  # tcmalloc's "large alloc" lines on stderr: from 1 GiB unless set


def main() -> int:
    interrupts_held(True)  # until torch is imported (_settle); pending through the restart
    error = restart_with_allocator()
    if error:
        print(f"mt: error: {error}", file=sys.stderr)
        return 2
    gc.disable()
    try:
        from transformer_mt.cli import main as run

        return run(before_command=_settle)
    except KeyboardInterrupt:  # Ctrl-C as mt starts, before its command could say so (cli._run)
        print("mt: interrupted", file=sys.stderr)
        return 130
    finally:
        gc.enable()


def _settle(args: argparse.Namespace) -> None:
    """Import torch while the collector still waits, then freeze what exists and let it run;
    ``mt translate``'s word worker first."""
    if args.command == "translate" and args.checkpoint:
        from transformer_mt.data import word_worker

        word_worker.start_for(args.checkpoint[0])
    try:
        with collector_waiting():  # (main() made it wait already, before the command's imports)
            import torch  # noqa: F401  (every command imports it: here, once, unscanned)
    finally:
        interrupts_held(False)  # a Ctrl-C that came meanwhile lands here: "interrupted"
    import logging

    logging.getLogger(__name__).debug("memory allocator: %s", allocator_in_use())


def interrupts_held(held: bool) -> None:
    """Hold Ctrl-C (SIGINT) back, or deliver it: one that came meanwhile raises
    KeyboardInterrupt as Python runs on. Held, it stays pending through ``execve``; children
    started meanwhile start with it held too."""
    if hasattr(signal, "pthread_sigmask"):  # (not on Windows)
        signal.pthread_sigmask(signal.SIG_BLOCK if held else signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def collector_waiting() -> Iterator[None]:
    """What a process loads as it starts (torch, inductor, spaCy: objects that live as long as
    it) made with the garbage collector waiting, then set aside for good (``gc.freeze``); the
    collector runs as ever after. ``mt`` itself, and the processes it starts to work beside it
    (``mt serve --workers``', spaCy's word worker, the tokenizers', the compilers') start so:
    on a 2-core VM ``import torch`` took 1.25 s of CPU so against 1.65, inductor's compiler
    2.6 against 3.7, spaCy 1.6 against 2.2."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def restart_with_allocator() -> str | None:
    """Start this process again (the same pid, arguments and standard streams) with the
    allocator ``MT_ALLOCATOR`` names (by default :func:`tcmalloc`) preloaded, unless one is
    loaded already; or say why ``MT_ALLOCATOR`` cannot be used (None: it can, or there is
    nothing to do). The benchmarks start so too (``bench/common.py``)."""
    env = allocator_environment()
    if env is None or isinstance(env, str):
        return env
    sys.stdout.flush()
    os.execve(sys.executable, sys.orig_argv, env)
    return None  # (execve does not return)


def allocator_environment() -> dict[str, str] | str | None:
    """The environment this process would start again with (:func:`restart_with_allocator`),
    which a process started in it starts with at once; None where there is nothing to do, or
    why ``MT_ALLOCATOR`` cannot be used."""
    chosen = os.environ.get("MT_ALLOCATOR", "auto")
    if chosen == "system" or sys.platform != "linux" or not sys.executable:
        return None
    library = tcmalloc() if chosen == "auto" else os.path.abspath(chosen)
    if library is None:
        return None
    if not os.path.isfile(library):
        return (f"MT_ALLOCATOR={chosen}: no such library (set it to a shared library's path, "
                "or to system or auto)")
    preloaded = [path for path in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":")
                 if path]
    if library in preloaded or any("malloc" in os.path.basename(p) for p in preloaded):
        return None  # already started with it, or with the user's allocator
    env = dict(os.environ, LD_PRELOAD=":".join([*preloaded, library]))
    env.setdefault("TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD", NO_REPORTS)
    return env


def tcmalloc() -> str | None:
    """tcmalloc's library where installed: the environment's (conda's), then the system's."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for folder in (os.path.join(sys.prefix, "lib"), f"/usr/lib/{multiarch}", "/usr/lib64",
                   "/usr/local/lib", "/usr/lib"):
        for name in TCMALLOC:
            if os.path.isfile(os.path.join(folder, name)):
                return os.path.join(folder, name)
    return None


def allocator_in_use() -> str:
    """The preloaded library this process runs with (as its memory map shows), or
    ``the system's malloc``."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            mapped = maps.read()
    except OSError:
        mapped = ""
    preloaded = os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":")
    loaded = [path for path in preloaded if path and os.path.realpath(path) in mapped]
    return ", ".join(loaded) or "the system's malloc"


if __name__ == "__main__":
    sys.exit(main())
