"""UDP datagrams a network held through a drop never run after the host reconnects.

A field radio that loses its link buffers the host's datagrams and releases them
when the link is back, in whatever order. The wire has no sequence number, so
the robot can only tell an old command from a new one by where it comes from:
the host reconnects from a new source port (``bcnp.host.link.dial``) and the robot
refuses whatever still comes from the old one (``stale_datagrams``).

Here the robot is the real :class:`~bcnp.transport.UdpServer` on an injected
clock, the host the real :class:`~bcnp.host.link.client.Client` on another, and
between them :class:`HoldingLink`, a relay on loopback that keeps each host port
as a radio does, holds what the host sends while the test says so, and then
releases the held handshakes ahead of the held commands.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from collections.abc import Iterator

import pytest
from support import FakeClock, drive_packet, serve_robot, wait_until

import bcnp
from bcnp import encode_handshake
from bcnp.connection import is_handshake_datagram
from bcnp.host.link.client import Client
from bcnp.host.link.core.state import LinkState, ReconnectPolicy
from bcnp.transport import UdpServer

Address = tuple[str, int]


class HoldingLink:
    """A relay: each host source gets its own socket towards the robot (the robot sees
    one port per host port, as through a radio), replies go back to that host port.
    :meth:`hold` keeps every host datagram and drops the robot's; :meth:`release`
    sends the held ones, handshakes first, and forwards again."""

    def __init__(self, robot: Address) -> None:
        self.robot = robot
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.addr: Address = self.sock.getsockname()
        self.upstream: dict[Address, socket.socket] = {}
        self.held: list[tuple[Address, bytes]] = []
        self.holding = False
        self._lock = threading.Lock()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.sock, selectors.EVENT_READ, None)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _up(self, source: Address) -> socket.socket:
        up = self.upstream.get(source)
        if up is None:
            up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            up.bind(("127.0.0.1", 0))
            up.connect(self.robot)
            self.upstream[source] = up
            self._sel.register(up, selectors.EVENT_READ, source)
        return up

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(0.05):
                try:
                    data, source = key.fileobj.recvfrom(65_536)  # type: ignore[union-attr]
                except OSError:
                    continue
                with self._lock:
                    if key.data is None:  # from a host
                        if self.holding:
                            self.held.append((source, data))
                        else:
                            self._up(source).send(data)
                    elif not self.holding:  # from the robot, back to its host
                        self.sock.sendto(data, key.data)

    def hold(self) -> None:
        with self._lock:
            self.holding = True

    def held_handshakes(self) -> set[int]:
        """The host ports whose handshakes are held."""
        with self._lock:
            return {source[1] for source, data in self.held if is_handshake_datagram(data)}

    def release(self) -> None:
        with self._lock:
            held, self.held, self.holding = self.held, [], False
            ordered = [h for h in held if is_handshake_datagram(h[1])] + [
                h for h in held if not is_handshake_datagram(h[1])
            ]
            for source, data in ordered:
                self._up(source).send(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sel.close()
        for up in self.upstream.values():
            up.close()
        self.sock.close()


@pytest.fixture
def held(schema: bcnp.Schema) -> Iterator[tuple[object, HoldingLink, Client, FakeClock]]:
    robot = serve_robot(schema, UdpServer)
    link = HoldingLink(robot.addr)
    host_clock = FakeClock()
    policy = ReconnectPolicy(initial_backoff=0.1, max_backoff=0.1, jitter=0.0, silence_timeout=0.5)
    client = Client(
        schema,
        *link.addr,
        udp=True,
        keepalive_interval=None,
        reconnect=policy,
        clock=host_clock,
        timeout=10.0,
    )
    try:
        yield robot, link, client, host_clock
    finally:
        client.close()
        link.close()
        robot.server.close()


def lose_the_link_while_holding(
    robot: object, link: HoldingLink, client: Client, host_clock: FakeClock
) -> int:
    """Connect, run one command, hold the link with a second command in it, let both
    ends find the loss on their clocks and the host dial again (held too). Returns the
    host's first source port."""
    schema = client.schema
    client.connect()
    first_port = int(client.local_address.rsplit(":", 1)[1])  # type: ignore[union-attr]
    wait_until(lambda: robot.server.handshaken, what="the pairing")  # type: ignore[attr-defined]
    robot.server.send(bcnp.encode_packet(schema["DrivetrainTelemetry"], []))  # type: ignore[attr-defined]
    client.link.send_packets([drive_packet(schema, 1)])
    wait_until(lambda: client.link.telemetry_packets == 1 and len(robot.packets) == 1, what="both ways")  # type: ignore[attr-defined]
    link.hold()
    client.link.send_packets([drive_packet(schema, 2)])  # sent before anyone noticed: the radio keeps it
    wait_until(lambda: len(link.held) == 1, what="the held command")
    robot.clock.advance(0.3)  # type: ignore[attr-defined]  # the robot's 0.2 s link timeout
    wait_until(lambda: robot.server.counters.link_losses == 1, what="the robot's link loss")  # type: ignore[attr-defined]
    host_clock.advance(1.0)  # the host's 0.5 s telemetry silence
    wait_until(lambda: client.status().state is not LinkState.CONNECTED, what="the host's loss")
    host_clock.advance(0.2)  # past its backoff
    wait_until(lambda: link.held_handshakes(), what="the host's new handshake, held")
    return first_port


