"""SysId in the simulator: the four "SysId" autonomous modes (autonomous/sysid.py) run on the
simulated drivetrain, each wiring, with rolling friction on; their entries are read back from
the ``.wpilog`` with wpiutil's DataLogReader (benchmarks/harness/robotlog.py), and kS, kV and
kA are fitted from them as WPILib's SysId tool fits a simple motor, to land on the simulated
drivetrain's own. "SysId: all four
tests" runs them in one enable into one log, which fits the same; while a test drives open
loop, ``Network/VxError`` and ``WError`` read 0.

Simulated time moves one 20 ms tick at a time, as in test_autonomous.py, but for the headless
route (a ``--nogui`` simulator process with ``BCNP_SIM_AUTO_MODE``, read over NetworkTables 4).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import wpilib
from support import LOG_POLL_S, wait_until
from test_autonomous import choose, running, still
from test_recording import log_records, mark, mark_index
from test_robot import TICK, Physics, Sim, cmd, wiring  # noqa: F401  (wiring: each drivetrain wiring)
from wpilib import SmartDashboard
from wpilib.simulation import DriverStationSim
from wpimath.system.plant import LinearSystemId

import constants
import physics
from autonomous import FieldGuard, sysid
from sim import chassis, kitbot, settings

#: The simulated drivetrain's rolling friction per side (volts): the kS to find.
FRICTION_V = 0.5
#: How long each test runs here (simulated seconds): enough to fit, far short of SYSID_TIMEOUT_S
#: and of SYSID_MAX_DISTANCE_M. A quasistatic test gets the robot moving against friction after
#: 0.5 s, a dynamic one settles within half a second (the kit chassis' kA/kV is 0.08 s) and has
#: covered about 2.5 m by 1.2 s.
RUN_S = {
    "SysId: quasistatic forward": 4.5,
    "SysId: quasistatic reverse": 4.5,
    "SysId: dynamic forward": 1.2,
    "SysId: dynamic reverse": 1.2,
}
TESTS = {
    "quasistatic-forward": "SysId: quasistatic forward",
    "quasistatic-reverse": "SysId: quasistatic reverse",
    "dynamic-forward": "SysId: dynamic forward",
    "dynamic-reverse": "SysId: dynamic reverse",
}
STATE_ENTRY = f"sysid-test-state-{sysid.LOG_NAME}"
#: Samples slower than this (m/s) are left out of the fit, as SysId's motion threshold does: a
#: wheel held still by friction follows no line.
MOTION_THRESHOLD_MPS = 0.1


@pytest.fixture
def friction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.FRICTION_V, str(FRICTION_V))


@pytest.fixture
def sim(wiring, friction, control, robot) -> Iterator[Sim]:  # type: ignore[no-untyped-def]  # noqa: F811
    with running(control, robot) as sim:
        assert sim.drivetrain.io.wiring == wiring
        yield sim


# -- the .wpilog --------------------------------------------------------------------------------------


@dataclass
class Sample:
    """One tick of one motor as SysId reads it: seconds, volts, metres, m/s."""

    t: float
    voltage: float
    position: float
    velocity: float


@dataclass
class Routine:
    """What the log holds after a mark: the test states in order, and each test's runs per motor."""

    states: list[str]
    runs: dict[str, dict[str, list[list[Sample]]]]


def read_routine(after: str, done: int) -> Routine:
    """The SysId entries recorded after the mark ``after``, once ``done`` tests have ended in the
    log (the writer thread writes a moment after each flush)."""
    found: list[Routine] = []

    def written() -> bool:
        wpilib.DataLogManager.getLog().flush()
        routine = _read(after)
        found[:] = [routine]
        return routine is not None and routine.states.count("none") >= done

    wait_until(written, what="the SysId entries to be written", first_poll=LOG_POLL_S)
    return found[0]


