"""The processes that compile a model's decoding graphs for ``--compile``
(:meth:`~transformer_mt.decode.compiled.CompiledDecoding.warm_up`).

A graph compiles in a process apart (export and inductor are Python, then the C++ compiler:
one core each, and a process can be stopped, its compilers with it). There are as many as
the asking process has threads at most (its share of the cores: each of ``mt serve --workers
2``'s processes on two cores starts one), started when a graph not in the cache is first
asked for; each loads the model once and compiles the graphs handed to it one after another.
Starting one costs ~6-9 s of a core (torch, inductor, the model): the five graphs of
``--compile --beam-size 5`` on two cores start two, not five.

A process told to stop (:func:`stop_compiling`: a signal came) kills them and the C++
compilers they started, and compiles nothing more.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType

import torch

from transformer_mt.errors import MTError
from transformer_mt.fileio import own_folder
from transformer_mt.model.transformer import Transformer

log = logging.getLogger(__name__)

DONE, FAILED = "\0done", "\0failed"  # a worker's answers, each on a line of its own
_STOP = threading.Event()


def stop_compiling() -> None:
    """Give up the graphs this process compiles (a signal came): their processes and compilers
    are killed, and :meth:`Compilers.compile` raises a one-line :class:`MTError`. For good: a
    process told to stop compiles nothing more."""
    _STOP.set()


class Worker:
    """One compiling process (:func:`serve`), a session of its own: killing it kills the C++
    compilers it runs. Its output is read by a thread into a queue of lines (None at its end)."""

    def __init__(self, model_file: Path, precision: str, threads: int, max_rows: int) -> None:
        # (the collector waits while it starts: serve())
        command = [sys.executable, "-c", "import gc; gc.disable(); from transformer_mt.decode."
                   "compilers import serve; serve()", str(model_file), precision, str(threads),
                   str(max_rows)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def compile(self, name: str, directory: Path) -> None:
        """Compile the graph ``name`` into ``directory``; a one-line :class:`MTError` if it
        cannot, or once :func:`stop_compiling` is called (the caller kills it then)."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(f"{name}\t{directory}\n")
            self.process.stdin.flush()
        except OSError:
            pass  # it ended: its output says why
        last = ""
        while True:
            if _STOP.is_set():
                raise MTError("--compile stopped: the process was asked to stop while compiling")
            with contextlib.suppress(queue.Empty):
                line = self.lines.get(timeout=0.2)
                if line is None or FAILED in line:
                    said = (line.split(FAILED, 1)[1].strip() if line else
                            f"its process exited with {self.process.wait()}: {last[:300]}")
                    raise MTError(f"--compile could not compile the decoder: {said}; "
                                  "translate without --compile")
                if DONE in line:
                    return
                last = line.strip() or last

    def kill(self) -> None:
        """End it and the compilers it started."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()


class Compilers:
    """At most ``slots`` compiling processes of ``model`` at ``precision``, shared by the
    threads of a warm-up: a thread takes a turn (:meth:`turn`), then, for its graph, an idle
    process (or starts one). Used as a context manager: at its end they are stopped, and the
    model's file removed."""

    def __init__(self, model: Transformer, precision: str, max_rows: int, slots: int) -> None:
        self.model, self.precision, self.max_rows = model, precision, max_rows
        self.threads = torch.get_num_threads()  # the compiled code's, as the model's key says
        self._slots = threading.BoundedSemaphore(slots)  # a graph's turn
        self._idle: list[Worker] = []
        self._all: list[Worker] = []
        self._lock = threading.Lock()
        self._folder: Path | None = None  # the model's file's, made when the first one starts
        self._failed: MTError | None = None  # a graph that could not compile: start no more

    def turn(self) -> threading.BoundedSemaphore:
        """A turn to compile (``with compilers.turn():``), once one of the processes is free:
        a warm-up takes it before a graph's cache entry, so that it holds no entry while it
        waits (another process that warms the same model up compiles that one meanwhile)."""
        return self._slots

    def compile(self, name: str, directory: Path) -> None:
        """Compile the graph ``name`` into ``directory`` in one of the processes, within a
        :meth:`turn`; a one-line :class:`MTError` if it cannot (the process is retired), and
        at once for a graph whose turn comes after one could not (a compiler that does not
        work fails every graph, each after ~10 s of export and inductor)."""
        worker = self._take()
        log.info("compiling the %s graph of decoding (once for this model; ~20-40 s)", name)
        try:
            worker.compile(name, directory)
        except BaseException as e:
            worker.kill()  # its state after a failure is not to be trusted
            if isinstance(e, MTError):
                self._failed = e
            raise
        with self._lock:
            self._idle.append(worker)

    def _take(self) -> Worker:
        with self._lock:
            if _STOP.is_set():
                raise MTError("--compile stopped: the process was asked to stop while compiling")
            if self._failed is not None:
                raise MTError(str(self._failed))
            if self._idle:
                return self._idle.pop()
            if self._folder is None:
                self._folder = own_folder("mt-compile-")
                torch.save(self.model, self._folder / "model.pt")
            worker = Worker(self._folder / "model.pt", self.precision, self.threads,
                            self.max_rows)
            self._all.append(worker)
            return worker

    def __enter__(self) -> Compilers:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for worker in self._all:  # idle now, or told to stop
            worker.kill()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


def serve() -> None:
    """A compiling process's work (:class:`Worker`): load the model it was given, then compile
    each graph named on a line of its input (``name<TAB>directory``), answering each on a line
    of its output, until its input ends. Arguments: the model's file, the precision, the
    threads and the most hypotheses of a lone sentence's beam."""
    from transformer_mt.__main__ import collector_waiting
    from transformer_mt.decode.compiled import CompiledDecoding
    from transformer_mt.internals import torch_private
    from transformer_mt.precision import for_decoding

    model_file, precision, threads, max_rows = sys.argv[1:]
    with collector_waiting():  # what it loads, unscanned (Worker's command stopped it)
        torch_private.import_compiler()
        torch.set_num_threads(int(threads))
        model = torch.load(model_file, weights_only=False)  # written by the parent just now
        decoding = CompiledDecoding(for_decoding(model, precision), model)
        decoding.max_rows = int(max_rows)
    for line in sys.stdin:
        name, directory = line.rstrip("\n").split("\t")
        try:
            decoding.compile_graph(Path(directory), name, precision)
        except MTError as e:
            print(f"\n{FAILED} {e}", flush=True)
        else:
            print(f"\n{DONE}", flush=True)
