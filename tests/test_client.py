"""The host Client against the real TcpServer / UdpServer on loopback."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from support import FakeClock, ServedRobot, open_fds, serve_robot, wait_until

import bcnp
from bcnp import CLEAR_QUEUE, Dispatcher, MessageQueue, MessageQueueConfig, encode_packet
from bcnp.defaults import LINK_TIMEOUT_S
from bcnp.host.link.client import (
    Client,
    LinkClosedError,
    LinkDownError,
    LinkError,
    LinkLoss,
    LinkState,
    LinkStatus,
    ReconnectPolicy,
    RobotUnreachableError,
    SchemaMismatchError,
)
from bcnp.transport import MAX_DATAGRAM, TcpServer, TransportConfig, UdpServer
from benchmarks.harness.ports import free_port


class Robot(ServedRobot):
    def client(self, **kwargs: object) -> Client:
        return Client(self.schema, "127.0.0.1", self.server.port, udp=self.udp, **kwargs)  # type: ignore[arg-type]

    def released(self) -> bool:
        """Whether the server let its controller go. A UDP peer is only unlocked
        after idle_timeout on the robot's clock, so move the clock on each call
        (a datagram still in flight may have refreshed it)."""
        if self.udp:
            self.clock.advance(self.server.config.idle_timeout + 0.1)
        return not self.server.status().handshaken


def make_robot(schema: bcnp.Schema, udp: bool, capacity: int = 70_000) -> Robot:
    return serve_robot(schema, UdpServer if udp else TcpServer, Robot, capacity=capacity)


@pytest.fixture(params=["tcp", "udp"])
def robot(request: pytest.FixtureRequest, schema: bcnp.Schema) -> Iterator[Robot]:
    r = make_robot(schema, request.param == "udp")
    yield r
    r.server.close()


def commands(schema: bcnp.Schema, n: int, vx: float = 0.5) -> list[bcnp.Message]:
    drive = schema["DriveCmd"]
    return [drive(vx=vx, omega=(i % 100) / 100, durationMs=i % 1000) for i in range(n)]


# -- connecting -------------------------------------------------------------------------


def test_connect_handshakes_and_reports_the_robot_hash(robot: Robot) -> None:
    with robot.client(keepalive_interval=None) as client:
        assert client.connected and client.remote_hash == robot.schema.hash
        wait_until(lambda: robot.server.status().handshaken)
    wait_until(lambda: not client.connected)


@pytest.mark.parametrize("udp", [False, True], ids=["tcp", "udp"])
def test_unreachable_robot_names_host_and_port(schema: bcnp.Schema, udp: bool) -> None:
    port = free_port()
    with pytest.raises(RobotUnreachableError) as err:
        Client(schema, "127.0.0.1", port, udp=udp, timeout=1.0).connect()
    assert f"127.0.0.1:{port}" in str(err.value)
    assert "python run.py sim --nogui" in str(err.value)
    assert (err.value.host, err.value.port) == ("127.0.0.1", port)


def test_schema_mismatch_carries_both_hashes(robot: Robot, test_schema: bcnp.Schema) -> None:
    with pytest.raises(SchemaMismatchError) as err:
        Client(test_schema, "127.0.0.1", robot.server.port, udp=robot.udp).connect()
    assert err.value.local_hash == test_schema.hash
    assert err.value.remote_hash == robot.schema.hash
    assert f"0x{test_schema.hash:08X}" in str(err.value) and f"0x{robot.schema.hash:08X}" in str(err.value)
    wait_until(lambda: robot.server.status().handshake_rejects == 1)
    assert robot.server.counters.bytes_in == 0


def test_refused_second_controller_is_a_clear_error(schema: bcnp.Schema) -> None:
    robot = make_robot(schema, udp=False)
    try:
        with robot.client():
            wait_until(lambda: robot.server.status().handshaken)
            with pytest.raises(LinkClosedError, match="another controller"):
                robot.client(timeout=2.0).connect()
    finally:
        robot.server.close()


# -- sending ----------------------------------------------------------------------------


def test_send_clear_queue_and_stop(robot: Robot) -> None:
    with robot.client(keepalive_interval=None) as client:
        assert client.send(commands(robot.schema, 5)) == 1
        assert client.send(commands(robot.schema, 2, vx=1.0), clear_queue=True) == 1
        wait_until(lambda: len(robot.packets) == 2)
        assert robot.queue.size() == 2 and robot.packets[1].clear_queue
        client.stop()
        wait_until(lambda: len(robot.packets) == 3)
    stop = robot.packets[2]
    assert stop.count == 0 and stop.flags == CLEAR_QUEUE and stop.spec.name == "DriveCmd"
    assert robot.queue.size() == 0


def test_large_batches_are_split_into_packets_that_fit(robot: Robot) -> None:
    n = 70_000 if not robot.udp else 10_000
    msgs = commands(robot.schema, n)
    per_packet = 65_535 if not robot.udp else (MAX_DATAGRAM - 11) // 10
    expected = -(-n // per_packet)
    with robot.client(keepalive_interval=None) as client:
        robot.queue.push_batch(commands(robot.schema, 3))
        assert client.send(msgs, clear_queue=True) == expected
        wait_until(lambda: len(robot.packets) == expected, timeout=10)
    batch = robot.packets[:expected]  # a UDP client says goodbye with a keepalive on close
    assert [p.count for p in batch][:-1] == [per_packet] * (expected - 1)
    assert [p.clear_queue for p in batch] == [True] + [False] * (expected - 1)
    assert robot.queue.drain() == msgs  # in order, nothing lost, the 3 stale ones cleared


def test_messages_of_another_schema_are_refused(robot: Robot, test_schema: bcnp.Schema) -> None:
    other = test_schema["TestCmd"]
    values = {f.name: 0 for f in other.fields}
    with robot.client(keepalive_interval=None) as client, pytest.raises(TypeError, match="not a message"):
        client.send([other(**values)])


def test_keepalive_keeps_a_long_command_running(robot: Robot) -> None:
    """One 1 s command; the robot's link timeout is 200 ms. The shared fake clock
    moves in 51 ms steps and each step's keepalive keeps the command active."""
    drive = robot.schema["DriveCmd"]
    with robot.client(clock=robot.clock, keepalive_interval=0.05) as client:
        client.send([drive(vx=1.0, omega=0.0, durationMs=1000)], clear_queue=True)
        wait_until(lambda: len(robot.packets) == 1)
        assert robot.queue.update(robot.clock()) is not None
        for step in range(1, 20):
            seen = len(robot.packets)
            robot.clock.advance(0.051)
            wait_until(lambda seen=seen: len(robot.packets) > seen, what=f"keepalive {step}")
            assert robot.queue.update(robot.clock()) is not None, f"cut at {step * 51} ms"
        keepalives = robot.packets[1:]
        assert all(p.count == 0 and p.flags == 0 and p.spec.name == "DriveCmd" for p in keepalives)
        wait_until(lambda: client.link.keepalives_sent == len(keepalives))


