"""The pre-flight check (autonomous/preflight.py) in the simulator, each wiring: with no fault
every item passes; each fault the simulator can stage (sim/settings.py) fails exactly its
item. Results are read back from SmartDashboard and from the ``.wpilog``.

The simulated robot stands on the floor, so the gyro item is judged; on blocks (which the
simulator cannot stage) is checked on the judging functions alone. Simulated time moves one
20 ms tick at a time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import pytest
from test_autonomous import choose, running, still
from test_recording import mark, read_log_after
from test_robot import TICK, Physics, Sim, wiring  # noqa: F401  (wiring: each drivetrain wiring)
from wpilib import SmartDashboard
from wpilib.simulation import DriverStationSim

import constants
from autonomous import preflight
from autonomous.preflight import FAIL, ITEMS, NA, NOT_JUDGED, ON_BLOCKS, PASS, PREFIX, RESULT, Step
from sim import settings
from subsystems.drivetrain.io import ConfigResult

MODE = "Pre-flight check"
#: The whole check: three steps of driving then pausing, and a tick to report.
CHECK_S = 3 * (constants.PREFLIGHT_STEP_S + constants.PREFLIGHT_PAUSE_S) + 2 * TICK
#: What each item is with no fault, per wiring.
HEALTHY = {
    "kitbot": {
        "LeftEncoder": PASS,
        "RightEncoder": PASS,
        "Gyro": PASS,
        "Followers": NA,
        "Config": NA,
        "VelocityLag": PASS,
    },
    "sparkmax": {
        "LeftEncoder": PASS,
        "RightEncoder": PASS,
        "Gyro": PASS,
        "Followers": PASS,
        "Config": PASS,
        "VelocityLag": PASS,
    },
}
NO_FOLLOWER_OUTPUT = (
    "the simulator does not write the SPARK MAX followers' applied output (sim/wirings.py "
    "SparkMaxDevices.report): the follower item cannot be judged here"
)


@pytest.fixture
def fault(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ``BCNP_SIM_*=value`` fault in the environment before the robot starts ("" none)."""
    text = str(getattr(request, "param", ""))
    if text:
        name, value = text.split("=")
        monkeypatch.setenv(name, value)
    return text


@pytest.fixture
def sim(wiring, fault, control, robot) -> Iterator[Sim]:  # type: ignore[no-untyped-def]  # noqa: F811
    with running(control, robot) as sim:
        assert sim.drivetrain.io.wiring == wiring
        yield sim


def results() -> dict[str, str]:
    """Each item's result word (PASS, FAIL, ...) on SmartDashboard, and the overall one."""
    return {
        key: SmartDashboard.getString(PREFIX + key, "<missing>").split(":")[0] for key in (*ITEMS, RESULT)
    }


def texts() -> dict[str, str]:
    return {key: SmartDashboard.getString(PREFIX + key, "<missing>") for key in (*ITEMS, RESULT)}


def active_alerts() -> list[str]:
    return list(SmartDashboard.getStringArray("Autonomous/errors", []))


def run_check(sim: Sim, request: pytest.FixtureRequest) -> tuple[float, float]:
    """Run the whole check, judged by the simulator's truth: how far either wheel rolled in all
    (m), and the farthest the chassis got from where it started (m)."""
    choose(sim, MODE)
    drivesim = Physics(request).drivesim
    start = drivesim.getPose()
    wheels = (drivesim.getLeftPosition(), drivesim.getRightPosition())
    rolled = [0.0, 0.0]
    farthest = 0.0
    for _ in range(round(CHECK_S / TICK)):
        sim.tick()
        now = (drivesim.getLeftPosition(), drivesim.getRightPosition())
        rolled = [r + abs(n - w) for r, n, w in zip(rolled, now, wheels, strict=True)]
        wheels = now
        farthest = max(farthest, drivesim.getPose().translation().distance(start.translation()))
    return max(rolled), farthest


