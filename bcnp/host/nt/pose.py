"""The robot's own pose, for a host: ``Network/Pose`` over NetworkTables.

The robot publishes, every tick, one double array under SmartDashboard:
``Network/Pose`` = ``[x m, y m, heading rad, timestampMs]``, its odometry (on the
gyro's heading while the gyro is trusted: a chassis whose wheels scrub turns less
than their difference says) and the FPGA time (ms) of the tick, the same
``timestampMs`` as that tick's DrivetrainTelemetry sample. One array, so a reader
never pairs a pose with another tick's stamp. The pose is relative to where the
robot program started.

:class:`RobotPose` is an NT4 client of its own (its own ntcore instance, like
``bcnp monitor``) that keeps the latest :class:`StampedPose`, and the recent ones with
when they arrived for a loop to :meth:`~RobotPose.drain` (as ``replay --follow``'s
does at each step); ``on_pose``, if given, hears each as it arrives (on ntcore's thread)::

    with RobotPose("10.12.34.2") as robot:      # NetworkTables on 5810
        pose = robot.wait(2.0)                  # None if none came
        print(pose.x, pose.y, pose.heading, pose.stamp_ms)

Host only: needs ``pyntcore`` (the ``host`` extra); the constructor raises
``ImportError`` without it. ntcore reconnects by itself when the robot restarts or
its radio comes back. ``replay --follow`` follows on it when the robot offers it
(:mod:`bcnp.host.sessions.follow`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ...defaults import NT_PORT
from ..sessions.core.session import StampedPose
from .instance import event_value, new_instance, server_name, start, stop

__all__ = ["NO_SERVER_S", "POSE_TOPIC", "RobotPose", "StampedPose"]

POSE_TOPIC = "/SmartDashboard/Network/Pose"
#: :meth:`RobotPose.wait` with ``server_within``: no server this long after the start, none soon.
NO_SERVER_S = 0.5
#: Updates as the robot sends them (each tick's), within 10 ms.
_PERIODIC_S = 0.01
#: Poses kept for :meth:`RobotPose.drain` (the oldest dropped): 2 s of robot ticks.
POSES_KEPT = 100


class RobotPose:
    """The latest ``Network/Pose`` of the robot at ``host`` (or team ``team``'s roboRIO),
    NetworkTables port ``port``; see the module docs. ``on_pose(pose)`` is called for each
    pose as it arrives, on ntcore's thread. :meth:`close` (or the ``with`` block's end)
    stops the client."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = NT_PORT,
        *,
        team: int | None = None,
        on_pose: Callable[[StampedPose], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import ntcore

        #: Where it asks, as the host tools name it: "host:port" or "team N robot:port".
        self.server = server_name(host, port, team)
        self.on_pose = on_pose
        self.clock = clock
        #: Poses received, and when the latest arrived (``clock``).
        self.received = 0
        self.arrived: float | None = None
        self._latest: StampedPose | None = None
        self._arrivals: deque[tuple[float, StampedPose]] = deque(maxlen=POSES_KEPT)
        self._changed = threading.Condition()
        self._started = clock()
        inst = new_instance()
        options = ntcore.PubSubOptions(periodic=_PERIODIC_S, sendAll=True)
        self._subscriber = inst.getDoubleArrayTopic(POSE_TOPIC).subscribe([], options)
        inst.addListener(self._subscriber, ntcore.EventFlags.kValueAll, self._heard)
        start(inst, "bcnp-robot-pose", host, port, team)
        self._inst: Any = inst

    def _heard(self, event: Any) -> None:
        values = event_value(event)
        if not isinstance(values, list | tuple):
            return
        pose = StampedPose.from_array(values)
        if pose is None:
            return
        with self._changed:
            self._latest = pose
            self.arrived = now = self.clock()
            self._arrivals.append((now, pose))
            self.received += 1
            self._changed.notify_all()
        callback = self.on_pose
        if callback is not None:
            callback(pose)

    @property
    def connected(self) -> bool:
        """Connected to the NetworkTables server."""
        inst = self._inst
        return inst is not None and bool(inst.isConnected())

    def latest(self) -> StampedPose | None:
        """The latest pose received; None before the first."""
        with self._changed:
            return self._latest

    def drain(self) -> list[tuple[float, StampedPose]]:
        """The poses received since the last drain (at most :data:`POSES_KEPT`), oldest first,
        each with when it arrived (``clock``); never waits."""
        with self._changed:
            arrived = list(self._arrivals)
            self._arrivals.clear()
        return arrived

    def wait(self, timeout: float, *, server_within: float | None = None) -> StampedPose | None:
        """The latest pose, waiting up to ``timeout`` s for the first; None if none came.
        ``server_within``: give up sooner when no server has answered that long after the
        start (a robot on the network answers within a fraction of a second)."""
        deadline = self.clock() + timeout
        with self._changed:
            while self._latest is None:
                now = self.clock()
                if now >= deadline:
                    return None
                if server_within is not None and now - self._started >= server_within and not self.connected:
                    return None
                self._changed.wait(min(0.05, deadline - now))
            return self._latest

    def close(self) -> None:
        inst = self._inst
        if inst is None:
            return
        self._inst = None
        stop(inst, [self._subscriber])

    def __enter__(self) -> RobotPose:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
