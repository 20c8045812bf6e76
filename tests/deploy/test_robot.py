"""The robot in the WPILib simulator (pyfrc fixtures, simulated time) driven over real loopback sockets.

Time only moves when a test steps it, one 20 ms robot tick at a time, so every
timing rule is checked to the tick. Packets are sent while time stands still
and the test waits until the robot's receive thread has taken them in.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import socket
import sys
from collections.abc import Iterator

import ntcore
import pytest
import rev
import wpilib
from support import peer_closed, recv_exactly, wait_until
from wpilib import SmartDashboard, Timer
from wpilib.simulation import DriverStationSim, XboxControllerSim, stepTiming

import bcnp
import constants
import physics
from bcnp.host.link.client import Client, ReconnectPolicy, SchemaMismatchError
from benchmarks.harness.ports import free_port
from messages import DRIVETRAIN_TELEMETRY_SPEC, SCHEMA, DriveCmd
from subsystems.drivetrain.kitbot import KitbotIO

TICK = 0.02


class Sim:
    """Steps the simulated robot and talks to it as a host would."""

    def __init__(self, robot: object) -> None:
        self.robot = robot

    @property
    def link(self):  # type: ignore[no-untyped-def]
        return self.robot.link  # type: ignore[attr-defined]

    @property
    def drivetrain(self):  # type: ignore[no-untyped-def]
        return self.robot.drivetrain  # type: ignore[attr-defined]

    # -- time -----------------------------------------------------------------------------

    def tick(self, n: int = 1, *, autonomous: bool = True, enabled: bool = True) -> None:
        DriverStationSim.setDsAttached(True)
        DriverStationSim.setAutonomous(autonomous)
        DriverStationSim.setEnabled(enabled)
        for _ in range(n):
            DriverStationSim.notifyNewData()
            stepTiming(TICK)

    def run(self, seconds: float, client: Client | None = None, **mode: bool) -> list[float]:
        """Tick for ``seconds``; with ``client``, a keepalive every 2nd tick (40 ms).
        Returns Network/CmdVx after each tick."""
        seen = []
        for i in range(round(seconds / TICK)):
            if client is not None and i % 2 == 0:
                self.deliver(client.keepalive)
            self.tick(**mode)
            seen.append(self.number("Network/CmdVx"))
        return seen

    # -- host side -----------------------------------------------------------------------------

    def connect(self, udp: bool = False, schema: bcnp.Schema = SCHEMA, **kwargs: object) -> Client:
        """A host that never reconnects by itself and never judges the robot by a
        telemetry silence: simulated time stands still between steps."""
        port = self.link.udp.port if udp else self.link.tcp.port
        kwargs.setdefault("reconnect", ReconnectPolicy(enabled=False, silence_timeout=None))
        client = Client(schema, "127.0.0.1", port, udp=udp, keepalive_interval=None, **kwargs)  # type: ignore[arg-type]
        client.connect()
        wait_until(lambda: self.link.slot.owner is not None, what="the robot to take the controller")
        return client

    def deliver(self, send: object, *args: object, **kwargs: object) -> None:
        """Call ``send(*args)`` and wait until the robot has received what it sent."""
        before = self.handled()
        send(*args, **kwargs)  # type: ignore[operator]
        wait_until(lambda: self.handled() > before, what="the packet to arrive", first_poll=0.0001)

    def handled(self) -> int:
        """How many packets the robot's dispatcher is done with (``packets_done``: its
        ``packets_received`` goes up before the handler queues the packet, so a tick right after
        a wait on it could run before the packet was queued)."""
        return self.link.dispatcher.packets_done  # type: ignore[no-any-return]

    # -- what the robot shows ---------------------------------------------------------------------

    @staticmethod
    def number(key: str) -> float:
        return SmartDashboard.getNumber(key, math.nan)

    @staticmethod
    def string(key: str) -> str:
        return SmartDashboard.getString(key, "<missing>")

    @staticmethod
    def connected() -> bool:
        return SmartDashboard.getBoolean("Network/Connected", False)

    def motors(self) -> tuple[float, float]:
        """What the wiring drives the motors at (fraction of full output)."""
        return self.drivetrain.io.outputs()  # type: ignore[no-any-return]

    def travelled(self) -> float:
        left, right = self.drivetrain.wheel_positions()
        return (left + right) / 2


WIRINGS = ["kitbot", "sparkmax"]
#: Full output's wheel speed in the simulator: the kit chassis' dual CIMs reach 3.96 m/s; the
#: SPARK MAX model is the motor the reference robot's feedforward describes (1.5 m/s).
TOP_SPEED_MPS = {"kitbot": 3.96, "sparkmax": 3.96}


@pytest.fixture(params=WIRINGS)
def wiring(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every robot test runs against each drivetrain wiring (the robot reads it at robotInit)."""
    monkeypatch.setenv("BCNP_DRIVETRAIN", request.param)
    return str(request.param)


