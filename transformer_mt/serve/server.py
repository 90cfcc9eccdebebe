"""The server process: uvicorn around the app, with time limits on every connection and a
stop that lets the requests in flight finish.

- A connection must send a request's headers within ``header_timeout_s`` of opening (or of its
  last answer): one that sends nothing, or a byte now and then, is closed. An idle keep-alive
  connection is closed after ``idle_timeout_s``; a body must arrive within the body timeout
  (``guard.py``). At most ``max_connections`` are served at once (503 beyond), and the process
  may open as many files as its hard limit allows.
- The model is warmed up (``--compile``: compiled the first time) before the server listens;
  SIGTERM or SIGINT meanwhile stop the compilers and end the process (exit 0).
- SIGTERM or SIGINT: the server stops accepting connections and lets the requests in flight
  finish within ``grace_s`` seconds; those still waiting then get a 503 (not a traceback), the
  queue is closed, and the process exits with 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import resource
import signal
import socket
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import uvicorn

from transformer_mt.decode.compilers import stop_compiling
from transformer_mt.errors import MTError
from transformer_mt.internals import uvicorn_private
from transformer_mt.serve.app import create_app
from transformer_mt.serve.batcher import decoder_thread
from transformer_mt.serve.service import Service
from transformer_mt.serve.settings import Connections, ServeOptions
from transformer_mt.translate import Translator

log = logging.getLogger("transformer_mt.serve")


def _open_files_limit() -> None:
    """Let the process open as many sockets as the system allows it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _out_of_descriptors_once() -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """The event loop's handler of errors no task awaits: a listening socket that cannot
    accept (no file descriptor left: asyncio retries, and logs each try with its traceback,
    ~30 MB in 8 s) is one warning line every 10 s; anything else, asyncio's own report."""
    last = [-math.inf]

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (context.get("message", "").startswith("socket.accept() out of system resource")
                or (isinstance(exc, ValueError) and "Invalid file descriptor" in str(exc))):
            loop.default_exception_handler(context)
        elif time.monotonic() - last[0] > 10:
            last[0] = time.monotonic()
            log.warning("connections wait: the process has no file descriptor left (%s); "
                        "raise its limit (ulimit -n) or lower --max-connections", exc)

    return handle


class _Server(uvicorn.Server):
    """uvicorn's server, but a stop asked for by a signal is a normal end (exit code 0:
    uvicorn would raise the signal again), the requests still waiting when the grace
    period ends get a 503, and a process out of file descriptors says so once."""

    def __init__(self, config: uvicorn.Config, app: Any, grace_s: float) -> None:
        super().__init__(config)
        self.served, self.grace_s = app, grace_s
        self.stops, self.grace_over = 0, False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(_out_of_descriptors_once())
        await super().startup(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {s: signal.signal(s, self.handle_exit)
                    for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The first signal stops accepting and gives what is in flight the grace; the
        second ends the grace now (what waits gets 503, the batch decoding finishes); a
        third is uvicorn's forced exit."""
        self.stops += 1
        loop = asyncio.get_event_loop()
        if self.stops == 1:
            loop.call_soon_threadsafe(lambda: loop.call_later(self.grace_s, self._end_of_grace))
        elif self.stops == 2:
            loop.call_soon_threadsafe(self._end_of_grace, "a second signal came")
            return
        super().handle_exit(sig, frame)

    def _end_of_grace(self, why: str = "") -> None:
        batcher = self.served.state.service.batcher
        if batcher is not None and self.stops < 3 and not self.grace_over:
            self.grace_over = True
            log.warning("%s: the requests still waiting get 503",
                        why or f"the grace period ({self.grace_s:g} s) is over")
            batcher.abort()


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (a server's, or the one ``mt serve --workers``' processes share);
    one line where it cannot be had (the port taken, a host not of this machine)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise MTError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def serve(translator: Translator, options: ServeOptions, host: str = "127.0.0.1",
          connections: Connections | None = None, compare: Translator | None = None,
          sock: socket.socket | None = None) -> None:
    """Run the server until SIGINT/SIGTERM (see the module's docstring); on ``sock`` where
    given (a worker of several: ``workers.py``), else on ``host:port``."""
    connections = connections or Connections()
    port, grace_s = connections.port, connections.grace_s
    _open_files_limit()
    app = create_app(translator, options, compare)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            http=uvicorn_private.timed_protocol(connections.header_timeout_s),
                            timeout_keep_alive=connections.idle_timeout_s,
                            limit_concurrency=connections.max_connections,
                            # uvicorn's own deadline, past ours: whole seconds, as it takes
                            timeout_graceful_shutdown=math.ceil(grace_s) + 5,
                            # a client's address is the peer's unless a proxy is trusted
                            proxy_headers=bool(options.forwarded_allow_ips),
                            forwarded_allow_ips=list(options.forwarded_allow_ips) or None,
                            lifespan="on")

    if _warmed_up(app.state.service):
        listening = bind(host, port) if sock is None else sock  # (a worker's: shared)
        log.info("serving %s -> %s on http://%s:%d/ (API key %s)",
                 translator.config.data.src_lang, translator.config.data.tgt_lang, host,
                 listening.getsockname()[1], "required" if options.api_keys else "not required")
        try:
            _Server(config, app, grace_s).run(sockets=[listening])
        finally:
            if sock is None:
                listening.close()
    log.info("stopped")


def _warmed_up(service: Service) -> bool:
    """Warm the service up on the decoding thread, before listening (with ``--compile``, the
    first time, minutes of compiling). SIGTERM or SIGINT meanwhile stop it (the compilers
    too) and the server never starts: False."""
    stopped: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.append(signum)
        stop_compiling()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        decoder_thread().submit(service.warm_up).result()
    except MTError:
        if not stopped:
            raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if stopped:
        log.info("%s while starting: not serving", signal.Signals(stopped[0]).name)
    return not stopped
