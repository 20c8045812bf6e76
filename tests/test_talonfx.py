"""The TalonFX wiring (``BCNP_DRIVETRAIN=talonfx``) in the pyfrc simulator: four TalonFX and a
Pigeon 2 running CTRE's own firmware (Phoenix 6's simulation, ``sim/talonfx.py``), judged by the
simulated chassis (``physics.PhysicsEngine.drivesim``) wherever the robot moves, never by what
the code commanded.

Every TalonFX test is in this one module: Phoenix 6 keeps each simulated device's flash in
``./ctre_sim`` of the working directory, which two processes must not use at once, and the full
suite hands a whole module to one worker. The firmware runs in wall time, so the simulated
clock is held to the wall clock: each simulated second here is a wall second, and the tests
drive no longer than what they judge needs.

Every test watches each tick of its robot: a motor's firmware that holds exactly 0 V while the
robot is enabled and the motor should drive (a leader asked for more than a volt, a follower
whose leader applies more: a disabled firmware), past the first few ticks of an enable (the
firmware takes the enable a few ticks late) and more than a starved machine's blip, fails the
test at teardown. A firmware that is never enabled holds its outputs neutral without a word: it
would pass any test of a stop.

A machine that holds the whole process (a busy CI host) stops the firmware's threads with the
robot's, but not the wall clock: the firmware finds its control frames timed out and goes neutral
until the next ones arrive. The simulator holds its clock until they have (``sim/talonfx.py``);
what a hold may still do to a judgement reruns the test (``HeldMachine``), and a test holds the
process on purpose to show the chassis does not see it.
"""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Iterator

import pytest
import test_preflight
from phoenix6 import BaseStatusSignal, configs, signals, unmanaged
from phoenix6.wpiutils import auto_feed_enable
from test_autonomous import choose, still
from test_on_target import DISTURBANCES, arc, drive, unicycle
from test_preflight import assert_within_cap, expect_only, results, run_check, texts
from test_recording import mark
from test_robot import TICK, Physics, Sim, cmd, sim, truth
from test_sim import drive_straight
from test_sysid import read_routine

import constants
from autonomous import sysid
from autonomous.preflight import PASS
from sim import settings
from sim.talonfx import TalonFXDevices

#: The robot's fixtures from the robot's tests: ``sim`` starts it on the ``wiring`` below.
ROBOT_FIXTURES = (sim, truth)
#: A failure after the machine held the process (its firmware saw wall time the chassis did not:
#: conftest's ``HeldMachine``) runs the test again, twice at most; any other failure fails.
pytestmark = pytest.mark.flaky(reruns=2, only_rerun=["HeldMachine"])
#: A leader's firmware may stay neutral for this many ticks of an enable: it takes the enable
#: 2-3 ticks after the robot is enabled (and a silent tick is counted the tick after).
ENABLE_TICKS = 5
#: Silent ticks past that a test tolerates: a machine that starves Phoenix 6's own threads (they
#: send the robot's requests and the enable on the wall clock) can blip a firmware neutral for a
#: tick or three; one never enabled is silent for every tick that asks it to drive.
SILENT_TOLERANCE = 5
#: Ticks of a second's keys a test lets fall outside its bounds, for the same reason.
BLIP_TICKS = 2
Mode = signals.ControlModeValue
#: The control modes that use FOC, a Phoenix Pro feature an unlicensed device refuses.
FOC = {mode for mode in Mode if "FOC" in mode.name}
#: Each ``BCNP_SIM_*`` setting a test stages by name before the robot starts.
STAGED = {
    "none": {},
    "ideal": {settings.DEVICE: "ideal"},
    "all": DISTURBANCES["all"],
    "scrub": DISTURBANCES["scrub"],
    "velocity late": {settings.VELOCITY_DELAY_MS: "150"},
    "velocity 100 ms late": {settings.VELOCITY_DELAY_MS: "100"},
    "reversed gyro": {settings.GYRO_SIGN: "-1"},
    "right reversed": {settings.RIGHT_REVERSED: "1"},
    "gyro freezes": {settings.GYRO_FAIL_S: "0.5"},
}
#: The pre-flight check's items with no fault: the TalonFX has followers and configures its
#: controllers, as the SPARK MAX does.
HEALTHY = test_preflight.HEALTHY["sparkmax"]


