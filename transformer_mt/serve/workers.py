"""``mt serve --workers N``: N server processes on one listening socket, as gunicorn's and
uvicorn's workers are. Each loads its own model and runs its own batcher, decoding thread and
event loop, with the CPU's cores shared out between them (``cores // N`` threads each); the
kernel hands each new connection to one of them. With ``--shared-storage`` they count one rate
limit and read one cache (``storage.py``); else each keeps its own.

This process binds the socket, starts the workers (spawned: nothing of this one is copied),
forwards SIGTERM and SIGINT to them (each then stops as one server does: what is in flight
finishes within ``--grace``) and exits when they have. A worker that ends on its own (it could
not load the model, or it crashed) stops the others: the exit code is its, and a supervisor
(systemd, a container's restart policy) starts the server again. Workers whose first process
is killed (SIGKILL) stop as on SIGTERM."""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import threading
from types import FrameType

from transformer_mt.fileio import own_folder
from transformer_mt.serve.server import bind

log = logging.getLogger("transformer_mt.serve")


def run_workers(args: argparse.Namespace) -> int:
    """Serve with ``args.workers`` processes until a signal (or one of them ends)."""
    sock = bind(args.host, args.port)
    args.files_dir = str(own_folder("mt-serve-files-"))  # any worker answers a download
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_worker, args=(args, sock, n), name=f"mt-serve-{n}")
               for n in range(args.workers)]
    stopping: list[int] = []

    def forward(sig: int, frame: FrameType | None) -> None:
        stopping.append(sig)
        for worker in workers:
            if worker.pid is not None and worker.exitcode is None:
                os.kill(worker.pid, signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for worker in workers:
            worker.start()
        log.info("serving with %d worker processes on http://%s:%d/", len(workers), args.host,
                 args.port)
        code = 0
        while alive := [w.sentinel for w in workers if w.exitcode is None]:
            multiprocessing.connection.wait(alive)
            ended = [w for w in workers if w.exitcode not in (None, 0)]
            if ended and not stopping:
                log.error("worker %s ended (exit code %s): stopping the others", ended[0].name,
                          ended[0].exitcode)
                code = ended[0].exitcode or 1
                forward(signal.SIGTERM, None)
        for worker in workers:  # one still loading when the signal came ended at once
            if stopping and worker.exitcode == -signal.SIGTERM:
                log.info("worker %s stopped while starting", worker.name)
        return 0 if code == 0 else code if code > 0 else 1
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        sock.close()
        shutil.rmtree(args.files_dir, ignore_errors=True)


def _worker(args: argparse.Namespace, sock: socket.socket, n: int) -> None:
    """One worker: ``mt serve`` on the shared socket, in a process group of its own (a
    terminal's Ctrl-C reaches the parent, which forwards it once)."""
    import sys

    from transformer_mt.__main__ import collector_waiting

    os.setpgrp()
    _stop_when_orphaned()
    with collector_waiting():  # as mt starts
        import torch

        from transformer_mt.cli import _run
        from transformer_mt.device import threads_per_process
        from transformer_mt.logs import setup_logging

    torch.set_num_threads(threads_per_process(args.workers))
    setup_logging(args.quiet, args.debug)
    args.socket = sock
    sys.exit(_run(args))


def _stop_when_orphaned() -> None:
    """A worker whose parent is gone (killed: ``kill -9``, the OOM killer) stops as on SIGTERM,
    as gunicorn's do: else it would serve on, the old model on the port, which a server
    started again could not bind."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        log.warning("the server's first process is gone: this worker stops")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="mt-serve-parent", daemon=True).start()
