"""The HTTP layer, hostile clients included, on a stub engine: fast, and no model needed.

The stub stands in for the model only; the handler, the limits, the queue and the answers are
the real ones. `test_app_integration.py` and `test_hostile_http.py` repeat the essentials on the
real server.
"""
import concurrent.futures
import json
import socket
import threading
import time
from dataclasses import dataclass

import pytest

from helpers.runtime.embedded import MODEL_ID, SERVER_NAME
from helpers.server import app as app_module
from helpers.server.app import DEFAULT_BODY_LIMIT_MB, PREPARING_AT_ONCE, Server, service_limit
from helpers.server.engine import Cancelled, Completion
from helpers.server.protocol import MAX_MESSAGES, ChatRequest
from helpers.server.request_queue import RequestQueue

KEY = "test-key-0123456789"
AUTHORIZED = b"Authorization: Bearer " + KEY.encode() + b"\r\n"


@dataclass
class StubJob:
    request: ChatRequest
    deadline: float | None = None


class StubEngine:
    """Echoes the last message; a few magic messages misbehave on purpose."""

    def __init__(self, queue_limit: int = 2):
        self.queue = RequestQueue(queue_limit)
        self.cancelled = threading.Event()
        self.released = threading.Event()  # ends every "stuck preparation"
        self.lock = threading.Lock()
        self.preparing = self.most_preparing = 0

    def prepare(self, request: ChatRequest) -> StubJob:
        text = request.messages[-1]["content"]
        if text == "fail while preparing":
            raise KeyError("a bug before decoding")
        with self.lock:
            self.preparing += 1
            self.most_preparing = max(self.most_preparing, self.preparing)
        try:
            if text == "long preparation":
                time.sleep(0.3)
            elif text == "slow preparation":
                time.sleep(0.6)
            elif text == "stuck preparation":
                self.released.wait(30)
        finally:
            with self.lock:
                self.preparing -= 1
        return StubJob(request, time.monotonic() + request.deadline_s if request.deadline_s else None)

    def run(self, job, on_text=None, client_gone=lambda: False):
        text = job.request.messages[-1]["content"]

        def should_leave():
            if client_gone():
                return "client_gone"
            return "deadline" if job.deadline is not None and time.monotonic() > job.deadline else None

        with self.queue.turn(should_leave):
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
    server = Server(0, engine, KEY, body_limit=1024, socket_timeout=1.0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    engine.released.set()
    server.shutdown()
    server.server_close()


def body(content: str = "hi", **fields) -> bytes:
    return json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": content}], **fields}).encode()


def post(content: str = "hi", **fields) -> bytes:
    data = body(content, **fields)
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: HOST\r\nContent-Type: application/json\r\n" + AUTHORIZED +
            b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(data) + data)


def addressed(server: Server, data: bytes) -> bytes:
    """A raw request with HOST replaced by the server's own address, which its Host header must name."""
    return data.replace(b"HOST", b"%s:%d" % (server.server_address[0].encode(), server.server_address[1]))


def exchange(server: Server, data: bytes, wait: float = 10.0, read: bool = True) -> tuple[int, dict, bytes]:
    """Send raw bytes (see `addressed`); the status, the headers and the body of the answer."""
    with socket.create_connection(server.server_address, timeout=wait) as sock:
        sock.sendall(addressed(server, data))
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
    got, headers, payload = exchange(app, b"POST /v1/chat/completions HTTP/1.1\r\nHost: HOST\r\n"
                                          b"Content-Type: application/json\r\n" + AUTHORIZED + tail)
    assert (got, error_of(payload)["code"]) == (status, code)
    assert headers["connection"] == "close"
    assert time.monotonic() - started < 5  # the socket timeout is 1 s here; nothing waits on a lie
    assert exchange(app, post())[0] == 200