def assert_within_cap(travel: tuple[float, float]) -> None:
    """Each step ends once a wheel has gone PREFLIGHT_MAX_STEP_M (read a tick late, then braked:
    up to 0.1 m more); a wheel rolls in each of the three steps at most (dragged by the other
    side in its step), and the chassis never gets a metre from where it started."""
    rolled, farthest = travel
    assert rolled < 3 * (constants.PREFLIGHT_MAX_STEP_M + 0.1) and farthest < 1.0, travel


def followers_reported(sim: Sim) -> bool:
    """Whether the simulator writes a follower's applied output (it reads 0 while driven if not)."""
    mode = sim.robot.automodes.active_mode  # type: ignore[attr-defined]
    samples = [s for step in mode._steps for s in step.followers.values()]
    return any(follower != 0.0 for _, _, follower, _ in samples)


def expect_only(sim: Sim, failing: str) -> None:
    """Every item as with no fault, but ``failing``, which fails; so does the result."""
    wiring_name = sim.drivetrain.io.wiring
    expected = dict(HEALTHY[wiring_name], **{failing: FAIL})
    got = results()
    if wiring_name == "sparkmax" and not followers_reported(sim):
        got.pop("Followers")
        expected.pop("Followers")
    assert {k: got[k] for k in expected} == expected, texts()
    assert got[RESULT] == FAIL and texts()[RESULT].startswith(f"FAIL: {failing}")
    assert [a for a in active_alerts() if a.startswith("Pre-flight")] == [
        f"Pre-flight {failing}: {texts()[failing].split(': ', 1)[1]}"
    ]


# -- the simulated robot ----------------------------------------------------------------------------


def test_with_no_fault_every_item_passes_within_the_distance_cap(
    sim: Sim, request: pytest.FixtureRequest
) -> None:
    start = mark()
    travel = run_check(sim, request)
    wiring_name = sim.drivetrain.io.wiring
    got = results()
    if wiring_name == "sparkmax" and not followers_reported(sim):
        pytest.skip(NO_FOLLOWER_OUTPUT)
    assert got == dict(HEALTHY[wiring_name], Result=PASS), texts()
    assert still(sim) and not [a for a in active_alerts() if a.startswith("Pre-flight")]
    assert_within_cap(travel)
    # The same results in the .wpilog, under Preflight/.
    expected = texts()
    log = read_log_after(
        start, lambda log: bool(log[PREFIX + RESULT]) and log[PREFIX + RESULT][-1] == expected[RESULT]
    )
    assert {key: log[PREFIX + key][-1] for key in (*ITEMS, RESULT)} == expected


@pytest.mark.parametrize("fault", [f"{settings.GYRO_SIGN}=-1"], indirect=True)
def test_a_gyro_mounted_reversed_fails_the_gyro_item(sim: Sim, request: pytest.FixtureRequest) -> None:
    run_check(sim, request)
    expect_only(sim, "Gyro")
    assert "turns against the wheels" in texts()["Gyro"]


@pytest.mark.parametrize("fault", [f"{settings.RIGHT_REVERSED}=1"], indirect=True)
def test_a_right_side_turning_backward_fails_the_right_encoder_item(
    sim: Sim, request: pytest.FixtureRequest
) -> None:
    """The drivetrain's interlock stops the robot in the right side's step (a side running against
    its command): the check ends there. The gyro is judged on the left side's step alone: a
    failed encoder says nothing of how the chassis turned."""
    travel = run_check(sim, request)
    expect_only(sim, "RightEncoder")
    assert "counts backward" in texts()["RightEncoder"]
    assert "right side:" not in texts()["Gyro"] and "left side:" in texts()["Gyro"]
    assert_within_cap(travel)
    assert still(sim)
    # The interlock holds until the next enable; then the check starts over and drives.
    sim.tick(enabled=False)
    sim.run(0.1)
    assert not still(sim) and texts()[RESULT] == "RUNNING: left side"


