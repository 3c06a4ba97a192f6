"""OpenAI-style request errors, so every client library shows them the way it shows OpenAI's own."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RequestError(Exception):
    """A request the server refuses; becomes `{"error": {...}}` with `status`."""

    message: str
    param: str | None = None
    code: str | None = None
    status: int = 400
    type: str = "invalid_request_error"

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type,
                          "param": self.param, "code": self.code}}
