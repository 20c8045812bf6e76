"""The one loop that drives a host session (replay and follow alike): it pulls, step by step.

Each step, on the caller's thread:

1. drains what has arrived since the last step: the client's telemetry packets
   (:meth:`~bcnp.host.link.client.Client.drain`) and, when the session follows a robot
   that offers it, the robot's poses (:meth:`~bcnp.host.nt.pose.RobotPose.drain`), each
   with the moment it arrived; they go to the telemetry recorder, if any, and into the
   session's sans-I/O core (:class:`~bcnp.host.sessions.core.session.Session`);
2. asks the client for the link's status and tells the session of outages;
3. asks the session what to send, and sends it;
4. sleeps a step.

The client's thread only receives and keeps the link; nothing is pushed into a
session from it, so the session needs no lock. A client whose ``on_telemetry`` is set
hands its telemetry there instead, and the session gets none.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from ..link.client import Client, LinkClosedError, LinkDownError
from .core.replay import STEP_S
from .core.session import EndedDown, LinkWatch, Outage, Session, StampedPose
from .recorder import TelemetryRecorder

__all__ = ["Arrivals", "SessionDriver", "drive"]

T = TypeVar("T")


class Arrivals(Protocol, Generic[T]):
    """Something that keeps what arrived for the loop to drain: a client's telemetry, a
    :class:`~bcnp.host.nt.pose.RobotPose`'s poses."""

    @property
    def clock(self) -> Callable[[], float]:
        """The clock its arrival times are on."""
        ...

    def drain(self) -> list[tuple[float, T]]:
        """What arrived since the last drain, oldest first, each with when (on ``clock``)."""
        ...


def _drained(source: Arrivals[T], now: float) -> list[tuple[float, T]]:
    """``source``'s arrivals, each dated on the loop's clock (now ``now``) by its age on the
    source's own clock: the loop and its sources may keep different clocks."""
    arrived = source.drain()
    if not arrived:
        return arrived
    theirs = source.clock()
    return [(now - max(0.0, theirs - at), item) for at, item in arrived]


def drive(
    client: Client,
    session: Session,
    *,
    outages: list[Outage],
    start: float,
    step: float = STEP_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    recorder: TelemetryRecorder | None = None,
    poses: Arrivals[StampedPose] | None = None,
    on_outage: Callable[[Outage], object] | None = None,
    on_step: Callable[[], object] | None = None,
) -> None:
    """Runs ``session`` on ``client`` until it is finished, its time counted from ``start``
    (``clock``), one step every ``step`` seconds (see the module docs); each outage is
    appended to ``outages``.

    ``on_outage`` hears of each outage when the link goes and when it is back;
    ``on_step`` is called after each step. Raises :class:`LinkClosedError` when the
    client closes for good (reconnecting off, a schema mismatch, given up) or the
    session ends with the link down."""
    watch = LinkWatch(client.status().generation, outages)

    def take_news(now: float) -> None:
        for at, packet in _drained(client, now):
            if recorder is not None and at >= start:  # what came before the session is not its record
                recorder.record(packet, at - start)
            session.on_telemetry(packet, at)
        if poses is not None:
            for at, pose in _drained(poses, now):
                session.on_pose(pose, at)

    while True:
        now = clock()
        elapsed = now - start
        take_news(now)
        status = client.status()
        if client.closed_reason is not None:
            raise LinkClosedError(
                f"lost the link to the robot at {client.address} after {elapsed:.1f} s "
                f"({session.where()}): {client.closed_reason}",
                client.host,
                client.port,
            )
        went, back = watch.observe(status, client.clock(), elapsed)
        for outage, tell in ((went, session.went), (back, session.back)):
            if outage is not None:
                tell(outage, elapsed)
                if on_outage is not None:
                    on_outage(outage)
        send = session.step(elapsed, now, status.connected)
        if send is not None:
            with contextlib.suppress(LinkDownError):  # the next step sees the outage
                # Only on the connection the step was decided on: one made since holds an empty
                # queue, and the next step resumes there (CLEAR_QUEUE first).
                sent = client.send(send.messages, clear_queue=send.clear, generation=watch.generation)
                session.delivered(send, sent)
        try:
            if session.finished(elapsed, watch.current):
                take_news(clock())  # what the robot said of the last step, for the record
                return
        except EndedDown as exc:
            raise LinkClosedError(
                f"the path ended with the link to {client.address} down: {exc}", client.host, client.port
            ) from None
        if on_step is not None:
            on_step()
        sleep(step)


class SessionDriver:
    """What :class:`~bcnp.host.sessions.replay.Replay` and :class:`~bcnp.host.sessions.follow.Follower`
    share: a session driven on a connected client with :func:`drive`, one step every ``step``
    seconds of ``clock``; ``start`` is when the last run began. ``recorder`` records the
    telemetry the loop pulls; ``poses``, if given, feeds the robot's own poses to the session."""

    def __init__(
        self,
        client: Client,
        session: Session,
        *,
        step: float,
        recorder: TelemetryRecorder | None,
        poses: Arrivals[StampedPose] | None,
        clock: Callable[[], float],
        sleep: Callable[[float], object],
    ) -> None:
        self.client = client
        self._driven = session
        self.step = step
        self.recorder = recorder
        self.poses = poses
        self.clock = clock
        self.sleep = sleep
        self.start: float | None = None

    def _drive(
        self,
        outages: list[Outage],
        on_outage: Callable[[Outage], object] | None = None,
        on_step: Callable[[], object] | None = None,
    ) -> float:
        """Runs the session to its end (:func:`drive`); returns the seconds it took."""
        self.start = start = self.clock()
        drive(
            self.client,
            self._driven,
            outages=outages,
            start=start,
            step=self.step,
            clock=self.clock,
            sleep=self.sleep,
            recorder=self.recorder,
            poses=self.poses,
            on_outage=on_outage,
            on_step=on_step,
        )
        return self.clock() - start
