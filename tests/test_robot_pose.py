"""The robot's own pose for hosts (``Network/Pose``) and ``replay --follow`` on it.

* The follower's core (sans-I/O, on a made-up timeline): a robot pose is placed in time by
  its stamp, on the path where the wheels had the robot then, and carried by the wheels to
  the newest sample; a robot that restarts is placed afresh.
* :class:`RobotPose` against a real NT4 server (ntcore, in this process), and the one line
  ``--follow`` says when the robot offers no pose.
* The real robot program in a headless simulator whose chassis scrubs (it turns as if its
  track were 1.25 times wider), kitbot wiring, shared by the module: it publishes its pose
  with the stamp of its telemetry (a real BCNP client and a real NT4 client side by side),
  and ``replay --follow`` ends on the path's end on it, judged by the simulator's own pose.
"""

from __future__ import annotations

import itertools
import math
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import ntcore
import pytest
from support import wait_until
from test_session import follow, telemetry

from bcnp.host.cli import main
from bcnp.host.cli.replay_cmd import POSE_WAIT_S, open_robot_pose, use_robot_pose
from bcnp.host.nt.pose import NO_SERVER_S, POSE_TOPIC, RobotPose
from bcnp.host.sessions.core.follow import FollowSession, StampedPose
from bcnp.host.sessions.core.session import Outage
from bcnp.paths import DriveLimits, PathCommand, from_commands, load_trajectory
from bcnp.wire import PacketView
from benchmarks.harness.ports import free_port
from benchmarks.harness.sim import SimRobot
from messages import DRIVE_CMD_SPEC, SCHEMA, DriveCmd

LIMITS = DriveLimits()
TRACK = LIMITS.track_width_m
SCRUB = 1.25
#: 1 m straight ahead at 0.5 m/s: the path the made-up robot is on while it turns in place.
STRAIGHT = from_commands([PathCommand(0.5, 0.0, 2000)], LIMITS)


# -- the follower's core ------------------------------------------------------------------------


def test_a_stamped_pose_reads_network_pose_and_refuses_anything_else() -> None:
    assert StampedPose.from_array([1.0, 2.0, -0.5, 4294967295.0]) == StampedPose(1.0, 2.0, -0.5, 2**32 - 1)
    assert StampedPose.from_array([1.0, 2.0, 0.5, 20.0, 9.0]) == StampedPose(
        1.0, 2.0, 0.5, 20
    )  # more: kept out
    for bad in ([], [1.0, 2.0, 0.5], [1.0, math.nan, 0.5, 20.0], [1.0, 2.0, 0.5, 20.5], [0, 0, 0, -20.0]):
        assert StampedPose.from_array(bad) is None, bad


def turning(
    stamp_ms: int, side_mm: int, robot_at: tuple[float, float, float]
) -> tuple[PacketView, StampedPose]:
    """A robot turning in place on a scrubbing chassis: its telemetry sample, each wheel
    ``side_mm`` from where it began (whole mm, as the wire carries positions), and its own pose
    (the gyro's heading: 1/SCRUB of the wheels' turn) in the frame of its odometry, where it
    stands at ``robot_at``."""
    x, y, heading = robot_at
    sample = telemetry(SCHEMA, stamp_ms, -side_mm / 1000, side_mm / 1000, -0.1, 0.1)
    return sample, StampedPose(x, y, heading + wheel_turn(side_mm) / SCRUB, stamp_ms)


def wheel_turn(side_mm: int) -> float:
    return 2 * side_mm / 1000 / TRACK