def _no_enable(timeout_seconds: float) -> None:
    """Phoenix 6's enable, never fed."""


@pytest.fixture
def fault(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A setting of the simulator (:data:`STAGED`), a wrong constant ("right not inverted") or a
    firmware never enabled ("never enabled"), staged before the robot starts ("none": nothing)."""
    name = str(getattr(request, "param", "none"))
    if name == "right not inverted":
        monkeypatch.setattr(constants, "TALONFX_RIGHT_INVERTED", False)
    elif name == "never enabled":
        # Both feeds of the enable: the simulator's, each tick, and Phoenix 6's own Notifier.
        monkeypatch.setattr(unmanaged, "feed_enable", _no_enable)
        monkeypatch.setattr(auto_feed_enable, "feed_enable", _no_enable)
    else:
        for variable, value in STAGED[name].items():
            monkeypatch.setenv(variable, value)
    return name


@pytest.fixture
def wiring(fault: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The TalonFX wiring, with the test's fault staged (test_robot's ``sim`` starts the robot)."""
    monkeypatch.setenv(constants.DRIVETRAIN_ENV, "talonfx")
    return "talonfx"


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, bool]]:
    """Each tick of the simulated devices: whether the robot was enabled (and not browned out),
    and whether a silent tick (the one before) was counted then."""
    seen: list[tuple[bool, bool]] = []
    begin = TalonFXDevices.begin

    def watched(self: TalonFXDevices, enabled: bool) -> None:
        before = self.silent_ticks
        begin(self, enabled)
        seen.append((enabled, self.silent_ticks > before))

    monkeypatch.setattr(TalonFXDevices, "begin", watched)
    return seen


def silent_past_the_enable(ticks: list[tuple[bool, bool]]) -> list[int]:
    """The ticks a leader's firmware was disabled while the robot was enabled, past the first
    :data:`ENABLE_TICKS` of that enable."""
    late = []
    enabled_for = 0
    for tick, (enabled, silent) in enumerate(ticks):
        enabled_for = enabled_for + 1 if enabled else 0
        if silent and enabled_for > ENABLE_TICKS:
            late.append(tick)
    return late


def assert_never_silent(ticks: list[tuple[bool, bool]], devices: TalonFXDevices) -> None:
    assert sum(silent for _, silent in ticks) == devices.silent_ticks  # every tick was watched
    late = silent_past_the_enable(ticks)
    assert len(late) <= SILENT_TOLERANCE, f"{devices.silent_ticks} silent ticks: {late}"


@pytest.fixture(autouse=True)
def never_silent(fault: str, ticks: list[tuple[bool, bool]], sim: Sim, truth: Physics) -> Iterator[None]:
    """Every test: the firmware enabled whenever the robot was, but for an enable's first ticks."""
    assert sim.drivetrain.io.wiring == "talonfx"
    yield
    if fault != "never enabled":  # that test judges the silence itself
        assert_never_silent(ticks, truth.engine.devices)


def control_modes(sim: Sim) -> tuple[Mode, Mode]:
    """The left and right leaders' control modes as they report them now."""
    io = sim.drivetrain.io
    modes = (io.left_leader.get_control_mode(False), io.right_leader.get_control_mode(False))
    BaseStatusSignal.refresh_all(*modes)
    return modes[0].value, modes[1].value


def true_speed(truth: Physics) -> float:
    drivesim = truth.drivesim
    return float((drivesim.getLeftVelocity() + drivesim.getRightVelocity()) / 2)


# -- configuration ----------------------------------------------------------------------------------