@pytest.mark.parametrize("fault", [f"{settings.GYRO_FAIL_S}=0.5"], indirect=True)
def test_a_gyro_that_freezes_fails_the_gyro_item_as_frozen(sim: Sim, request: pytest.FixtureRequest) -> None:
    run_check(sim, request)
    expect_only(sim, "Gyro")
    assert texts()["Gyro"].startswith("FAIL: frozen")


def measured_lag_ms() -> float:
    """The lag the ``VelocityLag`` item measured (ms), from its text."""
    found = re.search(r"reads (\d+) ms behind", texts()["VelocityLag"])
    assert found, texts()["VelocityLag"]
    return float(found.group(1))


def test_the_velocity_lag_measured_is_the_configured_filters(
    sim: Sim, request: pytest.FixtureRequest
) -> None:
    """No extra delay: the lag measured is within 25 ms of what the configured filter gives (the
    SPARK MAX's 9.5 ms, the kitbot's FPGA rate none), and the item says both."""
    run_check(sim, request)
    configured = sim.drivetrain.io.velocity_filter()
    assert results()["VelocityLag"] == PASS, texts()["VelocityLag"]
    assert abs(measured_lag_ms() - configured.delay_s * 1000) <= 25, texts()["VelocityLag"]
    assert configured.what in texts()["VelocityLag"]


@pytest.mark.parametrize("fault", [f"{settings.VELOCITY_DELAY_MS}=150"], indirect=True)
def test_a_velocity_150_ms_late_fails_the_lag_item_with_the_lag_it_measured(
    sim: Sim, request: pytest.FixtureRequest
) -> None:
    """What a SPARK MAX whose configuration did not take measures with (REV's defaults: 81.5 ms,
    a NEO's 112 ms), and more: the item fails alone, naming the lag (150 ms and the filter's)."""
    run_check(sim, request)
    expect_only(sim, "VelocityLag")
    configured = sim.drivetrain.io.velocity_filter().delay_s * 1000
    assert 150 + configured - 25 <= measured_lag_ms() <= 150 + configured + 25, texts()["VelocityLag"]


def test_the_lag_that_fits_a_late_speed_is_its_lateness() -> None:
    """A speed rising and falling as a chassis does (time constant 0.15 s), read 0, 60 or 120 ms
    late at 50 Hz: the lag found is within 5 ms of it; a speed that never changes has none."""
    tau = 0.15

    def speed(t: float) -> float:
        rise = 1 - math.exp(-max(t, 0.0) / tau)
        fall = math.exp(-max(t - 0.5, 0.0) / tau)
        return rise * fall

    def position(t: float) -> float:  # the integral of speed, numerically (1 ms steps)
        steps = round(t / 0.001)
        return sum(speed((i + 0.5) * 0.001) for i in range(steps)) * 0.001

    for late in (0.0, 0.06, 0.12):
        samples = [(k * TICK, position(k * TICK), speed(k * TICK - late)) for k in range(40)]
        found = preflight.velocity_lag([samples])
        assert found is not None and abs(found - late) <= 0.005, (late, found)
    assert preflight.velocity_lag([[(k * TICK, 0.3 * k * TICK, 0.3) for k in range(40)]]) is None


def test_followers_follow(sim: Sim, request: pytest.FixtureRequest) -> None:
    run_check(sim, request)
    if sim.drivetrain.io.wiring == "kitbot":
        assert results()["Followers"] == NA
        return
    if not followers_reported(sim):
        pytest.skip(NO_FOLLOWER_OUTPUT)
    assert results()["Followers"] == PASS, texts()["Followers"]


