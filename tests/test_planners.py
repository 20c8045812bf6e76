"""PathPlanner and Choreo paths (bcnp/paths/), their replay in the simulator, the
autonomous modes that play them on the robot, and the closed-loop follower (bcnp/host/sessions/follow.py).

The simulator tests run the real robot program through pyfrc on the kit chassis' wiring, with
real ``Client`` connections over loopback; simulated time moves one 20 ms tick per host step.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import wpilib
from support import stepping_sleep, wait_until
from test_autonomous import choose, running
from test_robot import Sim, field_pose

import constants
import physics
from bcnp.host import cli
from bcnp.host.link.client import Client, ReconnectPolicy
from bcnp.host.sessions.follow import Follower
from bcnp.host.sessions.replay import Replay
from bcnp.paths import (
    SAMPLE_S,
    DriveLimits,
    PathCommand,
    PathError,
    RefState,
    Trajectory,
    from_commands,
    load_path,
    to_commands,
)
from bcnp.paths.choreo import load_choreo
from bcnp.paths.pathplanner import load_pathplanner
from benchmarks.harness.truth import arcs
from sim import settings

PATHS = constants.AUTO_PATHS_DIR
PATHPLANNER = PATHS / "s_curve.path"
CHOREO = PATHS / "j_turn.traj"
LIMITS = DriveLimits.from_constants(constants)


def integrate(commands: list[PathCommand]) -> tuple[float, float, float]:
    """Where exact arcs of the commands end, from the origin facing +x."""
    *_, (_, x, y, heading) = arcs(commands, SAMPLE_S)
    return x, y, heading


# -- planning -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "end"),
    [(PATHPLANNER, (9.0, 6.8, math.pi / 2)), (CHOREO, (8.6, 2.6, -math.pi / 2))],
    ids=["pathplanner", "choreo"],
)
def test_a_shipped_example_plans_from_the_robots_start_to_its_end(file: Path, end: tuple[float, ...]) -> None:
    trajectory = load_pathplanner(file, LIMITS) if file.suffix == ".path" else load_choreo(file)
    start = physics.START_POSE
    assert (trajectory.start.x, trajectory.start.y) == pytest.approx((start.X(), start.Y()), abs=1e-6)
    assert trajectory.start.heading == pytest.approx(0.0, abs=0.01)
    assert (trajectory.end.x, trajectory.end.y) == pytest.approx(end[:2], abs=0.01)
    assert trajectory.end.heading == pytest.approx(end[2], abs=0.03)
    times = [s.t for s in trajectory.states]
    assert all(b - a == pytest.approx(SAMPLE_S) for a, b in itertools.pairwise(times))

    commands = to_commands(trajectory)
    # within what the robot runs: its clamp and (nearly) its acceleration limits
    assert max(abs(c.vx) for c in commands) <= LIMITS.max_vx_mps
    assert max(abs(c.omega) for c in commands) <= LIMITS.max_omega_radps
    # the commands drive to the planned end: integrated, they land on it
    relative = trajectory.relative_to_start().end
    x, y, heading = integrate(commands)
    assert (x, y) == pytest.approx((relative.x, relative.y), abs=0.01)
    assert heading == pytest.approx(relative.heading, abs=0.01)
    assert load_path(file, LIMITS) == commands  # the robot's and replay's reader gives the same


def test_equal_commands_are_merged_and_rounded_to_the_wire() -> None:
    states = tuple(RefState(k * SAMPLE_S, 0.5 * k * SAMPLE_S, 0.0, 0.0, 0.5, 0.0) for k in range(51))
    assert to_commands(Trajectory("line", states)) == [PathCommand(0.5, 0.0, 1000)]
    states = tuple(RefState(k * SAMPLE_S, 0.123456 * k * SAMPLE_S, 0.0, 0.0, 0.1, 0.0) for k in range(3))
    assert to_commands(Trajectory("slow", states)) == [PathCommand(0.1235, 0.0, 40)]


def test_from_commands_drives_tick_by_tick_through_the_robots_limits() -> None:
    reference = from_commands([PathCommand(1.0, 0.0, 1000), PathCommand(0.0, 0.0, 50)], LIMITS, settle_s=0.1)
    speeds = [s.vx for s in reference.states]
    assert speeds[1] == pytest.approx(3.0 * SAMPLE_S)  # one tick of 3 m/s²
    assert max(speeds) == pytest.approx(1.0)
    # 53 ticks: the 50 ms command is the one running at three of them, ramping down
    assert speeds[51:54] == pytest.approx([0.94, 0.88, 0.82])
    assert speeds[54:] == [0.0] * 5  # then the queue is empty: a stop, no ramp
    assert reference.total == pytest.approx(1.06 + 0.1)


def test_pathplanner_settings_beside_the_path_are_used(tmp_path: Path) -> None:
    folder = tmp_path / "pathplanner" / "paths"
    folder.mkdir(parents=True)
    shutil.copy(PATHPLANNER, folder / "p.path")
    plain = load_pathplanner(folder / "p.path", LIMITS)
    settings = {
        "holonomicMode": False,
        "robotMass": 60.0,
        "robotMOI": 6.0,
        "robotTrackwidth": 0.6604,
        "driveWheelRadius": 0.0762,
        "driveGearing": 10.71,
        "maxDriveSpeed": 3.5,
        "wheelCOF": 1.2,
        "driveMotorType": "CIM",
        "driveCurrentLimit": 20.0,  # weak motors: a slower path
    }
    (tmp_path / "pathplanner" / "settings.json").write_text(json.dumps(settings))
    weak = load_pathplanner(folder / "p.path", LIMITS)
    assert weak.total > plain.total + 1.0
    (tmp_path / "pathplanner" / "settings.json").write_text(
        json.dumps({**settings, "driveCurrentLimit": 5.0})
    )
    with pytest.raises(PathError, match="planned no motion"):  # too weak to move at all
        load_pathplanner(folder / "p.path", LIMITS)
    (tmp_path / "pathplanner" / "settings.json").write_text(json.dumps({**settings, "holonomicMode": True}))
    with pytest.raises(PathError, match="holonomic"):
        load_pathplanner(folder / "p.path", LIMITS)


def _choreo_doc() -> dict[str, object]:
    return json.loads(CHOREO.read_text())


@pytest.mark.parametrize(
    ("suffix", "content", "message"),
    [
        (".traj", "{not json", "invalid JSON"),
        (".traj", json.dumps({**_choreo_doc(), "version": 1}), "format 1"),
        (".traj", json.dumps({"name": "x", "version": 3}), "no 'trajectory'"),
        (
            ".traj",
            json.dumps(
                {
                    **_choreo_doc(),
                    "trajectory": {
                        "sampleType": "Swerve",
                        "samples": [{"t": 0, "x": 0, "y": 0, "heading": 0, "vx": 0, "vy": 0, "omega": 0}],
                        "splits": [0],
                    },
                }
            ),
            "swerve",
        ),
        (".traj", json.dumps({**_choreo_doc(), "trajectory": {"samples": [], "splits": []}}), "no samples"),
        (
            ".traj",
            json.dumps({**_choreo_doc(), "trajectory": {"samples": [{"t": 0}], "splits": [0]}}),
            "lacks 'x'",
        ),
        (".path", json.dumps({"version": "2025.0"}), "no waypoints"),
        (".path", json.dumps({**json.loads(PATHPLANNER.read_text()), "version": "1.0"}), "format 1.0"),
        (".path", json.dumps({**json.loads(PATHPLANNER.read_text()), "waypoints": []}), "PathPlanner"),
    ],
)
def test_a_bad_or_unsupported_file_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, content: str, message: str
) -> None:
    bad = tmp_path / f"bad{suffix}"
    bad.write_text(content)
    with pytest.raises(PathError, match=message) as caught:
        load_path(bad, LIMITS)
    assert str(caught.value).startswith(str(bad)) and "\n" not in str(caught.value)
    # the host tool says it in one line, before any connection is tried
    assert cli.main(["replay", str(bad), "--port", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message.split()[0] in err[0]


# -- in the simulator -----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def kitbot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(constants.DRIVETRAIN_ENV, "kitbot")


@pytest.fixture
def sim(control, robot) -> Iterator[Sim]:  # type: ignore[no-untyped-def]
    with running(control, robot) as sim:
        yield sim


def now() -> float:
    return wpilib.Timer.getFPGATimestamp()


def stepper(sim: Sim, client: Client) -> object:
    """The host's sleep: a keepalive every other tick (the client's own keepalives run on
    wall time), what it sent has arrived, then one robot tick; then the telemetry that tick
    sent has arrived."""
    base_robot, base_client = sim.link.telemetry.packets, client.link.telemetry_packets

    def tick(seconds: float) -> None:
        sim.tick()
        sim.link.flush_sends()
        want = sim.link.telemetry.packets - base_robot
        wait_until(lambda: client.link.telemetry_packets - base_client >= want, what="telemetry to arrive")

    return stepping_sleep(client, lambda: sim.link.dispatcher.packets_done, tick)


def truth() -> tuple[float, float, float]:
    x, y, degrees = field_pose()
    return x, y, math.radians(degrees)


@pytest.mark.parametrize("file", [PATHPLANNER, CHOREO], ids=["pathplanner", "choreo"])
def test_replaying_an_example_in_the_simulator_ends_where_the_path_ends(sim: Sim, file: Path) -> None:
    trajectory = load_pathplanner(file, LIMITS) if file.suffix == ".path" else load_choreo(file)
    with sim.connect() as host:
        replay = Replay(host, load_path(file, LIMITS), clock=now, sleep=stepper(sim, host))  # type: ignore[arg-type]
        replay.run()
    sim.run(0.3)
    x, y, heading = truth()
    end = trajectory.end
    # open loop: the simulated motors lag the commanded speeds a little
    assert math.hypot(x - end.x, y - end.y) < 0.12
    assert math.remainder(heading - end.heading, math.tau) == pytest.approx(0.0, abs=0.08)


@pytest.mark.parametrize("file", [PATHPLANNER, CHOREO], ids=["pathplanner", "choreo"])
def test_the_autonomous_mode_of_an_example_plays_it_on_the_robot(sim: Sim, file: Path) -> None:
    mode = f"Path: {file.name}"
    choose(sim, mode)
    selected = sim.robot.automodes.chooser.getSelected()  # type: ignore[attr-defined]
    assert selected.path is None  # chosen: the robot sees it after this tick's mode step ...
    sim.tick(enabled=False)
    assert selected.path is not None, selected.error  # ... and plans it in the next, disabled
    trajectory = load_pathplanner(file, LIMITS) if file.suffix == ".path" else load_choreo(file)
    sim.run(trajectory.total + 0.5)
    x, y, _ = truth()
    assert math.hypot(x - trajectory.end.x, y - trajectory.end.y) < 0.12
    assert sim.number("Network/MessagesSkipped") == 0 and sim.number("Network/QueueOverflows") == 0


def test_a_planner_file_is_planned_only_when_its_mode_is_wanted(control, robot) -> None:  # type: ignore[no-untyped-def]
    with running(control, robot) as sim:
        modes = sim.robot.automodes.modes  # type: ignore[attr-defined]
        assert modes["Path: s_curve.path"].path is None and not modes["Path: s_curve.path"].prepared
        assert modes["Path: square.csv"].path is not None  # our own files: read at start


@pytest.fixture
def weak_right(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setenv(settings.RIGHT_SCALE, "0.85")
    return 0.85


@pytest.mark.parametrize("file", [PATHPLANNER, CHOREO], ids=["pathplanner", "choreo"])
def test_follow_and_the_robots_own_loops_make_up_a_weak_side(weak_right: float, sim: Sim, file: Path) -> None:
    trajectory = load_pathplanner(file, LIMITS) if file.suffix == ".path" else load_choreo(file)
    end = trajectory.end
    # The client dates the telemetry on the simulator's clock too: the follower extrapolates the
    # robot's pose by a sample's age, and on the wall clock that age grows with what the machine
    # held the test between the sample's arrival and the next step, while simulated time stood still.
    with sim.connect(clock=now) as host:
        follower = Follower(host, trajectory, LIMITS, clock=now, sleep=stepper(sim, host))  # type: ignore[arg-type]
        result = follower.run()
    sim.run(0.3)
    x, y, _ = truth()
    assert math.hypot(x - end.x, y - end.y) < 0.05
    assert result.final_error <= 0.03 and result.reference_time == pytest.approx(trajectory.total)

    # the same robot, open loop, from where it stands now: its wheel loops make up the weak
    # side themselves
    start = truth()
    with sim.connect() as host:
        replay = Replay(host, load_path(file, LIMITS), clock=now, sleep=stepper(sim, host))  # type: ignore[arg-type]
        replay.run()
    sim.run(0.3)
    moved = trajectory.relative_to_start().end
    x, y, _ = truth()
    c, s = math.cos(start[2]), math.sin(start[2])
    want = (start[0] + c * moved.x - s * moved.y, start[1] + s * moved.x + c * moved.y)
    assert math.hypot(x - want[0], y - want[1]) < 0.12


def test_follow_rides_through_a_lost_link_and_finishes_the_path_late(sim: Sim) -> None:
    """Half way, the host's packets stop reaching the robot for 0.6 s of simulated time: the
    robot's link timeout stops it and closes the connection, the host reconnects. The
    reference waits while the link is down, so the path is finished, late, where it ends."""
    trajectory = load_pathplanner(PATHPLANNER, LIMITS)
    end = trajectory.end
    host = sim.connect(
        reconnect=ReconnectPolicy(initial_backoff=0.01, max_backoff=0.05, silence_timeout=None)
    )
    real_send, real_keepalive = host.send, host.keepalive
    ticks = {"n": 0, "dark": 0}

    def dark() -> bool:
        return 0 < ticks["dark"] <= 30

    def send(messages: object, clear_queue: bool = False, *, generation: int | None = None) -> int:
        return 0 if dark() else real_send(messages, clear_queue=clear_queue, generation=generation)  # type: ignore[arg-type]

    host.send = send  # type: ignore[method-assign]
    host.keepalive = lambda: None if dark() else real_keepalive()  # type: ignore[method-assign]
    started = now()
    received = lambda: sim.link.dispatcher.packets_done  # noqa: E731
    link = {"generation": host.status().generation, "base": host.link.packets_sent - received()}

    def sleep(seconds: float) -> None:
        ticks["n"] += 1
        if ticks["dark"] or follower.reference_time >= trajectory.total / 2:
            ticks["dark"] += 1
        if ticks["n"] % 2 == 0:
            host.keepalive()
        status = host.status()
        if not status.connected or status.generation != link["generation"]:
            # lost (the robot closed it) and reconnecting: the robot counts afresh from here
            wait_until(lambda: host.connected, timeout=10.0, what="the host to reconnect")
            link.update(generation=host.status().generation, base=host.link.packets_sent - received())
        else:  # what was sent on this connection has arrived, or the connection went meanwhile
            wait_until(
                lambda: (
                    received() >= host.link.packets_sent - link["base"]
                    or not host.connected
                    or host.status().generation != link["generation"]
                ),
                what="sends to arrive",
            )
        sim.tick()
        sim.link.flush_sends()

    follower = Follower(host, trajectory, LIMITS, clock=now, sleep=sleep)  # type: ignore[arg-type]
    try:
        result = follower.run()
    finally:
        host.close()
    sim.run(0.3)
    x, y, _ = truth()
    # the robot dropped the link once or, if the host was back before its packets were, twice
    assert result.outages and all(o.back_at is not None for o in result.outages)
    assert sim.number("Network/LinkLosses") >= 1
    assert now() - started > trajectory.total + 0.4  # the path waited for the link
    assert math.hypot(x - end.x, y - end.y) < 0.05
