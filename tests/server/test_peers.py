"""Telling a connection's user apart on loopback, and the caps on connections per user: each test instant."""
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers.server import peers as peers_module
from helpers.server.peers import Peers, TooManyConnections, peer_uid

LINUX = Path("/proc/net/tcp").exists()


@contextmanager
def accepted(family: int = socket.AF_INET, host: str = "127.0.0.1") -> Iterator[socket.socket]:
    """The server's end of a connection made from this process to a listener on 127.0.0.1."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.socket(family) as client:
            client.connect((host, listener.getsockname()[1]))
            connection, _ = listener.accept()
            with connection:
                yield connection


@pytest.mark.skipif(not LINUX, reason="no /proc/net/tcp here: every peer is one bucket")
def test_a_connection_from_this_process_is_its_users():
    with accepted() as connection:
        assert peer_uid(connection) == os.getuid()


@pytest.mark.skipif(not LINUX or not socket.has_ipv6, reason="needs /proc/net/tcp6 and IPv6")
def test_an_ipv6_client_of_the_ipv4_address_is_found_in_tcp6():
    try:
        with accepted(socket.AF_INET6, "::ffff:127.0.0.1") as connection:
            assert peer_uid(connection) == os.getuid()
    except OSError as exc:
        pytest.skip(f"no IPv6 socket here: {exc}")


@pytest.mark.skipif(not LINUX or os.geteuid() != 0, reason="needs /proc/net/tcp and root, to connect as another user")
def test_the_uid_is_the_clients_not_the_servers():
    """Instant: a child process connects as `nobody` (65534)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        # bash, not this Python: `nobody` may not be allowed to run the virtual environment's
        child = subprocess.Popen(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{listener.getsockname()[1]}; read"],
                                 stdin=subprocess.PIPE, cwd="/", user=65534)
        try:
            listener.settimeout(10)
            connection, _ = listener.accept()
            with connection:
                assert peer_uid(connection) == 65534
        finally:
            child.communicate(b"", timeout=10)


def test_a_peer_that_cannot_be_read_is_none(monkeypatch):
    left, right = socket.socketpair()
    with left, right:
        assert peer_uid(left) is None  # not a TCP connection
    monkeypatch.setattr(peers_module, "PROC_TCP", ("/nonexistent/tcp",))  # macOS, say
    with accepted() as connection:
        assert peer_uid(connection) is None


def test_each_peer_has_its_cap_and_the_others_share_one_the_owner_is_not_counted_in():
    peers = Peers(lambda name: name, per_peer=2, others=3, owner="owner")
    assert [peers.admit(name) for name in ("a", "a", "b")] == ["a", "a", "b"]
    with pytest.raises(TooManyConnections, match="this user holds 2"):
        peers.admit("a")
    with pytest.raises(TooManyConnections, match="other users hold 3"):
        peers.admit("c")
    assert [peers.admit("owner") for _ in range(2)] == ["owner", "owner"]
    with pytest.raises(TooManyConnections, match="this user holds 2"):
        peers.admit("owner")
    peers.leave("b")
    assert peers.admit("c") == "c"
