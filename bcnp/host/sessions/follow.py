"""Closed loop on the host: follow a trajectory with the robot's own telemetry (``replay --follow``).

Open-loop replay sends the plan and never looks back: a wheel that drags, a
push, a link drop are never made up. :class:`Follower` closes the loop on the
host, with nothing new on the wire:

* **Where the robot is**: the robot's own pose when it offers it
  (``Network/Pose`` over NetworkTables, :mod:`bcnp.host.nt.pose`: its
  odometry on the gyro's heading, stamped with its tick's telemetry
  ``timestampMs``), fed in through :meth:`Follower.on_pose`; else, and between
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
import threading
import time
from collections.abc import Callable

from ...paths import DriveLimits, Trajectory
from ...wire import PacketView
from ..link.client import Client, LinkDownError
from .core.follow import TICK_S, FollowResult, FollowSession, StampedPose
from .core.outages import Outage, Send
from .driver import SessionDriver
from .replay import TelemetryRecorder

__all__ = ["FollowResult", "FollowSession", "Follower"]


class _Guarded:
    """A session whose every call holds ``lock``: the follower's telemetry arrives on the
    client's receive thread while the loop steps the session on the caller's."""

    def __init__(self, session: FollowSession, lock: threading.Lock) -> None:
        self.session = session
        self.lock = lock

    def went(self, outage: Outage, elapsed: float) -> None:
        with self.lock:
            self.session.went(outage, elapsed)

    def back(self, outage: Outage, elapsed: float) -> None:
        with self.lock:
            self.session.back(outage, elapsed)

    def step(self, elapsed: float, now: float, connected: bool) -> Send | None:
        with self.lock:
            return self.session.step(elapsed, now, connected)

    def delivered(self, send: Send, packets: int) -> None:
        with self.lock:
            self.session.delivered(send, packets)

    def finished(self, elapsed: float, down: Outage | None) -> bool:
        with self.lock:
            return self.session.finished(elapsed, down)

    def where(self) -> str:
        with self.lock:
            return self.session.where()


class Follower(SessionDriver):
    """Follows ``trajectory`` on a connected :class:`Client`: a :class:`FollowSession`
    driven on the client (:func:`~bcnp.host.sessions.driver.drive`); see the module docs."""

    def __init__(
        self,
        client: Client,
        trajectory: Trajectory,
        limits: DriveLimits,
        *,
        horizon: float = 0.2,
        correct_for: float = 0.04,
        settle: float = 2.0,
        tolerance: float = 0.02,
        step: float = TICK_S,
        recorder: TelemetryRecorder | None = None,
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
        self._lock = threading.Lock()
        guarded = _Guarded(self.session, self._lock)
        super().__init__(client, guarded, step=step, recorder=recorder, clock=clock, sleep=sleep)
        self.recorder: TelemetryRecorder | None = recorder

    @property
    def reference_time(self) -> float:
        return self.session.reference_time

    @property
    def outages(self) -> list[Outage]:
        return self.session.outages

    def on_telemetry(self, packet: PacketView) -> None:
        """The client's ``on_telemetry`` (its receive thread)."""
        if self.recorder is not None:
            self.recorder(packet)
        now = self.clock()
        with self._lock:
            self.session.on_telemetry(packet, now)

    def on_pose(self, pose: StampedPose) -> None:
        """The robot's own pose (a :class:`~bcnp.host.nt.pose.RobotPose`'s ``on_pose``, on
        its NetworkTables thread)."""
        now = self.clock()
        with self._lock:
            self.session.on_pose(pose, now)

    def run(self, on_outage: Callable[[Outage], object] | None = None) -> FollowResult:
        self._drive(self.session.outages, on_outage)
        with contextlib.suppress(LinkDownError):
            self.client.stop()
        assert self.start is not None
        with self._lock:
            return self.session.result(self.clock() - self.start)
