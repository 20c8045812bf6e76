"""What every host session's core shares, sans-I/O: the :class:`Session` it answers as, outages.

A *session* is what a host tool does with a robot over time: replay a path
(:mod:`~bcnp.host.sessions.replay`), follow a trajectory (:mod:`~bcnp.host.sessions.follow`). Its
core is sans-I/O, as the link state machine is: it is told what happened (the
robot's telemetry and pose arrived, the link went, a new connection is up, time
passed) and answers what to send. Two pieces serve every session:

* :class:`LinkWatch` turns the client's successive :class:`LinkStatus` into
  outages (:class:`Outage`): when the robot was last heard, why the link went,
  when a new connection came up. The soak check dates its outages with it too.
* :class:`Session` is what a session's core answers; :func:`bcnp.host.sessions.driver.drive`
  is the one loop that, at each step, pulls what has arrived (telemetry, poses) into
  the session, asks the client for its status, tells the session, sends what it
  answers and sleeps a step. Nothing is pushed into a session from another thread.

No sockets, threads or clocks here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ....schema import Message
from ....wire import PacketView
from ...link.core.state import LinkStatus

__all__ = ["EndedDown", "LinkWatch", "Outage", "Send", "Session", "StampedPose"]

_UINT32 = 0xFFFFFFFF


@dataclass
class Outage:
    """One lost link, in host seconds from the session's start."""

    #: When the robot was last heard from (the link went).
    lost_at: float
    #: Why the client counted the link as lost.
    reason: str
    #: When a new connection was up; ``None`` while it is down.
    back_at: float | None = None
    #: Commands planned between ``lost_at`` and ``back_at`` that were cut short or never ran.
    dropped: int = 0
    #: Index of the command the replay resumed with (``len`` of the path: nothing was left).
    resumed_at: int = 0

    @property
    def duration(self) -> float | None:
        return None if self.back_at is None else self.back_at - self.lost_at

    @classmethod
    def starting(cls, status: LinkStatus, now: float, elapsed: float) -> Outage:
        """The outage ``status`` shows (down, or already back after a loss not seen yet),
        dated when the robot was last heard: ``now`` on the client's clock is ``elapsed``
        host seconds from the session's start."""
        loss = status.last_loss
        if loss is None:
            return cls(elapsed, status.last_error)
        return cls(max(0.0, elapsed - max(0.0, now - loss.at)), loss.reason)

    def __str__(self) -> str:
        went = f"link lost at {self.lost_at:.2f} s ({self.reason})"
        if self.back_at is None:
            return f"{went}; reconnecting"
        return (
            f"{went}; back at {self.back_at:.2f} s after {self.back_at - self.lost_at:.2f} s: "
            f"{self.dropped} command(s) dropped, resumed at command {self.resumed_at}"
        )


class LinkWatch:
    """Outages from a client's successive statuses; sans-I/O (see the module docs)."""

    def __init__(self, generation: int, outages: list[Outage] | None = None) -> None:
        #: The connection the session is on (``LinkStatus.generation``).
        self.generation = generation
        #: The outage under way, if the link is down.
        self.current: Outage | None = None
        #: Every outage so far, in order (appended to ``outages`` when given).
        self.outages: list[Outage] = [] if outages is None else outages

    def observe(self, status: LinkStatus, now: float, elapsed: float) -> tuple[Outage | None, Outage | None]:
        """``(went, back)``: the outage that began (seen down for the first time) and the one
        that ended (a new connection is up: the robot's queue is empty), each ``None`` when
        nothing happened. A link lost and back between two looks ends an outage that never
        began. ``now``: the client's clock; ``elapsed``: session seconds."""
        went = back = None
        if not status.connected:
            if self.current is None:
                self.current = went = self._new(status, now, elapsed)
        elif status.generation != self.generation:
            self.generation = status.generation
            back = self.current if self.current is not None else self._new(status, now, elapsed)
            back.back_at = elapsed
            self.current = None
        return went, back

    def _new(self, status: LinkStatus, now: float, elapsed: float) -> Outage:
        outage = Outage.starting(status, now, elapsed)
        self.outages.append(outage)
        return outage


@dataclass(frozen=True)
class Send:
    """Messages to send now, the first packet with CLEAR_QUEUE when ``clear``."""

    messages: Sequence[Message]
    clear: bool = False


class EndedDown(Exception):
    """A session that had to end while the link was down (``str``: the outage)."""


@dataclass(frozen=True)
class StampedPose:
    """The robot's own pose, as it offers it on ``Network/Pose``: x, y (m) and heading (rad) of
    its odometry (on the gyro's heading), and ``stamp_ms``, the FPGA time (ms) of the tick it
    was taken in, the ``timestampMs`` of that tick's DrivetrainTelemetry sample. Relative to
    where the robot's odometry started (where the robot program started)."""

    x: float
    y: float
    heading: float
    stamp_ms: int

    @classmethod
    def from_array(cls, values: Sequence[float]) -> StampedPose | None:
        """From ``Network/Pose``'s ``[x, y, heading, timestampMs]``; None for anything else."""
        if len(values) < 4 or not all(math.isfinite(v) for v in values[:4]):
            return None
        x, y, heading, stamp = values[:4]
        if not (0 <= stamp <= _UINT32 and stamp == int(stamp)):
            return None
        return cls(float(x), float(y), float(heading), int(stamp))


class Session(Protocol):
    def on_telemetry(self, packet: PacketView, now: float) -> None:
        """A telemetry packet from the robot, which arrived at ``now`` (the session's clock)."""

    def on_pose(self, pose: StampedPose, now: float) -> None:
        """The robot's own pose (``Network/Pose``), which arrived at ``now``."""

    def went(self, outage: Outage, elapsed: float) -> None:
        """The link went (the robot stopped when it stopped hearing us: ``outage.lost_at``)."""

    def back(self, outage: Outage, elapsed: float) -> None:
        """A new connection is up; the robot's queue is empty."""

    def step(self, elapsed: float, now: float, connected: bool) -> Send | None:
        """Time passed: what to send now (only asked while ``connected`` matters)."""

    def delivered(self, send: Send, packets: int) -> None:
        """``send`` went out, in ``packets`` packets."""

    def finished(self, elapsed: float, down: Outage | None) -> bool:
        """Whether the session is over; raises :class:`EndedDown` when it ends with the link
        down (``down``: the outage under way)."""

    def where(self) -> str:
        """How far the session got, for an error: ``"12/252 commands sent"``."""