def test_the_devices_report_the_configuration_the_wiring_applied(sim: Sim) -> None:
    """Read back from each device's flash (Phoenix 6's configurator refresh), not from the
    configuration objects the wiring built."""
    sim.tick(enabled=False)
    io = sim.drivetrain.io
    ks, kv, ka = constants.TALONFX_WHEEL_FEEDFORWARD[constants.TALONFX_MOTOR]
    assert constants.TALONFX_RIGHT_INVERTED  # the right side is mounted mirrored
    sides = {
        signals.InvertedValue.COUNTER_CLOCKWISE_POSITIVE: (io.left_leader, io.left_follower),
        signals.InvertedValue.CLOCKWISE_POSITIVE: (io.right_leader, io.right_follower),
    }
    for inverted, talons in sides.items():
        for talon in talons:
            config = configs.TalonFXConfiguration()  # type: ignore[no-untyped-call]
            assert talon.configurator.refresh(config, 1.0).is_ok(), talon.device_id
            output, limits, slot = config.motor_output, config.current_limits, config.slot0
            assert output.inverted == inverted, talon.device_id
            assert output.neutral_mode == signals.NeutralModeValue.BRAKE
            assert limits.stator_current_limit_enable and limits.supply_current_limit_enable
            assert (
                limits.stator_current_limit,
                limits.supply_current_limit,
                limits.supply_current_lower_limit,
                limits.supply_current_lower_time,
            ) == pytest.approx(
                (
                    constants.TALONFX_STATOR_LIMIT_A,
                    constants.TALONFX_SUPPLY_LIMIT_A,
                    constants.TALONFX_SUPPLY_LOWER_LIMIT_A,
                    constants.TALONFX_SUPPLY_LOWER_TIME_S,
                )
            )
            # The device keeps single precision.
            ratio = config.feedback.sensor_to_mechanism_ratio
            assert ratio == pytest.approx(constants.TALONFX_SENSOR_TO_MECHANISM, rel=1e-6)
            gains = (slot.k_s, slot.k_v, slot.k_a, slot.k_p, slot.k_i, slot.k_d)
            expected = (
                ks,
                kv,
                ka,
                constants.TALONFX_WHEEL_KP_V_PER_RPS,
                0,  # kI: the integral is on the distance, the roboRIO's (WheelFeedback)
                0,
            )
            assert gains == pytest.approx(expected, rel=1e-6), talon.device_id
    for follower in (io.left_follower, io.right_follower):
        assert follower.get_control_mode().value == Mode.FOLLOWER
    assert Mode.FOLLOWER not in control_modes(sim)
    assert io.pigeon is not None
    pigeon = configs.Pigeon2Configuration()  # type: ignore[no-untyped-call]
    assert io.pigeon.configurator.refresh(pigeon, 1.0).is_ok()

    answers = sim.drivetrain.inputs.config_results
    assert [(a.device, a.status, a.ok) for a in answers] == [
        (f"TalonFX {constants.TALONFX_LEFT_LEADER_CAN}", "OK", True),
        (f"TalonFX {constants.TALONFX_LEFT_FOLLOWER_CAN}", "OK", True),
        (f"TalonFX {constants.TALONFX_RIGHT_LEADER_CAN}", "OK", True),
        (f"TalonFX {constants.TALONFX_RIGHT_FOLLOWER_CAN}", "OK", True),
        (f"Pigeon 2 {constants.TALONFX_PIGEON_CAN}", "OK", True),
    ]
    assert sim.string("Network/ConfigErrors") == "" and not sim.drivetrain.config_alert.get()


# -- driving -----------------------------------------------------------------------------------------