def test_without_keepalive_the_robot_times_the_command_out(robot: Robot) -> None:
    drive = robot.schema["DriveCmd"]
    with robot.client(keepalive_interval=None) as client:
        client.send([drive(vx=1.0, omega=0.0, durationMs=1000)], clear_queue=True)
        wait_until(lambda: len(robot.packets) == 1)
        assert robot.queue.update(robot.clock()) is not None
        robot.clock.advance(0.25)
        assert robot.queue.update(robot.clock()) is None


def test_no_keepalive_while_commands_flow(robot: Robot) -> None:
    with robot.client(clock=robot.clock, keepalive_interval=0.05) as client:
        for _ in range(5):
            robot.clock.advance(0.04)
            client.send(commands(robot.schema, 1))
        wait_until(lambda: len(robot.packets) == 5)
        time.sleep(0.05)
        assert client.link.keepalives_sent == 0


# -- receiving ------------------------------------------------------------------------------


def test_telemetry_by_iterator_and_by_callback(robot: Robot) -> None:
    telemetry = robot.schema["DrivetrainTelemetry"]
    batches = [[telemetry(i, -i, 2 * i, -2 * i, 10 * i + k) for k in range(3)] for i in range(4)]
    with robot.client(keepalive_interval=None) as client:
        wait_until(lambda: robot.server.status().handshaken)
        for batch in batches:
            assert robot.server.send(encode_packet(telemetry, batch))
        got = [list(p) for _, p in zip(batches, client.packets(timeout=5.0), strict=False)]
        assert got == batches
        assert client.receive(timeout=0.05) is None
        # The state and counters docs/transports.md lists, read on the client: the link's.
        assert (client.telemetry_packets, client.parse_errors, client.callback_errors) == (4, 0, 0)
        assert client.bytes_in == client.link.bytes_in > 0 and client.packets_sent == client.link.packets_sent
        assert client.keepalives_sent == 0 and client.bytes_out == client.link.bytes_out > 0
        assert client.remote_hash == robot.schema.hash and client.connected and client.closed_reason is None
        # A loop drains what arrived since, each with when it arrived on the client's clock.
        assert robot.server.send(encode_packet(telemetry, batches[0]))
        wait_until(lambda: client.telemetry_packets == 5)
        (at, packet), *rest = client.drain()
        assert not rest and list(packet) == batches[0] and at <= client.clock()
        assert client.drain() == []
    wait_until(robot.released)
    received: list[bcnp.PacketView] = []
    with robot.client(keepalive_interval=None, on_telemetry=received.append) as client:
        wait_until(lambda: robot.server.status().handshaken)
        robot.server.send(encode_packet(telemetry, batches[0]))
        wait_until(lambda: len(received) == 1)
        assert list(received[0]) == batches[0]
        assert client.receive(timeout=0.05) is None


