"""The robot's telemetry as a replay records it: one CSV row per sample (``replay --telemetry``).

Each row: host time (seconds from the session's start; the samples of one packet
are back-dated from its arrival by their robot timestamps), the message's fields,
and the command the host had scheduled at that time. The session's loop
(:func:`~bcnp.host.sessions.driver.drive`) hands each packet to :meth:`TelemetryRecorder.record`
as it pulls it from the client, with the moment it arrived: no thread, no lock.
``plot`` reads the file back.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ...schema import Message, MessageSpec, Schema
from ...wire import PacketView
from ..link.keeper import STAMP_FIELD
from .core.replay import Schedule

__all__ = ["COMMAND_COLUMNS", "TELEMETRY_COLUMNS", "TIME_COLUMN", "TelemetryRecorder", "telemetry_spec"]

#: Columns the recorder writes before the telemetry message's own fields ...
TIME_COLUMN = "hostTimeS"
#: ... and after them: the command the host had scheduled at that moment.
COMMAND_COLUMNS = ("cmdVx", "cmdOmega")
#: The DrivetrainTelemetry fields, which ``plot`` needs.
TELEMETRY_COLUMNS = ("timestampMs", "leftVelocity", "rightVelocity", "leftPosition", "rightPosition")
#: Without a robot timestamp, the samples of one packet are taken a robot tick apart.
_TICK_S = 0.02


def telemetry_spec(schema: Schema, command: MessageSpec) -> MessageSpec | None:
    """The robot's telemetry type: ``DrivetrainTelemetry``, else the first non-command type."""
    names = {spec.name: spec for spec in schema.messages}
    if "DrivetrainTelemetry" in names:
        return names["DrivetrainTelemetry"]
    return next((spec for spec in schema.messages if spec is not command), None)


class TelemetryRecorder:
    """Telemetry rows of one session, written as CSV; see the module docs."""

    def __init__(self, spec: MessageSpec, schedule: Schedule) -> None:
        self.spec = spec
        self.schedule = schedule
        self.rows: list[tuple[float | int, ...]] = []
        self._stamp = STAMP_FIELD in spec.field_names
        self._stamp_index = spec.field_names.index(STAMP_FIELD) if self._stamp else 0

    @property
    def columns(self) -> tuple[str, ...]:
        return (TIME_COLUMN, *self.spec.field_names, *COMMAND_COLUMNS)

    def record(self, packet: PacketView, arrived: float) -> None:
        """A packet that arrived ``arrived`` seconds after the session started; other
        message types and empty packets are left out."""
        if packet.spec is not self.spec or not len(packet):
            return
        messages: list[Message] = list(packet)
        newest = messages[-1].raw[self._stamp_index] if self._stamp else 0
        for n, msg in enumerate(messages):
            if self._stamp:
                t = arrived - (newest - msg.raw[self._stamp_index]) / 1000
            else:
                t = arrived - (len(messages) - 1 - n) * _TICK_S
            command = self.schedule.command_at(t)
            vx, omega = (command.vx, command.omega) if command is not None else (0.0, 0.0)
            self.rows.append((round(t, 4), *msg.as_dict().values(), vx, omega))

    def __len__(self) -> int:
        return len(self.rows)

    def write_csv(self, path: str | Path) -> int:
        """Writes every row so far; returns the row count."""
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(self.columns)
            writer.writerows(self.rows)
        return len(self.rows)