def test_the_follower_rests_on_the_robots_pose_placed_by_its_stamp() -> None:
    session = FollowSession(STRAIGHT, LIMITS, command_spec=DRIVE_CMD_SPEC)
    robot_at = (2.0, -1.0, 0.7)  # the robot's odometry started elsewhere: only motion counts
    sides = [0, 20, 40, 60, 80]
    turns = [wheel_turn(side) for side in sides]
    made = [turning(1000 + 20 * i, side, robot_at) for i, side in enumerate(sides)]
    # Wheels only: the heading is the wheels'.
    session.on_telemetry(made[0][0], now=0.0)
    session.on_telemetry(made[1][0], now=0.02)
    follow(session, 0.02)
    estimate = session.estimate()
    assert estimate is not None and estimate[2] == pytest.approx(turns[1])
    # The robot's pose of the first tick: placed where the wheels had the robot then (the
    # path's start), and carried by the wheels one tick to the newest sample.
    session.on_pose(made[0][1], now=0.03)
    follow(session, 0.04)
    assert session.poses_used == 1
    assert session.estimate() == pytest.approx((0.0, 0.0, turns[1]))
    # A pose that comes before the sample of its tick waits for it; then the gyro's heading holds.
    session.on_pose(made[2][1], now=0.05)
    follow(session, 0.06)
    assert session.poses_used == 1
    session.on_telemetry(made[2][0], now=0.07)
    follow(session, 0.08)
    assert session.poses_used == 2
    assert session.estimate() == pytest.approx((0.0, 0.0, turns[2] / SCRUB))
    # The next sample comes without its pose: the wheels carry on from the last pose.
    session.on_telemetry(made[3][0], now=0.09)
    follow(session, 0.1)
    assert session.estimate() == pytest.approx((0.0, 0.0, turns[2] / SCRUB + (turns[3] - turns[2])))
    # Its pose comes late; an older pose that straggles in after it is not used.
    session.on_pose(made[3][1], now=0.11)
    session.on_pose(made[1][1], now=0.11)
    follow(session, 0.12)
    assert session.poses_used == 3
    assert session.estimate() == pytest.approx((0.0, 0.0, turns[3] / SCRUB))


def test_a_robot_that_restarts_has_its_next_pose_placed_where_the_estimate_was() -> None:
    session = FollowSession(STRAIGHT, LIMITS, command_spec=DRIVE_CMD_SPEC)
    first, first_pose = turning(5000, 0, (3.0, 3.0, 0.0))
    second, _ = turning(5020, 60, (3.0, 3.0, 0.0))
    session.on_telemetry(first, now=0.0)
    session.on_telemetry(second, now=0.02)
    session.on_pose(first_pose, now=0.02)
    follow(session, 0.02)
    before = session.estimate()
    assert before == pytest.approx((0.0, 0.0, wheel_turn(60)))
    _, stale = turning(5040, 90, (3.0, 3.0, 0.0))
    session.on_pose(stale, now=0.03)  # its sample never comes: the robot restarted
    # Restarted: its timestamps and its odometry start again, from its origin.
    sample, pose = turning(100, 0, (0.0, 0.0, 0.0))
    session.on_telemetry(sample, now=0.04)
    session.on_pose(pose, now=0.04)
    follow(session, 0.04)
    assert session.poses_used == 2
    assert session.estimate() == pytest.approx(before)
    later, later_pose = turning(120, 30, (0.0, 0.0, 0.0))
    session.on_telemetry(later, now=0.06)
    session.on_pose(later_pose, now=0.06)
    follow(session, 0.06)
    assert session.estimate() == pytest.approx((0.0, 0.0, wheel_turn(60) + wheel_turn(30) / SCRUB))


