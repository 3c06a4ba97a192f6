"""Who is connected, and how many connections each may hold open.

Every user of the machine can reach 127.0.0.1, and a connection costs the server a thread before it has sent a byte,
let alone the key. So the connections one peer holds open are capped (PER_PEER), and so are those of all peers
but the server's own user together (OTHERS): another user fills neither the server's service slots, which only a
request with the key takes, nor its owner's share of the connections.

On loopback the address names no one (it is always 127.0.0.1), so a peer is the user that owns the other end of
the connection: on Linux the `uid` column of the client socket's line in /proc/net/tcp or /proc/net/tcp6 (the line
whose local address is the connection's remote address). Where that cannot be read (macOS has no /proc, and a
client that has already closed has no line), the peer is `None`, one bucket shared by all of them: on macOS
another user can then keep the owner from connecting while it holds PER_PEER connections open, though never from
being served once connected.
"""
from __future__ import annotations

import ipaddress
import os
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable, Hashable

# A user's own programs need no more than the 35 requests the server serves at once and some kept-alive connections;
# four other users at their cap fill OTHERS, whose threads and head buffers (HEAD_BYTES each) stay small, and well
# under a process's usual limit of 1,024 open files.
PER_PEER = 64
OTHERS = 256
PROC_TCP = ("/proc/net/tcp", "/proc/net/tcp6")
TIME_WAIT = "06"  # such a line belongs to no process: its uid is 0


class TooManyConnections(Exception):
    pass


def peer_uid(connection: socket.socket) -> int | None:
    """The uid that owns the other end of `connection`, a TCP connection within this machine; None when unknown."""
    try:
        client = connection.getpeername()
        server = connection.getsockname()
    except OSError:
        return None
    if not isinstance(client, tuple):
        return None
    client_end, server_end = endpoint(*client[:2]), endpoint(*server[:2])
    ports = f":{client[1]:04X}", f":{server[1]:04X}"  # compared first: decoding every address is slow
    for table in PROC_TCP:
        try:
            with open(table, encoding="ascii") as lines:
                next(lines, None)  # the column names
                for line in lines:
                    fields = line.split()
                    if (len(fields) > 7 and fields[1].endswith(ports[0]) and fields[2].endswith(ports[1])
                            and fields[3] != TIME_WAIT and read_endpoint(fields[1]) == client_end
                            and read_endpoint(fields[2]) == server_end):
                        return int(fields[7])
        except (OSError, ValueError):
            continue
    return None


def endpoint(host: str, port: int) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    address = ipaddress.ip_address(host.partition("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped  # an IPv6 socket's view of 127.0.0.1
    return address, port


def read_endpoint(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """An address as /proc/net/tcp writes it: the address as 32-bit words in the machine's byte order, the port in
    hexadecimal."""
    host, _, port = text.partition(":")
    packed = b"".join(struct.pack("=I", int(host[i:i + 8], 16)) for i in range(0, len(host), 8))
    return endpoint(str(ipaddress.ip_address(packed)), int(port, 16))


class Peers:
    """The connections each peer holds open, admitted under PER_PEER each and OTHERS for all but the owner."""

    def __init__(self, peer_of: Callable[[socket.socket], Hashable] = peer_uid, per_peer: int = PER_PEER,
                 others: int = OTHERS, owner: Hashable = os.getuid() if hasattr(os, "getuid") else object()):
        self.peer_of, self.per_peer, self.others, self.owner = peer_of, per_peer, others, owner
        self.open: Counter[Hashable] = Counter()
        self.lock = threading.Lock()

    def admit(self, connection: socket.socket) -> Hashable:
        """The peer of a new connection, counted until `leave`; `TooManyConnections` when it may not hold one more."""
        peer = self.peer_of(connection)
        with self.lock:
            if self.open[peer] >= self.per_peer:
                raise TooManyConnections(f"this user holds {self.open[peer]} connections open to the server already")
            if peer != self.owner and sum(self.open.values()) - self.open[self.owner] >= self.others:
                raise TooManyConnections(f"other users hold {self.others} connections open to the server already")
            self.open[peer] += 1
        return peer

    def leave(self, peer: Hashable) -> None:
        with self.lock:
            self.open[peer] -= 1
            if not self.open[peer]:
                del self.open[peer]