@pytest.fixture
def sim(wiring, control, robot) -> Iterator[Sim]:  # type: ignore[no-untyped-def]
    with control.run_robot():
        assert robot.drivetrain.io.wiring == wiring
        yield Sim(robot)


class Physics:
    """physics.py's PhysicsEngine of the running test robot: the simulated truth. The robot
    thread makes it while the robot starts, so it is looked up when asked for, after a tick.
    (pyfrc internals: an upgrade that moves them fails here, loudly.)"""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._plugins = request.config.pluginmanager.get_plugins

    @property
    def engine(self):  # type: ignore[no-untyped-def]
        for plugin in self._plugins():
            if type(plugin).__name__ == "PyFrcPlugin":
                engine = plugin._physics.engine
                assert engine is not None, "no physics engine yet: tick first"
                return engine
        raise RuntimeError("pyfrc's plugin is not loaded")

    @property
    def drivesim(self):  # type: ignore[no-untyped-def]
        return self.engine.drivesim


@pytest.fixture
def truth(sim: Sim, request: pytest.FixtureRequest) -> Physics:
    return Physics(request)


def cmd(vx: float, omega: float = 0.0, ms: int = 1000) -> DriveCmd:
    return DriveCmd(vx=vx, omega=omega, durationMs=ms)


# -- (a) (b) executing commands ----------------------------------------------------------------------


def test_a_two_second_command_travels_two_metres(sim: Sim) -> None:
    sim.tick(5)
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
        seen = sim.run(2.0, host)
        assert seen[0] == 1.0 and seen[-2] == 1.0  # CmdVx reads 1.0 while active
        assert sim.connected()
        sim.run(1.0, host)  # queue empty: stopped, coasting to rest
    assert sim.number("Network/CmdVx") == 0.0
    assert sim.travelled() == pytest.approx(2.0, rel=0.15)
    assert sim.drivetrain.pose().X() == pytest.approx(2.0, rel=0.15)


def test_a_one_metre_per_second_for_one_second_and_telemetry_matches_the_physics(
    sim: Sim, truth: Physics
) -> None:
    sim.tick(5)
    drivesim = truth.drivesim
    start = drivesim.getPose()
    assert start == physics.START_POSE
    packets: list[bcnp.PacketView] = []
    with sim.connect(on_telemetry=packets.append) as host:
        sim.deliver(host.send, [cmd(1.0, ms=1000)], clear_queue=True)
        sim.run(0.8, host)  # past the 0.33 s ramp: cruising
        sent = len(packets)
        sim.run(0.04, host)  # one more telemetry packet, sampled at cruise
        wait_until(lambda: len(packets) > sent, what="telemetry at cruise")
        cruise = packets[-1][-1]
        truth = (drivesim.getLeftVelocity(), drivesim.getRightVelocity())
        assert (cruise.leftVelocity, cruise.rightVelocity) == pytest.approx(truth, rel=0.05)
        assert truth == pytest.approx((1.0, 1.0), rel=0.05)
        sim.run(1.5, host)  # the command ends at 1 s; stopped, at rest
        sent = len(packets)
        sim.run(0.04, host)
        wait_until(lambda: len(packets) > sent, what="telemetry at rest")
        rest = packets[-1][-1]
    truth = (drivesim.getLeftPosition(), drivesim.getRightPosition())
    assert (rest.leftPosition, rest.rightPosition) == pytest.approx(truth, rel=0.05)
    moved = drivesim.getPose().relativeTo(start)
    assert 0.8 <= moved.X() <= 1.2 and abs(moved.Y()) < 0.05


def test_b_commands_are_clamped_to_the_robot_limits(sim: Sim) -> None:
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(5.0, -9.0, ms=3000)])
        seen = sim.run(1.5, host)
        assert set(seen) == {1.5}
        assert sim.number("Network/CmdW") == -2.5
        left, right = sim.drivetrain.wheel_velocities()
        # Closed loop on the clamped command: wheels near 1.5 m/s -/+ 2.5 rad/s times half the
        # track, as far as the wiring's motors go (the SPARK MAX model tops out at 1.5 m/s).
        half_track = 0.6604 / 2
        top = TOP_SPEED_MPS[sim.drivetrain.io.wiring]
        assert left == pytest.approx(min(top, 1.5 + 2.5 * half_track), rel=0.1)
        assert right == pytest.approx(min(top, 1.5 - 2.5 * half_track), rel=0.1)


