"""The private API of uvicorn that transformer_mt calls: its HTTP/1.1 protocol class
(``uvicorn.protocols.http.h11_impl``), subclassed to give each request's headers a deadline
(``mt serve --header-timeout``: serve/server.py).

Tested on uvicorn 0.54 and 0.55. On any other version the server runs uvicorn's own ``h11``
protocol, said once in a warning line: requests are served the same, their headers without a
deadline (and a connection that sends no request is never closed: uvicorn's keep-alive
timeout starts after a response).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from transformer_mt.internals.versions import tested

TESTED = ("0.54", "0.55")


class TimedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline for each request's headers."""

    header_timeout_s = 10.0  # set per server by timed_protocol
    _headers_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._headers_deadline = self.loop.call_later(self.header_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._headers_deadline is not None:
            self._headers_deadline.cancel()
            self._headers_deadline = None

    def _too_slow(self) -> None:
        self._headers_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()  # no request's headers in time: let the socket go

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # the headers are in
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request's headers, on a kept-alive connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def timed_protocol(header_timeout_s: float) -> type[H11Protocol] | str:
    """The protocol class uvicorn builds each connection with, with this deadline; on a
    uvicorn it was not tested on, its own ``h11`` (no deadline for the headers; a warning)."""
    if not tested("uvicorn", TESTED, "--header-timeout", "a request's headers have no "
                  "deadline, a connection that sends none is never closed (the idle timeout "
                  "holds after a response, the body timeout for bodies)"):
        return "h11"
    return type("TimedH11Protocol", (TimedH11Protocol,), {"header_timeout_s": header_timeout_s})