def drive_two_metres(sim: Sim, truth: Physics) -> None:
    """1 m/s for 2 s from a host: the chassis cruises at 1 m/s and covers about 2 m (less the
    ramp's 0.17 m), straight; odometry agrees with it; the leaders ran their velocity loop, never
    FOC, and the drivetrain's inputs report no fault."""
    sim.tick(5)
    drivesim = truth.drivesim
    start = drivesim.getPose()
    modes: set[Mode] = set()
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
        for tick in range(150):  # the command, then a second standing
            if tick % 2 == 0:
                sim.deliver(host.keepalive)
            sim.tick()
            modes.update(control_modes(sim))
            if tick == 75:
                assert true_speed(truth) == pytest.approx(1.0, abs=0.03)
    moved = drivesim.getPose().relativeTo(start)
    assert 1.75 < moved.X() < 2.05 and abs(moved.Y()) < 0.03, moved
    assert abs(moved.rotation().radians()) < 0.02
    assert true_speed(truth) == pytest.approx(0.0, abs=0.01)  # braked to rest
    odometry = sim.drivetrain.pose()
    assert (odometry.X(), odometry.Y()) == pytest.approx((moved.X(), moved.Y()), abs=0.02)
    assert Mode.VELOCITY_VOLTAGE in modes and not modes & FOC, modes
    assert sim.drivetrain.inputs.faults == ()


def test_a_two_second_command_travels_two_metres_by_the_chassis(sim: Sim, truth: Physics) -> None:
    drive_two_metres(sim, truth)


#: When the held-machine test stops its own process (wall seconds after the drive starts: twice
#: in the cruise, once about when the command ends), and for how long (s): longer than Phoenix 6's
#: control timeout, as a busy CI host held a run of this suite.
HOLDS_AT_S = (0.8, 1.6, 2.6)
HOLD_S = 0.3


@pytest.mark.flaky(reruns=0)  # the holds are the test's own: it judges what they do
def test_a_machine_that_holds_the_process_changes_nothing_the_chassis_does(sim: Sim, truth: Physics) -> None:
    """The same 2 m drive, while another process stops this one (SIGSTOP: every thread, the
    firmware's too) three times for 0.3 s: the simulated clock waits for the firmware to take
    the robot's frames again, and the chassis drives as it does unheld."""
    pid, steps, after = os.getpid(), [], 0.0
    for at in HOLDS_AT_S:
        steps.append(f"sleep {at - after:.2f}; kill -STOP {pid}; sleep {HOLD_S}; kill -CONT {pid}")
        after = at + HOLD_S
    holder = subprocess.Popen(["sh", "-c", "; ".join(steps)])
    try:
        drive_two_metres(sim, truth)
    finally:
        holder.wait(timeout=10)
    assert truth.engine.devices.holds >= len(HOLDS_AT_S)


@pytest.mark.parametrize(
    ("fault", "turn", "metres", "radians"),
    [("ideal", 0.8, 0.05, 0.05), ("all", 0.8, 0.10, 0.05), ("all", -0.8, 0.10, 0.05)],
    ids=["ideal-left", "all-left", "all-right"],
    indirect=["fault"],
)
def test_an_arc_replayed_open_loop_ends_where_it_was_commanded(
    sim: Sim,
    truth: Physics,
    turn: float,
    metres: float,
    radians: float,
) -> None:
    """test_on_target's arc on CTRE's firmware (BCNP_SIM_DEVICE changes nothing for it): on the
    chassis the constants describe, and with a weak side, scrub, a tired battery and more mass."""
    sim.tick(5)
    start = truth.drivesim.getPose()
    commands = arc(turn)
    drive(sim, commands)
    x, y, heading = unicycle(commands)
    moved = truth.drivesim.getPose().relativeTo(start)
    assert math.hypot(moved.X() - x, moved.Y() - y) < metres, (moved, x, y)
    assert abs(math.remainder(moved.rotation().radians() - heading, math.tau)) < radians


@pytest.mark.parametrize("fault", ["velocity late"], indirect=True)
def test_the_wheel_loops_hold_no_limit_cycle_with_the_velocity_late(sim: Sim, truth: Physics) -> None:
    """The firmware's velocity loop with every rotor velocity 150 ms late: cruising at 1 m/s,
    the chassis' true speed over the last 2 s holds within +-0.05 m/s of its mean."""
    sim.tick(5)
    speeds = drive_straight(sim, truth, 3.5)
    cruise = speeds[-100:]
    mean = sum(cruise) / len(cruise)
    assert max(cruise) - min(cruise) < 0.1, (min(cruise), max(cruise))
    assert mean == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("fault", ["velocity 100 ms late"], indirect=True)
