"""Interlocks: wrong wiring and failing sensors never drive the robot away.

The pyfrc simulator with a fault of ``sim/settings.py`` on (a gyro mounted upside down, a right
side whose motors turn backward), a wrong constant, or a device that fails, both wirings,
judged by the simulated chassis (``physics.PhysicsEngine.drivesim``), never by what the code
commanded. The checks themselves are ``subsystems/drivetrain/checks.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import rev
from test_on_target import arc, unicycle
from test_recording import mark, read_log, read_log_after
from test_robot import TICK, Physics, Sim, cmd
from wpilib import SmartDashboard
from wpimath.geometry import Pose2d, Rotation2d

import constants
from subsystems.drivetrain import checks as drive_checks
from subsystems.drivetrain.drivetrain import Drivetrain
from subsystems.drivetrain.io import DrivetrainInputs, DrivetrainIO, VelocityFilter
from subsystems.drivetrain.kitbot import KitbotIO
from subsystems.drivetrain.sparkmax import SparkMaxIO

WIRINGS = ["kitbot", "sparkmax"]


@pytest.fixture
def wiring(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BCNP_DRIVETRAIN", request.param)
    return str(request.param)


@pytest.fixture
def fault(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fault set up before the robot (and the simulator) is built."""
    name = str(request.param)
    if name == "reversed gyro":
        monkeypatch.setenv("BCNP_SIM_GYRO_SIGN", "-1")
    elif name == "no gyro":
        monkeypatch.setattr(constants, "SPARKMAX_GYRO", None)
        read = KitbotIO.update_inputs

        def without_gyro(self: KitbotIO, inputs: DrivetrainInputs) -> None:
            read(self, inputs)
            inputs.heading = inputs.turn_rate_radps = None

        monkeypatch.setattr(KitbotIO, "update_inputs", without_gyro)
    elif name == "right reversed":
        monkeypatch.setenv("BCNP_SIM_RIGHT_REVERSED", "1")
    elif name == "right encoder reversed":
        monkeypatch.setattr(constants, "RIGHT_ENCODER_REVERSED", False)
    elif name == "right not inverted":
        monkeypatch.setattr(constants, "SPARKMAX_RIGHT_INVERTED", False)
    elif name == "scrub":
        monkeypatch.setenv("BCNP_SIM_SCRUB", "1.25")
    elif name == "config fails":
        monkeypatch.setattr(rev.SparkMax, "configure", lambda *args: rev.REVLibError.kTimeout)
    elif name == "false rate":
        read_imu = SparkMaxIO.update_inputs

        def drifting(self: SparkMaxIO, inputs: DrivetrainInputs) -> None:
            read_imu(self, inputs)
            seconds = self.left_encoder.getPosition() / 0.5  # a turn where the robot drives straight
            assert inputs.heading is not None and inputs.turn_rate_radps is not None
            inputs.heading = inputs.heading + Rotation2d(0.4 * max(0.0, seconds))
            inputs.turn_rate_radps += 0.4

        monkeypatch.setattr(SparkMaxIO, "update_inputs", drifting)
    else:
        assert name == "none", name
    return name


@pytest.fixture
def sim(fault: str, wiring: str, control, robot) -> Iterator[Sim]:  # type: ignore[no-untyped-def]
    with control.run_robot():
        yield Sim(robot)


@pytest.fixture
def truth(sim: Sim, request: pytest.FixtureRequest) -> Physics:
    return Physics(request)


def alerts(level: str) -> list[str]:
    return list(SmartDashboard.getStringArray(f"Drivetrain/{level}", []))


# -- the gyro against the wheels ------------------------------------------------------------------

#: How far the 4 s arc may end from where it was commanded: with no gyro at all the simulated
#: chassis ends 0.070 m and 0.003 rad off (kitbot), 0.013 m and 0.010 rad (SPARK MAX); an
#: upside-down gyro costs the ticks it takes to find it (0.080 m, 0.002 rad; 0.019 m, 0.007 rad).
ARC_POSITION_M = {"kitbot": 0.09, "sparkmax": 0.03}
ARC_HEADING_RAD = 0.02