def test_back_from_an_outage_the_reference_moves_on_to_the_robot_and_keeps_to_it() -> None:
    """The robot ran on after it was last heard (its plan, then its stop): the reference, rewound
    to where it was last heard, moves on to where the robot stands, waits while it stands, keeps
    to it along the path while it speeds up, and runs on the clock again once it is up to speed."""
    session = FollowSession(STRAIGHT, LIMITS, command_spec=DRIVE_CMD_SPEC)

    def heard(stamp_ms: int, x: float, v: float, now: float) -> None:
        session.on_telemetry(telemetry(SCHEMA, stamp_ms, x, x, v, v), now=now)
        follow(session, now)

    for t in range(51):  # 1 s on the path with the link up
        ref = STRAIGHT.sample(t * 0.02)
        heard(t * 20, ref.x, ref.vx, t * 0.02)
    session.went(Outage(lost_at=0.8, reason="no telemetry for 0.5 s"), 1.0)
    assert session.reference_time == pytest.approx(0.8, abs=0.03)
    session.back(Outage(lost_at=0.8, reason="no telemetry for 0.5 s", back_at=2.0), 2.0)
    follow(session, 2.0)
    ran_on = STRAIGHT.sample(1.2).x  # 0.2 m on, at rest
    heard(3000, ran_on, 0.0, 2.02)
    assert session.reference_time == pytest.approx(1.2, abs=0.02)
    for n in range(1, 6):  # still standing: the reference waits with it
        heard(3000 + 20 * n, ran_on, 0.0, 2.02 + 0.02 * n)
    assert session.reference_time == pytest.approx(1.2, abs=0.02)
    x = ran_on
    for n in range(10):  # 0.2 s at half the path's speed: the reference keeps to the robot
        x += 0.25 * 0.02
        heard(3120 + 20 * n, x, 0.25, 2.14 + 0.02 * n)
    assert STRAIGHT.sample(session.reference_time).x == pytest.approx(x, abs=0.01)
    assert session.reference_time == pytest.approx(1.3, abs=0.03)  # not 1.4: the clock's
    heard(3320, x + 0.01, 0.5, 2.34)  # up to speed: the clock again
    at = session.reference_time
    follow(session, 2.44)
    assert session.reference_time == pytest.approx(at + 0.1)


# -- RobotPose against a real NT4 server ----------------------------------------------------------


@pytest.fixture
def nt_server(tmp_path: Path) -> Iterator[tuple[ntcore.NetworkTableInstance, int]]:
    """A NetworkTables server in this process (no robot): its instance and NT4 port."""
    server = ntcore.NetworkTableInstance.create()
    port = free_port()
    server.startServer(str(tmp_path / "networktables.json"), "127.0.0.1", 0, port)
    try:
        yield server, port
    finally:
        server.stopServer()
        ntcore.NetworkTableInstance.destroy(server)


def test_robot_pose_keeps_the_latest_pose_and_hands_each_on(
    nt_server: tuple[ntcore.NetworkTableInstance, int],
) -> None:
    server, port = nt_server
    publisher = server.getDoubleArrayTopic(POSE_TOPIC).publish()
    heard: list[StampedPose] = []
    with RobotPose("127.0.0.1", port, on_pose=heard.append) as robot_pose:
        assert robot_pose.server == f"127.0.0.1:{port}"
        wait_until(lambda: robot_pose.connected, timeout=10.0, what="the NT4 client to connect")
        for stamp in (20, 40):
            publisher.set([1.0, 2.0, 0.25, float(stamp)])
            wait_until(lambda s=stamp: heard and heard[-1].stamp_ms == s, timeout=10.0, what=f"pose {stamp}")
        publisher.set([1.0, 2.0])  # not a pose: ignored
        publisher.set([3.0, 4.0, 0.5, 60.0])
        wait_until(lambda: heard[-1].stamp_ms == 60, timeout=10.0, what="pose 60")
        assert [p.stamp_ms for p in heard] == [20, 40, 60]
        assert robot_pose.latest() == robot_pose.wait(0.0) == StampedPose(3.0, 4.0, 0.5, 60)
        assert robot_pose.received == 3
        # A loop pulls them in order, each with when it arrived, once.
        drained = robot_pose.drain()
        assert [p.stamp_ms for _, p in drained] == [20, 40, 60]
        times = [at for at, _ in drained]
        assert times == sorted(times) and times[-1] == robot_pose.arrived
        assert robot_pose.drain() == []


