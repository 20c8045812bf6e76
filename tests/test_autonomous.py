"""The autonomous chooser in the simulator: each mode, picked through the real SendableChooser
the way a dashboard does (NetworkTables), on the default drivetrain wiring.

Hosts are real ``Client`` connections over loopback, as in test_robot.py; simulated time
moves one 20 ms tick at a time, so the fallback's wait and every stop are checked to the tick.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import accumulate
from pathlib import Path

import pytest
from ntcore.util import ChooserControl
from robotpy_ext.autonomous.selector_tests import test_all_autonomous  # noqa: F401  (the selector's own test)
from support import wait_until
from test_robot import TICK, Sim, cmd, field_pose

import constants
import physics
from bcnp.paths import load_path

CHOOSER = "Autonomous Mode"
SHIPPED = sorted(p.name for p in constants.AUTO_PATHS_DIR.iterdir() if p.suffix in (".csv", ".json"))
#: The PathPlanner and Choreo examples: planned into commands when chosen (test_planners.py).
PLANNED = sorted(p.name for p in constants.AUTO_PATHS_DIR.iterdir() if p.suffix in (".path", ".traj"))


@pytest.fixture(autouse=True)
def kitbot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit chassis' wiring, whatever the environment says: the tolerances below are its."""
    monkeypatch.setenv(constants.DRIVETRAIN_ENV, "kitbot")


@contextmanager
def running(control, robot) -> Iterator[Sim]:  # type: ignore[no-untyped-def]
    """The robot started (robotInit: modes built, path files read) and ticked once, disabled."""
    with control.run_robot():
        sim = Sim(robot)
        sim.tick(enabled=False)
        yield sim


@pytest.fixture
def sim(control, robot) -> Iterator[Sim]:  # type: ignore[no-untyped-def]
    with running(control, robot) as sim:
        yield sim


def choose(sim: Sim, mode: str) -> None:
    """Pick ``mode`` as a dashboard does; the robot reads it at its next tick."""
    chooser = ChooserControl(CHOOSER)
    assert mode in chooser.getChoices()
    chooser.setSelected(mode)
    sim.tick(enabled=False)
    selected = sim.robot.automodes.chooser.getSelected()  # type: ignore[attr-defined]
    assert mode == selected.MODE_NAME


Pose = tuple[float, float, float]


def pose() -> Pose:
    """Where the simulated robot is (physics, the truth), relative to its start: x, y, degrees."""
    x, y, degrees = field_pose()
    start = physics.START_POSE
    return x - start.X(), y - start.Y(), degrees - start.rotation().degrees()


def still(sim: Sim) -> bool:
    return sim.motors() == (0.0, 0.0) and sim.drivetrain.commanded == (0.0, 0.0)


def path_seconds(name: str) -> float:
    return sum(c.duration_ms for c in load_path(constants.AUTO_PATHS_DIR / name)) / 1000


def drive(sim: Sim, seconds: float) -> tuple[list[float], list[Pose]]:
    """Tick for ``seconds``: Network/CmdVx and the pose after each tick."""
    seen, poses = [], []
    for _ in range(round(seconds / TICK)):
        sim.tick()
        seen.append(sim.number("Network/CmdVx"))
        poses.append(pose())
    return seen, poses


def planned(name: str, ticks: int) -> list[Pose]:
    """The pose after each tick of an ideal robot playing path file ``name`` from its first
    tick: each command for its duration, through the acceleration limits (3 m/s², 6 rad/s²
    per second, at 20 ms a tick), stopped at once when the path ends."""
    commands = load_path(constants.AUTO_PATHS_DIR / name)
    ends = list(accumulate(c.duration_ms for c in commands))
    assert constants.MAX_ACCEL_MPS2 is not None and constants.MAX_ALPHA_RADPS2 is not None
    dv, dw = constants.MAX_ACCEL_MPS2 * TICK, constants.MAX_ALPHA_RADPS2 * TICK
    x = y = heading = v = w = 0.0
    poses = []
    for k in range(ticks):
        i = bisect.bisect_right(ends, round(k * TICK * 1000))
        if i == len(commands):
            v = w = 0.0
        else:
            v += max(-dv, min(dv, commands[i].vx - v))
            w += max(-dw, min(dw, commands[i].omega - w))
        x += v * math.cos(heading) * TICK
        y += v * math.sin(heading) * TICK
        heading += w * TICK
        poses.append((x, y, math.degrees(heading)))
    return poses


