"""The official `openai` client, configured for a backend, with refused guided requests explained.

A server that refuses a guided request answers an error, and the client raises its own error for that status
(`openai.BadRequestError` for a 400, `openai.InternalServerError` for a 500), so code that catches it still does;
its message names the backend, the dialect sent, the server's own words (on one line, the key blanked) and the fix.
The client's `http_client`, which its documentation offers for proxies and transports, does this: an
`ExplainingHttpClient` is the default one (`openai.DefaultHttpxClient`) whose `send`, the public method every
request of an `httpx` client goes through, answers a refused guided request with the server's status and headers
and an explained message; the openai client then raises and retries as it would have. Not an override of the
client's private methods (an SDK update changes them without a word); not an exception raised in an `httpx` event
hook or transport (the openai client takes any as a lost connection: it retries, then raises
`APIConnectionError`); not a `transport=` of its own (`httpx` then ignores the proxy the environment sets, and the
NVIDIA or H Company API behind one could not be reached). The error being the client's own, a notebook shows its
traceback through the client, the explanation last. Plain requests' errors are left as the client raises them.

A rate limit (HTTP 429) is waited out where the room can see it: `send` says so in one line, waits what the server's
`Retry-After` asks (or longer each time, up to a minute), and asks again, for up to RATE_LIMIT_PATIENCE seconds in
all; a room of thirty on one provider's limits then slows down instead of failing. Past that, the 429 goes to the
openai client, which retries and raises `openai.RateLimitError` as it would have.
"""
from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import openai

from helpers.runtime.dialects import DIALECTS, Constraint, request_fields
from helpers.runtime.probes import PROBE_ORDER, enforced_at
from helpers.runtime.quoting import SERVER_WORDS, body_of, server_message

EMBEDDED_RETRIES = 6
RATE_LIMIT_PATIENCE = 180  # seconds a request waits out 429s in all before the openai client's own retries
RATE_LIMIT_WAITS = (5, 10, 20, 40, 60)  # seconds, when the server does not say; the last one repeats
LONGEST_WAIT = 60  # a Retry-After beyond it is waited in steps of this, each said
CHAT_PATH = "chat/completions"  # below the base URL, where the openai client asks for a chat completion
# What describes a body rather than the answer: an explained body has its own.
BODY_HEADERS = {"content-length", "content-type", "content-encoding", "transfer-encoding"}


@functools.cache
def _guided_paths() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Where each dialect puts its constraint in a request body, read off `request_fields` (the one source)."""
    # A schema every dialect sends unchanged (response_format rewrites others into OpenAI's strict subset).
    mark = {"type": "object", "properties": {}, "required": [], "additionalProperties": False,
            "description": "where the constraint goes"}

    def path_to(value: Any) -> tuple[str, ...] | None:
        if value == mark:
            return ()
        for key, inner in value.items() if isinstance(value, dict) else ():
            found = path_to(inner)
            if found is not None:
                return (key, *found)
        return None

    paths = []
    for dialect in DIALECTS:
        for kind in ("json_schema", "choice", "regex"):
            try:
                fields = request_fields(dialect, Constraint(kind, mark))
            except ValueError:  # the dialect has no spelling for this kind of constraint
                continue
            body = {**fields.pop("extra_body", {}), **fields}
            if (path := path_to(body)) is not None:
                paths.append((dialect, path))
    return tuple(paths)


def dialect_sent(body: bytes | str) -> str | None:
    """The dialect a chat-completions request body asked for guided decoding in; None for a plain request."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    for dialect, path in _guided_paths():
        value = data
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            return dialect
    return None


def _fix(dialect: str, enforced: Sequence[str] | None) -> str:
    """What to do about a refused guided request; `enforced`: the dialects the server is known to enforce, in
    PROBE_ORDER (None before a probe)."""
    if enforced and dialect in enforced:
        return (f"fix: this server enforces {dialect}, so the request itself is the problem: the server's "
                "message names it")
    if enforced:
        return (f"fix: this server enforces {', '.join(enforced)}: set WORKSHOP_DIALECT={enforced[0]} "
                "and restart the kernel")
    if enforced is not None:
        return "fix: this server enforces no dialect: set WORKSHOP_DIALECT=prompt_only, or use another server"
    return ("fix: run `python -m helpers.runtime.backends --probe` to see which dialects this server enforces, then "
            "set WORKSHOP_DIALECT to one of them (or, for the openai backend, unset it so that connect() probes) "
            "and restart the kernel")