def _read(after: str) -> Routine | None:
    first = mark_index(after)  # the log is the process's: read once, as it grows
    if first is None:
        return None
    values: dict[int, dict[str, float]] = {}  # timestamp (us) -> "field motor" -> value
    states: list[tuple[int, str]] = []
    suffix = f"-{sysid.LOG_NAME}"
    for name, kind, stamp, value in log_records()[first:]:
        if name == STATE_ENTRY:
            states.append((stamp, value))
        elif kind == "double" and name.endswith(suffix):
            field, motor = name[: -len(suffix)].split("-", 1)  # "voltage", "drive-left"
            values.setdefault(stamp, {})[f"{field} {motor}"] = value
    # Each tick of a test has its motor values and then its state, at the tick's timestamp.
    runs: dict[str, dict[str, list[list[Sample]]]] = {test: {m: [] for m in sysid.MOTORS} for test in TESTS}
    previous = "none"
    for t, state in states:
        if state in TESTS:
            v = values[t]
            for motor in sysid.MOTORS:
                if state != previous:  # a run starts
                    runs[state][motor].append([])
                sample = Sample(
                    t / 1e6, v[f"voltage {motor}"], v[f"position {motor}"], v[f"velocity {motor}"]
                )
                runs[state][motor][-1].append(sample)
        previous = state
    return Routine([s for _, s in states], runs)


# -- the fit --------------------------------------------------------------------------------------------


@dataclass
class Gains:
    ks: float
    kv: float
    ka: float


def fit(runs: list[list[Sample]]) -> Gains:
    """SysId's simple-motor fit: ordinary least squares on consecutive samples of each run,
    v[k+1] = a v[k] + b V[k] + c sgn(v[k]), the discrete form of V = kS sgn(v) + kV v + kA dv/dt
    with the voltage held over the step dt; then kV = (1 - a) / b, kA = (a - 1) dt / (b ln a),
    kS = -c / b."""
    rows, targets, steps = [], [], []
    for run in runs:
        for now, then in itertools.pairwise(run):
            steps.append(then.t - now.t)
            if abs(now.velocity) >= MOTION_THRESHOLD_MPS:
                rows.append([now.velocity, now.voltage, math.copysign(1.0, now.velocity)])
                targets.append(then.velocity)
    dt = statistics.median(steps)
    (a, b, c), *_ = np.linalg.lstsq(np.array(rows), np.array(targets), rcond=None)
    return Gains(ks=-c / b, kv=(1 - a) / b, ka=(a - 1) * dt / (b * math.log(a)))


def simulated_gains() -> Gains:
    """The simulated drivetrain's own, driven straight (the same voltage both sides): WPILib's
    drivetrain model that physics.py builds (``DifferentialDrivetrainSim``), and its friction."""
    plant = LinearSystemId.drivetrainVelocitySystem(
        chassis.gearbox(physics.drive_motor(), 2),
        chassis.KITBOT_MASS_KG,
        constants.WHEEL_DIAMETER_M / 2,
        constants.TRACK_WIDTH_M / 2,
        chassis.KITBOT_MOI_KG_M2,
        constants.GEAR_RATIO,
    )
    a, b = plant.A(), plant.B()
    # dv/dt = (A00 + A01) v + (B00 + B01) V on both sides: V = kV v + kA dv/dt.
    return Gains(ks=FRICTION_V, kv=-(a[0, 0] + a[0, 1]) / (b[0, 0] + b[0, 1]), ka=1 / (b[0, 0] + b[0, 1]))


def through_pwm_deadband(gains: Gains) -> Gains:
    """What a fit finds through a PWM controller's deadband: WPILib sends duty d as
    1500 + 503 d us; the controller drives (pulse - 1500 - deadband) / (500 - deadband) of the
    bus beyond its deadband, so the voltage asked for is ``scale`` times the one applied plus
    a share of the bus (12 V here): a higher kS, a slightly lower kV and kA."""
    deadband, full = kitbot.PWM_DEADBAND_US, kitbot.PWM_FULL_US
    scale = (full - deadband) / kitbot.WPILIB_FULL_SCALE_US
    offset = deadband / kitbot.WPILIB_FULL_SCALE_US * 12.0
    return Gains(ks=scale * gains.ks + offset, kv=scale * gains.kv, ka=scale * gains.ka)


# -- the tests ------------------------------------------------------------------------------------------


