"""Who may drive: ``TransportConfig.allowed_peers`` on real loopback sockets, and the
robot's limit on how often each kind of transport warning is printed.

Linux routes all of 127.0.0.0/8 to loopback, so a client socket bound to 127.0.0.2
before it connects or sends is a second host: 127.0.0.1 is allowed, 127.0.0.2 not.
"""

from __future__ import annotations

import logging
import socket
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import pytest
from support import ServedRobot, drive_packet, recv_exactly, serve_robot, wait_until

import bcnp
from bcnp import encode_handshake
from bcnp.transport import WARNING_LOGGERS, TcpServer, TransportConfig, UdpServer

ALLOWED, REFUSED = "127.0.0.1", "127.0.0.2"
REFUSAL = "refused, not an allowed peer"


def _loopback_alias_usable() -> bool:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind((REFUSED, 0))
    except OSError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _loopback_alias_usable(), reason=f"{REFUSED} is not a loopback address here (Linux only)"
)


Robot = ServedRobot


def make_robot(schema: bcnp.Schema, kind: type[TcpServer | UdpServer], **config: object) -> Robot:
    return serve_robot(schema, kind, host=ALLOWED, **{"allowed_peers": (ALLOWED,), **config})


@pytest.fixture
def tcp(schema: bcnp.Schema) -> Iterator[Robot]:
    robot = make_robot(schema, TcpServer)
    yield robot
    robot.server.close()


@pytest.fixture
def udp(schema: bcnp.Schema) -> Iterator[Robot]:
    robot = make_robot(schema, UdpServer)
    yield robot
    robot.server.close()


def tcp_client(addr: tuple[str, int], source: str) -> socket.socket:
    return socket.create_connection(addr, timeout=5, source_address=(source, 0))


