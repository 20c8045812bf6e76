"""UdpServer on real loopback sockets: pairing, peer lock, unlock, sending."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from support import ServedRobot, drive_packet, open_fds, serve_robot, wait_until

import bcnp
from bcnp import Dispatcher, encode_handshake, encode_packet
from bcnp.transport import MAX_DATAGRAM, TransportConfig, UdpServer


class Robot(ServedRobot):
    def peer(self) -> socket.socket:
        """A UDP socket on its own port, aimed at the robot."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(5)
        sock.connect(self.addr)
        return sock

    def pair(self) -> socket.socket:
        sock = self.peer()
        sock.send(encode_handshake(self.schema.hash))
        assert sock.recv(100) == encode_handshake(self.schema.hash)
        return sock


def make_robot(schema: bcnp.Schema, **config: object) -> Robot:
    return serve_robot(schema, UdpServer, Robot, **config)


@pytest.fixture
def robot(schema: bcnp.Schema) -> Iterator[Robot]:
    r = make_robot(schema)
    yield r
    r.server.close()


def test_handshake_pairs_locks_and_is_answered(robot: Robot) -> None:
    with robot.pair() as sock:
        status = robot.server.status()
        assert status.handshaken and status.transport == "udp" and status.controllers == 1
        assert status.peer == f"127.0.0.1:{sock.getsockname()[1]}"
        assert status.remote_hash == robot.schema.hash
        sock.send(drive_packet(robot.schema))
        wait_until(lambda: len(robot.packets) == 1)
        assert robot.queue.last_receive_time == pytest.approx(robot.clock())


def test_datagrams_before_pairing_are_dropped_never_parsed(robot: Robot) -> None:
    with robot.peer() as sock:
        sock.send(drive_packet(robot.schema))  # a valid packet, but no handshake yet
        sock.send(b"BCNP")  # too short to be a handshake
        sock.send(encode_handshake(robot.schema.hash) + b"\0")  # too long
        sock.send(b"XXXX" + robot.schema.hash.to_bytes(4, "big"))  # wrong magic
        wait_until(lambda: robot.server.status().unpaired_datagrams == 4)
    status = robot.server.status()
    assert not status.handshaken and status.handshake_rejects == 0
    assert robot.server.counters.bytes_in == 0