def test_the_chassis_turn_rate_holds_too_with_the_velocity_late(sim: Sim, truth: Physics) -> None:
    """Old gains: with the kitbot's 2 V per m/s (0.958 V per rps) on the Kraken's quicker chassis
    and the velocity 100 ms late, the speed held but the chassis' turn rate swung, 0.24 rad/s peak
    to peak 4 s into a straight cruise and growing. Over the last 2 s of 5 s it holds within
    0.1 rad/s."""
    sim.tick(5)
    model = truth.drivesim
    track = constants.TRACK_WIDTH_M
    rates = []
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=5500)], clear_queue=True)
        for i in range(250):
            if i % 2 == 0:
                sim.deliver(host.keepalive)
            sim.tick()
            rates.append((model.getRightVelocity() - model.getLeftVelocity()) / track)
    last = rates[-100:]
    assert max(last) - min(last) < 0.1, (min(last), max(last))


@pytest.mark.parametrize("fault", ["scrub"], indirect=True)
def test_the_keys_track_a_turn_the_chassis_makes_at_the_commanded_rate(sim: Sim, truth: Physics) -> None:
    """Scrub: the wheel speeds for 1 rad/s turn the chassis at 1/1.2 of it; the Pigeon 2 and the
    turn-rate loop make up the rest, and the keys show what the chassis does, every tick of the
    second after the first (where the kitbot and the SPARK MAX hold ActualW within 0.987-1.039
    and WError within 0.04)."""
    sim.tick(5)
    drivesim = truth.drivesim
    keys = ("ActualW", "ActualVx", "WError", "VxError")
    seen = []
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(0.5, 1.0, ms=3000)], clear_queue=True)
        sim.run(1.0, host)
        before = drivesim.getHeading().radians()
        for _ in range(50):
            sim.run(TICK, host)
            seen.append({key: sim.number(f"Network/{key}") for key in keys})
        turned = drivesim.getHeading().radians() - before
        assert sim.string("Network/Gyro") == "ok"
    assert turned == pytest.approx(1.0, abs=0.03)
    bounds = {
        "ActualW": (0.95, 1.05),
        "ActualVx": (0.47, 0.53),
        "WError": (-0.05, 0.05),
        "VxError": (-0.03, 0.03),
    }
    # Every tick but a blip or two: the firmware runs on the wall clock, and a machine that starves
    # Phoenix 6's threads can hold a tick's output (one tick read 1.22 rad/s so, under load).
    outside = {key: [s[key] for s in seen if not low < s[key] < high] for key, (low, high) in bounds.items()}
    assert all(len(ticks) <= BLIP_TICKS for ticks in outside.values()), outside
    means = {key: sum(s[key] for s in seen) / len(seen) for key in keys}
    assert means["ActualW"] == pytest.approx(1.0, abs=0.02) and abs(means["WError"]) < 0.02, means


# -- interlocks -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["reversed gyro"], indirect=True)
def test_a_reversed_pigeon_is_distrusted_and_the_chassis_never_spins(sim: Sim, truth: Physics) -> None:
    """The Pigeon 2 mounted upside down: the turn loop fed its heading is positive feedback. It is
    found within 0.25 s of the first command, and the chassis follows the arc's first second."""
    sim.tick(5)
    drivesim = truth.drivesim
    start = drivesim.getPose()
    commands = arc(0.8)[:50]
    states = []
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(vx, omega, ms) for vx, omega, ms in commands], clear_queue=True)
        for tick in range(60):
            sim.run(TICK, host)
            states.append(sim.drivetrain.gyro_state)
            _, _, should = unicycle(commands[: tick + 1])
            true = drivesim.getPose().relativeTo(start).rotation().radians()
            assert abs(true - should) < 0.08, tick  # a spin would be radians off
    assert states.index("disagrees with the wheels") * TICK <= 0.25
    assert states[-1] == "disagrees with the wheels"
    assert sim.string("Network/Gyro") == "disagrees with the wheels"
    assert sim.drivetrain.gyro_disagrees_alert.get()
    x, y, _ = unicycle(commands)
    moved = drivesim.getPose().relativeTo(start)
    assert math.hypot(moved.X() - x, moved.Y() - y) < 0.05