# -- (c) (d) stopping ---------------------------------------------------------------------------------


def test_c_silence_stops_the_robot_within_the_link_timeout_plus_one_tick(sim: Sim) -> None:
    sim.tick(5)
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=10_000)], clear_queue=True)
        # The packet arrived now; the next ticks run it, then nothing more comes.
        moving_ticks = 0
        for _ in range(11):  # 200 ms + one tick
            sim.tick()
            if sim.number("Network/CmdVx") != 0.0:
                moving_ticks += 1
        assert sim.number("Network/CmdVx") == 0.0
        assert sim.motors() == (0.0, 0.0)
        assert not sim.connected()
        assert moving_ticks == 10  # active for exactly the 200 ms the link was trusted
        sim.run(2.0)
    assert sim.drivetrain.wheel_velocities() == pytest.approx((0.0, 0.0), abs=0.01)
    assert 0.0 < sim.travelled() < 0.35


def test_c_a_controller_that_disconnects_stops_the_robot_in_the_next_tick(sim: Sim) -> None:
    host = sim.connect()
    sim.deliver(host.send, [cmd(1.0, ms=10_000)], clear_queue=True)
    sim.run(0.1, host)
    assert sim.number("Network/CmdVx") == 1.0
    host.close()
    wait_until(lambda: sim.link.slot.owner is None)
    sim.tick()
    assert sim.number("Network/CmdVx") == 0.0 and sim.motors() == (0.0, 0.0)
    assert not sim.connected()  # its last packet is only 20 ms old, but nobody is handshaken
    assert sim.string("Network/Transport") == "none" and sim.string("Network/Peer") == ""


def test_a_new_controller_never_inherits_the_previous_ones_commands(sim: Sim) -> None:
    first = sim.connect()
    sim.deliver(first.send, [cmd(1.0, ms=5000)] * 5, clear_queue=True)
    sim.run(0.1, first)
    first.close()
    # The next controller pairs before the robot ticks again.
    with sim.connect(udp=True) as second:
        assert sim.link.queue.size() == 0 and sim.link.queue.active() is None
        sim.tick()
        assert sim.number("Network/CmdVx") == 0.0 and sim.motors() == (0.0, 0.0)
        sim.deliver(second.send, [cmd(-0.5, ms=200)])  # no CLEAR_QUEUE needed
        seen = sim.run(0.3, second)
    assert set(seen) == {-0.5, 0.0} and seen[0] == -0.5
    assert sim.string("Network/Transport") == "udp"


HANDSHAKE = bcnp.encode_handshake(SCHEMA.hash)
KEEPALIVE = bcnp.encode_packet(DriveCmd.spec, [])


def commands(*cmds: DriveCmd, clear: bool = False) -> bytes:
    return bcnp.encode_packet(DriveCmd.spec, cmds, bcnp.CLEAR_QUEUE if clear else 0)