def assert_follows(poses: list[Pose], plan: list[Pose], metres: float = 0.2, degrees: float = 7.0) -> None:
    """Every tick within ``metres`` and ``degrees`` of the plan: the simulated motors lag
    the commanded speeds a little; over a 12 s path that adds up to under 0.2 m."""
    assert len(poses) == len(plan)
    for k, (got, want) in enumerate(zip(poses, plan, strict=True)):
        off = math.hypot(got[0] - want[0], got[1] - want[1])
        assert off < metres and abs(got[2] - want[2]) < degrees, (k * TICK, got, want)


# -- the chooser ----------------------------------------------------------------------------------


def test_the_chooser_offers_every_mode_and_defaults_to_the_bcnp_host(sim: Sim) -> None:
    chooser = ChooserControl(CHOOSER)
    paths = [f"Path: {name}" for name in SHIPPED + PLANNED]
    assert {"Path: square.csv", "Path: figure8.csv", "Path: slalom.json"} <= set(paths)
    assert {"Path: s_curve.path", "Path: j_turn.traj"} <= set(paths)
    assert set(chooser.getChoices()) == {
        "BCNP host",
        "BCNP host, fallback path",
        "Do nothing",
        "SysId: quasistatic forward",
        "SysId: quasistatic reverse",
        "SysId: dynamic forward",
        "SysId: dynamic reverse",
        "SysId: all four tests",
        "Pre-flight check",
        *paths,
        "None",
    }
    assert chooser.getSelected() == "BCNP host"


# -- BCNP host (the default) ------------------------------------------------------------------------


def test_bcnp_host_a_host_drives(sim: Sim) -> None:
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=1000)], clear_queue=True)
        seen = sim.run(1.5, host)
    assert seen[0] == 1.0 and seen[-1] == 0.0
    assert pose()[0] == pytest.approx(1.0, abs=0.15)


def test_bcnp_host_without_a_host_stays_still_all_period(sim: Sim) -> None:
    sim.run(constants.AUTO_FALLBACK_WAIT_S + 2.0)
    assert still(sim) and abs(sim.travelled()) < 1e-6


# -- BCNP host, fallback path ---------------------------------------------------------------------------


def test_fallback_without_a_host_drives_the_path_after_the_wait(sim: Sim) -> None:
    choose(sim, "BCNP host, fallback path")
    name = constants.AUTO_FALLBACK_PATH
    wait = constants.AUTO_FALLBACK_WAIT_S
    sim.run(wait - 2 * TICK)
    assert still(sim) and sim.link.queue.size() == 0 and abs(sim.travelled()) < 1e-6
    seen, poses = drive(sim, 2 * TICK + path_seconds(name) + 0.5)
    start = next(k for k, vx in enumerate(seen) if vx != 0.0)
    assert start <= 2  # within a tick of the wait
    assert not sim.connected()  # a path played here is not a controller
    assert_follows(poses[start:], planned(name, len(poses) - start))
    x, y, _ = poses[-1]
    assert math.hypot(x, y) < 0.2  # square.csv closes
    assert still(sim) and sim.number("Network/MessagesSkipped") == 0


def test_fallback_a_host_that_connects_later_takes_over_at_once(sim: Sim) -> None:
    choose(sim, "BCNP host, fallback path")
    sim.run(constants.AUTO_FALLBACK_WAIT_S + 1.5)  # the path has been driving for 1.5 s
    queue = sim.link.queue
    assert sim.number("Network/CmdVx") == 0.75 and queue.size() > 0  # the next command is queued
    received = queue.metrics.received
    with sim.connect(udp=True) as host:
        # The receive thread dropped the path's commands when the controller came, before any tick.
        wait_until(lambda: queue.size() == 0 and queue.active() is None, what="the path to be dropped")
        sim.tick()
        assert still(sim) and sim.number("Network/CmdVx") == 0.0  # stopped in the next tick
        sim.run(1.0, host)  # the host only keeps the link alive: nothing moves, nothing is queued
        assert still(sim) and queue.size() == 0 and queue.metrics.received == received
        sim.deliver(host.send, [cmd(-0.5, 0.5, ms=400)] * 3)  # no CLEAR_QUEUE needed
        drained = sim.link.parts.shared_queue.drain()
        assert [m.vx for m in drained] == [-0.5] * 3  # only the host's commands are queued
        sim.deliver(host.send, [cmd(-0.5, 0.5, ms=400)] * 3)
        seen = sim.run(1.0, host)
        assert seen[0] == -0.5 and sim.number("Network/CmdW") == 0.5
        assert sim.drivetrain.wheel_velocities()[0] < 0  # the robot follows the host
    sim.run(1.0)  # the host left: the path does not come back
    assert still(sim) and queue.metrics.received == received + 6


