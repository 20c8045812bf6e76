"""The one socket loop around a host session (:mod:`~bcnp.host.sessions.core.outages`):
replay and follow alike."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Protocol

from ..link.client import Client, LinkClosedError, LinkDownError
from .core.outages import EndedDown, LinkWatch, Outage, Session

__all__ = ["SessionDriver", "drive"]


def drive(
    client: Client,
    session: Session,
    *,
    outages: list[Outage],
    start: float,
    step: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    on_outage: Callable[[Outage], object] | None = None,
    on_step: Callable[[], object] | None = None,
) -> None:
    """Runs ``session`` on ``client`` until it is finished, its time counted from ``start``
    (``clock``), one step every ``step`` seconds; each outage is appended to ``outages``.

    ``on_outage`` hears of each outage when the link goes and when it is back;
    ``on_step`` is called after each step. Raises :class:`LinkClosedError` when the
    client closes for good (reconnecting off, a schema mismatch, given up) or the
    session ends with the link down."""
    watch = LinkWatch(client.status().generation, outages)
    while True:
        now = clock()
        elapsed = now - start
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
                session.delivered(send, client.send(send.messages, clear_queue=send.clear))
        try:
            if session.finished(elapsed, watch.current):
                return
        except EndedDown as exc:
            raise LinkClosedError(
                f"the path ended with the link to {client.address} down: {exc}", client.host, client.port
            ) from None
        if on_step is not None:
            on_step()
        sleep(step)


class _Recorder(Protocol):
    start: float | None


class SessionDriver:
    """What :class:`~bcnp.host.sessions.replay.Replay` and :class:`~bcnp.host.sessions.follow.Follower` share:
    a session driven on a connected client with :func:`drive`, one step every ``step``
    seconds of ``clock``; ``start`` is when the last run began (also the ``recorder``'s)."""

    def __init__(
        self,
        client: Client,
        session: Session,
        *,
        step: float,
        recorder: _Recorder | None,
        clock: Callable[[], float],
        sleep: Callable[[float], object],
    ) -> None:
        self.client = client
        self._driven = session
        self.step = step
        self.recorder = recorder
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
        if self.recorder is not None:
            self.recorder.start = start
        drive(
            self.client,
            self._driven,
            outages=outages,
            start=start,
            step=self.step,
            clock=self.clock,
            sleep=self.sleep,
            on_outage=on_outage,
            on_step=on_step,
        )
        return self.clock() - start