class RawHost:
    """A host on a bare socket, TCP or UDP, so that the test decides every byte it sends."""

    def __init__(self, sim: Sim, udp: bool) -> None:
        self.sim = sim
        self.udp = udp
        if udp:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.settimeout(5)
            self.sock.connect(("127.0.0.1", sim.link.udp.port))
        else:
            self.sock = socket.create_connection(("127.0.0.1", sim.link.tcp.port), timeout=5)
            assert recv_exactly(self.sock, 8) == HANDSHAKE
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.handshake()

    def handshake(self) -> None:
        before = self.sim.link.counter("controllers")
        self.send(HANDSHAKE)
        if self.udp:
            while self.sock.recv(65_536) != HANDSHAKE:  # the answer, behind any telemetry
                pass
        wait_until(lambda: self.sim.link.counter("controllers") == before + 1, what="the handshake")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_c_after_a_link_loss_nothing_sent_before_the_host_connects_again_runs(
    sim: Sim, transport: str
) -> None:
    """A proxy holds the link: the robot stops 200 ms into the silence and ends the controller
    (TCP: closes its connection; UDP: unlocks it). The host's backlog, delivered in one burst
    on the same connection when the link comes back, never runs; a new connection (UDP: a new
    handshake) drives again."""
    sim.tick(5)
    host = RawHost(sim, udp=transport == "udp")
    sim.deliver(host.send, commands(*[cmd(1.0, ms=100)] * 50, clear=True))  # 5 s of commands
    for _ in range(5):
        sim.deliver(host.send, KEEPALIVE)
        sim.tick(2)
    assert sim.number("Network/CmdVx") == 1.0 and sim.connected()
    received = sim.number("Network/MessagesRx")
    sim.tick(11)  # the proxy holds everything: 260 ms since the last packet, stopped at 220
    assert sim.number("Network/CmdVx") == 0.0 and sim.motors() == (0.0, 0.0) and not sim.connected()
    wait_until(lambda: sim.link.counter("link_losses") == 1, what="the controller to be ended")

    backlog = [commands(*[cmd(1.0, ms=100)] * 5) for _ in range(5)] + [KEEPALIVE] * 5
    with contextlib.suppress(OSError):  # TCP: the robot's close may have reset the connection already
        for packet in backlog:
            host.send(packet)
    if host.udp:
        wait_until(lambda: sim.link.udp.counters.unpaired_datagrams == len(backlog), what="the backlog")
    else:
        assert peer_closed(host.sock)
    seen = sim.run(0.5)
    assert set(seen) == {0.0} and sim.motors() == (0.0, 0.0)
    assert sim.number("Network/MessagesRx") == received and sim.number("Network/QueueSize") == 0
    assert sim.number("Network/LinkLosses") == 1 and sim.string("Network/Transport") == "none"
    # Found by the tick 220 ms after the last packet, or by the receive thread, which on a busy
    # machine may look only after the last of these ticks (260 ms).
    drop = re.fullmatch(
        rf"{host.address}: link lost: no packet for (0\.\d+) s \(link timeout 0\.2 s\)",
        sim.string("Network/LastDrop"),
    )
    assert drop is not None and 0.22 <= float(drop[1]) <= 0.26, sim.string("Network/LastDrop")

    if host.udp:
        host.handshake()  # the same socket: a new handshake is a new link
    else:
        host.sock.close()
        host = RawHost(sim, udp=False)
    sim.deliver(host.send, commands(cmd(0.5, ms=1000), clear=True))
    for _ in range(5):
        sim.deliver(host.send, KEEPALIVE)
        sim.tick(2)
    assert sim.number("Network/CmdVx") == 0.5 and sim.connected()
    assert sim.number("Network/LinkLosses") == 1
    host.sock.close()


def test_c_the_tick_that_stops_the_robot_ends_the_controller_its_server_thinks_alive(sim: Sim) -> None:
    """Packets of another type keep the link alive as the server sees it but start nothing:
    200 ms after the last command the queue stops the robot, and that tick has the server
    end the controller, so no command sent before it connects again can start."""
    host = RawHost(sim, udp=False)
    sim.deliver(host.send, commands(cmd(1.0, ms=10_000), clear=True))
    other = bcnp.encode_packet(DRIVETRAIN_TELEMETRY_SPEC, [])
    for _ in range(10):
        sim.deliver(host.send, other)
        sim.tick()
    assert sim.number("Network/CmdVx") == 1.0 and sim.connected()
    sim.deliver(host.send, other)
    sim.tick()
    assert sim.number("Network/CmdVx") == 0.0 and sim.motors() == (0.0, 0.0)
    wait_until(lambda: sim.link.counter("link_losses") == 1, what="the controller to be ended")
    assert peer_closed(host.sock)
    sim.tick()
    assert sim.string("Network/LastDrop") == (
        f"{host.address}: link lost: no packet for 0.220 s (link timeout 0.2 s)"
    )
    assert sim.link.tcp.counters.idle_drops == sim.link.tcp.counters.disconnects == 0
    host.sock.close()


def test_d_zero_message_clear_queue_stops_in_the_next_tick(sim: Sim) -> None:
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=5000)] * 3, clear_queue=True)
        sim.run(0.5, host)
        assert sim.motors() != (0.0, 0.0)
        sim.deliver(host.stop)
        sim.tick()
        assert sim.motors() == (0.0, 0.0)
        assert sim.number("Network/CmdVx") == 0.0 and sim.number("Network/QueueSize") == 0
        assert sim.connected()  # a stop is not a link loss


def test_acceleration_is_limited_and_every_stop_resets_the_ramp(sim: Sim) -> None:
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, 1.0, ms=5000)], clear_queue=True)
        ramp = []
        for _ in range(3):
            sim.tick()
            ramp.append(sim.drivetrain.commanded)
        # 3 m/s^2 and 6 rad/s^2 at 20 ms per tick.
        assert ramp == [pytest.approx((0.06 * k, 0.12 * k)) for k in (1, 2, 3)]
        sim.deliver(host.stop)
        sim.tick()
        assert sim.drivetrain.commanded == (0.0, 0.0) and sim.motors() == (0.0, 0.0)
        sim.deliver(host.send, [cmd(1.0, ms=5000)])
        sim.tick()
        assert sim.drivetrain.commanded == pytest.approx((0.06, 0.0))  # ramps up from 0 again


