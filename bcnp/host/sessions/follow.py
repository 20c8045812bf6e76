"""Closed loop on the host: follow a trajectory with the robot's own telemetry (``replay --follow``).

Open-loop replay sends the plan and never looks back: a wheel that drags, a
push, a link drop are never made up. :class:`Follower` closes the loop on the
host, with nothing new on the wire:

* **Where the robot is**: the robot's own pose when it offers it
  (``Network/Pose`` over NetworkTables, :mod:`bcnp.host.nt.pose`: its
  odometry on the gyro's heading, stamped with its tick's telemetry
  ``timestampMs``), which the session's loop pulls at each step; else, and between
  poses, differential-drive odometry (WPILib's ``DifferentialDriveOdometry``)
  over the wheel positions in every telemetry sample (25 packets/s, one sample
  per robot tick), the heading from the wheels' difference over the track
  width. A wheel heading overstates the turn on a chassis whose wheels scrub;
  the gyro's does not. The estimate starts at the trajectory's start pose, and
  the first robot pose is placed where the wheels had the robot at its stamp.
  A pose is placed in time by its stamp: the telemetry sample of the same
  tick, whose arrival the follower knows, carries the wheels from it to the
  newest sample. A robot that restarts (its timestamps go back) is picked up
  where the estimate was.
* **Correction**: WPILib's ``LTVUnicycleController`` compares that pose,
  carried forward over the telemetry's age and the tick until the robot acts
  on a new command, with the reference at that moment.
* **Short-horizon plan**: on each telemetry packet the host sends, with
  CLEAR_QUEUE, the correction for the next 40 ms followed by the reference's
  own speeds up to ``horizon`` (0.2 s). The robot replaces whatever it had
  queued; if the host goes quiet, at most that horizon runs before the robot's
  200 ms link timeout stops it, as for any host.
* **The reference clock holds while the link is down**: the robot stops (link
  timeout), so the reference waits, rewound to when the robot was last heard,
  and resumes when the link is back; the path is finished late rather than cut.
  The robot ran on a little after it was last heard (its plan, up to the link
  timeout, then its stop): with the first news the reference moves on to where
  the robot is along the path, and keeps to it while it gets back up to speed,
  so the robot neither turns back for path it drove nor overshoots chasing a
  reference that ran off while it accelerated.
  The same when the robot stands still while the reference moves (for 0.1 s by
  its own clock): our commands are not reaching it although its telemetry
  reaches us, or it stopped for a link timeout before the host noticed; the
  reference waits where it was when the robot stopped.
* **The end**: after the trajectory's last sample the host drives straight for
  its end point (forwards or backwards, slowing as it nears: a unicycle
  controller at rest cannot close a sideways error) until the estimate is
  within ``tolerance`` with the robot at rest, or ``settle`` seconds have
  passed; then a stop. The end heading is not corrected.

:class:`~bcnp.host.sessions.core.follow.FollowSession` is the sans-I/O core (telemetry
in, plans out); :class:`Follower` drives it on a client.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from ...paths import DriveLimits, Trajectory
from ..link.client import Client, LinkDownError
from .core.follow import (
    CORRECT_FOR_S,
    HORIZON_S,
    SETTLE_S,
    TICK_S,
    TOLERANCE_M,
    FollowResult,
    FollowSession,
)
from .core.session import Outage, StampedPose
from .driver import Arrivals, SessionDriver
from .recorder import TelemetryRecorder

__all__ = ["FollowResult", "FollowSession", "Follower"]


class Follower(SessionDriver):
    """Follows ``trajectory`` on a connected :class:`Client`: a :class:`FollowSession`
    driven on the client (:func:`~bcnp.host.sessions.driver.drive`), which pulls the
    client's telemetry and, if ``poses`` is given (a :class:`~bcnp.host.nt.pose.RobotPose`),
    the robot's own poses into it at each step; see the module docs."""

    def __init__(
        self,
        client: Client,
        trajectory: Trajectory,
        limits: DriveLimits,
        *,
        horizon: float = HORIZON_S,
        correct_for: float = CORRECT_FOR_S,
        settle: float = SETTLE_S,
        tolerance: float = TOLERANCE_M,
        step: float = TICK_S,
        recorder: TelemetryRecorder | None = None,
        poses: Arrivals[StampedPose] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.session = FollowSession(
            trajectory,
            limits,
            horizon=horizon,
            correct_for=correct_for,
            settle=settle,
            tolerance=tolerance,
            command_spec=client.command_spec,
        )
        super().__init__(
            client, self.session, step=step, recorder=recorder, poses=poses, clock=clock, sleep=sleep
        )

    @property
    def reference_time(self) -> float:
        return self.session.reference_time

    @property
    def outages(self) -> list[Outage]:
        return self.session.outages

    def run(self, on_outage: Callable[[Outage], object] | None = None) -> FollowResult:
        self._drive(self.session.outages, on_outage)
        with contextlib.suppress(LinkDownError):
            self.client.stop()
        assert self.start is not None
        return self.session.result(self.clock() - self.start)
