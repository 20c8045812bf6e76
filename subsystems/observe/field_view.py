"""The field on SmartDashboard (``Odometry``): where the robot thinks it is, and where its commands take it.

A WPILib ``Field2d`` with two objects, which Elastic's Field widget, the sim
GUI, Glass and AdvantageScope all draw:

* ``Robot``: the drivetrain's odometry pose, every tick (relative to where the
  robot started: it knows no better without vision);
* ``CommandedPath``: the path the running command and the ones queued behind
  it drive from that pose, clamped like the commands themselves, up to
  ``PATH_HORIZON_S`` ahead. It is worked out every ``PATH_EVERY_TICKS`` ticks
  (a host replans its commands a few times a second at most), and emptied
  once when nothing is queued.

It shows what is commanded whatever the mode runs: in teleop, or with the
chooser on "None", the queue's path is drawn though the wheels do not follow it.

The path is the poses of :func:`commanded_path` (``Pose2d.exp`` of each step), but
worked out in plain floats by :func:`path_array` and published as what a ``Field2d``
object publishes: one double array of x, y (metres) and heading (degrees) per pose, on
the object's topic (``PATH_TOPIC``), through a publisher of its own. No ``Pose2d`` is
made per pose (each ``Pose2d.exp`` call through pybind11 cost about 6,000 instructions),
and a queued command's steps are worked out once, the first time it is drawn, and kept
between paths by its wire integers (:class:`_CommandSteps`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from itertools import chain
from math import atan2, cos, hypot, pi, remainder, sin, tau
from typing import TYPE_CHECKING, cast

import ntcore
import wpilib
from wpimath.geometry import Pose2d, Twist2d

if TYPE_CHECKING:
    from typing import SupportsFloat, SupportsIndex

    from bcnp.schema import MessageSpec
    from messages import DriveCmd
    from subsystems.drivetrain.drivetrain import Drivetrain
    from subsystems.link.bcnp_link import BcnpLink

FIELD_KEY = "Odometry"  # SmartDashboard/Odometry (the simulator's own "Field" shows the physics)
PATH_OBJECT = "CommandedPath"
PATH_TOPIC = f"/SmartDashboard/{FIELD_KEY}/{PATH_OBJECT}"  # the Field2d object's topic: double[]
PATH_HORIZON_S = 3.0
PATH_STEP_S = 0.1  # one pose of the drawn path per this much driving
PATH_EVERY_TICKS = 5  # 100 ms at the 20 ms loop
PATH_MAX_COMMANDS = 150  # queued commands read at most (3 s of 20 ms commands)
COMMANDS_KEPT = 1000  # commands whose steps are kept between paths at most, per command type

_DEGREES = 180.0 / pi

#: One step of a path, as :func:`path_array` takes it: (seconds, length, angle, turn, vx,
#: omega). The robot moves ``length`` metres in a straight line at its heading plus
#: ``angle`` (radians: about half the turn, or that plus pi driving backwards), then its
#: heading turns by ``turn``; vx and omega (m/s, rad/s) are for a step cut short.
Step = tuple[float, float, float, float, float, float]


def commanded_path(
    start: Pose2d,
    segments: Iterable[tuple[float, float, float]],
    *,
    horizon: float = PATH_HORIZON_S,
    step: float = PATH_STEP_S,
) -> list[Pose2d]:
    """The poses a unicycle passes from ``start`` driving ``segments`` of (vx m/s,
    omega rad/s, seconds) in turn: ``start``, one pose every ``step`` seconds of
    driving, one at the end of every segment, and none beyond ``horizon`` seconds.

    What the field draws; the robot works the same poses out with :func:`path_steps`
    and :func:`path_array`, without a ``Pose2d`` per pose."""
    poses = [start]
    pose = start
    left = horizon
    for vx, omega, seconds in segments:
        seconds = min(seconds, left)
        while seconds > 1e-9:
            dt = min(seconds, step)
            pose = pose.exp(Twist2d(vx * dt, 0.0, omega * dt))
            poses.append(pose)
            seconds -= dt
            left -= dt
        if left <= 1e-9:
            break
    return poses


def path_steps(vx: float, omega: float, seconds: float, *, step: float = PATH_STEP_S) -> tuple[Step, ...]:
    """The steps :func:`commanded_path` drives a segment of (vx, omega, seconds) in, when
    the horizon does not cut it short: one of ``step`` seconds while more is left, then
    the rest; none once 1e-9 s or less is left (so a segment that short has none)."""
    steps = []
    while seconds > 1e-9:
        dt = seconds if seconds < step else step
        steps.append(_step(vx, omega, dt))
        seconds -= dt
    return tuple(steps)


def _step(vx: float, omega: float, dt: float) -> Step:
    """Driving (vx, omega) for ``dt`` seconds: the move ``Pose2d.exp(Twist2d(dx, 0, turn))``
    makes (dx = vx * dt, turn = omega * dt), (dx * s, dx * c) in the robot's frame with
    s = sin(turn) / turn and c = (1 - cos(turn)) / turn (below 1e-9 rad their series,
    1 - turn**2 / 6 and turn / 2), then the turn. Kept as the move's length and its angle
    from the heading (about half the turn), so that a step of the path costs one cosine
    and one sine. Worked out as ``Pose2d.exp`` works it out, rounding included: for turns
    of 1e-9 to 1e-7 rad, where 1 - cos(turn) has lost its digits, the path is drawn as it
    always was, not more exactly."""
    dx, turn = vx * dt, omega * dt
    if abs(turn) < 1e-9:
        s, c = 1.0 - 1.0 / 6.0 * turn * turn, 0.5 * turn
    else:
        s, c = sin(turn) / turn, (1 - cos(turn)) / turn
    ahead, aside = dx * s, dx * c
    return (dt, hypot(ahead, aside), atan2(aside, ahead), turn, vx, omega)


def path_array(start: Pose2d, steps: Iterable[Step], *, horizon: float = PATH_HORIZON_S) -> list[float]:
    """:func:`commanded_path`'s poses as a ``Field2d`` object publishes them: x, y
    (metres) and heading (degrees) of each, in one flat list, for ``steps`` of the
    segments one after the other (:func:`path_steps` of each). The start is as given;
    the headings after it are in (-180, 180], as ``Pose2d.exp`` leaves them.

    The same poses to within rounding (the heading is summed where ``Pose2d.exp``
    multiplies rotations): under 1e-12 m and 1e-12 degrees over 3 s of driving.
    Steps are read only as far as the horizon: an iterator is not read beyond it."""
    rotation = start.rotation()
    x, y, theta = start.X(), start.Y(), rotation.radians()
    out = [x, y, rotation.degrees()]
    append = out.append
    left = horizon
    if left <= 1e-9:
        return out
    cos_, sin_, high, low, degrees = cos, sin, pi, -pi, _DEGREES  # locals: read once per step
    for dt, length, angle, turn, vx, omega in steps:
        if dt > left:  # the horizon ends the path inside this step
            dt, length, angle, turn, vx, omega = _step(vx, omega, left)
        heading = theta + angle
        x += length * cos_(heading)
        y += length * sin_(heading)
        theta += turn
        if theta > high or theta <= low:
            theta = remainder(theta, tau)  # in [-pi, pi]
            if theta == low:
                theta = high
        append(x)
        append(y)
        append(theta * degrees)
        left -= dt
        if left <= 1e-9:
            break
    return out


class FieldView:
    """Publishes ``Odometry`` to SmartDashboard; :meth:`periodic` once per tick, after the
    drivetrain's odometry has been updated."""

    def __init__(self, link: BcnpLink, drivetrain: Drivetrain) -> None:
        self.field = wpilib.Field2d()
        wpilib.SmartDashboard.putData(FIELD_KEY, self.field)
        # The CommandedPath object's topic, written directly (what FieldObject2d.setPoses
        # writes, without a Pose2d per pose); empty until the first path, as an object is.
        topic = ntcore.NetworkTableInstance.getDefault().getDoubleArrayTopic(PATH_TOPIC)
        self.path = topic.publish()
        self.path.setDefault([])
        self._link = link
        self._drivetrain = drivetrain
        self._countdown = 0
        self._path_empty = False
        self._steps: dict[MessageSpec, _CommandSteps] = {}
        self._limits = (link.max_vx, link.max_omega)

    def periodic(self, now: float) -> None:
        pose = self._drivetrain.pose()
        self.field.setRobotPose(pose)
        self._countdown -= 1
        if self._countdown > 0:
            return
        self._countdown = PATH_EVERY_TICKS
        link = self._link
        # The waiting commands as wire integers, read by their fields' layout: no message
        # object per command (the queue holds DriveCmds; any type with these fields reads alike).
        active, started, waiting = link.parts.shared_queue.peek_raw(PATH_MAX_COMMANDS)
        if active is None and not waiting:
            if not self._path_empty:
                self.path.set([])
                self._path_empty = True
            return
        self._path_empty = False
        max_vx, max_omega = link.max_vx, link.max_omega
        if (max_vx, max_omega) != self._limits:  # the steps kept were clamped to the old limits
            self._steps.clear()
            self._limits = (max_vx, max_omega)
        parts: list[Iterable[Step]] = []
        if active is not None:
            command = cast("DriveCmd", active)
            seconds = command.durationMs / 1000
            if started is not None:
                seconds = max(0.0, started + seconds - now)  # what is left of the running one
            vx = max(-max_vx, min(max_vx, command.vx))
            omega = max(-max_omega, min(max_omega, command.omega))
            parts.append(path_steps(vx, omega, seconds))
        for spec, raws in waiting:
            table = self._steps.get(spec)
            if table is None or len(table) > COMMANDS_KEPT:
                table = self._steps[spec] = _CommandSteps(spec, max_vx, max_omega)
            # Each command's steps, looked up lazily: none beyond the horizon is read.
            parts.append(_chained(map(table.__getitem__, raws)))
        poses = path_array(pose, _chained(parts))
        self.path.set(cast("list[SupportsFloat | SupportsIndex]", poses))  # the stub's list is invariant


