"""Telemetry accumulator: robot-to-host messages batched into one packet.

Implements the 3.2 "Full duplex communication" telemetry behaviour: the robot
records one message per tick into a bounded buffer (full: the oldest is
dropped and counted) and every ``flush_interval_ticks``-th tick sends the
buffer as ONE homogeneous packet through ``send(bytes) -> bool``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .schema import Message, MessageSpec
from .wire import MAX_MESSAGES_PER_PACKET, encode_packet

__all__ = ["TelemetryAccumulator", "TelemetryMetrics"]


@dataclass(frozen=True)
class TelemetryMetrics:
    recorded: int  # messages recorded
    sent: int  # messages in packets that send() accepted
    packets: int  # packets that send() accepted
    overflows: int  # oldest messages dropped because the buffer was full
    send_failures: int  # packets send() refused or raised on (their messages are dropped)


class TelemetryAccumulator:
    """Buffers telemetry messages and flushes them as one packet every N ticks.

    Used from one thread (the robot loop). ``send`` must not block; a refused
    or failing send drops that packet and is counted: telemetry is real-time,
    stale samples are not retried.
    """

    def __init__(
        self,
        spec: MessageSpec,
        send: Callable[[bytes], object],
        flush_interval_ticks: int = 2,
        max_buffered: int = 32,
    ) -> None:
        if flush_interval_ticks < 1:
            raise ValueError("flush_interval_ticks must be at least 1")
        if not 1 <= max_buffered <= MAX_MESSAGES_PER_PACKET:
            raise ValueError(f"max_buffered must be 1..{MAX_MESSAGES_PER_PACKET}")
        self.spec = spec
        self.send = send
        self.flush_interval_ticks = flush_interval_ticks
        self.max_buffered = max_buffered
        self._buffer: deque[Message] = deque()
        self._ticks = 0
        # Counters, read as they are (``metrics`` is a snapshot of all five).
        self.recorded = 0
        self.sent = 0
        self.packets = 0
        self._overflows = 0
        self._send_failures = 0
        self.last_send_error: BaseException | None = None

    def record(self, msg: Message) -> None:
        """Buffer one message of this accumulator's type (drop-oldest when full)."""
        if type(msg) is not self.spec.message_class:
            raise TypeError(f"expected a {self.spec.name} message, got {msg!r}")
        if len(self._buffer) >= self.max_buffered:
            self._buffer.popleft()
            self._overflows += 1
        self._buffer.append(msg)
        self.recorded += 1

    def tick(self) -> bool:
        """Count a robot tick; flush on every Nth. True when a packet was sent."""
        self._ticks += 1
        if self._ticks < self.flush_interval_ticks:
            return False
        self._ticks = 0
        return self.force_flush()

    def force_flush(self) -> bool:
        """Send what is buffered now as one packet (nothing to send: False)."""
        if not self._buffer:
            return False
        batch = list(self._buffer)
        self._buffer.clear()
        data = encode_packet(self.spec, batch)
        try:
            ok = bool(self.send(data))
        except Exception as exc:  # a transport failure must not reach the robot loop
            self.last_send_error = exc
            ok = False
        if ok:
            self.sent += len(batch)
            self.packets += 1
        else:
            self._send_failures += 1
        return ok

    def clear(self) -> None:
        """Drop buffered messages without sending (e.g. the peer went away)."""
        self._buffer.clear()
        self._ticks = 0

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def metrics(self) -> TelemetryMetrics:
        return TelemetryMetrics(self.recorded, self.sent, self.packets, self._overflows, self._send_failures)
