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
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from math import copysign
from typing import TYPE_CHECKING, cast

import wpilib
from wpimath.geometry import Pose2d, Twist2d

if TYPE_CHECKING:
    from bcnp.schema import MessageSpec
    from messages import DriveCmd
    from subsystems.bcnp_link import BcnpLink
    from subsystems.drivetrain import Drivetrain

FIELD_KEY = "Odometry"  # SmartDashboard/Odometry (the simulator's own "Field" shows the physics)
PATH_OBJECT = "CommandedPath"
PATH_HORIZON_S = 3.0
PATH_STEP_S = 0.1  # one pose of the drawn path per this much driving
PATH_EVERY_TICKS = 5  # 100 ms at the 20 ms loop
PATH_MAX_COMMANDS = 150  # queued commands read at most (3 s of 20 ms commands)
TWISTS_KEPT = 1000  # twists kept between paths at most (commanded_path's ``twists``)


def commanded_path(
    start: Pose2d,
    segments: Iterable[tuple[float, float, float]],
    *,
    horizon: float = PATH_HORIZON_S,
    step: float = PATH_STEP_S,
    twists: dict[tuple[float, float], Twist2d] | None = None,
) -> list[Pose2d]:
    """The poses a unicycle passes from ``start`` driving ``segments`` of (vx m/s,
    omega rad/s, seconds) in turn: ``start``, one pose every ``step`` seconds of
    driving, one at the end of every segment, and none beyond ``horizon`` seconds.

    ``twists`` keeps each ``Twist2d`` made, by its (dx, dtheta), for this call and the
    next ones it is given to: a command still queued at the next call, or one like it,
    has its twist made once (the poses are the same; only a -0.0, which a dict cannot
    tell from 0.0, gets a twist of its own every time)."""
    if twists is None:
        twists = {}
    get = twists.get
    poses = [start]
    append = poses.append
    exp = Pose2d.exp
    pose = start
    left = horizon
    # Conditional expressions where min() was: the same value (min(a, b) is b only when
    # b < a), without the builtin's argument parsing, in a loop of up to 150 commands.
    for vx, omega, seconds in segments:
        if left < seconds:
            seconds = left
        while seconds > 1e-9:
            dt = seconds if seconds < step else step
            x, theta = vx * dt, omega * dt
            if (x or copysign(1.0, x) > 0.0) and (theta or copysign(1.0, theta) > 0.0):
                twist = get((x, theta))
                if twist is None:
                    twist = twists[x, theta] = Twist2d(x, 0.0, theta)
            else:
                twist = Twist2d(x, 0.0, theta)
            pose = exp(pose, twist)
            append(pose)
            seconds -= dt
            left -= dt
        if left <= 1e-9:
            break
    return poses


class FieldView:
    """Publishes ``Odometry`` to SmartDashboard; :meth:`periodic` once per tick, after the
    drivetrain's odometry has been updated."""

    def __init__(self, link: BcnpLink, drivetrain: Drivetrain) -> None:
        self.field = wpilib.Field2d()
        wpilib.SmartDashboard.putData(FIELD_KEY, self.field)
        self.path = self.field.getObject(PATH_OBJECT)
        self._link = link
        self._drivetrain = drivetrain
        self._countdown = 0
        self._path_empty = False
        self._twists: dict[tuple[float, float], Twist2d] = {}

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
                self.path.setPoses([])
                self._path_empty = True
            return
        self._path_empty = False
        segments: list[tuple[float, float, float]] = []
        max_vx, max_omega = link.max_vx, link.max_omega
        if active is not None:
            command = cast("DriveCmd", active)
            seconds = command.durationMs / 1000
            if started is not None:
                seconds = max(0.0, started + seconds - now)  # what is left of the running one
            vx = max(-max_vx, min(max_vx, command.vx))
            omega = max(-max_omega, min(max_omega, command.omega))
            segments.append((vx, omega, seconds))
        append = segments.append
        low_vx, low_omega = -max_vx, -max_omega
        for spec, raws in waiting:
            vx_at, vx_scale, omega_at, omega_scale, ms_at = _layout(spec)
            for raw in raws:
                # As the fields read (a float32 field is its integer / its scale), clamped as
                # max(-limit, min(limit, value)) clamps, written out.
                vx = raw[vx_at] / vx_scale
                vx = vx if vx < max_vx else max_vx
                vx = vx if vx > low_vx else low_vx
                omega = raw[omega_at] / omega_scale
                omega = omega if omega < max_omega else max_omega
                omega = omega if omega > low_omega else low_omega
                append((vx, omega, raw[ms_at] / 1000))
        if len(self._twists) > TWISTS_KEPT:
            self._twists.clear()
        self.path.setPoses(commanded_path(pose, segments, twists=self._twists))


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