def test_the_four_tests_find_the_simulated_drivetrains_feedforward(sim: Sim) -> None:
    start = mark()
    for mode, seconds in RUN_S.items():
        choose(sim, mode)
        sim.run(seconds)
        sim.tick(enabled=False)  # the test ends
        assert still(sim)
        sim.run(0.5, enabled=False)  # at rest before the next
    routine = read_routine(start, done=len(RUN_S))
    ticks = {test: round(RUN_S[mode] / TICK) for test, mode in TESTS.items()}
    assert routine.states == [s for test in TESTS for s in [test] * ticks[test] + ["none"]]
    for motor in sysid.MOTORS:
        for test in TESTS:
            [run] = routine.runs[test][motor]
            sign = -1.0 if test.endswith("reverse") else 1.0
            assert len(run) == ticks[test]
            if test.startswith("quasistatic"):  # the ramp: 1 V/s, read back over its last second
                ramp = sign * constants.SYSID_RAMP_V_PER_S * 50 * TICK
                assert run[-1].voltage - run[-51].voltage == pytest.approx(ramp, abs=0.03)
            else:  # the step: 7 V
                assert run[-1].voltage == pytest.approx(sign * constants.SYSID_STEP_V, abs=0.05)
            assert sign * run[-1].velocity > 1.0 and sign * (run[-1].position - run[0].position) > 1.0

    truth = simulated_gains()
    if sim.drivetrain.io.wiring == "kitbot":
        truth = through_pwm_deadband(truth)
    for motor in sysid.MOTORS:
        gains = fit([run for test in TESTS for run in routine.runs[test][motor]])
        assert gains.ks == pytest.approx(truth.ks, rel=0.1), motor
        assert gains.kv == pytest.approx(truth.kv, rel=0.1), motor
        # The SPARK MAX's velocity arrives late (its filter, then a CAN frame every 20 ms),
        # which biases the fit's kA as it does SysId's on a robot.
        assert gains.ka == pytest.approx(
            truth.ka, rel=0.1 if sim.drivetrain.io.wiring == "kitbot" else 0.2
        ), motor


def test_disabling_mid_test_stops_the_motors_in_that_tick(sim: Sim) -> None:
    start = mark()
    choose(sim, "SysId: quasistatic forward")
    sim.run(1.5)
    assert min(sim.drivetrain.wheel_velocities()) > 0.1  # (1.5 V - kS and the PWM deadband) / kV
    sim.tick(enabled=False)
    assert still(sim)  # in that very tick
    routine = read_routine(start, done=1)
    assert routine.states == ["quasistatic-forward"] * round(1.5 / TICK) + ["none"]
    sim.run(0.5, enabled=False)
    assert still(sim) and read_routine(start, done=1).states == routine.states  # nothing more
    # Enabled again, the test starts over from 0 V (below friction: the robot stays put).
    sim.run(0.3)
    volts = constants.SYSID_RAMP_V_PER_S * (round(0.3 / TICK) - 1) * TICK
    battery = wpilib.RobotController.getBatteryVoltage()
    assert [output * battery for output in sim.motors()] == pytest.approx([volts, volts], abs=0.03)
    # Leaving autonomous for teleop, sticks centred, ends it in that tick too.
    sim.tick(autonomous=False)
    assert sim.motors() == pytest.approx((0.0, 0.0), abs=1e-4)  # the wheel loops hold 0 m/s
    assert read_routine(start, done=2).states[-1] == "none"


@pytest.mark.parametrize("wiring", ["kitbot"], indirect=True)
def test_a_test_leaves_the_queue_alone_and_ends_after_its_timeout(
    sim: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "SYSID_MAX_DISTANCE_M", math.inf)  # the timeout alone: about 20 m
    start = mark()
    choose(sim, "SysId: dynamic forward")
    queue = sim.link.queue
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(-1.0, ms=15_000)], clear_queue=True)
        received = queue.metrics.received
        # The host's command is active and reported the whole time, and never run.
        seen = sim.run(constants.SYSID_TIMEOUT_S, host)
        assert set(seen) == {-1.0}
        assert min(sim.motors()) > 0.5 and min(sim.drivetrain.wheel_velocities()) > 2.0
        sim.run(TICK, host)  # 10 s after the test's first tick: it ends, the robot stands still
        assert still(sim) and sim.number("Network/CmdVx") == -1.0
        sim.run(0.5, host)
        assert still(sim) and sim.number("Network/CmdVx") == -1.0
        assert queue.metrics.received == received  # the mode queued nothing
    routine = read_routine(start, done=1)
    assert routine.states == ["dynamic-forward"] * round(constants.SYSID_TIMEOUT_S / TICK) + ["none"]