def udp_client(addr: tuple[str, int], source: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((source, 0))
    sock.settimeout(5)
    sock.connect(addr)
    return sock


def read_until_closed(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything the other end sent before closing (EOF or reset); fails if it stays open."""
    sock.settimeout(timeout)
    data = bytearray()
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return bytes(data)


def tcp_controller(robot: Robot) -> socket.socket:
    sock = tcp_client(robot.addr, ALLOWED)
    assert recv_exactly(sock, 8) == encode_handshake(robot.schema.hash)
    sock.sendall(encode_handshake(robot.schema.hash))
    wait_until(lambda: robot.server.status().handshaken, what="handshake")
    return sock


def udp_controller(robot: Robot) -> socket.socket:
    sock = udp_client(robot.addr, ALLOWED)
    sock.send(encode_handshake(robot.schema.hash))
    assert sock.recv(100) == encode_handshake(robot.schema.hash)
    return sock


# -- the setting -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry", ["10.12.34.5/24", "team1234", "10.12.34.0/33", "", "10.12.34.0/24 ", "localhost", 1234]
)
def test_a_bad_entry_is_refused_when_the_config_is_built_and_named(entry: object) -> None:
    with pytest.raises(ValueError, match="allowed_peers") as info:
        TransportConfig(allowed_peers=("127.0.0.1", entry))  # type: ignore[arg-type]
    assert repr(entry) in str(info.value)


def test_one_string_instead_of_a_tuple_is_refused() -> None:
    with pytest.raises(ValueError, match="tuple"):
        TransportConfig(allowed_peers="10.12.34.0/24")  # type: ignore[arg-type]


def test_addresses_and_subnets_decide_who_is_allowed() -> None:
    config = TransportConfig(allowed_peers=("10.12.34.0/24", "127.0.0.1", "fd00::/8"))
    assert config.allows("10.12.34.2") and config.allows("10.12.34.255") and config.allows("127.0.0.1")
    assert not config.allows("10.12.35.2") and not config.allows("127.0.0.2")
    assert config.allows("fd00::5") and not config.allows("fe80::1")
    assert not config.allows("not an address")
    # An IPv4 peer on a dual-stack socket is reported mapped: still the same host.
    assert config.allows("::ffff:10.12.34.9") and not config.allows("::ffff:10.12.35.9")
    # An entry written in mapped form means the IPv4 subnet.
    mapped = TransportConfig(allowed_peers=("::ffff:10.12.34.0/120",))
    assert mapped.allows("10.12.34.7") and mapped.allows("::ffff:10.12.34.7")
    assert not mapped.allows("10.12.35.7")


def test_the_default_allows_anyone_and_a_list_is_kept_as_a_tuple() -> None:
    assert TransportConfig().allowed_peers == () and TransportConfig().allows("203.0.113.9")
    config = TransportConfig(allowed_peers=["10.12.34.0/24"])  # type: ignore[arg-type]
    assert config.allowed_peers == ("10.12.34.0/24",)
    assert hash(config) == hash(TransportConfig(allowed_peers=("10.12.34.0/24",)))
    assert replace(config, port=0).allows("10.12.34.2")


# -- TCP ---------------------------------------------------------------------------------------


def test_tcp_refused_peer_is_closed_at_accept_without_our_handshake(
    tcp: Robot, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bcnp.transport")
    with tcp_client(tcp.addr, REFUSED) as sock:
        source = f"{REFUSED}:{sock.getsockname()[1]}"
        sock.sendall(encode_handshake(tcp.schema.hash) + drive_packet(tcp.schema))
        assert read_until_closed(sock) == b""
    status = tcp.server.status()
    assert status.peers_refused == 1 and status.last_reject == f"{source}: {REFUSAL}"
    assert status.bytes_out == 0 and status.bytes_in == 0 and not status.handshaken
    assert status.refused == status.handshake_rejects == status.controllers == 0
    assert tcp.packets == []
    assert any(
        r.name == "bcnp.transport.tcp.not_allowed" and source in r.getMessage() for r in caplog.records
    )


def test_tcp_refused_peer_leaves_the_controller_undisturbed(tcp: Robot) -> None:
    with tcp_controller(tcp) as controller:
        controller.sendall(drive_packet(tcp.schema, 1))
        wait_until(lambda: len(tcp.packets) == 1)
        for _ in range(3):
            with tcp_client(tcp.addr, REFUSED) as intruder:
                intruder.sendall(encode_handshake(tcp.schema.hash) + drive_packet(tcp.schema, 9))
                assert read_until_closed(intruder) == b""
        controller.sendall(drive_packet(tcp.schema, 2))
        wait_until(lambda: len(tcp.packets) == 2)
        status = tcp.server.status()
        assert status.handshaken and status.peer == f"{ALLOWED}:{controller.getsockname()[1]}"
        assert status.peers_refused == 3 and status.controllers == 1
        # Counted as not allowed, not as "a controller is connected".
        assert status.refused == 0 and status.disconnects == 0
    assert [p.count for p in tcp.packets] == [1, 2]


def test_tcp_allowed_subnet_admits_its_members(schema: bcnp.Schema) -> None:
    robot = make_robot(schema, TcpServer, allowed_peers=("127.0.0.0/31",))  # .0 and .1
    try:
        with tcp_controller(robot) as controller:
            controller.sendall(drive_packet(schema))
            wait_until(lambda: len(robot.packets) == 1)
        assert robot.server.status().peers_refused == 0
        wait_until(lambda: not robot.server.status().handshaken)
        with tcp_client(robot.addr, REFUSED) as outsider:
            assert read_until_closed(outsider) == b""
        assert robot.server.status().peers_refused == 1
    finally:
        robot.server.close()


# -- UDP ---------------------------------------------------------------------------------------


def test_udp_refused_handshake_is_not_answered_and_does_not_pair(udp: Robot) -> None:
    with udp_client(udp.addr, REFUSED) as intruder:
        source = f"{REFUSED}:{intruder.getsockname()[1]}"
        intruder.send(encode_handshake(udp.schema.hash))
        intruder.send(b"BCNP\x12\x34\x56\x78")  # a wrong hash is answered when allowed; not here
        wait_until(lambda: udp.server.status().peers_refused == 2)
        status = udp.server.status()
        assert not status.handshaken and status.controllers == 0 and status.bytes_out == 0
        assert status.handshake_rejects == status.unpaired_datagrams == 0 and status.remote_hash is None
        assert status.last_reject == f"{source}: {REFUSAL}"
        # Datagrams are handled in order: once an allowed peer has had its answer, an
        # answer to the refused one would already be waiting.
        with udp_controller(udp):
            intruder.setblocking(False)
            with pytest.raises(BlockingIOError):
                intruder.recv(100)


def test_udp_refused_datagrams_neither_reach_the_parser_nor_change_the_controller(udp: Robot) -> None:
    # The controller sends no packet: idle_timeout, not the link timeout, decides when it goes.
    with udp_controller(udp) as controller:
        udp.clock.advance(3.0)
        with udp_client(udp.addr, REFUSED) as intruder:
            intruder.send(drive_packet(udp.schema, 9))
            intruder.send(encode_handshake(udp.schema.hash))
            intruder.send(b"\xff" * 64)
            wait_until(lambda: udp.server.status().peers_refused == 3)
        status = udp.server.status()
        assert status.handshaken and status.peer == f"{ALLOWED}:{controller.getsockname()[1]}"
        assert status.controllers == 1 and status.foreign_datagrams == 0 and status.parse_errors == 0
        assert udp.server.counters.bytes_in == 0 and udp.packets == []
        # Silent since pairing at 100 s: the refused datagrams at 103 s did not keep it alive.
        udp.clock.advance(2.5)
        wait_until(lambda: not udp.server.status().handshaken, what="idle unlock")
        assert udp.server.status().idle_drops == 1


# -- the robot: one line a second per kind of warning ---------------------------------------------


@pytest.mark.full_suite
def test_a_flood_through_the_robot_link_prints_about_one_line_a_second_per_kind(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("robotpy_ext", reason="the robot needs RobotPy (python run.py test installs it)")
    import constants
    from subsystems.link.bcnp_link import build_link
    from subsystems.observe.network_keys import KEYS, Sources

    # The 2 s handshake deadline is not under test: a machine that held this process (host
    # and robot threads alike) for 2 s between an accept and the peer's hash would make that
    # reject a timeout, and the count below one short.
    monkeypatch.setattr(
        constants,
        "BCNP_TRANSPORT",
        replace(constants.BCNP_TRANSPORT, host=ALLOWED, allowed_peers=(ALLOWED,), handshake_timeout=60.0),
    )
    caplog.set_level(logging.WARNING, logger="bcnp.transport")
    link = build_link(port=0, clock=time.monotonic)
    link.start()
    flood, bad_hash = 300, b"BCNP\x12\x34\x56\x78"
    try:
        tcp_addr, udp_addr = (ALLOWED, link.tcp.port), (ALLOWED, link.udp.port)
        started = time.monotonic()
        for _ in range(flood):
            with tcp_client(tcp_addr, REFUSED) as sock:
                read_until_closed(sock)
            with tcp_client(tcp_addr, ALLOWED) as sock:
                recv_exactly(sock, 8)
                sock.sendall(bad_hash)
                read_until_closed(sock)
        with udp_client(udp_addr, REFUSED) as refused, udp_client(udp_addr, ALLOWED) as allowed:
            for _ in range(flood):
                refused.send(encode_handshake(link.schema.hash))
                allowed.send(bad_hash)
                allowed.recv(100)  # answered, so the host can report both hashes
        wait_until(lambda: link.counter("peers_refused") == 2 * flood, what="every refusal counted")
        wait_until(lambda: link.counter("handshake_rejects") == 2 * flood, what="every reject counted")
        elapsed = time.monotonic() - started
    finally:
        link.close()

    lines = Counter(r.name for r in caplog.records if r.name in WARNING_LOGGERS)
    flooded = [
        f"bcnp.transport.{kind}.{warning}"
        for kind in ("tcp", "udp")
        for warning in ("not_allowed", "handshake")
    ]
    for name in flooded:
        assert 1 <= lines[name] <= elapsed + 1, f"{name}: {lines[name]} lines in {elapsed:.1f} s"
    (peers_refused,) = (key for key in KEYS if key.name == "PeersRefused")
    assert peers_refused.read(Sources(link, loop=None)) == 2 * flood  # type: ignore[arg-type]
    # Stopped, the link leaves the loggers as it found them.
    assert all(not logging.getLogger(name).filters for name in WARNING_LOGGERS)


def test_the_robot_refuses_a_peer_outside_its_allowed_peers_and_publishes_the_count(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyfrc", reason="the robot needs RobotPy (python run.py test installs it)")
    from wpilib import SmartDashboard

    import constants
    from bcnp.host import Client

    # Read at robotInit, which runs inside run_robot below.
    monkeypatch.setattr(
        constants, "BCNP_TRANSPORT", replace(constants.BCNP_TRANSPORT, allowed_peers=(ALLOWED,))
    )
    control = request.getfixturevalue("control")
    robot = request.getfixturevalue("robot")
    with control.run_robot():
        link = robot.link
        with tcp_client((ALLOWED, link.tcp.port), REFUSED) as sock:
            assert read_until_closed(sock) == b""
        with udp_client((ALLOWED, link.udp.port), REFUSED) as sock:
            sock.send(encode_handshake(link.schema.hash))
            wait_until(lambda: link.counter("peers_refused") == 2)
        control.step_timing(seconds=0.1, autonomous=True, enabled=True)
        assert SmartDashboard.getNumber("Network/PeersRefused", -1) == 2
        assert SmartDashboard.getString("Network/Transport", "") == "none"
        with Client(link.schema, ALLOWED, link.tcp.port, keepalive_interval=None):
            wait_until(lambda: link.slot.owner is link.tcp, what="the allowed host to take the link")
            control.step_timing(seconds=0.1, autonomous=True, enabled=True)
            assert SmartDashboard.getString("Network/Transport", "") == "tcp"
            assert SmartDashboard.getString("Network/Peer", "").startswith(f"{ALLOWED}:")
        assert link.counter("peers_refused") == 2