def test_disabling_a_moving_robot_stops_it_in_that_tick(sim: Sim) -> None:
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=5000)], clear_queue=True)
        sim.run(0.5, host)
        assert sim.motors() != (0.0, 0.0)
        sim.tick(enabled=False)
        assert sim.motors() == (0.0, 0.0) and sim.drivetrain.commanded == (0.0, 0.0)
        assert sim.number("Network/CmdVx") == 1.0  # the queue still runs and reports


def step_mode(sim: Sim, mode: str, n: int = 1) -> None:
    """``n`` ticks with the driver station in ``mode``: disabled, autonomous, teleop or test."""
    DriverStationSim.setTest(mode == "test")
    sim.tick(n, autonomous=mode == "autonomous", enabled=mode != "disabled")


def test_the_keys_say_the_mode_and_only_autonomous_drives_bcnp_commands(sim: Sim) -> None:
    """Network/Mode and Network/Enabled follow the driver station; a host's command moves
    the chassis in autonomous only, while the link and the queue run in every mode."""
    moved = {}
    with sim.connect() as host:
        for mode in ("disabled", "autonomous", "teleop", "test", "disabled"):
            step_mode(sim, mode)
            assert sim.string("Network/Mode") == mode
            assert SmartDashboard.getBoolean("Network/Enabled", None) is (mode != "disabled")  # type: ignore[arg-type]
            for _ in range(20):  # what the last mode's command left rolls out
                sim.deliver(host.keepalive)
                step_mode(sim, mode, 2)
            before = sim.travelled()
            sim.deliver(host.send, [cmd(1.0, ms=400)], clear_queue=True)
            for _ in range(10):
                sim.deliver(host.keepalive)
                step_mode(sim, mode, 2)
            moved[mode] = sim.travelled() - before
            assert sim.connected() and sim.number("Network/MessagesRx") > 0
    assert moved["autonomous"] > 0.15, moved  # 1 m/s for 0.4 s, the first 0.33 s ramping up
    assert all(abs(moved[mode]) < 0.01 for mode in ("disabled", "teleop", "test")), moved
    DriverStationSim.setTest(False)


def field_pose() -> list[float]:
    """The pose physics.py publishes for the sim's Field view: x, y, degrees."""
    return list(
        ntcore.NetworkTableInstance.getDefault().getTable("SmartDashboard/Field").getNumberArray("Robot", [])
    )


def test_positive_omega_turns_left_and_odometry_follows_the_simulated_robot(sim: Sim) -> None:
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(0.5, 1.0, ms=1500)], clear_queue=True)
        sim.run(1.0, host)
    pose = sim.drivetrain.pose()
    assert pose.rotation().radians() > 0.5 and pose.Y() > 0.05  # counter-clockwise: left
    x, y, degrees = field_pose()
    start = physics.START_POSE
    assert (x - start.X(), y - start.Y()) == pytest.approx((pose.X(), pose.Y()), abs=0.05)
    assert degrees == pytest.approx(pose.rotation().degrees(), abs=3)
    trail = (
        ntcore.NetworkTableInstance.getDefault().getTable("SmartDashboard/Field").getNumberArray("Trail", [])
    )
    assert len(trail) >= 3 * 8 and trail[:2] == [start.X(), start.Y()]  # a pose per 0.1 s, from the start
    assert (trail[-3], trail[-2]) == pytest.approx((x, y), abs=0.15)  # up to 0.1 s behind the robot


def test_teleop_right_stick_right_turns_clockwise(sim: Sim) -> None:
    stick = XboxControllerSim(0)
    stick.setRightX(1.0)
    sim.run(0.5, autonomous=False, enabled=True)
    assert sim.drivetrain.pose().rotation().radians() < -0.3
    assert field_pose()[2] < -15


def test_motor_safety_stays_enabled_and_fed_while_stopped(sim: Sim) -> None:
    motors = sim.drivetrain.io.watchdogs()
    for enabled in (False, True):  # idle while disabled, then autonomous with no commands
        sim.tick(25, enabled=enabled)  # 0.5 s: five times the 100 ms motor-safety expiration
        assert all(m.isSafetyEnabled() for m in motors)
        assert all(m.isAlive() for m in motors)  # fed every tick, so no "output not updated" errors
    assert sim.motors() == (0.0, 0.0)


def test_the_first_command_after_a_standstill_ramps_from_zero(sim: Sim) -> None:
    """Stopped, the acceleration limiters restart every tick (a reset restarts their
    clock too): however long the robot stood, the first command gets one tick's worth
    of acceleration, not a jump worth the whole standstill."""
    sim.tick(25)  # 0.5 s standing in autonomous, no commands
    sim.drivetrain.drive(constants.MAX_VX_MPS, 0.0)  # what the next tick's command would do
    assert constants.MAX_ACCEL_MPS2 is not None and constants.MAX_ACCEL_MPS2 * 0.5 >= constants.MAX_VX_MPS
    assert 0.0 <= sim.drivetrain.commanded[0] <= constants.MAX_ACCEL_MPS2 * TICK + 1e-9


