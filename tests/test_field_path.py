"""The drawn path (``SmartDashboard/Odometry/CommandedPath``) is the poses of ``Pose2d.exp``.

The robot works the path out in plain floats (``path_steps``, ``path_array``) and keeps
each queued command's steps between paths. Both are compared here with a plain
reference that builds a ``Pose2d`` per pose with ``Pose2d.exp``: the pure functions over
random start poses and segments, and ``FieldView`` over random histories of its queue
(commands started, consumed and appended, limits changed, the queue emptied), tick by
tick: the same poses to within 1e-9 m and 1e-9 degrees, published on the same ticks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from types import SimpleNamespace
from typing import Any

import pytest
import wpilib
from hypothesis import given, settings
from hypothesis import strategies as st
from wpimath.geometry import Pose2d, Rotation2d, Twist2d

from messages import DRIVE_CMD_SPEC, DriveCmd
from subsystems.observe.field_view import (
    PATH_EVERY_TICKS,
    PATH_HORIZON_S,
    PATH_MAX_COMMANDS,
    PATH_STEP_S,
    FieldView,
    commanded_path,
    path_array,
    path_steps,
)

TOLERANCE = 1e-9


def reference_path(
    start: Pose2d, segments: Iterable[tuple[float, float, float]], horizon: float = PATH_HORIZON_S
) -> list[Pose2d]:
    """The path as the field has always drawn it: one ``Pose2d.exp`` per step of at most
    ``PATH_STEP_S``, the last step of a segment what is left of it, nothing after
    ``horizon`` seconds, a rest of 1e-9 s or less dropped."""
    poses = [start]
    left = horizon
    for vx, omega, seconds in segments:
        if left < seconds:
            seconds = left
        while seconds > 1e-9:
            dt = seconds if seconds < PATH_STEP_S else PATH_STEP_S
            poses.append(poses[-1].exp(Twist2d(vx * dt, 0.0, omega * dt)))
            seconds -= dt
            left -= dt
        if left <= 1e-9:
            break
    return poses


def assert_same_poses(published: Sequence[float], poses: Sequence[Pose2d]) -> None:
    """``published`` (x, y, degrees per pose) draws ``poses``: as many, each within the
    tolerance (a heading by its difference around the circle: -180 and 180 are one)."""
    assert len(published) == 3 * len(poses)
    for i, pose in enumerate(poses):
        x, y, degrees = published[3 * i : 3 * i + 3]
        where = f"pose {i} of {len(poses)}"
        assert x == pytest.approx(pose.X(), abs=TOLERANCE, rel=0), where
        assert y == pytest.approx(pose.Y(), abs=TOLERANCE, rel=0), where
        turn = math.remainder(degrees - pose.rotation().degrees(), 360.0)
        assert abs(turn) <= TOLERANCE, f"{where}: {degrees} degrees, not {pose.rotation().degrees()}"
        if i:  # the start is published as given; the poses after it as a Rotation2d holds them
            assert -180.0 < degrees <= 180.0, where


# -- the pure functions --------------------------------------------------------------------------

coordinates = st.floats(-100.0, 100.0, allow_nan=False)
start_poses = st.builds(
    lambda x, y, radians: Pose2d(x, y, Rotation2d(radians)), coordinates, coordinates, st.floats(-10.0, 10.0)
)
speeds = st.one_of(st.sampled_from([0.0, -0.0, 1e-4, -1e-4, 1e-12]), st.floats(-5.0, 5.0))
turn_rates = st.one_of(st.sampled_from([0.0, -0.0, 1e-4, -1e-4, 1e-12, math.pi / 2]), st.floats(-20.0, 20.0))
durations = st.one_of(
    st.sampled_from([0.0, 1e-10, 1e-9, 2e-9, 0.02, 0.1, 0.1 + 5e-10, 0.25, 0.3, 3.0]),
    st.floats(0.0, 4.0),
)
segments = st.lists(st.tuples(speeds, turn_rates, durations), max_size=200)


@pytest.fixture(autouse=True)
def _smartdashboard_let_go() -> Iterator[None]:
    """A FieldView puts its Field2d on SmartDashboard, which keeps it after the test. Let go of
    it here, while NetworkTables still knows its handles: a Field2d left there is destroyed
    later, after pyfrc has reset NetworkTables for a robot test, and releases handles whose
    numbers by then belong to that robot's entries (``Network/CmdVx`` read another key's value
    in a test_robot.py test that ran after this module; tests/conftest.py's ``robot`` fixture
    does the same after each robot)."""
    yield
    wpilib._wpilib._clearSmartDashboardData()


@settings(max_examples=300, deadline=None)
@given(start=start_poses, segments=segments, horizon=st.one_of(st.just(PATH_HORIZON_S), st.floats(0.0, 6.0)))
def test_path_array_draws_the_poses_of_pose2d_exp(
    start: Pose2d, segments: list[tuple[float, float, float]], horizon: float
) -> None:
    poses = reference_path(start, segments, horizon)
    steps = chain.from_iterable(path_steps(*segment) for segment in segments)
    assert_same_poses(path_array(start, steps, horizon=horizon), poses)
    # commanded_path, the definition the module documents, is that reference.
    assert commanded_path(start, segments, horizon=horizon) == poses


def test_path_array_reads_no_step_beyond_the_horizon() -> None:
    def forever() -> Iterable[Any]:
        while True:
            yield from path_steps(1.0, 0.5, 0.02)

    published = path_array(Pose2d(), forever())
    assert len(published) == 3 * (1 + round(PATH_HORIZON_S / 0.02))


# -- FieldView over queue histories -------------------------------------------------------------


class Publisher:
    """Stands in for the path's publisher: what was set, in order."""

    def __init__(self) -> None:
        self.sets: list[list[float]] = []

    def set(self, values: list[float]) -> None:
        self.sets.append(list(values))