def test_the_dynamic_test_stops_at_the_distance_cap(sim: Sim, request: pytest.FixtureRequest) -> None:
    """7 V for SYSID_TIMEOUT_S would run the kit chassis about 20 m: the test ends once a wheel has
    travelled SYSID_MAX_DISTANCE_M, judged here by the simulated wheels themselves."""
    start = mark()
    choose(sim, "SysId: dynamic forward")
    drivesim = Physics(request).drivesim
    wheels = (drivesim.getLeftPosition(), drivesim.getRightPosition())
    sim.tick()
    ticks = 1
    assert not still(sim)
    while not still(sim):
        assert ticks * TICK < constants.SYSID_TIMEOUT_S
        sim.tick()
        ticks += 1
    cap = constants.SYSID_MAX_DISTANCE_M
    at_stop = max(drivesim.getLeftPosition() - wheels[0], drivesim.getRightPosition() - wheels[1])
    # Read a tick late (a CAN status frame up to one more) at 2.2 m/s: under 0.15 m past the cap.
    assert cap < at_stop < cap + 0.15
    assert ticks * TICK < 2.0  # far short of the timeout
    sim.run(1.0)  # at rest: braked, and nothing more driven
    travelled = max(drivesim.getLeftPosition() - wheels[0], drivesim.getRightPosition() - wheels[1])
    assert still(sim) and travelled < cap + 0.3
    assert SmartDashboard.getString(sysid.STATUS_KEY, "").startswith(
        "SysId: dynamic forward: ended at the distance cap"
    )
    routine = read_routine(start, done=1)
    assert routine.states[-1] == "none" and routine.states.count("dynamic-forward") == ticks - 1


@pytest.mark.parametrize("wiring", ["kitbot"], indirect=True)
def test_with_the_field_connected_a_test_refuses_to_drive(sim: Sim) -> None:
    choose(sim, "SysId: quasistatic forward")
    DriverStationSim.setFmsAttached(True)
    try:
        sim.run(2.0)
        assert still(sim) and abs(sim.travelled()) < 1e-6
        status = SmartDashboard.getString(sysid.STATUS_KEY, "")
        assert status == "SysId: quasistatic forward: refused: " + FieldGuard.REASON
        assert FieldGuard.REASON.startswith("the field (FMS) is connected")
        errors = SmartDashboard.getStringArray("Autonomous/errors", [])
        assert any(e.startswith("SysId: quasistatic forward refused") for e in errors)
    finally:
        DriverStationSim.setFmsAttached(False)
        sim.tick(enabled=False)
    sim.run(2.0)  # off the field, the next enable runs the test
    assert not still(sim)


# -- all four in one enable ------------------------------------------------------------------------

ALL_FOUR = sysid.AllFourTests.MODE_NAME


@dataclass
class Tick:
    """What one tick of the robot showed: whether it stood still, and the drive keys."""

    still: bool
    vx_error: float
    w_error: float
    actual_vx: float
    actual_w: float


def tick_and_read(sim: Sim) -> Tick:
    sim.tick()
    return Tick(
        still(sim),
        sim.number("Network/VxError"),
        sim.number("Network/WError"),
        sim.number("Network/ActualVx"),
        sim.number("Network/ActualW"),
    )


