"""``Replay`` against a real TCP server, dispatcher and 200-command queue, on one injected clock.

The replay's clock and sleep, the server's clock and the queue's updates all
run on a :class:`FakeClock` that only the replay's ``sleep`` moves, so a 12.6 s
path runs in well under a second and every timing rule is exact.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from support import FakeClock, stepping_sleep, wait_until

import bcnp
from bcnp import Dispatcher, MessageQueue, MessageQueueConfig
from bcnp.host.link.client import Client, LinkClosedError, LinkStatus
from bcnp.host.sessions.core.replay import ReplaySession, Schedule
from bcnp.host.sessions.core.session import Outage
from bcnp.host.sessions.driver import drive
from bcnp.host.sessions.recorder import TelemetryRecorder, telemetry_spec
from bcnp.host.sessions.replay import Replay
from bcnp.parser import StreamParser
from bcnp.paths import PathCommand, load_path
from bcnp.transport import TcpServer, TransportConfig
from bcnp.wire import encode_packet
from benchmarks.harness import ROOT


@dataclass
class Robot:
    clock: FakeClock
    dispatcher: Dispatcher
    queue: MessageQueue
    server: TcpServer
    executed: list[tuple[float, bcnp.Message]] = field(default_factory=list)
    most_waiting: int = 0
    disconnected_ticks: int = 0

    def tick(self) -> None:
        """One robot loop iteration at the clock's time."""
        now = self.clock()
        active = self.queue.update(now)
        if not self.queue.link_alive(now):
            self.disconnected_ticks += 1
        start = self.queue.active_started_at
        if active is not None and start is not None and (not self.executed or self.executed[-1][0] != start):
            self.executed.append((start, active))
        self.most_waiting = max(self.most_waiting, len(self.queue))


@pytest.fixture
def robot(schema: bcnp.Schema) -> Iterator[Robot]:
    clock = FakeClock()
    dispatcher = Dispatcher(schema)  # the server passes its (fake) clock's time with every packet
    queue = MessageQueue(MessageQueueConfig())  # the robot's: 200 commands, 200 ms, 100 ms
    dispatcher.register("DriveCmd", queue.handle_packet)
    server = TcpServer(dispatcher, TransportConfig(host="127.0.0.1", port=0), clock=clock)
    server.start()
    yield Robot(clock, dispatcher, queue, server)
    server.close()


def run_replay(robot: Robot, client: Client, commands: list[PathCommand], **kwargs: object) -> Replay:
    """Replays on the robot's clock; each sleep is one 20 ms robot tick after the sends arrived.

    The client's keepalive thread runs on wall time, so here a keepalive goes out every
    other tick (40 ms) on the fake clock instead.
    """

    def tick(seconds: float) -> None:
        robot.clock.advance(seconds)
        robot.tick()

    sleep = stepping_sleep(client, lambda: robot.dispatcher.packets_done, tick)
    replay = Replay(client, commands, clock=robot.clock, sleep=sleep, **kwargs)  # type: ignore[arg-type]
    replay.run()
    return replay


def test_a_path_longer_than_the_queue_runs_whole_in_order_without_overflow_or_skips(
    robot: Robot, schema: bcnp.Schema
) -> None:
    commands = load_path(ROOT / "paths" / "figure8.csv")  # 252 x 50 ms: more than 200
    with Client(schema, "127.0.0.1", robot.server.port, keepalive_interval=None) as client:
        replay = run_replay(robot, client, commands)
    metrics = robot.queue.metrics
    assert (metrics.overflows, metrics.skipped) == (0, 0)
    assert metrics.received == len(commands) == replay.sent
    assert [(m.vx, m.omega, m.durationMs) for _, m in robot.executed] == [
        (pytest.approx(c.vx), pytest.approx(c.omega, abs=1e-4), c.duration_ms) for c in commands
    ]
    starts = [start for start, _ in robot.executed]
    assert starts[-1] - starts[0] == pytest.approx(12.55)  # back to back, no drift
    assert robot.disconnected_ticks == 0  # never a link timeout while it ran
    assert robot.most_waiting <= 1.0 / 0.05 + 1  # about one second ahead, never the whole path
    assert replay.packets < len(commands)  # batched, not a packet per command