def test_fallback_a_host_that_connected_during_the_wait_drives_and_no_path_follows(sim: Sim) -> None:
    choose(sim, "BCNP host, fallback path")
    sim.tick(10)
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(0.5, ms=500)], clear_queue=True)
        sim.run(1.0, host)
    sim.run(constants.AUTO_FALLBACK_WAIT_S + 1.0)  # the host is gone; its autonomous is over
    assert still(sim) and sim.link.queue.size() == 0
    assert sim.link.queue.metrics.received == 1


# -- a path file, played on the robot ---------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_a_path_mode_drives_its_path(sim: Sim, name: str) -> None:
    choose(sim, f"Path: {name}")
    seen, poses = drive(sim, path_seconds(name) + 0.5)
    assert seen[0] != 0.0  # from the first tick: no waiting
    assert_follows(poses, planned(name, len(poses)))
    x, y, _ = poses[-1]
    odometry = sim.drivetrain.pose()
    assert (odometry.X(), odometry.Y()) == pytest.approx((x, y), abs=0.05)  # odometry agrees
    assert still(sim) and sim.number("Network/MessagesSkipped") == 0


def test_a_path_longer_than_the_queue_plays_whole_and_on_time(sim: Sim) -> None:
    """figure8.csv: 252 commands of 50 ms, more than the queue's 200: queued just in time,
    never overflowing, never starved, and kept alive past the 200 ms link timeout."""
    commands = load_path(constants.AUTO_PATHS_DIR / "figure8.csv")
    assert len(commands) > constants.BCNP_QUEUE.capacity
    choose(sim, "Path: figure8.csv")
    seen = sim.run(path_seconds("figure8.csv") + 1.0)
    moving = [i for i, vx in enumerate(seen) if vx != 0.0]
    assert moving == list(range(len(moving)))  # from the first tick, without a gap
    assert len(moving) * TICK == pytest.approx(12.6, abs=TICK)
    assert sim.number("Network/QueueOverflows") == 0 and sim.number("Network/MessagesSkipped") == 0
    assert sim.number("Network/MessagesRx") == len(commands)
    x, y, _ = pose()
    assert math.hypot(x, y) < 0.3  # a figure 8 ends where it began
    assert still(sim)


def test_a_path_that_stops_feeding_is_dropped_by_the_link_timeout(sim: Sim) -> None:
    """A local source is held to the rule of a silent host: nothing fed for 200 ms, the queue
    (and so the robot) stops."""
    choose(sim, "Path: square.csv")
    sim.run(0.5)
    mode = sim.robot.automodes.active_mode  # type: ignore[attr-defined]
    mode.path.feed = lambda: None  # the source goes silent
    try:
        moving = 0
        for _ in range(11):  # 200 ms + one tick
            sim.tick()
            moving += sim.number("Network/CmdVx") != 0.0
        assert moving == 10 and still(sim) and sim.link.queue.size() == 0
    finally:
        del mode.path.feed


def test_a_host_that_connects_during_a_path_mode_takes_over_and_its_stop_holds(sim: Sim) -> None:
    choose(sim, "Path: square.csv")
    sim.run(1.0)
    assert sim.number("Network/CmdVx") == 0.75
    with sim.connect() as host:
        wait_until(lambda: sim.link.queue.size() == 0 and sim.link.queue.active() is None)
        sim.deliver(host.send, [cmd(0.3, ms=2000)], clear_queue=True)
        seen = sim.run(0.5, host)
        assert set(seen) == {0.3}
        sim.deliver(host.stop)  # CLEAR_QUEUE
        sim.tick()
        assert still(sim) and sim.number("Network/CmdVx") == 0.0
        seen = sim.run(2.0, host)
        assert set(seen) == {0.0} and still(sim)


def test_a_controller_holding_the_link_at_the_start_drives_instead_of_the_path(sim: Sim) -> None:
    choose(sim, "Path: square.csv")
    with sim.connect() as host:
        seen = sim.run(1.0, host)
        assert set(seen) == {0.0} and still(sim) and sim.link.queue.metrics.received == 0


# -- a bad path file -----------------------------------------------------------------------------------


