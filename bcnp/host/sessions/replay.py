"""Replaying a path file: commands streamed just in time, telemetry recorded to CSV.

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
loop every host session shares.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...paths import PathCommand
from ...schema import Message, MessageSpec, Schema
from ...wire import PacketView
from ..link.client import Client
from ..link.keeper import STAMP_FIELD
from .core.outages import Outage
from .core.replay import LEAD_S, MIN_REMAINDER_MS, UDP_LEAD_S, ReplaySession, Schedule, due
from .driver import SessionDriver

__all__ = [
    "LEAD_S",
    "MIN_REMAINDER_MS",
    "TELEMETRY_COLUMNS",
    "Outage",
    "Progress",
    "Replay",
    "ReplaySession",
    "Schedule",
    "TelemetryRecorder",
    "UDP_LEAD_S",
    "due",
    "telemetry_spec",
]

#: Columns the recorder writes before the telemetry message's own fields ...
TIME_COLUMN = "hostTimeS"
#: ... and after them: the command the host had scheduled at that moment.
COMMAND_COLUMNS = ("cmdVx", "cmdOmega")
#: The DrivetrainTelemetry fields, which ``plot`` needs.
TELEMETRY_COLUMNS = ("timestampMs", "leftVelocity", "rightVelocity", "leftPosition", "rightPosition")


def telemetry_spec(schema: Schema, command: MessageSpec) -> MessageSpec | None:
    """The robot's telemetry type: ``DrivetrainTelemetry``, else the first non-command type."""
    names = {spec.name: spec for spec in schema.messages}
    if "DrivetrainTelemetry" in names:
        return names["DrivetrainTelemetry"]
    return next((spec for spec in schema.messages if spec is not command), None)


class TelemetryRecorder:
    """Collects telemetry rows (called from the client's receive thread) and writes CSV.

    Each row: host time (s from the first send; the samples of one packet are
    back-dated from its arrival by their robot timestamps), the message's
    fields, and the command the host had scheduled at that time.
    """

    def __init__(self, spec: MessageSpec, schedule: Schedule, clock: Callable[[], float] = time.monotonic):
        self.spec = spec
        self.schedule = schedule
        self.clock = clock
        self.start: float | None = None
        self.rows: list[tuple[float | int, ...]] = []
        self._lock = threading.Lock()
        self._stamp = STAMP_FIELD in spec.field_names
        self._stamp_index = spec.field_names.index(STAMP_FIELD) if self._stamp else 0

    @property
    def columns(self) -> tuple[str, ...]:
        return (TIME_COLUMN, *self.spec.field_names, *COMMAND_COLUMNS)

    def __call__(self, packet: PacketView) -> None:
        now = self.clock()
        if packet.spec is not self.spec or self.start is None or not len(packet):
            return
        arrived = now - self.start
        messages: list[Message] = list(packet)
        newest = messages[-1].raw[self._stamp_index] if self._stamp else 0
        rows = []
        for n, msg in enumerate(messages):
            values = msg.as_dict()
            if self._stamp:
                t = arrived - (newest - msg.raw[self._stamp_index]) / 1000
            else:
                t = arrived - (len(messages) - 1 - n) * 0.02
            command = self.schedule.command_at(t)
            vx, omega = (command.vx, command.omega) if command is not None else (0.0, 0.0)
            rows.append((round(t, 4), *values.values(), vx, omega))
        with self._lock:
            self.rows.extend(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def write_csv(self, path: str | Path) -> int:
        """Writes every row so far; returns the row count."""
        with self._lock:
            rows = list(self.rows)
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(self.columns)
            writer.writerows(rows)
        return len(rows)


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
        max_ahead: int = 150,
        settle: float = 0.3,
        step: float = 0.02,
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
        super().__init__(client, self.session, step=step, recorder=recorder, clock=clock, sleep=sleep)
        self.recorder: TelemetryRecorder | None = recorder
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
