"""Clients that trickle their request, or hold many connections, on a stub engine: no model needed.

The review's finding (issue 47): 60 connections that sent their request head a byte every few seconds, never with
the key, held every slot of the server, and its owner's own `/health` timed out. Each test here takes a few
seconds at most; `test_hostile_http.py` repeats the essential one on the real server.
"""
import http.client
import json
import socket
import threading
import time

from helpers.server import app as app_module
from helpers.server.app import Server
from helpers.server.peers import Peers
from test_app import KEY, StubEngine, addressed, error_of, exchange, get_health, post
from test_request_queue import wait_until  # pytest puts tests/server/ on the path

KEYLESS_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: HOST\r\nContent-Type: application/json\r\n"


def started(server: Server) -> Server:
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


def stopped(server: Server) -> None:
    server.shutdown()
    server.server_close()


class Tricklers:
    """Connections to `address` that each send `head` one byte at a time, every `every` seconds, until closed."""

    def __init__(self, address: tuple[str, int], head: bytes, count: int, every: float):
        self.head = head
        self.opened_at: list[float] = []
        self.sockets: list[socket.socket] = []
        for _ in range(count):
            self.sockets.append(socket.create_connection(address, timeout=10))
            self.opened_at.append(time.monotonic())
        self.every, self.stop = every, threading.Event()
        self.thread = threading.Thread(target=self.trickle, daemon=True)
        self.thread.start()

    def trickle(self) -> None:
        for byte in self.head:
            for sock in self.sockets:
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    pass  # this one was cut
            if self.stop.wait(self.every):
                return

    def none_answered(self) -> bool:
        """Whether every trickler is still held open, unanswered."""
        for sock in self.sockets:
            sock.setblocking(False)
            try:
                if sock.recv(1, socket.MSG_PEEK):
                    return False
            except BlockingIOError:
                pass
            finally:
                sock.settimeout(10)
        return True

    def answers(self) -> list[tuple[int, float]]:
        """Each connection's status and when it came, in seconds from its opening."""
        answers = []
        for sock, opened in zip(self.sockets, self.opened_at):
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            answers.append((int(answer.split(b" ", 2)[1]), time.monotonic() - opened))
            assert error_of(answer.partition(b"\r\n\r\n")[2])["code"] == "http_error"
        return answers

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for sock in self.sockets:
            sock.close()


def timed(server: Server, data: bytes) -> tuple[int, float]:
    begun = time.monotonic()
    status = exchange(server, data, wait=5)[0]
    return status, time.monotonic() - begun


def test_sixty_trickling_keyless_clients_do_not_keep_the_owner_waiting():
    """About 3 s. The owner's /health and a completion, with the key, are answered at once while 60 keyless clients
    trickle their heads; then each trickler is cut at the head's deadline, with a 408."""
    server = started(Server(0, StubEngine(), KEY, socket_timeout=1.0, head_timeout=2.0, quiet=True))
    tricklers = Tricklers(server.server_address, addressed(server, KEYLESS_HEAD), 60, every=0.25)
    try:
        time.sleep(0.5)
        health, health_s = timed(server, get_health())
        completion, completion_s = timed(server, post("hello"))
        assert (health, completion) == (200, 200)
        assert health_s < 1 and completion_s < 1, (health_s, completion_s)
        assert tricklers.none_answered(), "the tricklers were cut before the owner was served"
        answers = tricklers.answers()
        assert {status for status, _ in answers} == {408}
        assert all(1.9 < seconds < 3.5 for _, seconds in answers), answers
    finally:
        tricklers.close()
        stopped(server)


