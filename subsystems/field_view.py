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

from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

import wpilib
from wpimath.geometry import Pose2d, Twist2d

if TYPE_CHECKING:
    from messages import DriveCmd
    from subsystems.bcnp_link import BcnpLink
    from subsystems.drivetrain import Drivetrain

FIELD_KEY = "Odometry"  # SmartDashboard/Odometry (the simulator's own "Field" shows the physics)
PATH_OBJECT = "CommandedPath"
PATH_HORIZON_S = 3.0
PATH_STEP_S = 0.1  # one pose of the drawn path per this much driving
PATH_EVERY_TICKS = 5  # 100 ms at the 20 ms loop
PATH_MAX_COMMANDS = 150  # queued commands read at most (3 s of 20 ms commands)


def commanded_path(
    start: Pose2d,
    segments: Iterable[tuple[float, float, float]],
    *,
    horizon: float = PATH_HORIZON_S,
    step: float = PATH_STEP_S,
) -> list[Pose2d]:
    """The poses a unicycle passes from ``start`` driving ``segments`` of (vx m/s,
    omega rad/s, seconds) in turn: ``start``, one pose every ``step`` seconds of
    driving, one at the end of every segment, and none beyond ``horizon`` seconds."""
    poses = [start]
    pose = start
    left = horizon
    for vx, omega, seconds in segments:
        seconds = min(seconds, left)
        while seconds > 1e-9:
            dt = min(step, seconds)
            pose = pose.exp(Twist2d(vx * dt, 0.0, omega * dt))
            poses.append(pose)
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

    def periodic(self, now: float) -> None:
        pose = self._drivetrain.pose()
        self.field.setRobotPose(pose)
        self._countdown -= 1
        if self._countdown > 0:
            return
        self._countdown = PATH_EVERY_TICKS
        link = self._link
        active, started, waiting = link.parts.shared_queue.peek(PATH_MAX_COMMANDS)
        commands = cast("list[DriveCmd]", [active, *waiting] if active is not None else waiting)
        if active is None and not waiting:
            if not self._path_empty:
                self.path.setPoses([])
                self._path_empty = True
            return
        self._path_empty = False
        segments: list[tuple[float, float, float]] = []
        max_vx, max_omega = link.max_vx, link.max_omega
        for index, command in enumerate(commands):
            seconds = command.durationMs / 1000
            if index == 0 and active is not None and started is not None:
                seconds = max(0.0, started + seconds - now)  # what is left of the running one
            vx = max(-max_vx, min(max_vx, command.vx))
            omega = max(-max_omega, min(max_omega, command.omega))
            segments.append((vx, omega, seconds))
        self.path.setPoses(commanded_path(pose, segments))