class Queue:
    """``SharedQueue.peek_raw`` over a state the test sets each tick."""

    def __init__(self) -> None:
        self.active: DriveCmd | None = None
        self.started: float | None = None
        self.waiting: list[DriveCmd] = []
        self.chunks = 1

    def peek_raw(self, limit: int) -> tuple[Any, float | None, list[Any]]:
        assert limit == PATH_MAX_COMMANDS
        raws = [command.raw for command in self.waiting[:limit]]
        size = -(-len(raws) // self.chunks)  # peek_raw's chunks are runs of one type: split anyway
        chunks = [(DRIVE_CMD_SPEC, raws[i : i + size]) for i in range(0, len(raws), size)] if raws else []
        return self.active, self.started, chunks


def clamp(value: float, limit: float) -> float:
    return max(-limit, min(limit, value))


def expected_path(queue: Queue, link: Any, pose: Pose2d, now: float) -> list[Pose2d] | None:
    """What the field must draw from this queue, or None: nothing queued."""
    if queue.active is None and not queue.waiting:
        return None
    segments = []
    if queue.active is not None:
        seconds = queue.active.durationMs / 1000
        if queue.started is not None:
            seconds = max(0.0, queue.started + seconds - now)
        active = queue.active
        segments.append((clamp(active.vx, link.max_vx), clamp(active.omega, link.max_omega), seconds))
    for command in queue.waiting[:PATH_MAX_COMMANDS]:
        vx, omega = clamp(command.vx, link.max_vx), clamp(command.omega, link.max_omega)
        segments.append((vx, omega, command.durationMs / 1000))
    return reference_path(pose, segments)


wire_speeds = st.one_of(st.sampled_from([0.0, 0.5, 1.5, 2.0, -0.8]), st.floats(-3.0, 3.0))
wire_turns = st.one_of(st.sampled_from([0.0, 0.3, -0.3, 2.5, 4.0]), st.floats(-6.0, 6.0))
wire_durations = st.one_of(st.sampled_from([0, 1, 20, 50, 100, 150, 1000, 3500]), st.integers(0, 65535))
commands = st.builds(DriveCmd, vx=wire_speeds, omega=wire_turns, durationMs=wire_durations)
ticks = st.fixed_dictionaries(
    {
        # how many of the stream's commands were taken off the queue before this tick
        "taken": st.integers(0, 6),
        # appended to the stream (the host sent more); 0 mostly
        "sent": st.integers(0, 12),
        "running": st.booleans(),
        "started_ago": st.one_of(st.none(), st.floats(0.0, 0.5)),
        "window": st.integers(0, PATH_MAX_COMMANDS + 20),
        "chunks": st.integers(1, 3),
        "pose": start_poses,
        "limits": st.sampled_from([(1.5, 2.5), (1.5, 2.5), (1.5, 2.5), (0.5, 1.0), (3.0, 5.0)]),
        "clear": st.integers(0, 20),  # 0: the host cleared the queue (nothing queued this tick)
    }
)


@settings(max_examples=60, deadline=None)
@given(stream=st.lists(commands, min_size=1, max_size=260), history=st.lists(ticks, min_size=1, max_size=40))
def test_the_field_draws_each_queue_history_as_pose2d_exp_would(
    stream: list[DriveCmd], history: list[dict[str, Any]]
) -> None:
    queue = Queue()
    link = SimpleNamespace(parts=SimpleNamespace(shared_queue=queue), max_vx=1.5, max_omega=2.5)
    pose = [Pose2d()]
    drivetrain = SimpleNamespace(pose=lambda: pose[0])
    view = FieldView(link, drivetrain)  # type: ignore[arg-type]
    real_publisher, view.path = view.path, Publisher()  # type: ignore[assignment]
    real_publisher.close()
    published = view.path
    assert isinstance(published, Publisher)
    first = 0  # the stream's first command still queued (or running)
    sent = min(len(stream), 20)  # the stream's commands the host has sent so far
    empty_drawn = False
    for tick, state in enumerate(history):
        now = 10.0 + 0.02 * tick
        first = min(first + state["taken"], len(stream))
        sent = min(max(sent + state["sent"], first), len(stream))
        queued = [] if state["clear"] == 0 else stream[first:sent]
        window = queued[: 1 + state["window"]]
        queue.active = window[0] if window and state["running"] else None
        queue.started = None if state["started_ago"] is None else now - state["started_ago"]
        queue.waiting = window[1:] if queue.active is not None else window
        queue.chunks = state["chunks"]
        link.max_vx, link.max_omega = state["limits"]
        pose[0] = state["pose"]
        before = len(published.sets)
        view.periodic(now)
        new = published.sets[before:]
        if tick % PATH_EVERY_TICKS:
            assert new == [], f"tick {tick}: the path is drawn every {PATH_EVERY_TICKS}th tick only"
            continue
        expected = expected_path(queue, link, state["pose"], now)
        if expected is None:  # emptied once, then left alone
            assert new == ([] if empty_drawn else [[]]), f"tick {tick}"
            empty_drawn = True
            continue
        empty_drawn = False
        assert len(new) == 1, f"tick {tick}"
        assert_same_poses(new[0], expected)


def test_the_field_publishes_the_path_on_the_objects_topic() -> None:
    import ntcore

    queue = Queue()
    queue.waiting = [DriveCmd(vx=1.0, omega=0.5, durationMs=40) for _ in range(3)]
    link = SimpleNamespace(parts=SimpleNamespace(shared_queue=queue), max_vx=1.5, max_omega=2.5)
    start = Pose2d(1.0, 2.0, Rotation2d.fromDegrees(30.0))
    view = FieldView(link, SimpleNamespace(pose=lambda: start))  # type: ignore[arg-type]
    try:
        entry = ntcore.NetworkTableInstance.getDefault().getEntry("/SmartDashboard/Odometry/CommandedPath")
        view.periodic(0.0)
        assert entry.getTopic().getTypeString() == "double[]"
        expected = reference_path(start, [(1.0, 0.5, 0.04)] * 3)
        assert_same_poses(entry.getDoubleArray([]), expected)
        queue.waiting = []
        for _ in range(PATH_EVERY_TICKS):
            view.periodic(0.0)
        assert entry.getDoubleArray([1.0]) == []
    finally:
        view.path.close()