@pytest.mark.parametrize("fault", ["reversed gyro", "no gyro"], indirect=True)
@pytest.mark.parametrize("wiring", WIRINGS, indirect=True)
def test_an_upside_down_gyro_is_distrusted_and_the_arc_ends_as_without_one(
    fault: str, sim: Sim, truth: Physics
) -> None:
    """Old code: the turn loop, fed a reversed heading, is positive feedback: the arc ended
    2.5 m from where it was commanded (both wirings), the chassis spun 4.4 rad off the
    commanded heading on the way. Now found 0.18 s (kitbot) and 0.14 s (SPARK MAX) in."""
    sim.tick(5)
    drivesim = truth.drivesim
    start = drivesim.getPose()
    commands = arc(0.8)
    states: list[str] = []
    headings: list[float] = []
    with sim.connect() as host:
        for i in range(0, len(commands), 25):
            batch = [cmd(vx, omega, ms) for vx, omega, ms in commands[i : i + 25]]
            sim.deliver(host.send, batch, clear_queue=i == 0)
            for _ in range(25):
                sim.run(TICK, host)
                states.append(sim.drivetrain.gyro_state)
                headings.append(drivesim.getPose().relativeTo(start).rotation().radians())
        sim.run(0.5, host)
    x, y, heading = unicycle(commands)
    moved = drivesim.getPose().relativeTo(start)
    assert math.hypot(moved.X() - x, moved.Y() - y) < ARC_POSITION_M[sim.drivetrain.io.wiring]
    assert abs(math.remainder(moved.rotation().radians() - heading, math.tau)) < ARC_HEADING_RAD
    # Never spun: the chassis is never more than a few hundredths of a radian off the commanded heading.
    for tick, true in enumerate(headings):
        _, _, should = unicycle(commands[: tick + 1])
        assert abs(true - should) < 0.05, tick
    if fault == "no gyro":
        assert set(states) == {"none"}
        return
    # Found within 0.25 s of the first command (it has turned 0.02 rad by then).
    assert states.index("disagrees with the wheels") * TICK <= 0.25
    assert states[-1] == "disagrees with the wheels"  # a reversed gyro never agrees again
    assert sim.string("Network/Gyro") == "disagrees with the wheels"
    assert sim.drivetrain.gyro_disagrees_alert.get()
    assert any("Gyro disagrees with the wheels" in text for text in alerts("warnings"))
    assert not sim.drivetrain.gyro_alert.get()


@pytest.mark.parametrize("fault", ["false rate"], indirect=True)
@pytest.mark.parametrize("wiring", ["sparkmax"], indirect=True)
def test_a_gyro_that_reports_a_turn_that_is_not_there_is_distrusted_and_recorded(
    sim: Sim, truth: Physics
) -> None:
    """The IMU reports 0.4 rad/s while the robot drives straight. Old code: the turn loop
    turned the chassis the other way: 1.04 rad off, 0.44 m aside after a 1 m straight line."""
    sim.tick(5)
    drivesim = truth.drivesim
    start = drivesim.getPose()
    text = mark()
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(0.5, ms=2000)], clear_queue=True)
        sim.run(2.5, host)
    moved = drivesim.getPose().relativeTo(start)
    assert abs(moved.rotation().radians()) < 0.05 and abs(moved.Y()) < 0.05
    assert sim.string("Network/Gyro") == "disagrees with the wheels"
    log = read_log_after(text, lambda log: bool(log["BCNP/Gyro"]))
    assert log["BCNP/Gyro"][0].startswith("disagrees with the wheels: the gyro turned")  # type: ignore[union-attr]


def _manoeuvres(sim: Sim) -> list[str]:
    """Slow and fast arcs, turns in place, hard stops and direction reversals; the gyro's state
    after each tick."""
    states: list[str] = []
    plan = [
        [cmd(0.5, 0.05, ms=1500)],  # a turn slow enough to be mostly noise
        [cmd(1.0, 0.8, ms=1500), cmd(-1.0, -0.8, ms=1500)],  # reversed in full
        [cmd(0.0, 2.5, ms=1000)],  # in place at the limit, then the queue empties: a hard stop
        [cmd(0.0, -2.5, ms=700), cmd(0.0, 2.5, ms=700)],
        [cmd(1.5, 0.3, ms=800)],
    ]
    with sim.connect() as host:
        for commands in plan:
            seconds = sum(c.durationMs for c in commands) / 1000 + 0.4
            sim.deliver(host.send, commands, clear_queue=True)
            for _ in range(round(seconds / TICK)):
                sim.run(TICK, host)
                states.append(sim.drivetrain.gyro_state)
    return states


@pytest.mark.parametrize("fault", ["none", "scrub"], indirect=True)
@pytest.mark.parametrize("wiring", WIRINGS, indirect=True)
def test_a_healthy_gyro_and_healthy_sides_never_trip(sim: Sim) -> None:
    """Scrub up to 1.25, the gyro's noise, low turn rates, hard stops, reversals."""
    sim.tick(5)
    states = _manoeuvres(sim)
    assert set(states) == {"ok"}
    assert sim.drivetrain.drive_fault == "" and sim.string("Network/DriveFault") == ""