def test_the_cap_holds_back_short_commands(robot: Robot, schema: bcnp.Schema) -> None:
    commands = [PathCommand(0.2, 0.0, 1)] * 400  # 1 ms each: a second would be 1,000 commands
    with Client(schema, "127.0.0.1", robot.server.port, keepalive_interval=None) as client:
        run_replay(robot, client, commands, max_ahead=150)
    assert robot.queue.metrics.overflows == 0
    assert robot.most_waiting <= 150


def test_the_first_packet_clears_what_was_queued_before(robot: Robot, schema: bcnp.Schema) -> None:
    with Client(schema, "127.0.0.1", robot.server.port, keepalive_interval=None) as client:
        stale = schema["DriveCmd"](vx=-1.0, omega=0.0, durationMs=5000)
        client.send([stale] * 10)
        wait_until(lambda: len(robot.queue) == 10, what="the stale batch")
        run_replay(robot, client, [PathCommand(0.5, 0.0, 100)] * 3)
    assert all(m.vx == 0.5 for _, m in robot.executed)


def test_without_reconnecting_a_dropped_link_ends_the_replay_with_a_clear_error(
    robot: Robot, schema: bcnp.Schema
) -> None:
    commands = [PathCommand(0.5, 0.0, 50)] * 100
    with Client(schema, "127.0.0.1", robot.server.port, keepalive_interval=None, reconnect=False) as client:
        calls = 0

        def sleep(seconds: float) -> None:
            nonlocal calls
            calls += 1
            robot.clock.advance(seconds)
            if calls == 10:
                robot.server.close()  # the robot goes away mid-path
                wait_until(lambda: not client.connected, what="the client to see the close")

        replay = Replay(client, commands, clock=robot.clock, sleep=sleep)
        with pytest.raises(
            LinkClosedError, match=r"lost the link to the robot at 127\.0\.0\.1:\d+ after 0\.2 s"
        ):
            replay.run()


@pytest.mark.parametrize("drop", [0.3, 1.0, 3.0])
def test_after_a_drop_the_replay_resumes_on_the_host_clock_and_nothing_runs_late(
    robot: Robot, schema: bcnp.Schema, drop: float
) -> None:
    """The link is held for ``drop`` s while the host keeps sending (TCP buffers it);
    then everything arrives at once. The robot must refuse the backlog and the
    replay must resume on its own clock: every command the robot starts starts
    within one tick of the host's plan for it, or never."""
    commands = [PathCommand(0.5, i / 1000, 40) for i in range(150)]  # omega carries the index
    telemetry = schema["DrivetrainTelemetry"]
    schedule = Schedule(commands)
    with Client(schema, "127.0.0.1", robot.server.port, keepalive_interval=None, clock=robot.clock) as client:
        ticks = 0
        refused = 0  # packets sent into the drop, which never reach the queue
        heard = 0

        def tick() -> None:
            nonlocal heard
            robot.tick()
            sample = encode_packet(telemetry, [telemetry(0.0, 0.0, 0.0, 0.0, 0)])
            if robot.server.status().handshaken and robot.server.send(sample):
                heard += 1
                wait_until(lambda: client.link.telemetry_packets >= heard, what="telemetry to arrive")

        def sleep(seconds: float) -> None:
            nonlocal ticks, refused, heard
            ticks += 1
            if ticks % 2 == 0 and client.connected:
                client.keepalive()  # the client's own keepalives run on wall time
            wait_until(
                lambda: robot.dispatcher.packets_done + refused >= client.link.packets_sent,
                what="sends to arrive",
            )
            if ticks == 40:  # 0.8 s in: the link goes; TCP holds what the host sends meanwhile
                sent = client.link.packets_sent
                robot.clock.advance(drop)
                robot.tick()  # the robot has stopped: link loss
                client.keepalive()  # the held bytes arrive after the loss
                wait_until(lambda: client.status().generation == 2, what="the reconnect")
                refused += client.link.packets_sent - sent
                heard = client.link.telemetry_packets
            robot.clock.advance(seconds)
            tick()

        replay = Replay(client, commands, clock=robot.clock, sleep=sleep)
        replay.run()
    (outage,) = replay.outages
    assert outage.back_at is not None and outage.back_at == pytest.approx(0.8 + drop, abs=0.021)
    late = []
    for start, message in robot.executed:
        index = round(message.omega * 1000)
        host_start = start - (replay.start or 0)
        planned = schedule.starts[index + 1] - message.durationMs / 1000  # a remainder's plan is "now"
        if host_start - planned > 0.02 + 1e-6:  # one robot tick
            late.append((index, round(host_start - planned, 3)))
    print(f"drop {drop} s: {len(late)} late commands, {outage.dropped} dropped")
    assert late == []
    ran = [round(m.omega * 1000) for _, m in robot.executed]
    assert ran == sorted(ran)  # in order, nothing twice
    # What was planned during the drop never ran; the host's count also holds the
    # commands cut short at either end.
    assert set(range(len(commands))) - set(ran) == set(range(20, outage.resumed_at))
    assert outage.resumed_at - 20 <= outage.dropped <= outage.resumed_at - 20 + 2
    assert max(ran) == len(commands) - 1
    assert robot.queue.metrics.skipped == 0  # the robot had nothing stale to skip: the host sent none


