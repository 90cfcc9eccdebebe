"""The server's door: a small ASGI middleware in front of the routes.

- ``Host`` must name this server (``allowed_hosts``: localhost by default), and an ``Origin``
  (sent by browsers) must be this server or a page allowed by ``cors_origins``: a web page
  elsewhere cannot use a key-less server on localhost, directly or by DNS rebinding.
- A body is read up to ``max_body_bytes`` (413 beyond, before it is read when its
  ``Content-Length`` says so) and must arrive within ``body_timeout_s`` (408, then the
  connection is closed).
- Our API's POST routes take JSON only (415 otherwise: a browser can send a form or text
  anywhere, but not JSON without asking first).
- A translation request counts as *arriving* until its job is queued: the batcher waits for
  arriving requests to join a batch.
- Every answer is counted in the metrics, by route and status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.parse

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from transformer_mt.serve.service import Service

TRANSLATING = ("/translate", "/v1/translate")  # POSTs that become decoding jobs
JSON_ONLY = ("/v1/",)  # POSTs under these take JSON only
ARRIVED = "mt.arrived"  # scope key: call once the request's job is queued (or never will be)


def is_json(content_type: str | None) -> bool:
    kind = (content_type or "").split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and
                                          kind.endswith("+json"))


def json_route(scope: Scope) -> bool:
    """A POST to one of our API's POST routes: a POST to a GET route is its 405, one to no
    route its 404, as any other method's."""
    if scope["method"] != "POST" or not scope["path"].startswith(JSON_ONLY):
        return False
    routes = getattr(scope.get("app"), "routes", [])
    return any(isinstance(route, BaseRoute) and route.matches(scope)[0] == Match.FULL
               for route in routes)


def host_name(value: str) -> str:
    """``example.org:8000`` -> ``example.org``; ``[::1]:8000`` -> ``::1``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]")[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


async def answer(send: Send, status: int, message: str,
                 headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class Guard:
    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app, self.service = app, service
        options = service.options
        self.any_host = "*" in options.allowed_hosts
        self.hosts = {h.lower().strip("[]") for h in options.allowed_hosts}
        self.origins = {o.rstrip("/").lower() for o in options.cors_origins}

    def refused(self, scope: Scope, headers: Headers) -> tuple[int, str] | None:
        host = host_name(headers.get("host", ""))
        if not self.any_host and host not in self.hosts:
            return 400, (f"this server does not answer to the host name '{host}'; start mt "
                         f"serve with --allowed-host {host or 'NAME'} to allow it")
        origin = headers.get("origin")
        if origin is not None and "*" not in self.origins:
            name = host_name(urllib.parse.urlsplit(origin).netloc)
            # the page is this server's (the host it addressed), or one of its names; any
            # host answered (--allowed-host '*') allows no page elsewhere
            if origin.rstrip("/").lower() not in self.origins and not (
                    name and (name == host or name in self.hosts)):
                return 403, (f"requests from web pages at {origin} are refused; start mt serve "
                             f"with --cors-origin {origin} to allow them")
        if json_route(scope) and not is_json(headers.get("content-type")):
            return 415, ("send the body as JSON, with 'Content-Type: application/json' (curl: "
                         "--json '{...}')")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [0]

        async def counted_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, counted_send)
        except asyncio.CancelledError:
            # a forced stop (a second Ctrl-C) cancels what is in flight: those requests get
            # the stop's 503, not a plain-text 500 and a traceback a request
            if status[0]:
                raise
            status[0] = 503
            with contextlib.suppress(Exception):
                await answer(send, 503, "the server is stopping; try again on another",
                             {"Connection": "close"})
        finally:
            status[0] = status[0] or 500
            route = getattr(scope.get("route"), "path", "other")
            self.service.metrics.requests.labels(route, str(status[0])).inc()
            self.service.metrics.latency.labels(route).observe(time.perf_counter() - start)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        problem = self.refused(scope, headers)
        if problem:
            await answer(send, *problem)
            return
        limit = self.service.limits.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await answer(send, 413, f"the body is {int(declared):,} bytes; at most {limit:,}",
                         {"Connection": "close"})
            return
        bounded_receive = _BoundedBody(receive, limit, self.service.options.body_timeout_s)
        arriving = (scope["method"] == "POST" and scope["path"] in TRANSLATING
                    and self.service.batcher is not None)
        if not arriving:
            await self.app(scope, bounded_receive, send)
            return
        batcher = self.service.batcher
        assert batcher is not None
        batcher.arriving += 1
        pending = [True]

        def arrived() -> None:
            if pending[0]:
                pending[0] = False
                batcher.arrived()

        scope[ARRIVED] = arrived
        try:
            await self.app(scope, bounded_receive, send)
        finally:
            arrived()


class _BoundedBody:
    """``receive`` as the app sees it: the body within ``limit`` bytes and, all of it, within
    ``timeout`` seconds of the app's first read (else 413 or 408, the connection closed: a
    byte every few seconds does not keep a connection); after the body, a wait as long as it
    takes (for a disconnect)."""

    def __init__(self, receive: Receive, limit: int, timeout: float) -> None:
        self.receive, self.limit, self.timeout = receive, limit, timeout
        self.received, self.done = 0, False
        self.deadline: float | None = None

    async def __call__(self) -> Message:
        if self.done:
            return await self.receive()
        now = asyncio.get_running_loop().time()
        if self.deadline is None:
            self.deadline = now + self.timeout
        try:
            message = await asyncio.wait_for(self.receive(), max(self.deadline - now, 0.0))
        except asyncio.TimeoutError:
            raise HTTPException(408, f"the body did not arrive within {self.timeout:g} s",
                                {"Connection": "close"}) from None
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                raise HTTPException(413, f"the body is over {self.limit:,} bytes",
                                    {"Connection": "close"})
            self.done = not message.get("more_body", False)
        return message


def arrived(scope: Scope) -> None:
    """The request's job is queued (or will not be): it no longer counts as arriving."""
    done = scope.get(ARRIVED)
    if done is not None:
        done()
