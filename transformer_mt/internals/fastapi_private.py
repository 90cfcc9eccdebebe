"""The private API of FastAPI that transformer_mt calls: the function that reads an endpoint's
source lines for its error messages (``fastapi.routing._extract_endpoint_context``), called for
every endpoint at start-up (serve/app.py), not at each one's first request (~1 ms of the first
translation's time).

Tested on FastAPI 0.165 and 0.162 (the last for Python 3.10: 0.162.6 and later need 3.11). On
any other version nothing is read ahead (no warning: FastAPI reads them at the first request,
as it always does).
"""

from __future__ import annotations

from importlib.metadata import version

import fastapi.routing
from fastapi import FastAPI
from fastapi.routing import APIRoute

TESTED = ("0.162", "0.165")


def read_endpoints(app: FastAPI) -> None:
    """What FastAPI does at each endpoint's first request, done now."""
    read = getattr(fastapi.routing, "_extract_endpoint_context", None)
    if ".".join(version("fastapi").split(".")[:2]) not in TESTED:
        read = None
    routes = list(app.routes)
    while routes and read is not None:
        route = routes.pop()
        if isinstance(route, APIRoute) and route.dependant.call:
            read(route.dependant.call)
        routes += getattr(getattr(route, "original_router", None), "routes", [])  # included