def test_a_step_decided_on_a_connection_sends_nothing_on_the_next(schema: bcnp.Schema) -> None:
    """The client's thread can lose a connection and make the next between a step's look at
    the link and its send (a machine that held the host's thread does just that). What the step
    decided follows what the old connection queued; sent on the new one, whose queue is empty, it
    would start at once, a second early. It is not sent: the next step resumes, CLEAR_QUEUE
    first."""
    # One 20 ms command falls due every 20 ms step: each step sends. Omega carries the index.
    commands = [PathCommand(0.5, i / 1000, 20) for i in range(120)]
    clock = FakeClock()
    dispatcher = Dispatcher(schema)
    queue = MessageQueue(MessageQueueConfig())
    server = TcpServer(
        dispatcher, TransportConfig(host="127.0.0.1", port=0), clock=clock, on_controller_change=queue.clear
    )
    #: (the controller's connection, the first command's index, CLEAR_QUEUE) of each batch.
    arrived: list[tuple[object, int, bool]] = []

    def on_drive(packet: bcnp.PacketView, now: float) -> None:
        arrived.append((server.connection, round(packet[0].omega * 1000), packet.clear_queue))
        queue.handle_packet(packet, now)

    dispatcher.register("DriveCmd", on_drive)
    server.start()

    class RacedClient(Client):
        """A client whose link is replaced right after the step's look at it, at the 20th."""

        looks = 0

        def status(self) -> LinkStatus:
            status = Client.status(self)
            self.looks += 1
            if self.looks == 20:
                assert status.connected and status.generation == 1
                connection = server.connection
                assert connection is not None
                server.end_lost_link(connection, 0.3)
                wait_until(lambda: Client.status(self).generation == 2, what="the new connection")
            return status

    try:
        with RacedClient(schema, "127.0.0.1", server.port, keepalive_interval=None) as client:
            sleep = stepping_sleep(client, lambda: dispatcher.packets_done, clock.advance)
            replay = Replay(client, commands, clock=clock, sleep=sleep)
            replay.run()
    finally:
        server.close()
    assert client.looks > 20
    first, second = arrived[0][0], next(c for c, _, _ in arrived if c is not arrived[0][0])
    on_second = [(index, clear) for c, index, clear in arrived if c is second]
    assert all(c in (first, second) for c, _, _ in arrived)
    (outage,) = replay.outages
    # The new connection's first batch is the resume, with CLEAR_QUEUE; nothing before it.
    assert on_second[0] == (outage.resumed_at, True), on_second
    assert [clear for _, clear in on_second[1:]] == [False] * (len(on_second) - 1)