@pytest.mark.parametrize("wiring", ["kitbot"], indirect=True)  # the kitbot's PWM outputs
def test_a_side_set_before_an_error_is_still_stopped(sim: Sim) -> None:
    """The right side's output fails after the left motor took its new speed: the next
    stop still stops the left motor (a stopped kitbot skips stopMotor only when nothing
    was driven since)."""
    io = sim.drivetrain.io
    assert isinstance(io, KitbotIO)
    sim.tick(2)  # stopped

    right = io.right_motor

    class RightFails:
        def setVoltage(self, volts: float) -> None:
            raise RuntimeError("right side fails")

    io.right_motor = RightFails()  # type: ignore[assignment]
    try:
        with pytest.raises(RuntimeError):
            io.set_wheel_speeds(1.0, 1.0, 1.0, 1.0)
    finally:
        io.right_motor = right
    assert io.outputs()[0] != 0.0
    io.stop()
    assert io.outputs() == (0.0, 0.0)


def test_a_loop_that_stops_driving_has_its_motors_stopped_by_the_watchdog(sim: Sim) -> None:
    """The robot loop hangs (nothing calls the drivetrain any more) while the motors run:
    WPILib motor safety stops them once 100 ms have passed without an update."""
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=5000)], clear_queue=True)
        sim.run(0.5, host)
        assert sim.motors() != (0.0, 0.0)
        drivetrain = sim.drivetrain
        drivetrain.periodic = lambda: None  # the loop no longer reaches the drivetrain
        try:
            watchdogs = drivetrain.io.watchdogs()
            sim.tick(4)  # 80 ms: still within the expiration
            wpilib.MotorSafety.checkMotors()
            assert all(w.isAlive() for w in watchdogs) and sim.motors() != (0.0, 0.0)
            sim.tick(2)  # 120 ms without a feed
            wpilib.MotorSafety.checkMotors()
            assert not any(w.isAlive() for w in watchdogs)
            sim.tick()  # the physics step after the stop
            assert sim.motors() == (0.0, 0.0)
        finally:
            del drivetrain.periodic  # the class's method again; no cycle keeps the robot alive


# -- (e) (f) nothing moves -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["disabled", "teleop"])
def test_e_disabled_and_teleop_ignore_bcnp_commands(sim: Sim, mode: str) -> None:
    flags = {"autonomous": False, "enabled": mode == "teleop"}
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
        seen = sim.run(1.0, host, **flags)
        assert seen[0] == 1.0  # the queue keeps running and reporting
        assert sim.motors() == (0.0, 0.0)
    assert abs(sim.travelled()) < 1e-6


def test_e_teleop_drives_from_the_xbox_controller(sim: Sim) -> None:
    stick = XboxControllerSim(0)
    stick.setLeftY(-1.0)  # full forward
    sim.run(1.0, autonomous=False, enabled=True)
    assert sim.drivetrain.wheel_velocities()[0] == pytest.approx(1.5, rel=0.1)


def test_f_a_peer_with_the_wrong_hash_moves_nothing(sim: Sim, test_schema: bcnp.Schema) -> None:
    with pytest.raises(SchemaMismatchError):
        Client(test_schema, "127.0.0.1", sim.link.tcp.port).connect()
    # A raw peer that ignores the mismatch and streams anyway.
    with socket.create_connection(("127.0.0.1", sim.link.tcp.port), timeout=5) as raw:
        raw.sendall(bcnp.encode_handshake(0x12345678) + bcnp.encode_packet(DriveCmd.spec, [cmd(1.0)], 1))
        wait_until(lambda: sim.link.tcp.status().handshake_rejects == 2)
    sim.run(0.5)
    assert sim.motors() == (0.0, 0.0) and abs(sim.travelled()) < 1e-6
    assert sim.number("Network/HandshakeRejects") == 2
    assert sim.string("Network/RemoteSchemaHash") == "0x12345678"
    assert sim.number("Network/MessagesRx") == 0 and sim.link.counter("bytes_in") == 0


# -- (g) timing ------------------------------------------------------------------------------------------


def test_g_fifty_twenty_ms_commands_run_in_order_and_end_on_time(sim: Sim) -> None:
    batch = [cmd(0.5 if i % 2 == 0 else -0.5, ms=20) for i in range(50)]
    with sim.connect() as host:
        sim.deliver(host.send, batch, clear_queue=True)
        seen = sim.run(1.2, host)
    active = [i for i, v in enumerate(seen) if v != 0.0]
    start, end = active[0], active[-1] + 1
    assert seen[start:end] == [0.5, -0.5] * 25  # each command for exactly one tick, in order
    assert (end - start) * TICK == pytest.approx(1.00, abs=TICK)
    assert sim.number("Network/MessagesSkipped") == 0