@pytest.mark.parametrize("fault", ["none"], indirect=True)
@pytest.mark.parametrize("wiring", WIRINGS, indirect=True)
def test_teleop_stick_reversals_never_trip(sim: Sim) -> None:
    from wpilib.simulation import XboxControllerSim

    stick = XboxControllerSim(constants.DRIVER_CONTROLLER_PORT)
    sim.tick(5, autonomous=False)
    for forward, turn in [(-1.0, 0.0), (1.0, 0.0), (-1.0, 1.0), (0.0, -1.0), (1.0, 1.0), (0.0, 0.0)]:
        stick.setLeftY(forward)
        stick.setRightX(turn)
        stick.notifyNewData()
        for _ in range(40):
            sim.tick(autonomous=False)
            assert sim.drivetrain.drive_fault == ""
            assert sim.drivetrain.gyro_state == "ok"


# -- a side against its command ---------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["right reversed"], indirect=True)
@pytest.mark.parametrize("wiring", WIRINGS, indirect=True)
def test_a_side_whose_motors_turn_backward_stops_the_drivetrain_until_the_next_enable(
    sim: Sim, truth: Physics
) -> None:
    """Old code: the right wheel loop drove its backward motor ever harder: the robot spun
    13 rad in 2 s (both wirings). Now stopped after 0.14 s (kitbot) and 0.12 s (SPARK MAX),
    having moved 0.04 m and turned 0.15 and 0.18 rad."""
    sim.tick(5)
    drivesim = truth.drivesim
    start = drivesim.getPose()
    text = mark()
    tripped = None
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
        for tick in range(100):
            sim.run(TICK, host)
            if tripped is None and sim.drivetrain.drive_fault:
                tripped = tick + 1
                assert sim.motors() == (0.0, 0.0)  # in that tick
            if tripped is not None:
                assert sim.motors() == (0.0, 0.0) and sim.drivetrain.commanded == (0.0, 0.0)
        assert tripped is not None and tripped * TICK <= 0.25
        moved = drivesim.getPose().relativeTo(start)
        assert math.hypot(moved.X(), moved.Y()) <= 0.3
        assert abs(moved.rotation().radians()) <= 0.5
        fault = sim.string("Network/DriveFault")
        assert fault.startswith("right side runs against its command")
        assert sim.drivetrain.drive_fault_alert.get()
        assert any("right side runs against its command" in text for text in alerts("errors"))
        log = read_log_after(text, lambda log: bool(log["BCNP/DriveFault"]))
        assert log["BCNP/DriveFault"] == [fault]
        # Still stopped in another mode; cleared by disabled -> enabled, then found again.
        sim.run(0.2, host, autonomous=False)
        assert sim.motors() == (0.0, 0.0) and sim.drivetrain.drive_fault
        sim.run(0.1, host, enabled=False)
        assert sim.drivetrain.drive_fault
        sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
        sim.tick()
        assert sim.string("Network/DriveFault") == "" and not sim.drivetrain.drive_fault_alert.get()
        sim.run(0.3, host)
        assert sim.drivetrain.drive_fault and sim.motors() == (0.0, 0.0)


def one_metre_per_second_for_2_s(sim: Sim, truth: Physics, look_at_s: float) -> tuple[str, Pose2d]:
    """A host's 1 m/s for 2 s: the drive fault (the key, checked against the drivetrain's own)
    ``look_at_s`` into it, and how far the chassis truly moved by the end."""
    sim.tick(5)
    drivesim = truth.drivesim
    start = drivesim.getPose()
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
        sim.run(look_at_s, host)
        fault = sim.string("Network/DriveFault")
        assert fault == sim.drivetrain.drive_fault
        sim.run(2.0 - look_at_s, host)
    return fault, drivesim.getPose().relativeTo(start)


@pytest.mark.parametrize("fault", ["right encoder reversed"], indirect=True)
@pytest.mark.parametrize("wiring", ["kitbot"], indirect=True)
def test_a_kitbot_with_the_right_encoder_reversal_wrong_trips(sim: Sim, truth: Physics) -> None:
    """Old code: the right encoder counting backward, its loop drove the right side at full
    output: the robot spun 7.3 rad in 2 s. Now stopped after 0.16 s, 0.07 m and 0.04 rad."""
    fault, moved = one_metre_per_second_for_2_s(sim, truth, look_at_s=0.25)
    assert fault.startswith("right side runs against its command")
    assert math.hypot(moved.X(), moved.Y()) <= 0.3 and abs(moved.rotation().radians()) <= 0.5


