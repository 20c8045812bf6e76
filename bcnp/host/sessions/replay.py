"""Replaying a path file: commands streamed just in time, the telemetry recorded if asked.

The robot's queue holds 200 commands and drops the link after 200 ms without
a packet, so a long path is neither sent at once (it would overflow) nor
trickled late (stale commands are skipped). :func:`due` decides how much of
the path to have sent at each moment: everything that starts within ``lead``
seconds (1 s), but never more than ``max_ahead`` commands beyond the one
running. :class:`Replay` sends on that schedule, the first packet with
CLEAR_QUEUE so nothing left from before runs first; between sends the
client's keepalives hold the link.

Host time is the clock here: the robot starts the first command at its next
tick after the first packet arrives (up to one tick later), so the robot is
slightly behind the host's schedule, never ahead, and the queue is never
starved while the lead lasts.

Over UDP the lead is short (:data:`UDP_LEAD_S`): the robot runs each command
it receives right after the last one, so a lost datagram of commands moves the
rest of the path earlier by what it held, and never by more than the lead
(nothing is sent earlier than that). Over TCP nothing is lost in between.

The host's clock keeps running through a lost link. While the client
reconnects nothing is sent; once it is back (a new connection: the robot's
queue is empty), the replay resumes *now* on the schedule: the command
running at this moment with what is left of its duration, then the rest, the
first packet with CLEAR_QUEUE. Commands whose time passed while the link was
down are dropped, never run late; each outage is an :class:`Outage`.

The decisions are :class:`~bcnp.host.sessions.core.replay.ReplaySession`'s (sans-I/O);
:class:`Replay` drives it on a client with :func:`~bcnp.host.sessions.driver.drive`, the
loop every host session shares; a :class:`~bcnp.host.sessions.recorder.TelemetryRecorder`
given as ``recorder`` gets the telemetry that loop pulls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...paths import PathCommand
from ..link.client import Client
from .core.replay import (
    LEAD_S,
    MAX_AHEAD,
    MIN_REMAINDER_MS,
    SETTLE_S,
    STEP_S,
    UDP_LEAD_S,
    ReplaySession,
    Schedule,
    due,
)
from .core.session import Outage
from .driver import SessionDriver
from .recorder import TelemetryRecorder

__all__ = ["LEAD_S", "MIN_REMAINDER_MS", "UDP_LEAD_S", "Outage", "Progress", "Replay", "ReplaySession", "due"]


@dataclass
class Progress:
    elapsed: float
    total: float
    sent: int
    commands: int
    packets: int
    telemetry_rows: int


class Replay(SessionDriver):
    """Streams a path to a connected :class:`Client` on the :func:`due` schedule, riding
    through lost links: a :class:`ReplaySession` driven on the client
    (:func:`~bcnp.host.sessions.driver.drive`)."""

    def __init__(
        self,
        client: Client,
        commands: Sequence[PathCommand],
        *,
        lead: float | None = None,
        max_ahead: int = MAX_AHEAD,
        settle: float = SETTLE_S,
        step: float = STEP_S,
        clear_first: bool = True,
        recorder: TelemetryRecorder | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        if lead is None:
            lead = UDP_LEAD_S if client.udp else LEAD_S
        self.session = ReplaySession(
            commands,
            client.command_spec,
            lead=lead,
            max_ahead=max_ahead,
            settle=settle,
            clear_first=clear_first,
        )
        super().__init__(
            client, self.session, step=step, recorder=recorder, poses=None, clock=clock, sleep=sleep
        )
        self.outages: list[Outage] = []

    @property
    def schedule(self) -> Schedule:
        return self.session.schedule

    @property
    def sent(self) -> int:
        return self.session.sent

    @property
    def packets(self) -> int:
        return self.session.packets

    @property
    def elapsed(self) -> float:
        return self.session.elapsed

    def progress(self) -> Progress:
        rows = len(self.recorder) if self.recorder is not None else 0
        s = self.session
        return Progress(s.elapsed, s.schedule.total, s.sent, len(s.schedule), s.packets, rows)

    @property
    def dropped(self) -> int:
        """Commands dropped by every outage so far."""
        return sum(o.dropped for o in self.outages)

    def run(
        self,
        on_progress: Callable[[Progress], object] | None = None,
        on_outage: Callable[[Outage], object] | None = None,
    ) -> Progress:
        """Sends the whole path and waits until it has run (plus ``settle`` s).

        ``on_outage`` hears of each outage twice: when the link goes and when it
        is back. Raises :class:`LinkClosedError` when the client closes for good
        (reconnecting off, a schema mismatch, given up) or the path ends while
        the link is down.
        """
        self.outages = []

        def step() -> None:
            if on_progress is not None:
                on_progress(self.progress())

        self._drive(self.outages, on_outage, step)
        return self.progress()