@pytest.mark.parametrize("wiring", ["kitbot"], indirect=True)
def test_disabling_mid_check_stops_at_once_and_judges_nothing(sim: Sim) -> None:
    choose(sim, MODE)
    sim.run(0.3)
    assert not still(sim)
    sim.tick(enabled=False)
    assert still(sim)  # in that very tick
    got = results()
    assert got[RESULT] == "ABORTED" and {got[item] for item in ITEMS} == {NOT_JUDGED}
    sim.run(0.5, enabled=False)
    assert still(sim)


@pytest.mark.parametrize("wiring", ["kitbot"], indirect=True)
def test_with_the_field_connected_the_check_refuses_to_drive(sim: Sim) -> None:
    choose(sim, MODE)
    DriverStationSim.setFmsAttached(True)
    try:
        start = mark()
        sim.run(1.0)
        assert still(sim) and abs(sim.travelled()) < 1e-6
        assert texts()[RESULT].startswith("REFUSED: the field (FMS) is connected")
        assert any(a.startswith(f"{MODE} refused") for a in active_alerts())
        log = read_log_after(
            start, lambda log: bool(log[PREFIX + RESULT]) and "REFUSED" in str(log[PREFIX + RESULT][-1])
        )
        assert str(log[PREFIX + RESULT][-1]).startswith("REFUSED")
    finally:
        DriverStationSim.setFmsAttached(False)
        sim.tick(enabled=False)
    sim.run(0.3)  # off the field again, the next enable runs the check
    assert not still(sim)


# -- the judging, on measurements the simulator cannot stage ------------------------------------------


def measured(left: tuple[float, float], right: tuple[float, float], gyro: tuple[float, float]) -> list[Step]:
    """The three steps: the left one moved the wheels ``left`` (m) and turned the gyro gyro[0]
    (rad), the right one ``right`` and gyro[1]; both sides 0.3 m each, no turn."""
    steps = preflight.steps()
    for step, (lm, rm), turn in zip(steps, (left, right, (0.3, 0.3)), (*gyro, 0.0), strict=True):
        step.ran, step.left_m, step.right_m, step.gyro_rad, step.gyro_still = True, lm, rm, turn, False
    return steps


def judge(steps: list[Step]) -> dict[str, tuple[str, str]]:
    encoders = (preflight.judge_encoder(0, steps), preflight.judge_encoder(1, steps))
    return {
        "LeftEncoder": encoders[0],
        "RightEncoder": encoders[1],
        "Gyro": preflight.judge_gyro(steps, encoders, constants.TRACK_WIDTH_M),
    }


def test_on_blocks_the_gyro_sees_only_noise_and_is_not_a_pass() -> None:
    verdicts = judge(measured((0.3, 0.0), (0.0, 0.3), (0.002, -0.001)))
    assert verdicts["LeftEncoder"][0] == verdicts["RightEncoder"][0] == PASS
    assert verdicts["Gyro"][0] == ON_BLOCKS and "on blocks" in verdicts["Gyro"][1]
    assert preflight.overall(verdicts)[0] == "INCOMPLETE"


def test_on_the_floor_a_gyro_that_agrees_passes() -> None:
    turn = 0.3 / constants.TRACK_WIDTH_M
    verdicts = judge(measured((0.3, 0.0), (0.0, 0.3), (-0.9 * turn, 0.9 * turn)))  # a little scrub
    assert {item: v[0] for item, v in verdicts.items()} == {
        "LeftEncoder": PASS,
        "RightEncoder": PASS,
        "Gyro": PASS,
    }


def test_an_encoder_that_does_not_count_fails_and_its_step_is_not_used_for_the_gyro() -> None:
    verdicts = judge(measured((0.0, 0.0), (0.0, 0.3), (-0.4, 0.4)))
    assert verdicts["LeftEncoder"][0] == FAIL and "no count" in verdicts["LeftEncoder"][1]
    assert verdicts["Gyro"][0] == PASS and "left side" not in verdicts["Gyro"][1]
    # No encoder to compare with: the gyro is not judged at all.
    verdicts = judge(measured((0.0, 0.0), (0.0, -0.3), (-0.4, 0.4)))
    assert verdicts["Gyro"][0] == NOT_JUDGED