class ExplainingHttpClient(openai.DefaultHttpxClient):
    """The HTTP client under the official `openai` client: the default one, except that a refused guided request's
    error answer comes back with its message explained (the module docstring says why here). Requests and
    responses are typed Any: they are the `httpx` objects of whichever `httpx` the openai client uses (`httpx2` since
    openai 3), used only through what both offer."""

    def __init__(self, backend: str, enforced: Sequence[str] | None = None, *,
                 sleep: Callable[[float], None] = time.sleep, **options: Any) -> None:
        """`enforced`: what the server enforces without a probe (the embedded server: every dialect); `sleep`: how
        a rate limit is waited out (a test's clock); `options` go to the `httpx` client."""
        super().__init__(**options)
        self.backend, self.enforced, self.sleep = backend, enforced, sleep

    def send(self, request: Any, **options: Any) -> Any:
        # Every request passes here: the client's `request` and `stream` call it, and so does the openai client.
        response = self._patient(request, super().send(request, **options), options)
        # Only a JSON body asks for guided decoding (a file upload is multipart, and not read into memory).
        if not response.is_error or "json" not in request.headers.get("content-type", ""):
            return response
        dialect = dialect_sent(request.content)
        if dialect is None:
            return response
        response.read()
        return self._explained(response, dialect)

    def _patient(self, request: Any, response: Any, options: dict[str, Any]) -> Any:
        """`response`, or, while it is a 429 and patience lasts, the answer to the same request asked again after the
        wait the server asks for, each wait said on one line."""
        waited, attempt = 0.0, 0
        while response.status_code == 429 and waited < RATE_LIMIT_PATIENCE:
            attempt += 1
            asked = retry_after(response)
            wait = min(asked if asked is not None else RATE_LIMIT_WAITS[min(attempt, len(RATE_LIMIT_WAITS)) - 1],
                       LONGEST_WAIT, RATE_LIMIT_PATIENCE - waited)
            wait = max(wait, 1.0)  # a Retry-After of 0 must not spin: patience runs out in seconds, not requests
            print(f"{self.backend}: the server is busy or rate-limiting (HTTP 429): waiting {wait:.0f} s, then asking "
                  "again", file=sys.stdout, flush=True)
            response.close()
            self.sleep(wait)
            waited += wait
            response = super().send(request, **options)
        return response

    def _explained(self, response: Any, dialect: str) -> Any:
        """`response` with its error message saying which backend refused which dialect, in the server's words (the
        key blanked), and what to do; the status and headers are the server's, so the openai client raises the error
        it raises for that status, and retries as it would have."""
        request = response.request
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        said = server_message(response, key)
        base_url = str(request.url.copy_with(query=None)).removesuffix(CHAT_PATH)  # the probe's key, for a chat
        model = json.loads(request.content).get("model", "")
        enforced = enforced_at(base_url, model) if self.enforced is None else self.enforced
        body = body_of(response)
        fields = body["error"] if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
        message = f"the {self.backend} backend refused a guided request in the {dialect} dialect: {said}\n"
        error = {**fields, "message": message + _fix(dialect, enforced), SERVER_WORDS: said}
        # The new body has its own length, type and encoding; every other header is the server's (x-should-retry too).
        headers = [(name, value) for name, value in response.headers.multi_items() if name.lower() not in BODY_HEADERS]
        explained = type(response)(response.status_code, headers=headers, json={"error": error}, request=request,
                                   extensions=response.extensions)
        explained.elapsed = response.elapsed
        return explained


def retry_after(response: Any) -> float | None:
    """The seconds a response's `Retry-After` header asks for (None: it asks for none, or gives a date)."""
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


def backend_client(backend: str, base_url: str, key: str) -> openai.OpenAI:
    """The official client for `backend` at `base_url`, with the client's own defaults (the environment's proxy too)."""
    return openai.OpenAI(base_url=base_url, api_key=key, http_client=ExplainingHttpClient(backend))


def embedded_client(base_url: str, key: str) -> openai.OpenAI:
    """An OpenAI client for the embedded server at `base_url`, which asks for `key`."""
    # Loopback must not go through a proxy configured for the internet. One model serves requests in
    # turn, so a queued request may wait a while; a full queue answers 429 with Retry-After, which `send`
    # waits out, saying so (the server marks every other error as not worth retrying).
    return openai.OpenAI(base_url=base_url, api_key=key, max_retries=EMBEDDED_RETRIES, timeout=600,
                         http_client=ExplainingHttpClient("embedded", PROBE_ORDER, trust_env=False))