@pytest.mark.parametrize("wiring", ["kitbot"], indirect=True)
def test_all_four_tests_run_in_one_enable_into_one_log_sysid_fits(sim: Sim) -> None:
    """One selection, one enable: the four tests in SysId's order, a rest between them, all in
    one data log, which fits the simulated drivetrain as the four separate modes' does. The
    error keys read 0 while a test drives open loop, and the error against 0 while it rests."""
    start = mark()
    choose(sim, ALL_FOUR)
    ticks: list[Tick] = []
    limit = round((4 * constants.SYSID_TIMEOUT_S + 3 * sysid.REST_S) / TICK)
    while not sim.string(sysid.STATUS_KEY).startswith(f"{ALL_FOUR}: done"):
        assert len(ticks) < limit, sim.string(sysid.STATUS_KEY)
        ticks.append(tick_and_read(sim))
    assert sim.string(sysid.STATUS_KEY) == f"{ALL_FOUR}: done: the four tests ran"
    sim.run(1.0)  # and then nothing more
    assert still(sim)

    routine = read_routine(start, done=4)
    runs = [(state, len(list(group))) for state, group in itertools.groupby(routine.states)]
    assert [state for state, _ in runs] == [s for test in TESTS for s in (test, "none")]
    # Each ended at the distance cap (the quasistatic ramp at about 5 s, the step at 1.5 s).
    assert all(n < constants.SYSID_TIMEOUT_S / TICK for state, n in runs if state != "none")
    # Between two tests the robot stood still for the rest; the ramp's first tick drives 0 V,
    # and the last test's last tick stopped the robot.
    gaps = [len(list(group)) for is_still, group in itertools.groupby(t.still for t in ticks) if is_still]
    rest = round(sysid.REST_S / TICK)
    assert gaps == [1, rest + 1, rest, rest, 1], gaps
    assert abs(sim.travelled()) < 0.5  # forward, then reverse: back near where it began

    # The keys: against the open-loop tick before, 0; against a stop, the error against 0.
    after_drive = [now for before, now in itertools.pairwise(ticks) if not before.still]
    after_stop = [now for before, now in itertools.pairwise(ticks) if before.still and now.still]
    assert max(abs(t.actual_vx) for t in after_drive) > 2.0  # the dynamic step's speed
    assert all(t.vx_error == 0.0 and t.w_error == 0.0 for t in after_drive)
    assert all(t.vx_error == -t.actual_vx and t.w_error == -t.actual_w for t in after_stop)
    assert max(abs(t.vx_error) for t in after_stop) > 0.5  # braking after a test

    truth = through_pwm_deadband(simulated_gains())
    for motor in sysid.MOTORS:
        gains = fit([run for test in TESTS for run in routine.runs[test][motor]])
        assert gains.ks == pytest.approx(truth.ks, rel=0.1), motor
        assert gains.kv == pytest.approx(truth.kv, rel=0.1), motor
        assert gains.ka == pytest.approx(truth.ka, rel=0.1), motor


@pytest.mark.parametrize("wiring", ["kitbot"], indirect=True)
def test_all_four_tests_stop_with_autonomous_and_start_over_at_the_next_enable(sim: Sim) -> None:
    start = mark()
    choose(sim, ALL_FOUR)
    for _ in range(round(constants.SYSID_TIMEOUT_S / TICK)):
        if sim.string(sysid.STATUS_KEY).startswith("SysId: quasistatic forward: ended"):
            break
        sim.tick()
    sim.run(0.5)  # resting
    assert still(sim)
    sim.tick(enabled=False)
    expected = f"{ALL_FOUR}: stopped: autonomous ended after 1 of the four tests"
    assert sim.string(sysid.STATUS_KEY) == expected
    sim.run(sysid.REST_S, enabled=False)
    assert still(sim) and read_routine(start, done=1).states.count("quasistatic-reverse") == 0
    sim.run(0.1)  # enabled again: from the first test
    assert sim.string(sysid.STATUS_KEY) == "SysId: quasistatic forward: running"
    sim.tick(enabled=False)
    assert sim.string(sysid.STATUS_KEY) == "SysId: quasistatic forward: stopped: autonomous ended"
    states = read_routine(start, done=2).states
    assert [state for state, _ in itertools.groupby(states)] == ["quasistatic-forward", "none"] * 2


@pytest.mark.parametrize("wiring", ["kitbot"], indirect=True)
def test_all_four_tests_refuse_with_the_field_connected(sim: Sim) -> None:
    choose(sim, ALL_FOUR)
    DriverStationSim.setFmsAttached(True)
    try:
        sim.run(2 * sysid.REST_S)  # long enough to have gone on to the next test
        assert still(sim) and abs(sim.travelled()) < 1e-6
        assert sim.string(sysid.STATUS_KEY) == "SysId: quasistatic forward: refused: " + FieldGuard.REASON
        errors = SmartDashboard.getStringArray("Autonomous/errors", [])
        assert any(e.startswith(f"{ALL_FOUR} refused") for e in errors)
    finally:
        DriverStationSim.setFmsAttached(False)
        sim.tick(enabled=False)