def test_a_robot_that_falls_silent_just_before_the_paths_end_fails_the_replay(
    robot: Robot, schema: bcnp.Schema
) -> None:
    """The robot sends telemetry every tick until 0.2 s before the path's end, then nothing
    (a link cut without a close: UDP, or a cable): the replay must not report a clean run,
    which the settle (0.3 s) ended before the client's silence judgement (0.5 s) could."""
    commands = [PathCommand(0.5, 0.0, 50)] * 40  # 2 s
    telemetry = schema["DrivetrainTelemetry"]
    sample = encode_packet(telemetry, [telemetry(0.0, 0.0, 0.0, 0.0, 0)])
    with Client(schema, "127.0.0.1", robot.server.port, keepalive_interval=None, clock=robot.clock) as client:
        heard = 0
        begin = robot.clock()  # the replay's start: only its sleeps move the clock

        def tick(seconds: float) -> None:
            nonlocal heard
            robot.clock.advance(seconds)
            robot.tick()
            if robot.clock() - begin <= 1.8 and robot.server.send(sample):
                heard += 1
                wait_until(lambda: client.link.telemetry_packets >= heard, what="telemetry to arrive")

        sleep = stepping_sleep(client, lambda: robot.dispatcher.packets_done, tick)
        replay = Replay(client, commands, clock=robot.clock, sleep=sleep)
        with pytest.raises(
            LinkClosedError, match=r"the path ended with the link to 127\.0\.0\.1:\d+ down"
        ) as raised:
            replay.run()
    last = float(re.search(r"(?:link lost|last heard) at (\d+\.\d+) s", str(raised.value)).group(1))  # type: ignore[union-attr]
    assert 1.7 <= last <= 1.8, raised.value  # dated when the robot was last heard, before the end (2 s)
    assert replay.sent == len(commands)


def test_recorder_back_dates_samples_and_pairs_them_with_the_scheduled_command(schema: bcnp.Schema) -> None:
    commands = [PathCommand(1.0, 0.0, 100), PathCommand(0.0, 2.0, 100)]
    spec = telemetry_spec(schema, schema["DriveCmd"])
    assert spec is not None and spec.name == "DrivetrainTelemetry"
    recorder = TelemetryRecorder(spec, Schedule(commands))
    samples = [spec(0.1, 0.2, 0.3, 0.4, ms) for ms in (1000, 1020)]
    packets: list[bcnp.PacketView] = []
    StreamParser(schema, packets.append).push(encode_packet(spec, samples))
    recorder.record(packets[0], 0.11)  # a packet of two samples 20 ms apart arrives at t = 0.11 s
    assert recorder.rows == [
        (0.09, 0.1, 0.2, 0.3, 0.4, 1000, 1.0, 0.0),  # sampled 20 ms before it arrived
        (0.11, 0.1, 0.2, 0.3, 0.4, 1020, 0.0, 2.0),
    ]


def test_the_sessions_loop_pulls_the_telemetry_into_the_session_on_its_own_thread(
    robot: Robot, schema: bcnp.Schema
) -> None:
    """No telemetry is pushed into a session from the client's thread: each step of the loop
    drains what arrived, dated on the loop's clock, into the session and the recorder."""
    telemetry = schema["DrivetrainTelemetry"]
    heard: list[tuple[int, float, int]] = []

    class Listening(ReplaySession):
        def on_telemetry(self, packet: bcnp.PacketView, now: float) -> None:
            heard.append((threading.get_ident(), now, packet.count))

    def packet(ms: int) -> bytes:
        return encode_packet(telemetry, [telemetry(0.0, 0.0, 0.0, 0.0, ms)])

    with Client(schema, "127.0.0.1", robot.server.port, clock=robot.clock) as client:
        wait_until(lambda: robot.server.status().handshaken, what="the robot to take the controller")
        assert robot.server.send(packet(1))  # before the session started: fed, not recorded
        wait_until(lambda: client.link.telemetry_packets == 1, what="telemetry")
        session = Listening([PathCommand(0.5, 0.0, 100)], client.command_spec, lead=1.0, settle=0.1)
        recorder = TelemetryRecorder(telemetry, session.schedule)
        sent = 1

        def sleep(seconds: float) -> None:
            nonlocal sent
            sent += 1
            assert robot.server.send(packet(sent))
            wait_until(lambda: client.link.telemetry_packets == sent, what="telemetry")
            robot.clock.advance(seconds)

        start = robot.clock() + 0.005
        robot.clock.advance(0.01)
        outages: list[Outage] = []
        drive(
            client, session, outages=outages, start=start, clock=robot.clock, sleep=sleep, recorder=recorder
        )
    assert {thread for thread, _, _ in heard} == {threading.get_ident()}
    assert len(heard) == sent and not outages
    times = [at for _, at, _ in heard]
    assert times == sorted(times) and times[0] < start <= times[1]
    # Each packet is dated when it arrived: a step (20 ms) after the one before, on the loop's clock.
    assert [round(b - a, 3) for a, b in itertools.pairwise(times[1:])] == [0.02] * (sent - 2)
    assert [row[5] for row in recorder.rows] == list(range(2, sent + 1))
