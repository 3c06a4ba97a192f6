"""A FAKE OpenAI-compatible server, for unit tests only. It is not a backend the workshop supports.

It plays the server that accepts every field and enforces nothing: every chat request gets a 200
and the same canned reply, valid JSON of the wrong shape, whatever the request asked for. That is
what a server does when it drops a guided-decoding field it does not know, or quietly falls back to
"any JSON"; the probe must call it "ignored", never "guided". `refuse` can make it answer some
requests with an error instead, as a real server does with a dialect it cannot read; `refuse_models`
does the same for the model listing (GET /v1/models). `enforce` names dialects it plays a guided server for,
for the probe only: asked in one of them, it writes the probe's own token, which no unguided server writes.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from helpers.runtime.client import dialect_sent
from helpers.runtime.dialects import constraint_from_body

MODEL = "fake-model"
CANNED_REPLY = '{"answer": "yes"}'
MODELS = {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}]}
Refusal = tuple[int, dict]


def _completion(text: str) -> dict:
    return {"id": "fake", "object": "chat.completion", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _chunks(text: str, include_usage: bool) -> list[dict]:
    base = {"id": "fake", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                                    "finish_reason": None}]},
              {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                                        "total_tokens": 2}})
    return chunks


class FakeServer:
    """`with FakeServer() as fake:` serves on 127.0.0.1 and a free port; `fake.bodies` holds what it received."""

    def __init__(self, refuse: Callable[[dict, Mapping], Refusal | None] = lambda body, headers: None,
                 refuse_models: Callable[[Mapping], Refusal | None] = lambda headers: None,
                 enforce: Collection[str] = ()):
        self.refuse, self.refuse_models, self.enforce = refuse, refuse_models, set(enforce)
        self.bodies: list[dict] = []
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> FakeServer:
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def reply_to(self, body: dict) -> str:
        """The canned reply; a probe object when `body` asks for one in a dialect this fake enforces."""
        if dialect_sent(json.dumps(body)) not in self.enforce:
            return CANNED_REPLY
        token = constraint_from_body(body).value["properties"]["token"]["const"]
        return json.dumps({"token": token, "answer": "yes", "detail": None})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("x-should-retry", "false")  # a refusal is final: the client must not retry
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(*(fake.refuse_models(self.headers) or (200, MODELS)))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.bodies.append(body)
                refusal = fake.refuse(body, self.headers)  # headers: case-insensitive
                if refusal:
                    self._send(*refusal)
                elif body.get("stream"):
                    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    events = "".join(f"data: {json.dumps(c)}\n\n" for c in _chunks(CANNED_REPLY, include_usage))
                    data = (events + "data: [DONE]\n\n").encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self._send(200, _completion(fake.reply_to(body)))

        return Handler