@pytest.mark.parametrize("fault", ["right not inverted", "right reversed"], indirect=True)
def test_a_right_side_driven_backward_stops_the_drivetrain(sim: Sim, truth: Physics) -> None:
    """The right side runs backward (its inversion left off, or its gearbox the other way) while
    its rotor sensor, which turns with the motor, reads it forward: only the Pigeon 2 sees the
    chassis spin. The drivetrain stops, and stays stopped for the rest of the command."""
    sim.tick(5)
    drivesim = truth.drivesim
    start = drivesim.getPose()
    tripped = None
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
        for tick in range(40):
            sim.run(TICK, host)
            if tripped is None and sim.drivetrain.drive_fault:
                tripped = tick
            if tripped is not None:
                assert sim.drivetrain.commanded == (0.0, 0.0)
                if tick > tripped + 1:  # the firmware takes the neutral request a few ms late
                    assert control_modes(sim) == (Mode.NEUTRAL_OUT, Mode.NEUTRAL_OUT)
        assert tripped is not None and tripped * TICK <= 0.3
        fault = sim.string("Network/DriveFault")
        assert fault == sim.drivetrain.drive_fault and fault.startswith("the chassis turns at"), fault
        assert sim.drivetrain.drive_fault_alert.get()
    moved = drivesim.getPose().relativeTo(start)
    assert math.hypot(moved.X(), moved.Y()) <= 0.3 and abs(moved.rotation().radians()) <= 0.5, moved
    assert abs(drivesim.getLeftVelocity()) < 0.05 and abs(drivesim.getRightVelocity()) < 0.05  # at rest


# -- the pre-flight check ------------------------------------------------------------------------------


@pytest.fixture
def preflight_healthy(monkeypatch: pytest.MonkeyPatch) -> None:
    """test_preflight's judging of the items, with this wiring's healthy row."""
    monkeypatch.setitem(test_preflight.HEALTHY, "talonfx", HEALTHY)


def test_the_preflight_check_passes_every_item_with_no_fault(
    sim: Sim,
    request: pytest.FixtureRequest,
    preflight_healthy: None,
) -> None:
    sim.tick(enabled=False)  # pyfrc steps the physics from the second tick on (run_check reads the start)
    travel = run_check(sim, request)
    assert results() == dict(HEALTHY, Result=PASS), texts()
    assert still(sim)
    assert_within_cap(travel)


@pytest.mark.parametrize(
    ("fault", "failing", "item", "says"),
    [
        ("reversed gyro", "Gyro", "Gyro", "turns against the wheels"),
        # The gyro judged on the left side's step alone: a failed side says nothing of the turn.
        ("right reversed", "RightEncoder", "Gyro", "left side:"),
        ("gyro freezes", "Gyro", "Gyro", "frozen"),
        # The rotor velocity handed to the firmware 150 ms late, as SysId would count it.
        ("velocity late", "VelocityLag", "VelocityLag", "ms behind the position"),
    ],
    ids=["reversed gyro", "right reversed", "gyro freezes", "velocity late"],
    indirect=["fault"],
)
def test_each_fault_fails_the_preflight_item_it_fails_on_the_other_wirings(
    sim: Sim,
    request: pytest.FixtureRequest,
    preflight_healthy: None,
    failing: str,
    item: str,
    says: str,
) -> None:
    sim.tick(enabled=False)
    travel = run_check(sim, request)
    expect_only(sim, failing)
    assert says in texts()[item], texts()[item]
    if failing == "RightEncoder":
        assert "right side:" not in texts()["Gyro"]
    if failing == "VelocityLag":
        assert 125 <= test_preflight.measured_lag_ms() <= 175, texts()[item]
    assert_within_cap(travel)


# -- SysId ------------------------------------------------------------------------------------------------