def test_a_gyro_reading_the_same_through_a_step_is_frozen() -> None:
    steps = measured((0.3, 0.0), (0.0, 0.3), (-0.4, 0.0))
    steps[1].gyro_still = True
    verdict = preflight.judge_gyro(steps, (("PASS", ""), ("PASS", "")), constants.TRACK_WIDTH_M)
    assert verdict[0] == FAIL and verdict[1].startswith("frozen") and "right side" in verdict[1]


def test_a_gyro_reading_the_same_while_the_chassis_drives_straight_is_not_frozen() -> None:
    """Old code: a gyro with no noise (the Pigeon 2 in the simulator; a still one on a robot) read
    as frozen when the step of both sides drove the chassis straight."""
    turn = 0.3 / constants.TRACK_WIDTH_M
    steps = measured((0.3, 0.0), (0.0, 0.3), (-turn, turn))
    steps[2].gyro_still = True  # both sides: straight ahead
    verdict = preflight.judge_gyro(steps, (("PASS", ""), ("PASS", "")), constants.TRACK_WIDTH_M)
    assert verdict[0] == PASS, verdict


def test_a_side_whose_sensor_turns_with_its_reversed_motor_fails_by_the_gyros_word() -> None:
    """A TalonFX reads its own rotor: a side that turns backward counts forward all the same. The
    gyro turns with the wheels in the good side's step and against them in the bad one's: the
    bad side's encoder item fails, and the gyro (judged on the good step) passes. A gyro upside
    down turns against the wheels in both steps: that is the gyro's item."""
    turn = 0.3 / constants.TRACK_WIDTH_M
    steps = measured((0.3, 0.0), (0.0, 0.3), (-turn, -turn))  # the right side went backward
    encoders = (preflight.judge_encoder(0, steps), preflight.judge_encoder(1, steps))
    assert encoders[0][0] == encoders[1][0] == PASS
    left, right = preflight.reversed_with_its_sensor(steps, encoders, constants.TRACK_WIDTH_M)
    assert left[0] == PASS and right[0] == FAIL and "right motor turns backward" in right[1]
    assert preflight.judge_gyro(steps, (left, right), constants.TRACK_WIDTH_M)[0] == PASS
    upside_down = measured((0.3, 0.0), (0.0, 0.3), (turn, -turn))
    assert preflight.reversed_with_its_sensor(upside_down, encoders, constants.TRACK_WIDTH_M) == encoders


def test_followers_and_configuration_are_judged_by_their_readings() -> None:
    ok = [("left", 0.25, 0.25, 1), ("right", 0.25, -0.25, -1)]
    assert preflight.judge_followers(ok)[0] == PASS
    silent = [("left", 0.25, 0.0, 1), ("right", 0.25, -0.25, -1)]
    assert preflight.judge_followers(silent)[0] == FAIL
    wrong_way = [("left", 0.25, -0.25, 1), ("right", 0.25, -0.25, -1)]
    assert preflight.judge_followers(wrong_way)[0] == FAIL
    assert preflight.judge_followers([("left", 0.25, 0.25, 1)])[0] == NOT_JUDGED
    assert preflight.judge_followers(None)[0] == NA
    answers = [ConfigResult(f"SPARK MAX {can}", "kOk", True) for can in (2, 4, 5)]
    answers.insert(1, ConfigResult("SPARK MAX 3", "kTimeout", False))
    verdict = preflight.judge_config(tuple(answers))
    assert verdict[0] == FAIL and "SPARK MAX 3: kTimeout" in verdict[1] and "SPARK MAX 2" not in verdict[1]
    assert preflight.judge_config((ConfigResult("TalonFX 2", "OK", True),))[0] == PASS
    assert preflight.judge_config(None)[0] == NA