@pytest.mark.parametrize("raw,status", [
    (b"GARBAGE\r\n\r\n", 400), (b"\x00\xff\xfe binary junk\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n", 431),
    (b"DELETE /v1/models HTTP/1.1\r\nHost: HOST\r\n\r\n", 501),
    (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: HOST\r\n", 408),
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

    from helpers.runtime.client import embedded_client

    client = embedded_client(f"http://127.0.0.1:{app.server_address[1]}/v1", KEY)
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
    status, _, payload = exchange(app, get_health())
    health = json.loads(payload)
    assert status == 200 and health["server"] == SERVER_NAME
    assert health["queue"] == {"waiting": 0, "limit": 2, "busy": False}
    assert health["version"] and health["code"] and health["user"] and health["checkout"]


def test_a_client_that_leaves_stops_the_decoding(app):
    with socket.create_connection(app.server_address) as sock:
        sock.sendall(addressed(app, post("slow")))
        time.sleep(0.2)
    assert app.engine.cancelled.wait(5)


def get_health(host: bytes = b"HOST", extra: bytes = b"", key: bytes = AUTHORIZED) -> bytes:
    return b"GET /health HTTP/1.1\r\nHost: " + host + b"\r\n" + key + extra + b"Connection: close\r\n\r\n"


@pytest.mark.parametrize("request_bytes", [
    get_health(b"attacker.example:8765"), get_health(b"127.0.0.1"), get_health(b"localhost:1"),
    b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", get_health(b"HOST", b"Host: attacker.example\r\n"),
    post().replace(b"Host: HOST", b"Host: attacker.example"),
], ids=["rebound-name", "no-port", "other-port", "no-host", "two-hosts", "post"])
def test_a_host_that_does_not_name_this_server_is_refused(app, request_bytes):
    # A page that rebinds its own name to 127.0.0.1 sends that name as Host: /health would tell it who you are.
    status, _, payload = exchange(app, request_bytes)
    assert (status, error_of(payload)["code"]) == (421, "host_not_allowed")
    assert b"uid" not in payload


def test_the_servers_own_address_and_localhost_are_its_names(app):
    port = app.server_address[1]
    for host in (b"HOST", b"localhost:%d" % port, b"LocalHost:%d" % port):
        status, _, payload = exchange(app, get_health(host))
        assert status == 200 and json.loads(payload)["status"] == "ok"


@pytest.mark.parametrize("origin", [b"https://attacker.example", b"null", b"http://localhost:8888"])
def test_a_request_from_a_web_page_elsewhere_is_refused(app, origin):
    for request_bytes in (get_health(extra=b"Origin: " + origin + b"\r\n"),
                          post().replace(b"Host: HOST\r\n", b"Host: HOST\r\nOrigin: " + origin + b"\r\n")):
        status, _, payload = exchange(app, request_bytes)
        assert (status, error_of(payload)["code"]) == (403, "origin_not_allowed")


def test_the_servers_own_origin_is_accepted(app):
    own = b"http://localhost:%d" % app.server_address[1]
    assert exchange(app, post().replace(b"Host: HOST\r\n", b"Host: HOST\r\nOrigin: " + own + b"\r\n"))[0] == 200


@pytest.mark.parametrize("content_type", [b"text/plain", b"application/x-www-form-urlencoded", b"multipart/form-data",
                                          b"application/json; charset=latin-1", None],
                         ids=["text", "form", "multipart", "latin-1", "none"])
def test_a_body_that_is_not_declared_json_is_refused_unread(app, content_type):
    # What an HTML form can post without a preflight: text/plain, form-urlencoded, multipart.
    declared = b"" if content_type is None else b"Content-Type: " + content_type + b"\r\n"
    status, headers, payload = exchange(app, post().replace(b"Content-Type: application/json\r\n", declared))
    assert (status, error_of(payload)["code"]) == (415, "unsupported_media_type")
    assert headers["connection"] == "close"


def test_json_with_its_charset_is_accepted(app):
    declared = b"Content-Type: Application/JSON; charset=UTF-8\r\n"
    assert exchange(app, post().replace(b"Content-Type: application/json\r\n", declared))[0] == 200


def test_an_exception_while_reading_a_request_is_a_400_not_a_500(app, monkeypatch):
    def too_deep(*args):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(app_module, "parse_chat_request", too_deep)
    status, _, payload = exchange(app, post())
    assert (status, error_of(payload)["code"]) == (400, "too_deeply_nested")
    monkeypatch.setattr(app_module, "parse_chat_request", lambda *args: {}["a bug while reading"])
    status, _, payload = exchange(app, post())
    assert (status, error_of(payload)["code"]) == (400, "unreadable_request")


def test_preparations_run_at_most_two_at_once(app):
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(lambda _: exchange(app, post("long preparation"))[0], range(6)))
    assert statuses.count(200) >= 2 and set(statuses) <= {200, 429}
    assert app.engine.most_preparing == PREPARING_AT_ONCE == 2


def test_waiting_for_a_turn_to_prepare_does_not_count_against_the_preparation(app, monkeypatch):
    """Queued behind two slow preparations, a request whose own preparation fits the budget is answered, not blamed:
    its budget starts when it gets its turn."""
    monkeypatch.setattr(app_module, "PREPARE_S", 0.8)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        ahead = [pool.submit(exchange, app, post("slow preparation")) for _ in range(PREPARING_AT_ONCE)]
        time.sleep(0.1)
        queued = pool.submit(exchange, app, post("slow preparation"))
        assert [future.result()[0] for future in ahead] == [200, 200]
        status, _, payload = queued.result()
    assert status == 200, payload


def test_a_request_that_gets_no_turn_to_prepare_in_time_is_told_the_server_is_busy(app, monkeypatch):
    monkeypatch.setattr(app_module, "PREPARE_S", 0.5)
    with concurrent.futures.ThreadPoolExecutor(PREPARING_AT_ONCE) as pool:
        for _ in range(PREPARING_AT_ONCE):
            pool.submit(exchange, app, post("stuck preparation"))
        time.sleep(0.2)
        status, headers, payload = exchange(app, post())
        app.engine.released.set()
    assert (status, error_of(payload)["code"]) == (429, "server_busy") and int(headers["retry-after"]) >= 1


def test_a_preparation_that_takes_too_long_is_answered_and_others_are_still_prepared(app, monkeypatch):
    monkeypatch.setattr(app_module, "PREPARE_S", 1.0)
    status, _, payload = exchange(app, post("stuck preparation"))
    assert (status, error_of(payload)["code"]) == (400, "preparation_too_slow")
    assert exchange(app, post())[0] == 200  # the stuck one holds one of the two turns, not both


def test_requests_beyond_the_limit_are_answered_429_at_once_and_idle_connections_take_no_slot():
    """About 2 s. Five idle connections take neither of the two service slots; two slow requests take both, and a
    third is told the server is busy, and when to retry, at once (it once waited in the kernel's backlog)."""
    server = Server(0, StubEngine(), KEY, socket_timeout=5.0, quiet=True, serving=2)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    idle = [socket.create_connection(server.server_address) for _ in range(5)]
    try:
        assert exchange(server, post())[0] == 200
        holders = [threading.Thread(target=exchange, args=(server, post("slow"))) for _ in range(2)]
        for holder in holders:  # one decodes for about a second, one waits for it
            holder.start()
            time.sleep(0.1)
        started = time.monotonic()
        status, headers, payload = exchange(server, post())
        assert (status, error_of(payload)["code"]) == (429, "server_busy")
        assert "serves 2 requests at once" in error_of(payload)["message"]
        assert int(headers["retry-after"]) >= 1 and headers["x-should-retry"] == "true"
        assert time.monotonic() - started < 0.5
        for holder in holders:
            holder.join()
        assert exchange(server, post())[0] == 200  # answered, a request gives its slot back
    finally:
        for sock in idle:
            sock.close()
        server.shutdown()
        server.server_close()


def test_the_service_limit_follows_the_queue():
    # one decoding, each request the queue may hold, and those being prepared: 35 for the default queue of 32
    assert service_limit(32) == 35 and service_limit(4) == 7


@pytest.mark.parametrize("authorization", [None, b"Bearer wrong-key", b"Basic " + KEY.encode(), KEY.encode(),
                                           b"Bearer " + KEY.encode() + b"x", b"Bearer " + KEY[:-1].encode()],
                         ids=["none", "wrong", "basic", "no-scheme", "longer", "shorter"])
def test_a_request_without_the_servers_key_is_refused_401(app, authorization):
    key = b"" if authorization is None else b"Authorization: " + authorization + b"\r\n"
    for request_bytes in (get_health(key=key), post().replace(AUTHORIZED, key)):
        status, headers, payload = exchange(app, request_bytes)
        error = error_of(payload)
        assert (status, error["code"], error["type"]) == (401, "invalid_api_key", "invalid_request_error")
        assert headers["www-authenticate"].startswith("Bearer") and headers["connection"] == "close"
        assert KEY.encode() not in payload and b"uid" not in payload
    assert exchange(app, get_health())[0] == 200


def test_two_authorization_headers_are_refused(app):
    status, _, _ = exchange(app, get_health(extra=b"Authorization: Bearer other\r\n"))
    assert status == 401


def test_the_key_is_read_in_either_case_of_its_scheme(app):
    assert exchange(app, post().replace(b"Bearer", b"bearer"))[0] == 200


def test_the_default_body_cap_is_a_megabyte_and_a_larger_body_is_refused_unparsed():
    """A body over the cap is never parsed, nor kept: read and dropped up to 32 MiB, so that a client still sending it
    gets its 413; announced larger, it is refused before a byte of it is read."""
    server = Server(0, StubEngine(), KEY, socket_timeout=3.0, quiet=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        assert DEFAULT_BODY_LIMIT_MB == 1 and server.body_limit == 2**20
        over = b'{"model": "' + b"x" * 2**20 + b'"}'
        status, _, payload = exchange(server, post().replace(body(), over).replace(
            b"Content-Length: %d" % len(body()), b"Content-Length: %d" % len(over)))
        assert (status, error_of(payload)["code"]) == (413, "body_too_large")
        started = time.monotonic()
        announced = post().replace(b"Content-Length: ", b"Content-Length: %d\r\nX-Was: " % (64 * 2**20))
        status, _, payload = exchange(server, announced)  # the body it announces never comes: nobody waits for it
        assert (status, error_of(payload)["code"]) == (413, "body_too_large")
        assert time.monotonic() - started < 2
    finally:
        server.shutdown()
        server.server_close()


def test_more_messages_than_the_limit_are_refused_before_the_request_models_read_them(app, monkeypatch):
    from helpers.server import protocol

    def never(*args, **kwargs):
        raise AssertionError("the request models read the request")

    data = json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "a"}] * (MAX_MESSAGES + 1)})
    app.body_limit = 2**20
    monkeypatch.setattr(protocol.ChatCompletionRequest, "model_validate", never)
    status, _, payload = exchange(app, post().replace(body(), data.encode()).replace(
        b"Content-Length: %d" % len(body()), b"Content-Length: %d" % len(data)))
    error = error_of(payload)
    assert (status, error["code"], error["param"]) == (400, "too_many_messages", "messages")


