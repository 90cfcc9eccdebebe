"""The server's answer to a request it does not translate."""

from __future__ import annotations


class RequestError(Exception):
    """An answer other than 200: ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}