# -- (h) keys through a real NT4 client ----------------------------------------------------------------------

NETWORK_KEYS = {
    "Connected": ntcore.NetworkTableType.kBoolean,
    "QueueSize": ntcore.NetworkTableType.kDouble,
    "CmdVx": ntcore.NetworkTableType.kDouble,
    "CmdW": ntcore.NetworkTableType.kDouble,
    "SchemaHash": ntcore.NetworkTableType.kString,
    "ParseErrors": ntcore.NetworkTableType.kDouble,
    "MessagesRx": ntcore.NetworkTableType.kDouble,
    "QueueOverflows": ntcore.NetworkTableType.kDouble,
    "MessagesSkipped": ntcore.NetworkTableType.kDouble,
    "TelemetrySent": ntcore.NetworkTableType.kDouble,
    "TelemetryPackets": ntcore.NetworkTableType.kDouble,
    "Transport": ntcore.NetworkTableType.kString,
    "Peer": ntcore.NetworkTableType.kString,
    "RemoteSchemaHash": ntcore.NetworkTableType.kString,
    "HandshakeRejects": ntcore.NetworkTableType.kDouble,
    "PeersRefused": ntcore.NetworkTableType.kDouble,
    "LinkLosses": ntcore.NetworkTableType.kDouble,
    "LastDrop": ntcore.NetworkTableType.kString,
}


