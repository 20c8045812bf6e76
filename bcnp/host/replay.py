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
"""

from __future__ import annotations

import bisect
import csv
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

from ..schema import Message, MessageSpec, Schema
from ..wire import PacketView
from .client import Client, LinkClosedError
from .paths import PathCommand

__all__ = [
    "TELEMETRY_COLUMNS",
    "Progress",
    "Replay",
    "Schedule",
    "TelemetryRecorder",
    "due",
    "telemetry_spec",
]

#: Columns the recorder writes before the telemetry message's own fields ...
TIME_COLUMN = "hostTimeS"
#: ... and after them: the command the host had scheduled at that moment.
COMMAND_COLUMNS = ("cmdVx", "cmdOmega")
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
        self._stamp = "timestampMs" in spec.field_names
        self._stamp_index = spec.field_names.index("timestampMs") if self._stamp else 0

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


class Replay:
    """Streams a path to a connected :class:`Client` on the :func:`due` schedule."""

    def __init__(
        self,
        client: Client,
        commands: Sequence[PathCommand],
        *,
        lead: float = 1.0,
        max_ahead: int = 150,
        settle: float = 0.3,
        step: float = 0.02,
        recorder: TelemetryRecorder | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        if lead <= 0 or max_ahead < 1:
            raise ValueError("lead must be > 0 s and max_ahead >= 1")
        self.client = client
        self.schedule = Schedule(commands)
        drive = client.command_spec.message_class
        self.messages = [drive(vx=c.vx, omega=c.omega, durationMs=c.duration_ms) for c in commands]
        self.lead = lead
        self.max_ahead = max_ahead
        self.settle = settle
        self.step = step
        self.recorder = recorder
        self.clock = clock
        self.sleep = sleep
        self.sent = 0
        self.packets = 0
        self.start: float | None = None
        self.elapsed = 0.0

    def progress(self) -> Progress:
        rows = len(self.recorder) if self.recorder is not None else 0
        return Progress(self.elapsed, self.schedule.total, self.sent, len(self.schedule), self.packets, rows)

    def run(self, on_progress: Callable[[Progress], object] | None = None) -> Progress:
        """Sends the whole path and waits until it has run (plus ``settle`` s).

        Raises :class:`LinkClosedError` if the robot drops the link.
        """
        self.start = self.clock()
        if self.recorder is not None:
            self.recorder.start = self.start
        n = len(self.schedule)
        end = self.schedule.total + self.settle
        while True:
            self.elapsed = self.clock() - self.start
            if not self.client.connected:
                reason = self.client.closed_reason or "closed"
                raise LinkClosedError(
                    f"lost the link to the robot at {self.client.address} after {self.elapsed:.1f} s "
                    f"({self.sent}/{n} commands sent): {reason}",
                    self.client.host,
                    self.client.port,
                )
            target = due(self.schedule, self.sent, self.elapsed, self.lead, self.max_ahead)
            if target > self.sent:
                batch = self.messages[self.sent : target]
                self.packets += self.client.send(batch, clear_queue=self.sent == 0)
                self.sent = target
            if on_progress is not None:
                on_progress(self.progress())
            if self.sent == n and self.elapsed >= end:
                return self.progress()
            self.sleep(self.step)
