"""Dependencies the routes declare: the service, and the API key (a security scheme, so that
``/openapi.json`` and ``/docs`` show it)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from transformer_mt.serve.errors import RequestError
from transformer_mt.serve.guard import arrived, is_json
from transformer_mt.serve.service import Service

bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer KEY")
key_header = APIKeyHeader(name="X-API-Key", auto_error=False)


def service(request: Request) -> Service:
    svc: Service = request.app.state.service
    return svc


async def given_key(request: Request,
                    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
                    header: Annotated[str | None, Security(key_header)]) -> str | None:
    """The key a client sent: ``Authorization: Bearer``, ``X-API-Key``, or LibreTranslate's
    ``api_key`` field (in the JSON body, or a file's multipart form)."""
    if credentials is not None:
        return credentials.credentials
    if header is not None:
        return header
    if request.method == "POST" and is_json(request.headers.get("content-type")):
        try:
            body = await request.json()
        except ValueError:
            return None
        if isinstance(body, dict) and isinstance(body.get("api_key"), str):
            return body["api_key"]
    elif request.method == "POST" and "multipart/form-data" in request.headers.get(
            "content-type", ""):  # /translate_file's form, which FastAPI has read and kept
        value = (await request.form()).get("api_key")
        return value if isinstance(value, str) else None
    return None


async def api_key(request: Request, key: Annotated[str | None, Security(given_key)]) -> None:
    """Our API: 401 without a valid key (where the server has keys)."""
    if not service(request).key_ok(key):
        raise RequestError(401, "a valid API key is required: send it as "
                           "'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                           {"WWW-Authenticate": "Bearer"})


async def libre_key(request: Request, key: Annotated[str | None, Security(given_key)]) -> None:
    """LibreTranslate's routes: 403 without a valid key, as LibreTranslate answers."""
    if not service(request).key_ok(key):
        raise RequestError(403, "Invalid API key: send a valid 'api_key'")


ServiceDep = Annotated[Service, Depends(service)]
GivenKey = Annotated[str | None, Depends(given_key)]


def client_id(request: Request, key: str | None) -> str:
    """Whom rate limits count: its key where the server checks keys, else its address (a key
    nobody checks would be a fresh allowance for every key a client makes up). The address is
    the peer's, or what a proxy named in ``--forwarded-allow-ips`` says in X-Forwarded-For."""
    if key and service(request).options.api_keys:
        return "key:" + key
    return "address:" + (request.client.host if request.client else "unknown")


def client_left(request: Request) -> Callable[[], Coroutine[Any, Any, None]]:
    """An awaitable's maker that completes when the client closes the connection (after the
    body, the next message a server receives is the disconnect)."""
    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
    return watch


@dataclass
class Caller:
    """Who sent a request, as its work needs it: whom the limits count (:func:`client_id`),
    what completes when the client leaves (:func:`client_left`), and what to call once the
    request is queued (the server counts requests on their way to the queue)."""

    client: str
    left: Callable[[], Coroutine[Any, Any, None]]
    queued: Callable[[], None]


def caller(request: Request, key: GivenKey) -> Caller:
    return Caller(client_id(request, key), client_left(request), lambda: arrived(request.scope))


CallerDep = Annotated[Caller, Depends(caller)]