def test_h_network_keys_through_a_real_nt4_client(control, robot, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ntcore.NetworkTableInstance.getDefault()
    server.stopLocal()
    server.startServer(str(tmp_path / "networktables.json"), "127.0.0.1", free_port(), port4 := free_port())
    client = ntcore.NetworkTableInstance.create()
    try:
        client.startClient4("bcnp-test")
        client.setServer("127.0.0.1", port4)
        table = client.getTable("SmartDashboard").getSubTable("Network")
        # NT4 clients only learn of topics they subscribe to: all of Network/, at 50 Hz.
        everything = ntcore.MultiSubscriber(
            client, ["/SmartDashboard/Network/"], ntcore.PubSubOptions(periodic=0.02)
        )
        with control.run_robot():
            sim = Sim(robot)
            with sim.connect() as host:
                sim.deliver(host.send, [cmd(1.0, -0.5, ms=2000)], clear_queue=True)
                sim.run(0.2, host)
                wait_until(lambda: table.getNumber("CmdVx", 0.0) == 1.0, what="CmdVx on the NT client")
                wait_until(lambda: set(table.getKeys()) >= set(NETWORK_KEYS), what="every Network/* key")
                types = {name: table.getEntry(name).getType() for name in NETWORK_KEYS}
                assert types == NETWORK_KEYS
                assert table.getBoolean("Connected", False) is True
                assert table.getNumber("CmdW", 0.0) == -0.5
                assert table.getString("SchemaHash", "") == f"0x{SCHEMA.hash:08X}" == "0xE9EFEE08"
                assert table.getString("RemoteSchemaHash", "") == "0xE9EFEE08"
                assert table.getString("Transport", "") == "tcp"
                assert table.getString("Peer", "") == f"127.0.0.1:{host.link._sock.getsockname()[1]}"  # type: ignore[union-attr]
                assert table.getNumber("MessagesRx", 0.0) == 1.0
        everything.close()
    finally:
        client.stopClient()
        ntcore.NetworkTableInstance.destroy(client)
        server.stopServer()
        server.startLocal()


# -- (i) telemetry -----------------------------------------------------------------------------------------


def test_i_telemetry_arrives_at_25_packets_per_second_and_decodes(sim: Sim) -> None:
    packets: list[bcnp.PacketView] = []
    with sim.connect(on_telemetry=packets.append) as host:
        sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
        t0 = len(packets)
        sim.run(2.0, host)
        wait_until(lambda: len(packets) >= t0 + 50, what="50 telemetry packets")
    got = packets[t0:]
    assert len(got) == 50  # 2.0 s of simulated time at 25 packets/s
    samples = [m for p in got for m in p]
    assert all(p.spec.name == "DrivetrainTelemetry" and p.count == 2 for p in got)
    stamps = [m.timestampMs for m in samples]
    assert all(b - a == 20 for a, b in itertools.pairwise(stamps))
    assert samples[-1].leftVelocity == pytest.approx(1.0, rel=0.1)
    assert samples[-1].leftPosition > samples[0].leftPosition
    assert sim.number("Network/TelemetryPackets") >= 50


def test_telemetry_reaches_a_peer_that_only_listens(sim: Sim) -> None:
    packets: list[bcnp.PacketView] = []
    with sim.connect(udp=True, on_telemetry=packets.append):
        sim.tick(10)
        wait_until(lambda: len(packets) >= 5)
    assert sim.string("Network/Transport") == "udp" and not sim.connected()


def test_a_new_controller_gets_no_telemetry_sampled_for_the_previous_one(sim: Sim) -> None:
    first = sim.connect()
    sim.tick()
    if sim.link.telemetry.buffered == 0:
        sim.tick()
    assert sim.link.telemetry.buffered == 1  # one sample waits for the next flush
    first.close()
    packets: list[bcnp.PacketView] = []
    with sim.connect(udp=True, on_telemetry=packets.append):
        switched_ms = round(Timer.getFPGATimestamp() * 1000)
        sim.tick(2)
        wait_until(lambda: packets, what="the new controller's first telemetry packet")
    stamps = [m.timestampMs for m in packets[0]]
    assert stamps and all(t > switched_ms for t in stamps), (switched_ms, stamps)


def test_the_tick_is_marked_busy_for_the_receive_threads(sim: Sim) -> None:
    seen: list[bool] = []
    periodic = sim.drivetrain.periodic

    def spy() -> None:
        seen.append(sim.link.priority._busy)
        periodic()

    sim.drivetrain.periodic = spy
    try:
        sim.tick(3)
    finally:
        # Back to the class's method: a spy left on the instance would keep the robot
        # (and its SPARK MAX device ids) alive into the next test.
        del sim.drivetrain.periodic
    assert seen == [True, True, True]  # busy while the tick runs ...
    assert sim.link.priority._busy is False  # ... idle between ticks
    assert sys.getswitchinterval() == pytest.approx(0.0005)


# -- the SPARK MAX wiring's configuration, as REVLib reports it ---------------------------------------


@pytest.mark.parametrize("wiring", ["sparkmax"], indirect=True)
def test_the_spark_max_wiring_is_configured_as_the_reference_robot_with_its_wheel_loop(sim: Sim) -> None:
    io = sim.drivetrain.io
    assert all(error == rev.REVLibError.kOk for error in io.config_errors) and len(io.config_errors) == 4
    leaders = {"left": io.left_leader, "right": io.right_leader}
    followers = {"left": io.left_follower, "right": io.right_follower}
    assert [
        s.getDeviceId() for s in (io.left_leader, io.left_follower, io.right_leader, io.right_follower)
    ] == [
        2,
        3,
        4,
        5,
    ]
    for side, leader in leaders.items():
        config = leader.configAccessor
        assert config.getInverted() == (side == "right")
        assert config.getIdleMode() == rev.SparkBaseConfig.IdleMode.kBrake
        assert leader.getMotorType() == rev.SparkLowLevel.MotorType.kBrushed
        assert config.encoder.getCountsPerRevolution() == 42
        metres_per_turn = math.pi * 0.1524 / 10.71
        assert config.encoder.getPositionConversionFactor() == pytest.approx(metres_per_turn)
        assert config.encoder.getVelocityConversionFactor() == pytest.approx(metres_per_turn / 60)
        loop = config.closedLoop
        # P in the controller; the feedforward and the integral (on the distance) are the roboRIO's,
        # sent with each setpoint.
        assert (loop.getP(), loop.getI(), loop.getD()) == pytest.approx((constants.SPARKMAX_WHEEL_KP, 0, 0))
        assert loop.feedForward.getkV() == 0.0
        follower = followers[side]
        assert (
            follower.isFollower()
            and follower.configAccessor.getFollowerModeLeaderId() == leader.getDeviceId()
        )
        assert follower.configAccessor.getIdleMode() == rev.SparkBaseConfig.IdleMode.kBrake
    assert isinstance(io.gyro, wpilib.ADIS16470_IMU)  # the turn-rate loop's gyro


@pytest.fixture
def no_gyro(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "SPARKMAX_GYRO", None)


@pytest.mark.parametrize("wiring", ["sparkmax"], indirect=True)
def test_without_a_gyro_the_wheels_give_the_heading(no_gyro: None, sim: Sim, truth: Physics) -> None:
    assert sim.drivetrain.io.gyro is None and sim.drivetrain.turn is None
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(0.5, 1.0, ms=1500)], clear_queue=True)
        sim.run(1.0, host)
    heading = sim.drivetrain.pose().rotation().radians()
    assert heading == pytest.approx(truth.drivesim.getHeading().radians(), abs=0.05) and heading > 0.5