@pytest.mark.parametrize("fault", ["right not inverted"], indirect=True)
@pytest.mark.parametrize("wiring", ["sparkmax"], indirect=True)
def test_a_spark_max_side_left_uninverted_spins_no_further_than_a_quarter_turn(
    sim: Sim, truth: Physics
) -> None:
    """The SPARK MAX's encoder follows its motor's inversion: with SPARKMAX_RIGHT_INVERTED
    wrong the right side drives backward while its encoder reads forward, so no side runs
    against its command; only the gyro sees the chassis spin, and distrusting it left the wheel
    loops spinning the robot on the spot (3 rad/s, 5.6 rad in 2 s). The spin check stops it."""
    fault, moved = one_metre_per_second_for_2_s(sim, truth, look_at_s=0.3)
    assert fault.startswith("the chassis turns at")
    assert math.hypot(moved.X(), moved.Y()) <= 0.3 and abs(moved.rotation().radians()) <= 0.5


def test_a_side_check_lets_a_wheel_close_on_its_command_and_counts_volts_as_speed() -> None:
    """A reversal, open loop too (SysId: a full step the other way while the robot still runs
    the old way): the wheel runs against the command for a while, but slows toward it."""
    check = drive_checks.SideCheck("left", TICK)
    speed = 2.0
    for _ in range(50):
        speed += (drive_checks.volts_as_speed(-7.0) - speed) * 0.1  # a first-order wheel
        assert check.update(drive_checks.volts_as_speed(-7.0), speed) == ""
    # A wheel that runs away from its command, or that sits still against it, trips.
    speed = 0.0
    ticks = 0
    while not check.update(0.5, speed):
        speed -= 0.1
        ticks += 1
        assert ticks * TICK < 0.2
    assert drive_checks.volts_as_speed(0.0) == 0.0


# -- configuration -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["config fails"], indirect=True)
@pytest.mark.parametrize("wiring", ["sparkmax"], indirect=True)
def test_a_spark_max_that_refuses_its_configuration_is_reported_at_start(sim: Sim) -> None:
    """Old code: REVLib's kTimeout was kept in ``config_errors`` and nothing said so."""
    expected = "; ".join(
        f"SPARK MAX {can}: kTimeout"
        for can in (
            constants.SPARKMAX_LEFT_LEADER_CAN,
            constants.SPARKMAX_LEFT_FOLLOWER_CAN,
            constants.SPARKMAX_RIGHT_LEADER_CAN,
            constants.SPARKMAX_RIGHT_FOLLOWER_CAN,
        )
    )
    sim.tick()
    assert sim.drivetrain.config_errors == expected
    assert sim.string("Network/ConfigErrors") == expected
    assert sim.drivetrain.config_alert.get()
    assert any(expected in text for text in alerts("errors"))
    from support import wait_until

    wait_until(lambda: expected in read_log()["BCNP/ConfigErrors"], what="the configuration errors logged")


@pytest.mark.parametrize("fault", ["none"], indirect=True)
@pytest.mark.parametrize("wiring", WIRINGS, indirect=True)
def test_a_configuration_taken_reports_nothing(sim: Sim) -> None:
    sim.tick()
    assert sim.string("Network/ConfigErrors") == "" and not sim.drivetrain.config_alert.get()


# -- odometry's start ------------------------------------------------------------------------------------


class StaleAtStart(DrivetrainIO):
    """CAN readings that arrive after the robot is built: zeros at first, then where the
    wheels and the gyro really are (the encoders kept counts, the gyro turned 0.5 rad)."""

    wiring = "stale"

    def __init__(self) -> None:
        self.reads = 0

    def update_inputs(self, inputs: DrivetrainInputs) -> None:
        self.reads += 1
        fresh = self.reads > 1
        inputs.left_position_m = 1.0 if fresh else 0.0
        inputs.right_position_m = 1.2 if fresh else 0.0
        inputs.heading = Rotation2d(0.5 if fresh else 0.0)
        inputs.turn_rate_radps = 0.0

    def set_wheel_speeds(self, *args: float) -> None: ...
    def set_voltages(self, left_v: float, right_v: float) -> None: ...
    def stop(self) -> None: ...
    def reset_loops(self) -> None: ...
    def outputs(self) -> tuple[float, float]:
        return 0.0, 0.0

    def velocity_filter(self) -> VelocityFilter:
        return VelocityFilter("none", 0.0)

    def watchdogs(self) -> tuple[()]:
        return ()


def test_odometry_starts_from_the_first_ticks_readings() -> None:
    """Old code: odometry anchored on the constructor's stale zeros put a robot that had not
    moved 1.1 m ahead."""
    drivetrain = Drivetrain(StaleAtStart())
    drivetrain.stop()
    drivetrain.periodic()
    drivetrain.periodic()
    pose = drivetrain.pose()
    assert (pose.X(), pose.Y(), pose.rotation().radians()) == pytest.approx((0.0, 0.0, 0.0), abs=1e-9)