def _chained(groups: Iterable[Iterable[Step]]) -> Iterator[Step]:
    return chain.from_iterable(groups)


class _CommandSteps(dict[tuple[int, ...], tuple[Step, ...]]):
    """The steps (:func:`path_steps`) of waiting commands of one type, by their wire
    integers, clamped as the link clamps commands (``max(-limit, min(limit, value))``).
    A command's steps are worked out the first time it is looked up (``__missing__``)
    and kept: one still queued at the next path is a lookup, made in C by ``map``."""

    def __init__(self, spec: MessageSpec, max_vx: float, max_omega: float) -> None:
        super().__init__()
        self._layout = _layout(spec)
        self._max_vx = max_vx
        self._max_omega = max_omega

    def __missing__(self, raw: tuple[int, ...]) -> tuple[Step, ...]:
        # As the fields read: a float32 field is its integer / its scale.
        vx_at, vx_scale, omega_at, omega_scale, ms_at = self._layout
        max_vx, max_omega = self._max_vx, self._max_omega
        vx = max(-max_vx, min(max_vx, raw[vx_at] / vx_scale))
        omega = max(-max_omega, min(max_omega, raw[omega_at] / omega_scale))
        steps = self[raw] = path_steps(vx, omega, raw[ms_at] / 1000)
        return steps


@functools.cache
def _layout(spec: MessageSpec) -> tuple[int, int, int, int, int]:
    """Where a command's vx, omega and durationMs sit in its wire integers, and the
    float fields' scales (``Message`` reads a float32 field as raw / effective_scale)."""
    names = [field.name for field in spec.fields]
    vx, omega = spec.field("vx"), spec.field("omega")
    return (
        names.index("vx"),
        vx.effective_scale,
        names.index("omega"),
        omega.effective_scale,
        names.index("durationMs"),
    )