def test_without_reconnecting_the_robot_going_away_ends_iteration_and_fails_sends(
    schema: bcnp.Schema,
) -> None:
    robot = make_robot(schema, udp=False)
    client = robot.client(keepalive_interval=None, reconnect=False).connect()
    wait_until(lambda: robot.server.status().handshaken)
    robot.server.close()
    assert list(client.packets()) == []
    assert not client.connected
    with pytest.raises(LinkClosedError, match="closed by the robot"):
        client.send(commands(schema, 1))
    client.close()


def test_context_manager_leaves_no_thread_or_socket(robot: Robot) -> None:
    threads, fds = threading.active_count(), open_fds()
    for i in range(20):
        with robot.client() as client:
            client.send(commands(robot.schema, 1))
        assert not client.connected
        # The server must have taken this controller and let it go before the next
        # connects ("not handshaken" alone also holds before it read the handshake).
        wait_until(lambda i=i: robot.server.status().controllers == i + 1 and robot.released())
    assert threading.active_count() == threads
    assert open_fds() == fds


def test_keepalive_thread_idles_while_a_send_blocks(schema: bcnp.Schema) -> None:
    """A robot that handshakes and then never reads: the user's send blocks in the
    kernel, and the keepalive thread must wait (not spin) meanwhile."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []

    def robot() -> None:
        conn, _ = listener.accept()
        conn.sendall(bcnp.encode_handshake(schema.hash))
        accepted.append(conn)

    server = threading.Thread(target=robot, daemon=True)
    server.start()
    client = Client(schema, "127.0.0.1", port, keepalive_interval=0.01).connect()
    blob = encode_packet(schema["DriveCmd"], commands(schema, 65_535)) * 60  # 39 MB

    def send() -> None:
        with contextlib.suppress(LinkError):
            client.link.send_packets([blob])

    sender = threading.Thread(target=send)
    try:
        sender.start()
        wait_until(lambda: client.link._send_lock.locked())
        time.sleep(0.2)  # let the send fill the kernel buffers and block
        cpu0, wall0 = time.process_time(), time.monotonic()
        time.sleep(1.0)
        cpu = time.process_time() - cpu0
        assert sender.is_alive(), "the send should still be blocked on the silent robot"
        assert cpu < 0.5 * (time.monotonic() - wall0), f"{cpu:.2f} s of CPU in 1 s while blocked"
    finally:
        client.close()
        sender.join(5)
        for conn in accepted:
            conn.close()
        listener.close()
    assert not sender.is_alive()


def test_without_reconnecting_the_thread_ends_when_a_send_finds_the_link_dead(schema: bcnp.Schema) -> None:
    robot = make_robot(schema, udp=True)
    client = robot.client(keepalive_interval=None, reconnect=False).connect()
    robot.server.close()
    with pytest.raises(LinkClosedError):
        for _ in range(100):  # the first send may still succeed: UDP learns of it from ICMP
            client.send(commands(schema, 1))
            time.sleep(0.01)
    wait_until(lambda: not any(t.name.startswith("bcnp-client") for t in threading.enumerate()))
    assert not client.connected
    client.close()


# -- keeping the link -----------------------------------------------------------------


def restart_on_the_same_port(robot: Robot) -> Robot:
    """The robot program restarts: a new server (and queue) where the old one listened."""
    port = robot.server.port
    robot.server.close()
    clock = robot.clock
    dispatcher = Dispatcher(robot.schema)
    queue = MessageQueue(MessageQueueConfig())
    cls = UdpServer if robot.udp else TcpServer
    server = cls(dispatcher, TransportConfig(host="127.0.0.1", port=port), clock=clock)
    again = Robot(robot.schema, clock, dispatcher, queue, server)
    dispatcher.register("DriveCmd", lambda packet, now: again.packets.append(packet))
    server.start()
    return again


def test_a_restarted_robot_is_reconnected_and_the_user_told(schema: bcnp.Schema) -> None:
    robot = make_robot(schema, udp=False)
    changes: list[LinkStatus] = []
    client = robot.client(keepalive_interval=None, on_link_change=changes.append).connect()
    try:
        robot.server.close()  # closes the controller's connection
        wait_until(lambda: not client.connected, what="the loss")
        with pytest.raises(LinkDownError, match=r"is down, (re)?connecting \(lost"):
            client.send(commands(schema, 1))
        robot = restart_on_the_same_port(robot)
        assert client.wait_connected(10.0)
        status = client.status()
        assert status.generation == 2 and status.losses == 1
        # A batch decided on the first connection does not reach the second's empty queue.
        with pytest.raises(LinkDownError, match=r"connection 1 was replaced by connection 2 .*nothing sent"):
            client.send(commands(schema, 3, vx=-1.0), generation=1)
        client.send(commands(schema, 3), generation=2)
        wait_until(lambda: len(robot.packets) == 1, what="the batch on the new connection")
        assert robot.packets[0][0].vx == 0.5
        states = [s.state for s in changes]
        # The first connect is told too, then the loss, the attempts, the reconnect.
        assert states[0] == "connected" and states[1] == "reconnecting" and states[-1] == "connected"
        # A closing server closes its controller, with a reset when bytes were left unread.
        assert changes[1].lost_reason in ("closed by the robot", "receive failed: Connection reset by peer")
        # Back: no loss reason or error on a connected status; the loss is kept as the latest one.
        assert changes[-1].lost_reason == "" and changes[-1].last_error == ""
        assert changes[-1].lost_since is None
        assert changes[-1].last_loss is not None and changes[-1].last_loss.reason == changes[1].lost_reason
        assert LinkState.CONNECTING in states
    finally:
        client.close()
        robot.server.close()
    assert client.status().state is LinkState.CLOSED and client.closed_reason == "closed by the client"


def test_a_loss_a_send_finds_is_reconnected_too(schema: bcnp.Schema) -> None:
    """A send that finds the connection dead marks the link lost from the user's thread; the
    client's own thread, busy meanwhile (here: in the telemetry callback), must reconnect all the
    same when it gets back to the link, not take the loss for an attempt under way and wait."""
    robot = make_robot(schema, udp=False)
    telemetry = schema["DrivetrainTelemetry"]
    inside, release = threading.Event(), threading.Event()

    def busy(packet: bcnp.PacketView) -> None:
        inside.set()
        release.wait(10.0)

    client = robot.client(keepalive_interval=None, on_telemetry=busy).connect()
    try:
        wait_until(lambda: robot.server.status().handshaken, what="the robot's side of the handshake")
        assert robot.server.send(encode_packet(telemetry, [telemetry(0.0, 0.0, 0.0, 0.0, 1)]))
        assert inside.wait(10.0), "the telemetry never reached the callback"
        robot.server.close()  # closes the controller's connection
        with pytest.raises(LinkDownError):
            for _ in range(100):  # the first send after the close may still go out
                client.send(commands(schema, 1))
                time.sleep(0.01)
        robot = restart_on_the_same_port(robot)
        release.set()
        assert client.wait_connected(10.0), client.status()
        assert client.status().generation == 2
    finally:
        release.set()
        client.close()
        robot.server.close()


def test_a_loss_after_a_stalled_burst_is_dated_when_the_robot_last_sent(schema: bcnp.Schema) -> None:
    """A TCP link stalls for 0.4 s (under the client's 0.5 s silence timeout): the
    telemetry the robot sent in its last 0.2 s before its link timeout arrives in one
    burst, then the robot's close. The loss is dated by the robot's own timestamps (the
    newest sample of each packet, whatever their count), when it really went quiet, not
    when the burst came in."""
    robot = make_robot(schema, udp=False)
    clock = FakeClock(start=50.0)
    spec = schema["DrivetrainTelemetry"]

    def packet(ms: int) -> bytes:  # two ticks' samples, as the robot sends them
        return encode_packet(spec, [spec(0.0, 0.0, 0.0, 0.0, ms - 20), spec(0.0, 0.0, 0.0, 0.0, ms)])

    try:
        client = Client(
            schema, "127.0.0.1", robot.server.port, keepalive_interval=None, reconnect=False, clock=clock
        )
        with client:
            wait_until(lambda: robot.server.status().handshaken, what="the robot to take the client")
            for i in range(5):  # every 40 ms, through at once: robot time 5.00 s is host time 50.0
                assert robot.server.send(packet(5000 + 40 * i))
                wait_until(lambda n=i + 1: client.link.telemetry_packets == n, what="telemetry")
                clock.advance(0.04)
            clock.advance(0.4)  # the stall: what the robot sends now arrives at 50.6
            for i in range(5, 9):
                assert robot.server.send(packet(5000 + 40 * i))
            last = encode_packet(spec, [spec(0.0, 0.0, 0.0, 0.0, 5360)])  # cut at the robot's link loss
            assert robot.server.send(last)
            wait_until(lambda: client.link.telemetry_packets == 10, what="the burst")
            robot.server.close()
            wait_until(lambda: client.status().losses == 1, what="the loss")
            status = client.status()
        assert status.last_loss is not None
        assert status.last_loss.reason in ("closed by the robot", "receive failed: Connection reset by peer")
        assert status.last_loss.at == pytest.approx(50.36, abs=1e-6)  # the last packet's send time
    finally:
        robot.server.close()


def test_a_udp_robot_gone_silent_is_handshaken_again_from_a_new_source(schema: bcnp.Schema) -> None:
    """A UDP host learns of a lost link only from telemetry silence, and dials again from a
    new source port. A robot that still holds the old one frees it on its own link
    timeout (the old port has gone quiet), then pairs the new one."""
    robot = make_robot(schema, udp=True)
    telemetry = schema["DrivetrainTelemetry"]
    host_clock = FakeClock()
    policy = ReconnectPolicy(silence_timeout=0.5)
    client = robot.client(keepalive_interval=None, reconnect=policy, clock=host_clock).connect()
    try:
        source = robot.server.status().peer
        robot.server.send(encode_packet(telemetry, [telemetry(0.0, 0.0, 0.0, 0.0, 1)]))
        client.keepalive()  # a link to lose: a peer that only handshook waits out the idle timeout
        wait_until(
            lambda: client.link.telemetry_packets == 1 and robot.server.counters.bytes_in, what="both ways"
        )
        assert client.status().generation == 1
        host_clock.advance(0.6)  # nothing heard since
        counters = robot.server.counters
        wait_until(lambda: counters.foreign_datagrams >= 1, what="a handshake from a new port, refused")
        assert client.status().generation == 1 and robot.server.status().peer == source
        robot.clock.advance(0.3)  # the robot's 200 ms link timeout: the old port is quiet
        wait_until(lambda: client.status().generation == 2, what="the new handshake")
        status = client.status()
        assert status.last_loss == LinkLoss(100.0, "no telemetry for 0.6 s")
        peer = robot.server.status().peer
        assert peer != source and peer == client.local_address
        assert counters.link_losses == 1 and counters.same_port_pairings == 0
    finally:
        client.close()
        robot.server.close()


def test_a_schema_mismatch_on_reconnect_closes_for_good(
    schema: bcnp.Schema, test_schema: bcnp.Schema
) -> None:
    robot = make_robot(schema, udp=False)
    client = robot.client(keepalive_interval=None).connect()
    port = robot.server.port
    robot.server.close()
    config = TransportConfig(host="127.0.0.1", port=port)
    other = TcpServer(Dispatcher(test_schema), config, clock=robot.clock)
    other.start()
    try:
        wait_until(lambda: client.closed_reason is not None, timeout=10.0, what="the mismatch")
        assert "schema mismatch" in (client.closed_reason or "")
        with pytest.raises(LinkClosedError, match="schema mismatch"):
            client.send(commands(schema, 1))
        assert list(client.packets()) == []  # ends: closed for good
    finally:
        client.close()
        other.close()


def test_giving_up_after_a_time_without_a_link(schema: bcnp.Schema) -> None:
    robot = make_robot(schema, udp=False)
    client = robot.client(keepalive_interval=None, reconnect=ReconnectPolicy(give_up_after=0.3)).connect()
    robot.server.close()
    try:
        wait_until(lambda: client.closed_reason is not None, timeout=10.0, what="giving up")
        assert (client.closed_reason or "").startswith("no link for 0.3 s (gave up after 0.3 s)")
        assert client.status().attempts >= 1
        wait_until(lambda: not any(t.name.startswith("bcnp-client") for t in threading.enumerate()))
    finally:
        client.close()


def test_reconnecting_leaves_no_socket_behind(schema: bcnp.Schema) -> None:
    fds = open_fds()
    robot = make_robot(schema, udp=False)
    client = robot.client(keepalive_interval=None).connect()
    try:
        for generation in range(2, 12):
            robot = restart_on_the_same_port(robot)
            assert client.wait_connected(10.0)
            wait_until(lambda g=generation: client.status().generation == g, what=f"connection {generation}")
    finally:
        client.close()
        robot.server.close()
    assert open_fds() == fds


def test_a_closing_udp_host_frees_the_link_at_the_link_timeout_not_the_idle_timeout(
    schema: bcnp.Schema,
) -> None:
    robot = make_robot(schema, udp=True)
    try:
        with robot.client(keepalive_interval=None):  # handshakes, sends nothing, closes
            wait_until(lambda: robot.server.status().handshaken)
        wait_until(lambda: len(robot.packets) == 1, what="the goodbye packet")
        robot.clock.advance(LINK_TIMEOUT_S + 0.01)
        wait_until(lambda: not robot.server.status().handshaken, what="the link to be freed")
        assert robot.server.status().link_losses == 1 and robot.server.status().idle_drops == 0
    finally:
        robot.server.close()


def test_every_name_a_host_program_needs_comes_from_bcnp_host() -> None:
    """What the docs' examples import: from bcnp.host, each name the object it names."""
    import bcnp.host
    import bcnp.paths
    from bcnp.host.link import client
    from bcnp.host.sessions import replay

    homes = {name: getattr(module, name) for module in (client, bcnp.paths, replay) for name in dir(module)}
    for name in bcnp.host.__all__:
        assert getattr(bcnp.host, name) is homes[name], name
    for name in ("Client", "ReconnectPolicy", "LinkDownError", "LinkError", "LinkClosedError", "LinkState"):
        assert name in bcnp.host.__all__ and name in dir(bcnp.host)