def test_a_request_whose_deadline_passes_in_the_queue_is_answered_504(app):
    holder = threading.Thread(target=exchange, args=(app, post("slow")))  # holds the model for about a second
    holder.start()
    time.sleep(0.2)
    status, headers, payload = exchange(app, post("late", x_deadline_s=0.3))
    error = error_of(payload)
    assert (status, error["code"], error["param"]) == (504, "deadline_exceeded", "x_deadline_s")
    assert headers["x-should-retry"] == "false" and "retry-after" not in headers
    holder.join()


def test_a_health_check_whose_client_left_is_not_logged_as_a_dropped_request(app, monkeypatch, capsys):
    """A client that gives up on /health before its answer (a check while the model loads) dropped no work; a
    completion's client that leaves did."""
    app.quiet = False

    def client_left(self):
        raise BrokenPipeError(32, "Broken pipe")

    def until_closed(data: bytes) -> str:
        with socket.create_connection(app.server_address, timeout=10) as sock:
            sock.sendall(addressed(app, data))
            while sock.recv(65536):
                pass
        return capsys.readouterr().err

    monkeypatch.setattr(app_module.Handler, "answer_get", client_left)
    monkeypatch.setattr(app_module.Handler, "answer_post", client_left)
    assert "client gone" not in until_closed(get_health())
    assert "client gone (BrokenPipeError): request dropped" in until_closed(post())