def test_wrong_hash_is_rejected_but_answered_with_our_hash(
    robot: Robot, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bcnp.transport")
    with robot.peer() as sock:
        sock.send(encode_handshake(0x12345678))
        assert sock.recv(100) == encode_handshake(robot.schema.hash)
        sock.send(drive_packet(robot.schema))
        wait_until(lambda: robot.server.status().unpaired_datagrams == 1)
    status = robot.server.status()
    assert status.handshake_rejects == 1 and not status.handshaken
    assert status.remote_hash == 0x12345678
    assert "0x12345678" in status.last_reject and f"0x{robot.schema.hash:08X}" in status.last_reject
    assert any("0x12345678" in r.getMessage() for r in caplog.records)
    assert robot.server.counters.bytes_in == 0


def test_foreign_sources_are_ignored_while_locked(robot: Robot) -> None:
    with robot.pair() as owner, robot.peer() as intruder:
        intruder.send(encode_handshake(robot.schema.hash))
        intruder.send(drive_packet(robot.schema, 7, flags=bcnp.CLEAR_QUEUE))
        wait_until(lambda: robot.server.status().foreign_datagrams == 2)
        intruder.settimeout(0.2)
        with pytest.raises(TimeoutError):
            intruder.recv(100)  # no answer to a second peer
        owner.send(drive_packet(robot.schema, 2))
        wait_until(lambda: len(robot.packets) == 1)
    assert robot.packets[0].count == 2 and robot.server.counters.parse_errors == 0
    assert robot.server.status().controllers == 1


def test_handshake_from_the_locked_peer_is_answered_not_parsed(robot: Robot) -> None:
    with robot.pair() as sock:
        robot.clock.advance(3.0)
        sock.send(encode_handshake(robot.schema.hash))
        assert sock.recv(100) == encode_handshake(robot.schema.hash)
        robot.clock.advance(3.0)  # 6 s since pairing but 3 s since the re-handshake
        time.sleep(0.1)
        assert robot.server.status().handshaken
    assert robot.server.counters.bytes_in == 0
    assert robot.server.status().controllers == 1


def test_one_datagram_may_hold_several_packets(robot: Robot) -> None:
    with robot.pair() as sock:
        sock.send(
            drive_packet(robot.schema, 1) + drive_packet(robot.schema, 2) + drive_packet(robot.schema, 3)
        )
        wait_until(lambda: len(robot.packets) == 3)
    assert [p.count for p in robot.packets] == [1, 2, 3]


def test_silent_peer_is_unlocked_and_another_can_pair(schema: bcnp.Schema) -> None:
    """Paired, then not one packet: no link to lose, so the idle timeout applies."""
    robot = make_robot(schema, idle_timeout=1.0)
    try:
        first = robot.pair()
        robot.clock.advance(0.9)
        time.sleep(0.1)
        assert robot.server.status().handshaken
        robot.clock.advance(0.2)
        wait_until(lambda: not robot.server.status().handshaken)
        assert robot.server.status().idle_drops == 1
        with robot.pair() as second:
            assert robot.server.status().controllers == 2
            second.send(drive_packet(schema, 4))
            wait_until(lambda: len(robot.packets) == 1)
            first.send(drive_packet(schema, 5))  # the old peer's datagrams are stale now
            wait_until(lambda: robot.server.status().stale_datagrams == 1)
            assert robot.server.status().foreign_datagrams == 0
        first.close()
        assert [p.count for p in robot.packets] == [4]
    finally:
        robot.server.close()


def test_after_a_link_loss_the_peer_must_handshake_again(schema: bcnp.Schema) -> None:
    """No packet for 200 ms: the peer is unlocked. What it sends afterwards is dropped and
    counted, never parsed, until its next handshake, which pairs it again."""
    robot = make_robot(schema, poll_interval=60.0)  # no polls: the late datagram finds the loss
    try:
        with robot.pair() as sock:
            sock.send(drive_packet(schema, 1))
            wait_until(lambda: len(robot.packets) == 1)
            robot.clock.advance(0.2)
            sock.send(drive_packet(schema, 2))  # exactly the link timeout: not over
            wait_until(lambda: len(robot.packets) == 2)
            robot.clock.advance(0.3)
            late = drive_packet(schema, 3)
            sock.send(late)
            wait_until(lambda: robot.server.counters.link_losses == 1, what="the link loss")
            status = robot.server.status()
            assert not status.handshaken and status.discarded_bytes == len(late)
            assert status.last_drop == (
                f"127.0.0.1:{sock.getsockname()[1]}: link lost: no packet for 0.300 s (link timeout 0.2 s)"
            )
            for n in (4, 5):
                sock.send(drive_packet(schema, n))
            wait_until(lambda: robot.server.counters.unpaired_datagrams == 2)
            assert [p.count for p in robot.packets] == [1, 2]
            assert robot.server.counters.bytes_in == sum(len(drive_packet(schema, n)) for n in (1, 2))
            sock.send(encode_handshake(schema.hash))  # the same peer, a new handshake: a new link
            assert sock.recv(100) == encode_handshake(schema.hash)
            sock.send(drive_packet(schema, 6))
            wait_until(lambda: len(robot.packets) == 3)
            status = robot.server.status()
            assert status.handshaken and status.controllers == 2 and status.link_losses == 1
        assert [p.count for p in robot.packets] == [1, 2, 6]
    finally:
        robot.server.close()


def test_telemetry_goes_to_the_locked_peer(robot: Robot) -> None:
    telemetry = robot.schema["DrivetrainTelemetry"]
    msgs = [telemetry(0.1 * i, 0.2 * i, 0.3 * i, 0.4 * i, i) for i in range(32)]
    assert not robot.server.send(encode_packet(telemetry, msgs))  # nobody paired
    with robot.pair() as sock:
        assert robot.server.send(encode_packet(telemetry, msgs))
        assert list(bcnp.decode_packet(robot.schema, sock.recv(MAX_DATAGRAM))) == msgs
        # A packet too large for one datagram is refused and counted, not truncated.
        too_big = encode_packet(telemetry, [msgs[0]] * 4000)
        assert len(too_big) > MAX_DATAGRAM
        assert not robot.server.send(too_big)
    status = robot.server.status()
    assert status.packets_out == 1 and status.send_failures == 2
    assert "datagram" in str(robot.server.last_send_error)


def test_largest_datagram_packet_is_received_intact(robot: Robot) -> None:
    drive = robot.schema["DriveCmd"]
    count = (MAX_DATAGRAM - 11) // drive.wire_size
    msgs = [drive(vx=i / 5000, omega=-i / 5000, durationMs=i) for i in range(count)]
    with robot.pair() as sock:
        sock.send(encode_packet(drive, msgs))
        wait_until(lambda: len(robot.packets) == 1)
    assert robot.queue.drain() == msgs


def test_start_close_cycles_leave_no_thread_or_socket(schema: bcnp.Schema) -> None:
    dispatcher = Dispatcher(schema)
    threads, fds = threading.active_count(), open_fds()
    server = UdpServer(dispatcher, TransportConfig(host="127.0.0.1", port=0))
    slowest = 0.0
    for i in range(100):
        server.start()
        if i % 10 == 0:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.settimeout(5)
                sock.sendto(encode_handshake(schema.hash), ("127.0.0.1", server.port))
                sock.recv(100)
        t0 = time.monotonic()
        server.close()
        slowest = max(slowest, time.monotonic() - t0)
    assert slowest < 1.0
    assert threading.active_count() == threads
    assert open_fds() == fds
