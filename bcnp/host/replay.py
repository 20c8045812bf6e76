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
"""

from __future__ import annotations

import bisect
import contextlib
import csv
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

from ..paths import PathCommand
from ..schema import Message, MessageSpec, Schema
from ..wire import PacketView
from .client import STAMP_FIELD, Client, LinkClosedError, LinkDownError, LinkStatus

__all__ = [
    "LEAD_S",
    "MIN_REMAINDER_MS",
    "TELEMETRY_COLUMNS",
    "Outage",
    "Progress",
    "Replay",
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
#: Seconds of commands kept sent ahead of the robot over TCP ...
LEAD_S = 1.0
#: ... and over UDP, under the robot's 200 ms link timeout: a lost datagram can make
#: what follows run this much early at most.
UDP_LEAD_S = 0.15
#: A command cut by an outage resumes with what is left of it when at least this
#: much is (one robot tick); less is dropped and the next command is sent.
MIN_REMAINDER_MS = 20
#: The DrivetrainTelemetry fields, which ``plot`` needs.
TELEMETRY_COLUMNS = ("timestampMs", "leftVelocity", "rightVelocity", "leftPosition", "rightPosition")


class Schedule:
    """When each command of a path starts, in host seconds from the first send."""

    def __init__(self, commands: Sequence[PathCommand]) -> None:
        if not commands:
            raise ValueError("a path needs at least one command")
        self.commands = list(commands)
        self.starts = [0.0, *(ms / 1000 for ms in accumulate(c.duration_ms for c in self.commands))]
        self.total = self.starts[-1]

    def __len__(self) -> int:
        return len(self.commands)

    def index_at(self, t: float) -> int:
        """Index of the command scheduled at ``t`` (``len`` once the path is over, -1 before)."""
        if t < 0:
            return -1
        return min(bisect.bisect_right(self.starts, t) - 1, len(self.commands))

    def command_at(self, t: float) -> PathCommand | None:
        i = self.index_at(t)
        return self.commands[i] if 0 <= i < len(self.commands) else None


def due(schedule: Schedule, sent: int, elapsed: float, lead: float, max_ahead: int) -> int:
    """How many commands should have been sent ``elapsed`` s after the first send.

    Everything starting before ``elapsed + lead``, capped at ``max_ahead``
    commands past the one running; never fewer than ``sent`` and at least one.
    """
    running = max(schedule.index_at(elapsed), 0)
    by_time = bisect.bisect_left(schedule.starts, elapsed + lead, hi=len(schedule))
    target = min(by_time, running + max_ahead, len(schedule))
    return max(target, sent, 1)


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


@dataclass
class Outage:
    """One lost link, in host seconds from the first send."""

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
        host seconds from the first send."""
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


class Replay:
    """Streams a path to a connected :class:`Client` on the :func:`due` schedule,
    riding through lost links (see the module docs)."""

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
        if lead <= 0 or max_ahead < 1:
            raise ValueError("lead must be > 0 s and max_ahead >= 1")
        self.client = client
        self.schedule = Schedule(commands)
        self._drive = client.command_spec.message_class
        self.messages = [self._drive(vx=c.vx, omega=c.omega, durationMs=c.duration_ms) for c in commands]
        self.lead = lead
        self.max_ahead = max_ahead
        self.settle = settle
        self.step = step
        #: CLEAR_QUEUE on the very first packet (a resumed stream always has it).
        self.clear_first = clear_first
        self.recorder = recorder
        self.clock = clock
        self.sleep = sleep
        self.sent = 0
        self.packets = 0
        self.start: float | None = None
        self.elapsed = 0.0
        self.outages: list[Outage] = []
        self._clear_next = clear_first
        self._remainder: Message | None = None  # replaces messages[sent] in the next send

    def progress(self) -> Progress:
        rows = len(self.recorder) if self.recorder is not None else 0
        return Progress(self.elapsed, self.schedule.total, self.sent, len(self.schedule), self.packets, rows)

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
        self.start = self.clock()
        if self.recorder is not None:
            self.recorder.start = self.start
        n = len(self.schedule)
        end = self.schedule.total + self.settle
        client = self.client
        generation = client.status().generation
        outage: Outage | None = None
        while True:
            self.elapsed = self.clock() - self.start
            status = client.status()
            if client.closed_reason is not None:
                raise LinkClosedError(
                    f"lost the link to the robot at {client.address} after {self.elapsed:.1f} s "
                    f"({self.sent}/{n} commands sent): {client.closed_reason}",
                    client.host,
                    client.port,
                )
            if not status.connected:
                if outage is None:
                    outage = self._outage(status)
                    if on_outage is not None:
                        on_outage(outage)
                if self.elapsed >= end:
                    if outage.lost_at >= self.schedule.total and self.sent == n:
                        return self.progress()  # lost after the path had run
                    raise LinkClosedError(
                        f"the path ended with the link to {client.address} down: {outage}",
                        client.host,
                        client.port,
                    )
            else:
                if status.generation != generation:  # a new connection: the robot's queue is empty
                    generation = status.generation
                    if outage is None:  # lost and back between two steps
                        outage = self._outage(status)
                    self._resume(outage)
                    if on_outage is not None:
                        on_outage(outage)
                    outage = None
                with contextlib.suppress(LinkDownError):  # the next step sees the outage
                    self._send_due()
                if self.sent == n and self.elapsed >= end:
                    return self.progress()
            if on_progress is not None:
                on_progress(self.progress())
            self.sleep(self.step)

    def _outage(self, status: LinkStatus) -> Outage:
        """A new outage, from when the robot was last heard (on the replay's clock)."""
        outage = Outage.starting(status, self.client.clock(), self.elapsed)
        self.outages.append(outage)
        return outage

    def _send_due(self) -> None:
        target = due(self.schedule, self.sent, self.elapsed, self.lead, self.max_ahead)
        if target <= self.sent:
            return
        batch = self.messages[self.sent : target]
        if self._remainder is not None:
            batch[0] = self._remainder
        self.packets += self.client.send(batch, clear_queue=self._clear_next)
        self._clear_next = False
        self._remainder = None
        self.sent = target

    def _resume(self, outage: Outage) -> None:
        """Start again from now: the running command's remainder, then the rest."""
        now = self.elapsed
        schedule = self.schedule
        n = len(schedule)
        running = schedule.index_at(now)
        first = max(running, 0)
        self._remainder = None
        if 0 <= running < n:
            left_ms = int((schedule.starts[running + 1] - now) * 1000)
            if left_ms >= MIN_REMAINDER_MS:
                c = schedule.commands[running]
                self._remainder = self._drive(vx=c.vx, omega=c.omega, durationMs=left_ms)
            else:
                first = running + 1
        first = min(first, n)
        went = max(schedule.index_at(outage.lost_at), 0)
        # Cut short or never run: from the one running when the link went up to the
        # one resumed with (counted when only its remainder runs).
        outage.dropped = max(0, min(first + (self._remainder is not None), n) - went)
        outage.back_at = now
        outage.resumed_at = first
        self.sent = first
        self._clear_next = True