def test_a_bad_path_file_is_logged_at_start_and_its_mode_stops_the_robot(
    control, robot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "good.csv").write_text("0.5,0,1000\n")
    (tmp_path / "bad.csv").write_text("vx,omega,durationMs\n0.5,0,1000\n0.5,fast,1000\n")
    monkeypatch.setattr(constants, "AUTO_PATHS_DIR", tmp_path)
    monkeypatch.setattr(constants, "AUTO_FALLBACK_PATH", "missing.csv")
    caplog.set_level(logging.INFO, logger="autonomous")
    with running(control, robot) as sim:
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any("'Path: bad.csv'" in e and "bad.csv:3: omega must be a number" in e for e in errors)
        assert any("'BCNP host, fallback path'" in e and "missing.csv: no such file" in e for e in errors)
        assert not any("good.csv" in e for e in errors)
        chooser = ChooserControl(CHOOSER)
        assert {"Path: good.csv", "Path: bad.csv"} <= set(chooser.getChoices())

        choose(sim, "Path: bad.csv")
        caplog.clear()
        with sim.connect() as host:
            sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
            seen = sim.run(1.0, host)
        # The robot must have seen that host go before the next mode looks for one.
        wait_until(lambda: sim.link.slot.owner is None, what="the robot to see the host go")
        assert seen[0] == 1.0 and still(sim) and abs(sim.travelled()) < 1e-6  # queued, never run
        refusals = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(refusals) == 1 and "refuses to run" in refusals[0] and "bad.csv:3" in refusals[0]

        # The fallback with a missing file: refuses once, after the wait, and stays still.
        sim.tick(enabled=False)
        choose(sim, "BCNP host, fallback path")
        caplog.clear()
        sim.run(constants.AUTO_FALLBACK_WAIT_S + 1.0)
        refusals = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(refusals) == 1 and "missing.csv: no such file" in refusals[0]
        assert still(sim) and abs(sim.travelled()) < 1e-6

        # The good file in the same folder plays.
        sim.tick(enabled=False)
        choose(sim, "Path: good.csv")
        seen = sim.run(1.2)
        assert seen[0] == 0.5 and seen[-1] == 0.0


# -- Do nothing ------------------------------------------------------------------------------------------


def test_do_nothing_keeps_the_robot_still_whatever_a_host_sends(sim: Sim) -> None:
    choose(sim, "Do nothing")
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, 1.0, ms=2000)], clear_queue=True)
        seen = sim.run(constants.AUTO_FALLBACK_WAIT_S + 1.0, host)
    assert seen[0] == 1.0  # the queue keeps running and reporting
    assert still(sim) and abs(sim.travelled()) < 1e-6


def test_the_choosers_none_keeps_the_robot_still(sim: Sim) -> None:
    chooser = ChooserControl(CHOOSER)
    chooser.setSelected("None")
    sim.tick(enabled=False)
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=1000)], clear_queue=True)
        sim.run(1.0, host)
    assert still(sim) and abs(sim.travelled()) < 1e-6


# -- disable and leaving autonomous ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["Path: square.csv", "BCNP host, fallback path"])
def test_disabling_stops_at_once_and_the_paths_commands_are_gone(sim: Sim, mode: str) -> None:
    choose(sim, mode)
    wait = constants.AUTO_FALLBACK_WAIT_S if mode.startswith("BCNP") else 0.0
    sim.run(wait + 1.0)
    assert sim.number("Network/CmdVx") == 0.75 and not still(sim)
    sim.tick(enabled=False)
    queue = sim.link.queue
    assert still(sim)  # in that very tick
    assert sim.number("Network/CmdVx") == 0.0 and queue.size() == 0 and queue.active() is None
    received = queue.metrics.received
    sim.run(1.0, enabled=False)
    assert still(sim) and queue.metrics.received == received  # nothing more queued while disabled
    # Enabled again, the mode starts over from its beginning.
    sim.run(wait + 0.1)
    assert sim.number("Network/CmdVx") == 0.75


def test_leaving_autonomous_for_teleop_stops_the_path(sim: Sim) -> None:
    choose(sim, "Path: square.csv")
    sim.run(1.0)
    sim.tick(autonomous=False)  # straight to teleop, sticks centred
    queue = sim.link.queue
    assert queue.size() == 0 and queue.active() is None and sim.number("Network/CmdVx") == 0.0
    received = queue.metrics.received
    sim.run(1.0, autonomous=False)
    assert queue.metrics.received == received
    assert sim.drivetrain.wheel_velocities() == pytest.approx((0.0, 0.0), abs=0.01)