def test_a_head_is_cut_at_its_deadline_however_steadily_it_trickles():
    """About 3 s. Each read keeps within the socket timeout, yet the head is cut at the head's deadline: counted from
    the opening, or from the previous answer on a kept-alive connection. A connection that sent nothing is closed
    without an answer."""
    server = started(Server(0, StubEngine(), KEY, socket_timeout=2.0, head_timeout=1.0, quiet=True))
    try:
        tricklers = Tricklers(server.server_address, addressed(server, KEYLESS_HEAD), 1, every=0.2)
        try:
            [(status, seconds)] = tricklers.answers()
        finally:
            tricklers.close()
        assert status == 408 and 0.9 < seconds < 1.6, seconds

        with socket.create_connection(server.server_address, timeout=5) as kept:
            kept.sendall(addressed(server, get_health().replace(b"Connection: close\r\n", b"")))
            first = http.client.HTTPResponse(kept)
            first.begin()
            assert first.status == 200 and not first.will_close and json.loads(first.read())["status"] == "ok"
            answered = time.monotonic()
            for byte in addressed(server, KEYLESS_HEAD)[:5]:
                kept.sendall(bytes([byte]))
                time.sleep(0.3)
            second = kept.recv(65536)
            assert second.startswith(b"HTTP/1.1 408") and b"took over 1 s" in second
            assert 0.9 < time.monotonic() - answered < 1.8

        with socket.create_connection(server.server_address, timeout=5) as silent:
            opened = time.monotonic()
            assert silent.recv(65536) == b""
            assert 0.9 < time.monotonic() - opened < 1.6
    finally:
        stopped(server)


def test_a_head_over_its_size_cap_is_refused_431(monkeypatch):
    """Instant. A head is read up to HEAD_BYTES and no further, however many header lines http.server would take."""
    monkeypatch.setattr(app_module, "HEAD_BYTES", 4096)
    server = started(Server(0, StubEngine(), KEY, socket_timeout=2.0, quiet=True))
    try:
        status, _, payload = exchange(server, get_health(extra=b"X-Filler: " + b"x" * 3000 + b"\r\n"))
        assert status == 200
        status, _, payload = exchange(server, get_health(extra=(b"X-Filler: " + b"x" * 3000 + b"\r\n") * 2))
        assert status == 431 and "over 4096 bytes" in error_of(payload)["message"]
    finally:
        stopped(server)


class ByPort:
    """A stand-in for the peer's user: whichever peer the test bound the client's port for, else the owner."""

    def __init__(self):
        self.peers: dict[int, str] = {}

    def __call__(self, connection: socket.socket) -> str:
        return self.peers.get(connection.getpeername()[1], "owner")

    def connect(self, server: Server, peer: str) -> socket.socket:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.peers[sock.getsockname()[1]] = peer
        sock.settimeout(5)
        sock.connect(server.server_address)
        return sock


def turned_away(sock: socket.socket) -> bool:
    """Whether the connection was answered 429 `too_many_connections` without sending a byte."""
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    return (head.startswith(b"HTTP/1.1 429") and b"Retry-After: " in head
            and json.loads(payload)["error"]["code"] == "too_many_connections")


def test_one_user_at_its_cap_does_not_keep_another_out():
    """Instant. A peer holding its cap of open connections is turned away at once with a 429 (and gets room again
    when one closes); another peer is still admitted and served."""
    by_port = ByPort()
    server = started(Server(0, StubEngine(), KEY, socket_timeout=5.0, quiet=True,
                            peers=Peers(by_port, per_peer=3, owner="owner")))
    held = [by_port.connect(server, "classmate") for _ in range(3)]
    try:
        with by_port.connect(server, "classmate") as one_more:
            assert turned_away(one_more)
        assert exchange(server, post("hello"))[0] == 200
        held.pop().close()
        wait_until(lambda: server.peers.open["classmate"] == 2, 5, "a closed connection still counts")
        held.append(by_port.connect(server, "classmate"))
        wait_until(lambda: server.peers.open["classmate"] == 3, 5, "a connection under the cap was not admitted")
    finally:
        for sock in held:
            sock.close()
        stopped(server)


def test_other_users_together_cannot_keep_the_owner_out():
    """Instant. Other peers share a cap of open connections; the owner's own are not counted in it."""
    by_port = ByPort()
    server = started(Server(0, StubEngine(), KEY, socket_timeout=5.0, quiet=True,
                            peers=Peers(by_port, per_peer=2, others=3, owner="owner")))
    held = [by_port.connect(server, peer) for peer in ("a", "a", "b")]
    try:
        with by_port.connect(server, "c") as fourth:
            assert turned_away(fourth)
        assert exchange(server, post("hello"))[0] == 200
    finally:
        for sock in held:
            sock.close()
        stopped(server)