# -- headless: the mode picked by BCNP_SIM_AUTO_MODE, the keys read over NetworkTables ---------------


def test_headless_the_variable_picks_a_sysid_mode_and_the_error_keys_read_0_in_it(tmp_path: Path) -> None:
    """The route docs/robot.md gives for a simulator without a GUI: ``python run.py sim --nogui``
    with ``BCNP_SIM_AUTO_MODE`` naming the mode (SimRobot starts it that way), the keys read by
    a NetworkTables 4 client as a dashboard reads them. Every value of ``VxError`` and ``WError``
    the robot wrote until the test ended is 0, while the robot ran well over 0.5 m/s."""
    import ntcore

    from benchmarks.harness.sim import SimRobot

    mode = "SysId: quasistatic forward"
    # Friction: the wheels start turning at about 2 V, 2 s in, so that the client, connected
    # once the robot answers, sees the whole test (3 m: about 6 s in).
    env: dict[str, str | None] = {settings.AUTO_MODE: mode, settings.FRICTION_V: "1.5"}
    with SimRobot(tmp_path / "logs", env=env) as robot:
        robot.start(timeout=120.0)
        client = ntcore.NetworkTableInstance.create()
        try:
            every = ntcore.PubSubOptions(sendAll=True, pollStorage=10_000)
            numbers = {
                name: client.getDoubleTopic(f"/SmartDashboard/Network/{name}").subscribe(math.nan, every)
                for name in ("VxError", "WError", "ActualVx")
            }
            pose = client.getDoubleArrayTopic("/SmartDashboard/Network/Pose").subscribe([], every)
            status = client.getStringTopic(f"/SmartDashboard/{sysid.STATUS_KEY}").subscribe("", every)
            client.startClient4("test-sysid")
            client.setServer("127.0.0.1", robot.nt_port)
            statuses: list[ntcore.TimestampedString] = []
            values: dict[str, list[ntcore.TimestampedDouble]] = {name: [] for name in numbers}
            poses: list[ntcore.TimestampedDoubleArray] = []

            def ended_and_its_keys_written() -> bool:
                statuses.extend(status.readQueue())
                for name, sub in numbers.items():
                    values[name] += sub.readQueue()
                poses.extend(pose.readQueue())
                end = next((s.serverTime for s in statuses if s.value.startswith(f"{mode}: ended")), None)
                return end is not None and any(p.serverTime >= end for p in poses)

            try:
                wait_until(ended_and_its_keys_written, timeout=60.0, what=f"{mode} to end")
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {[s.value for s in statuses]}\n{robot.output(30)}") from None
            values = {name: values[name] + sub.readQueue() for name, sub in numbers.items()}
        finally:
            for sub in (*numbers.values(), pose, status):
                sub.close()
            ntcore.NetworkTableInstance.destroy(client)
        output = robot.output(1_000_000)  # all of it: a loaded machine prints loop overruns by the page
    assert f"Enabling '{mode}'" in output and "Traceback" not in output, output
    assert statuses[0].value == f"{mode}: running", [s.value for s in statuses]
    end = next(s.serverTime for s in statuses if s.value.startswith(f"{mode}: ended"))
    # The tick that ended the test writes the status, then its keys, Pose last (it carries the
    # tick's time: new every tick); the next tick's keys come after that Pose. The next tick
    # tracks 0 m/s while the chassis still rolls (VxError -0.9), and a loop catching up after the
    # machine held it runs it at once: only that order tells the two ticks apart. (A key is
    # written only when its value changed: the gyro's rate, quantised, can repeat.)
    ended_tick = min(p.serverTime for p in poses if p.serverTime >= end)
    during = {name: [v.value for v in queue if v.serverTime <= ended_tick] for name, queue in values.items()}
    assert max(during["ActualVx"]) > 0.5, during["ActualVx"]
    assert set(during["VxError"]) == {0.0} and set(during["WError"]) == {0.0}, during
