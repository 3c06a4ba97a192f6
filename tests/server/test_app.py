"""The HTTP layer, hostile clients included, on a stub engine: fast, and no model needed.

The stub stands in for the model only; the handler, the limits, the queue and the answers are
the real ones. `test_app_integration.py` and `test_hostile_http.py` repeat the essentials on the
real server.
"""
import json
import socket
import threading
import time
from dataclasses import dataclass

import pytest

from helpers.server import MODEL_ID, SERVER_NAME
from helpers.server.app import Server
from helpers.server.engine import Cancelled, Completion
from helpers.server.protocol import ChatRequest
from helpers.server.request_queue import RequestQueue


@dataclass
class StubJob:
    request: ChatRequest


class StubEngine:
    """Echoes the last message; a few magic messages misbehave on purpose."""

    def __init__(self, queue_limit: int = 2):
        self.queue = RequestQueue(queue_limit)
        self.cancelled = threading.Event()

    def prepare(self, request: ChatRequest) -> StubJob:
        if request.messages[-1]["content"] == "fail while preparing":
            raise KeyError("a bug before decoding")
        return StubJob(request)

    def run(self, job, on_text=None, client_gone=lambda: False):
        text = job.request.messages[-1]["content"]
        with self.queue.turn(lambda: "client_gone" if client_gone() else None):
            if text.startswith("slow"):
                for _ in range(50):
                    if client_gone():
                        self.cancelled.set()
                        raise Cancelled("the client disconnected")
                    time.sleep(0.02)
            if on_text:
                on_text("echo: ")
            if text == "fail while streaming":
                raise RuntimeError("a bug after the first token")
            if on_text:
                on_text(text)
        return Completion("echo: " + text, "stop", 3, 2, {"decode_ms": 1.0})


@pytest.fixture()
def app():
    engine = StubEngine()
    server = Server(0, engine, body_limit=1024, socket_timeout=1.0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def body(content: str = "hi", **fields) -> bytes:
    return json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": content}], **fields}).encode()


def post(content: str = "hi", **fields) -> bytes:
    data = body(content, **fields)
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(data) + data)


def exchange(server: Server, data: bytes, wait: float = 10.0, read: bool = True) -> tuple[int, dict, bytes]:
    """Send raw bytes; the status, the headers and the body of the answer."""
    with socket.create_connection(server.server_address, timeout=wait) as sock:
        sock.sendall(data)
        answer = b""
        while read and (chunk := sock.recv(65536)):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, payload


def error_of(payload: bytes) -> dict:
    error = json.loads(payload)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


def test_a_plain_request_is_answered(app):
    status, _, payload = exchange(app, post("hello"))
    assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == "echo: hello"


HOSTILE = {
    "content-length-huge": (b"Content-Length: 10000000000\r\n\r\n{}", 413, "body_too_large"),
    "content-length-over-cap": (b"Content-Length: 1025\r\n\r\n{}", 413, "body_too_large"),
    "content-length-negative": (b"Content-Length: -5\r\n\r\n{}", 400, "invalid_content_length"),
    "content-length-not-a-number": (b"Content-Length: abc\r\n\r\n{}", 400, "invalid_content_length"),
    "content-length-two-values": (b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "invalid_content_length"),
    "content-length-missing": (b"\r\n{}", 411, "length_required"),
    "chunked": (b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 411, "length_required"),
    "body-then-silence": (b"Content-Length: 10\r\n\r\n{}", 408, "request_timeout"),
}


@pytest.mark.parametrize("tail,status,code", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_headers_get_an_error_at_once_and_the_server_keeps_serving(app, tail, status, code):
    started = time.monotonic()
    got, headers, payload = exchange(app, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + tail)
    assert (got, error_of(payload)["code"]) == (status, code)
    assert headers["connection"] == "close"
    assert time.monotonic() - started < 5  # the socket timeout is 1 s here; nothing waits on a lie
    assert exchange(app, post())[0] == 200


@pytest.mark.parametrize("raw,status", [
    (b"GARBAGE\r\n\r\n", 400), (b"\x00\xff\xfe binary junk\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n", 431),
    (b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 501),
    (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", 408),
], ids=["garbage-line", "binary", "too-many-headers", "unknown-method", "long-url", "headers-then-silence"])
def test_malformed_http_gets_a_json_error_too(app, raw, status):
    got, _, payload = exchange(app, raw)
    assert got == status and error_of(payload)["code"] == "http_error"
    assert exchange(app, post())[0] == 200


def test_an_unexpected_exception_is_a_500_in_the_openai_shape_and_the_server_keeps_serving(app, capsys):
    status, headers, payload = exchange(app, post("fail while preparing"))
    error = error_of(payload)
    assert (status, error["type"], error["code"]) == (500, "server_error", "internal_error")
    assert headers["x-should-retry"] == "false"
    assert "KeyError" in capsys.readouterr().err  # the traceback went to the log, not to the client
    assert "KeyError" not in error["message"]
    assert exchange(app, post())[0] == 200


def test_a_failure_after_the_stream_started_is_an_sse_error_event_then_done(app):
    status, headers, payload = exchange(app, post("fail while streaming", stream=True))
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = payload.decode().strip().split("\n\n")
    assert "HTTP/1.1" not in payload.decode()  # never a second status line inside the stream
    assert events[-2].startswith("event: error\ndata: ")
    assert error_of(events[-2].split("data: ", 1)[1].encode())["code"] == "internal_error"
    assert events[-1] == "data: [DONE]"
    assert exchange(app, post())[0] == 200


def test_the_openai_client_raises_the_stream_error_it_was_sent(app):
    import openai

    from helpers.runtime.backends import embedded_client

    client = embedded_client(f"http://127.0.0.1:{app.server_address[1]}/v1")
    with pytest.raises(openai.APIError, match="internal server error"):
        for _ in client.chat.completions.create(model=MODEL_ID, stream=True,
                                                messages=[{"role": "user", "content": "fail while streaming"}]):
            pass


def test_a_full_queue_answers_429_with_retry_after_at_once(app):
    holders = [threading.Thread(target=exchange, args=(app, post("slow"))) for _ in range(3)]
    for holder in holders:  # one decodes, two wait: the queue (limit 2) is full
        holder.start()
        time.sleep(0.1)
    started = time.monotonic()
    status, headers, payload = exchange(app, post())
    assert (status, error_of(payload)["code"]) == (429, "server_busy")
    assert int(headers["retry-after"]) >= 1 and headers["x-should-retry"] == "true"
    assert time.monotonic() - started < 1
    for holder in holders:
        holder.join()


def test_health_reports_the_queue_the_version_and_the_owner(app):
    status, _, payload = exchange(app, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    health = json.loads(payload)
    assert status == 200 and health["server"] == SERVER_NAME
    assert health["queue"] == {"waiting": 0, "limit": 2, "busy": False}
    assert health["version"] and health["code"] and health["user"] and health["checkout"]


def test_a_client_that_leaves_stops_the_decoding(app):
    with socket.create_connection(app.server_address) as sock:
        sock.sendall(post("slow"))
        time.sleep(0.2)
    assert app.engine.cancelled.wait(5)