def test_a_held_command_never_starts_after_the_host_handshakes_again(held, caplog) -> None:  # type: ignore[no-untyped-def]
    robot, link, client, host_clock = held
    caplog.set_level(logging.INFO, "bcnp")
    first_port = lose_the_link_while_holding(robot, link, client, host_clock)
    assert first_port not in link.held_handshakes()  # the host dials from a new port
    link.release()  # the new handshake overtakes the old command
    assert client.wait_connected(10)
    client.link.send_packets([drive_packet(client.schema, 3)])
    wait_until(lambda: any(p.count == 3 for p in robot.packets), what="the new command")
    assert [p.count for p in robot.packets] == [1, 3]  # the held command (2) never reached the queue
    counters = robot.server.counters
    wait_until(lambda: counters.stale_datagrams == 1, what="the held command refused")
    assert counters.controllers == 2 and counters.foreign_datagrams == 0
    assert "from an earlier controller" in robot.server.status().last_reject


def test_a_client_that_keeps_its_port_is_paired_again_and_warned(schema: bcnp.Schema, caplog) -> None:  # type: ignore[no-untyped-def]
    """A client with one socket (the reference's) still pairs again after a loss, as with
    the reference robot; the robot cannot tell its held datagrams from new ones, so it
    counts the pairing and says so once."""
    robot = serve_robot(schema, UdpServer)
    caplog.set_level(logging.WARNING, "bcnp")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(5)
            sock.connect(robot.addr)
            sock.send(encode_handshake(schema.hash))  # a handshake only: nothing it sent can be held
            assert sock.recv(100) == encode_handshake(schema.hash)
            robot.clock.advance(5.1)
            wait_until(lambda: robot.server.counters.idle_drops == 1)
            for n in (1, 2):
                sock.send(encode_handshake(schema.hash))
                assert sock.recv(100) == encode_handshake(schema.hash)
                sock.send(drive_packet(schema, n))
                wait_until(lambda n=n: len(robot.packets) == n)
                robot.clock.advance(0.3)
                wait_until(lambda n=n: robot.server.counters.link_losses == n)
        counters = robot.server.counters
        assert counters.controllers == 3 and counters.same_port_pairings == 1
        warnings = [r.getMessage() for r in caplog.records if "same source port" in r.getMessage()]
        assert len(warnings) == 1, warnings
    finally:
        robot.server.close()
