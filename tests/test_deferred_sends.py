"""Deferred sends (``defer_sends``): send() only queues; the receive thread writes after flush_sends().

The robot queues its telemetry during a tick and flushes after it, so no network
write runs in the robot loop. Real sockets on loopback, both transports.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from support import FakeClock, recv_exactly, wait_until

import bcnp
from bcnp import Dispatcher, encode_handshake, encode_packet
from bcnp.connection import MAX_DATAGRAM
from bcnp.transport import TcpServer, TransportConfig, UdpServer

Server = TcpServer | UdpServer


class Hold:
    """The receive thread's pause: while closed, it waits at its next safe point (before
    a read, a packet, or writing what was queued), as it does while a robot tick runs."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()

    def __call__(self) -> None:
        self._open.wait(10)

    def close(self) -> None:
        self._open.clear()

    def open(self) -> None:
        self._open.set()


@contextmanager
def deferred(
    kind: type[Server], schema: bcnp.Schema, hold: Hold | None = None, **config: object
) -> Iterator[Server]:
    # A long poll interval: the receive thread wakes only for a peer's bytes or a flush.
    cfg = TransportConfig(host="127.0.0.1", port=0, poll_interval=30.0, **config)  # type: ignore[arg-type]
    server = kind(Dispatcher(schema), cfg, clock=FakeClock(), pause=hold, defer_sends=True)
    server.start()
    try:
        yield server
    finally:
        server.close()


def controller(server: Server, schema: bcnp.Schema) -> socket.socket:
    """A peer that completed the handshake and owns the server."""
    hello = encode_handshake(schema.hash)
    if isinstance(server, TcpServer):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        assert recv_exactly(sock, 8) == hello
        sock.sendall(hello)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(5)
        sock.connect(("127.0.0.1", server.port))
        sock.send(hello)
        assert sock.recv(100) == hello
    wait_until(lambda: server.status().handshaken, what="the handshake")
    return sock


def receive(sock: socket.socket, size: int) -> bytes:
    if sock.type == socket.SOCK_STREAM:
        return recv_exactly(sock, size)
    return sock.recv(MAX_DATAGRAM)


def telemetry_packet(schema: bcnp.Schema, first: int, count: int) -> bytes:
    spec = schema["DrivetrainTelemetry"]
    return encode_packet(spec, [spec(0.5, -0.5, 0.25, -0.25, first + i) for i in range(count)])


@pytest.mark.parametrize("kind", [TcpServer, UdpServer], ids=["tcp", "udp"])
def test_a_deferred_send_is_written_by_the_receive_thread_after_the_flush(
    kind: type[Server], schema: bcnp.Schema
) -> None:
    hold = Hold()
    with deferred(kind, schema, hold) as server, controller(server, schema) as sock:
        written = server.counters.bytes_out
        packets = [telemetry_packet(schema, 100 * k, 3) for k in range(3)]
        hold.close()  # a tick runs: the receive thread writes nothing meanwhile
        assert all(server.send(p) for p in packets)
        # send() itself wrote nothing: without defer_sends it writes in the caller's thread.
        assert server.counters.bytes_out == written
        hold.open()
        server.flush_sends()
        for packet in packets:  # intact and in order
            assert receive(sock, len(packet)) == packet
        total = sum(map(len, packets))
        wait_until(lambda: server.counters.bytes_out == written + total, what="the bytes counted")
        assert server.status().packets_out == 3
        assert server.status().send_refused == 0 and server.status().send_failures == 0
        # Nothing queued: a flush is free and sends nothing more.
        server.flush_sends()
        assert server.send(packets[0])
        server.flush_sends()
        assert receive(sock, len(packets[0])) == packets[0]


@pytest.mark.parametrize("kind", [TcpServer, UdpServer], ids=["tcp", "udp"])
def test_deferred_sends_are_refused_beyond_the_send_buffer_limit_until_flushed(
    kind: type[Server], schema: bcnp.Schema
) -> None:
    packet = telemetry_packet(schema, 0, 20)  # 11 + 20 x 20 bytes
    limit = 2 * len(packet) + 10
    hold = Hold()
    with deferred(kind, schema, hold, send_buffer_limit=limit) as server, controller(server, schema) as sock:
        hold.close()  # nothing is written until the flush
        assert server.send(packet) and server.send(packet)
        assert not server.send(packet)  # a third would pass the limit: refused, counted
        assert server.status().send_refused == 1
        hold.open()
        server.flush_sends()
        assert receive(sock, len(packet)) == packet
        assert receive(sock, len(packet)) == packet
        wait_until(lambda: server.counters.bytes_out >= 2 * len(packet), what="the queue written")
        assert server.send(packet)  # room again
        server.flush_sends()
        assert receive(sock, len(packet)) == packet


@pytest.mark.parametrize("kind", [TcpServer, UdpServer], ids=["tcp", "udp"])
def test_a_deferred_send_without_a_controller_is_refused(kind: type[Server], schema: bcnp.Schema) -> None:
    with deferred(kind, schema) as server:
        assert not server.send(telemetry_packet(schema, 0, 1))
        server.flush_sends()
        assert server.status().send_failures == 1 and server.status().packets_out == 0


def test_a_deferred_packet_larger_than_the_limit_goes_onto_an_empty_buffer(schema: bcnp.Schema) -> None:
    """As without deferral: the largest packet can always be sent (TCP)."""
    spec = schema["DrivetrainTelemetry"]
    big = encode_packet(spec, [spec(i / 8, -i / 8, i / 16, -i / 16, i) for i in range(65_535)])
    hold = Hold()
    with deferred(TcpServer, schema, hold) as server, controller(server, schema) as sock:
        assert len(big) > server.config.send_buffer_limit
        hold.close()
        assert server.send(big)
        assert not server.send(telemetry_packet(schema, 0, 1))  # the buffer is over its limit now
        hold.open()
        server.flush_sends()
        assert recv_exactly(sock, len(big), timeout=10) == big