def test_follow_says_it_follows_the_wheels_when_no_server_answers() -> None:
    port = free_port()
    robot_pose = RobotPose("127.0.0.1", port)
    started = time.monotonic()
    used, line = use_robot_pose(robot_pose, "")
    assert (
        used is None
        and line == f"pose: from the wheel telemetry (no NetworkTables server at 127.0.0.1:{port})"
    )
    # It gives up NO_SERVER_S after the client started when no server answered: a bound for a
    # busy machine, not a timing measurement.
    assert NO_SERVER_S < POSE_WAIT_S
    assert time.monotonic() - started < POSE_WAIT_S + 5.0


def test_follow_says_it_follows_the_wheels_without_pyntcore(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ntcore", None)  # as on a host without the host extra
    robot_pose, why_not = open_robot_pose("127.0.0.1", free_port())
    assert robot_pose is None
    assert use_robot_pose(robot_pose, why_not) == (
        None,
        "pose: from the wheel telemetry (no pyntcore to read the robot's Network/Pose)",
    )


# -- the robot, in a headless simulator ----------------------------------------------------------


@pytest.fixture(scope="module")
def scrubbing_robot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimRobot]:
    """The robot program, kitbot, on a chassis that scrubs (BCNP_SIM_SCRUB=1.25), headless."""
    robot = SimRobot(tmp_path_factory.mktemp("scrub"), env={"BCNP_SIM_SCRUB": str(SCRUB)})
    robot.start()
    try:
        robot.wait_ticking()
        yield robot
    finally:
        robot.close()


def test_the_robot_publishes_its_pose_with_its_telemetrys_stamp(scrubbing_robot: SimRobot) -> None:
    from bcnp.host.link.client import Client

    port, nt_port = scrubbing_robot.port, scrubbing_robot.nt_port
    wheels: dict[int, tuple[float, float]] = {}
    poses: dict[int, StampedPose] = {}

    def on_telemetry(packet: PacketView) -> None:
        for sample in packet:
            row = sample.as_dict()
            wheels[int(row["timestampMs"])] = (row["leftPosition"], row["rightPosition"])

    def on_pose(pose: StampedPose) -> None:
        poses[pose.stamp_ms] = pose

    with (
        RobotPose("127.0.0.1", nt_port, on_pose=on_pose) as robot_pose,
        Client(SCHEMA, "127.0.0.1", port, on_telemetry=on_telemetry) as host,
    ):
        assert robot_pose.wait(10.0) is not None
        # 0.5 s straight at 0.5 m/s, then 0.7 s turning in place at 1 rad/s.
        host.send(
            [DriveCmd(vx=0.5, omega=0.0, durationMs=500), DriveCmd(vx=0.0, omega=1.0, durationMs=700)],
            clear_queue=True,
        )
        wait_until(lambda: len(wheels) >= 65, timeout=20.0, what="1.3 s of telemetry")
    # Every pose of a tick the robot sent telemetry for has that tick's sample's stamp. A busy
    # machine can lose a telemetry packet (the robot refuses a send its buffer cannot take, and
    # counts it): a pose of such a tick has no sample to match, and it lies in a gap of what
    # the host got, the samples either side of it more than a tick apart.
    linked = sorted(s for s in poses if min(wheels) <= s <= max(wheels))
    assert len(linked) >= 50
    stamps = sorted(wheels)
    tick_ms = statistics.median(b - a for a, b in itertools.pairwise(stamps))
    unmatched = [s for s in linked if s not in wheels]
    assert len(unmatched) <= len(linked) // 10, unmatched
    for s in unmatched:
        after = next(w for w in stamps if w > s)
        before = max(w for w in stamps if w < s)
        assert after - before > 1.5 * tick_ms, (s, before, after)
    # What follows compares a pose with its own tick's wheels: only the poses that have them.
    linked = [s for s in linked if s in wheels]
    first = linked[0]
    left0, right0 = wheels[first]

    def along(s: int) -> float:
        return (wheels[s][0] + wheels[s][1]) / 2 - (left0 + right0) / 2

    def turned(s: int) -> float:
        return ((wheels[s][1] - wheels[s][0]) - (right0 - left0)) / TRACK

    # Straight ahead, the pose moved as far as the wheels of its own tick say, to 2 mm (one
    # tick off would be 10 mm at 0.5 m/s).
    moving = [s for s in linked if along(s) > 0.05 and abs(turned(s)) < 0.02]
    assert len(moving) >= 8
    for s in moving:
        pose = poses[s]
        assert math.hypot(pose.x - poses[first].x, pose.y - poses[first].y) == pytest.approx(
            along(s), abs=0.002
        )
    # Turning, the heading is the gyro's: the wheels' difference says SCRUB times more.
    last = linked[-1]
    wheel_turn = turned(last)
    pose_turn = poses[last].heading - poses[first].heading
    assert pose_turn > 0.4
    assert wheel_turn / pose_turn == pytest.approx(SCRUB, abs=0.05)