#: Two of the four tests, short: how long each runs (s).
SYSID_RUNS = {"SysId: dynamic forward": 0.6, "SysId: quasistatic reverse": 1.0}


def test_sysid_drives_open_loop_and_logs_what_the_wheels_did(sim: Sim, truth: Physics) -> None:
    """A dynamic step forward and a quasistatic ramp in reverse: open loop through VoltageOut
    (never its FOC variant), the error keys 0 throughout, each tick in the log with the voltage
    the wiring drove and the wheels' distance and speed as the chassis had them."""
    start = mark()
    drivesim = truth.drivesim
    modes: set[Mode] = set()
    wheels: list[list[tuple[float, float]]] = []  # each run's true wheel distances after each tick
    for mode, seconds in SYSID_RUNS.items():
        choose(sim, mode)
        wheels.append([])
        for tick in range(round(seconds / TICK)):
            sim.tick()
            modes.update(control_modes(sim))
            if tick:  # from the tick after the first driven one: open loop tracks no speed
                assert sim.number("Network/VxError") == 0.0 and sim.number("Network/WError") == 0.0
            wheels[-1].append((drivesim.getLeftPosition(), drivesim.getRightPosition()))
        sim.tick(enabled=False)
        assert still(sim)
        sim.run(0.3, enabled=False)
    assert Mode.VOLTAGE_OUT in modes and not modes & FOC, modes
    routine = read_routine(start, done=2)
    tests = dict(zip(("dynamic-forward", "quasistatic-reverse"), wheels, strict=True))
    assert routine.states == [s for test, run in tests.items() for s in [test] * len(run) + ["none"]]
    ramp_s = 25 * TICK
    for side, motor in enumerate(sysid.MOTORS):
        [step] = routine.runs["dynamic-forward"][motor]
        [ramp] = routine.runs["quasistatic-reverse"][motor]
        assert step[-1].voltage == pytest.approx(constants.SYSID_STEP_V, abs=0.1)
        assert step[-1].velocity > 2.0
        assert ramp[-1].voltage - ramp[-26].voltage == pytest.approx(
            -ramp_s * constants.SYSID_RAMP_V_PER_S, abs=0.05
        )
        assert ramp[-1].velocity < -0.05
        # Each tick logs the distance the drivetrain read at its start: the chassis' after the
        # tick before, give or take what the latency compensation adds (at the step's 2.6 m/s,
        # a tick is 0.05 m).
        for test, run in (("dynamic-forward", step), ("quasistatic-reverse", ramp)):
            true = [positions[side] for positions in tests[test]]
            distances = [sample.position for sample in run]
            assert distances[1:] == pytest.approx(true[:-1], abs=0.06), (test, motor)
        # The voltage logged is what the motors were driven at: never more than the step asked.
        volts = [sample.voltage for sample in step]
        assert max(volts) < constants.SYSID_STEP_V + 0.3, f"{motor}: " + " ".join(f"{v:.2f}" for v in volts)


# -- a firmware that never drives -----------------------------------------------------------------


@pytest.mark.parametrize("fault", ["never enabled"], indirect=True)
def test_a_firmware_never_enabled_fails_the_drive_and_is_counted(
    sim: Sim,
    truth: Physics,
    ticks: list[tuple[bool, bool]],
) -> None:
    """Neither Phoenix 6's enable nor the simulator's is fed: the firmware holds its outputs
    neutral, the robot goes nowhere and the drive's assertions fail; every tick that asked for
    more than a volt is a silent one, and the check every other test makes at teardown fails."""
    sim.tick(30, enabled=False)  # 0.6 s: an enable an earlier test's robot fed (for 0.5 s) runs out
    with pytest.raises(AssertionError):
        drive_two_metres(sim, truth)
    devices = truth.engine.devices
    enabled = sum(on for on, _ in ticks)
    assert enabled > 50 and 50 < devices.silent_ticks <= enabled
    assert abs(truth.drivesim.getLeftPosition()) < 1e-6
    with pytest.raises(AssertionError):
        assert_never_silent(ticks, devices)
