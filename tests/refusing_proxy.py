"""A stand-in, for tests only, for a NIM that refuses `nvext`: a proxy in front of a real server.

It forwards every request to the upstream server (the test run's embedded server, with its key), streamed replies
included, but answers a chat request that carries an `nvext` field with the 400 a strict OpenAI-compatible server
gives a field it does not know. So the workshop meets, through the NVIDIA backend's own code path, a server that
refuses NIM's spelling and enforces another.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

REFUSAL = {"error": {"message": "Unrecognized request argument supplied: nvext", "type": "invalid_request_error",
                     "param": "nvext", "code": "unknown_parameter"}}


class RefusingProxy:
    """`with RefusingProxy(upstream, key) as proxy:` serves on 127.0.0.1 and a free port, at `proxy.base_url`."""

    def __init__(self, upstream: str, key: str):
        self.upstream, self.key = upstream.rstrip("/"), key
        self.refused = 0
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._client = httpx.Client(timeout=600, trust_env=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def __enter__(self) -> RefusingProxy:
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._client.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, data: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _forward(self, method: str, body: bytes | None) -> None:
                url = proxy.upstream + self.path.removeprefix("/v1")
                headers = {"Authorization": f"Bearer {proxy.key}", "Content-Type": "application/json"}
                with proxy._client.stream(method, url, content=body, headers=headers) as answer:
                    if "text/event-stream" not in answer.headers.get("content-type", ""):
                        self._send(answer.status_code, answer.read(), answer.headers.get("content-type", ""))
                        return
                    self.send_response(answer.status_code)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    for piece in answer.iter_raw():
                        self.wfile.write(piece)
                        self.wfile.flush()

            def do_GET(self) -> None:
                self._forward("GET", None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if "nvext" in json.loads(body or b"{}"):
                    proxy.refused += 1
                    self._send(400, json.dumps(REFUSAL).encode())
                    return
                self._forward("POST", body)

        return Handler