def _end_error(path: Path, start: tuple[float, float, float], end: tuple[float, float, float]) -> float:
    """How far the robot came to rest (``end``, having set off at ``start``, true poses) from
    the path's end, both relative to where they start."""
    trajectory = load_trajectory(path, LIMITS)
    x0, y0, h0 = start
    dx, dy = end[0] - x0, end[1] - y0
    moved = (dx * math.cos(h0) + dy * math.sin(h0), -dx * math.sin(h0) + dy * math.cos(h0))
    s, e = trajectory.start, trajectory.end
    ex, ey = e.x - s.x, e.y - s.y
    planned = (
        ex * math.cos(s.heading) + ey * math.sin(s.heading),
        -ex * math.sin(s.heading) + ey * math.cos(s.heading),
    )
    return math.hypot(moved[0] - planned[0], moved[1] - planned[1])


def test_replay_follow_ends_on_the_path_on_the_robots_pose(
    scrubbing_robot: SimRobot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An S on the scrubbing chassis (2.5 s: a left arc, then a right one). The wheels overstate
    each turn by a quarter: on them alone ``--follow`` ends about 0.3 m off, believing itself
    on target; on the robot's pose it ends on the path's end."""
    from benchmarks.harness.truth import FieldPose

    port, nt_port = scrubbing_robot.port, scrubbing_robot.nt_port
    path = tmp_path / "s.csv"
    path.write_text("0.8,1.0,1250\n0.8,-1.0,1250\n", encoding="utf-8")
    truth = FieldPose(nt_port)
    try:
        time.sleep(0.3)  # the last test's controller has gone and the robot stands still
        start = truth.pose()
        status = main(["replay", str(path), "--follow", "--port", str(port), "--nt-port", str(nt_port)])
        time.sleep(0.3)
        end = truth.pose()
    finally:
        truth.close()
    out = capsys.readouterr().out
    assert status == 0, out
    lines = out.splitlines()
    assert lines[1] == f"pose: the robot's own (Network/Pose at 127.0.0.1:{nt_port})"
    assert sum(line.startswith("pose:") for line in lines) == 1
    assert lines[2].startswith("following ") and lines[-1].startswith("done: ")
    # Measured 0.007 m on an idle machine and 0.11 m with the two cores busy and four test
    # workers beside it (the sim's ticks and the host's steps come late); on the wheels alone
    # about 0.3 m.
    assert _end_error(path, start, end) < 0.15


def test_replay_follow_falls_back_to_the_wheels_and_says_so(
    scrubbing_robot: SimRobot,
    nt_server: tuple[ntcore.NetworkTableInstance, int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A NetworkTables server that is not this robot's (no Network/Pose): the wheels."""
    _, nt_port = nt_server
    path = tmp_path / "short.csv"
    path.write_text("0.3,0,300\n", encoding="utf-8")
    time.sleep(0.3)
    port = scrubbing_robot.port
    status = main(["replay", str(path), "--follow", "--port", str(port), "--nt-port", str(nt_port)])
    out = capsys.readouterr().out
    assert status == 0, out
    lines = out.splitlines()
    assert (
        lines[1]
        == f"pose: from the wheel telemetry (the robot at 127.0.0.1:{nt_port} offers no Network/Pose)"
    )
    assert lines[2].startswith("following ") and lines[-1].startswith("done: ")
