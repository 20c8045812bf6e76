"""Message queue: timed execution of queued commands on the robot side.

Implements "Command Execution Model" of the BCNP 3.2.2 overview with the
reference's timing rules:

* not connected (nothing received, or the last packet older than
  ``connection_timeout``): the queue and the active message are cleared;
* a message that has run its ``durationMs`` ends at exactly
  ``start + duration`` (the virtual cursor), not at ``now``, so a chain of
  short commands does not drift with loop jitter;
* the next message starts at the cursor (or ``now`` with no cursor); one that
  would have ended before ``now - max_command_lag`` is skipped and counted,
  one that started before that floor is clamped to it;
* several short messages can complete inside one tick.

One addition: a command that *arrived* more than ``max_command_lag`` after
the previous one ended starts at ``now``. It came after a gap in the stream,
so it is not a backlog and is not skipped as stale; one that arrived within
the lag continues from the cursor, keeping the sender's plan time-locked.
(The arrival time is the last receive time when the command was queued.)

For latency measurements, ``on_packet_reached(arrival, now)`` is called from
``update(now)`` each time the first message of a queued packet (or push) is
taken off the queue: it starts then, or, already over, completes or is skipped
within that update. It adds nothing to the receive path.

Time is kept in integer microseconds internally, so boundaries are exact.
Packets are queued as :class:`~bcnp.wire.PacketView` runs: no Python object
is made per message until a message becomes active or is inspected.
"""

from __future__ import annotations

import struct
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .schema import Message, MessageSpec
from .wire import CLEAR_QUEUE, PacketView

__all__ = ["MessageQueue", "MessageQueueConfig", "QueueMetrics"]

_US = 1_000_000


def _us(seconds: float) -> int:
    return round(seconds * _US)


def elapsed_over(now: float, since: float, limit: float) -> bool:
    """More than ``limit`` seconds from ``since`` to ``now``, compared in whole
    microseconds, as the queue compares its times (in float seconds 4.03 - 2.03
    is 2.0000000000000004, over a 2 s limit). The dispatcher and the
    transports' deadlines use it too, so all agree at the boundary."""
    return _us(now) - _us(since) > _us(limit)


@dataclass(frozen=True)
class MessageQueueConfig:
    """Queue limits. Defaults are the spec's: 200 messages, 200 ms, 100 ms."""

    capacity: int = 200
    connection_timeout: float = 0.2
    max_command_lag: float = 0.1
    duration_field: str = "durationMs"

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError("capacity must be at least 1")
        if self.connection_timeout < 0 or self.max_command_lag < 0:
            raise ValueError("connection_timeout and max_command_lag must be >= 0 seconds")


@dataclass(frozen=True)
class QueueMetrics:
    received: int  # messages offered to the queue (accepted or not)
    overflows: int  # messages refused because the queue was full
    skipped: int  # stale messages skipped instead of executed late


# A run is a contiguous slice of queued messages from one packet or one push:
# [next index, end index, source, data, duration offset, stride, unpack, arrival].
# For a PacketView the durations are read straight from its bytes, so skipping
# a stale message makes no message object; for a list of messages ``data`` is
# None and the duration attribute is read instead.
_IDX, _END, _SRC, _DATA, _BASE, _STRIDE, _UNPACK, _ARRIVAL = range(8)
_Run = list[Any]


def _compact(run: _Run, take: int) -> None:
    """Points a partly accepted packet's run at a copy of only the accepted messages.

    A view of a 65,535-message packet of which the full queue took a few
    messages would otherwise keep all its 655 KB alive: a queue of 200 such
    runs would pin 130 MB.
    """
    src: PacketView = run[_SRC]
    start = src._offset
    payload = bytes(run[_DATA][start : start + take * run[_STRIDE]])
    run[_SRC] = PacketView(src.spec, src.flags, take, payload, 0)
    run[_DATA] = payload
    run[_BASE] -= start


class MessageQueue:
    """Thread-safe queue of timed messages (any type with a ``durationMs`` field).

    The receive thread pushes (``push``, ``push_batch``, ``handle_packet``);
    the robot thread calls ``update(now)`` once per tick and executes
    ``active()``. Every method holds one lock briefly and never blocks on I/O.

    ``on_packet_reached(arrival, now)`` (seconds) is called by ``update(now)``
    when it takes the first message of a packet off the queue, with the
    arrival time recorded for that packet (see the module docs). It runs
    under the queue's lock: it must be quick and must not call back into the
    queue. An exception it raises is counted in ``callback_errors`` (the last
    one kept in ``last_callback_error``); the message is executed all the same.
    """

    def __init__(
        self,
        config: MessageQueueConfig | None = None,
        *,
        on_packet_reached: Callable[[float, float], object] | None = None,
    ) -> None:
        self.config = config if config is not None else MessageQueueConfig()
        self._on_packet_reached = on_packet_reached
        self._capacity = self.config.capacity
        self._timeout_us = _us(self.config.connection_timeout)
        self._lag_us = _us(self.config.max_command_lag)
        self._field = self.config.duration_field
        self._lock = threading.Lock()
        self._runs: deque[_Run] = deque()
        self._size = 0
        self._active: Message | None = None
        self._active_start = 0
        self._active_duration = 0
        self._cursor: int | None = None
        self._last_rx: int | None = None
        self._received = 0
        self._overflows = 0
        self._skipped = 0
        self._readers: dict[MessageSpec, tuple[int, Callable[..., tuple[int]]]] = {}
        self.callback_errors = 0  # exceptions raised by on_packet_reached
        self.last_callback_error: BaseException | None = None

    # -- receive side --------------------------------------------------------

    def push(self, msg: Message) -> bool:
        """Queue one message; ``False`` (and an overflow counted) when full."""
        return self.push_batch((msg,)) == 1

    def push_batch(self, msgs: Sequence[Message] | PacketView, clear: bool = False) -> int:
        """Queue a packet's worth under one lock; returns how many were accepted.

        With ``clear`` the queue and the active message are dropped first.
        Messages beyond the free space are refused and counted as overflows.
        """
        run = self._new_run(msgs)
        with self._lock:
            if clear:
                self._clear_locked()
            return self._append_locked(run, len(msgs))

    def handle_packet(self, packet: PacketView, now: float) -> None:
        """Dispatcher handler: CLEAR_QUEUE, batch push and liveness under one lock."""
        run = self._new_run(packet)
        t = round(now * _US)
        with self._lock:
            if packet.flags & CLEAR_QUEUE:
                self._clear_locked()
            self._last_rx = t
            self._append_locked(run, packet.count)

    def notify_received(self, now: float) -> None:
        """A good packet arrived at ``now``: the link is alive."""
        with self._lock:
            self._last_rx = _us(now)

    def clear(self) -> None:
        """Drop every queued message and the active one (stop now)."""
        with self._lock:
            self._clear_locked()

    # -- robot side ----------------------------------------------------------

    def update(self, now: float) -> Message | None:
        """Advance time to ``now`` (seconds); returns the message to execute."""
        t = _us(now)
        with self._lock:
            last = self._last_rx
            if last is None or t - last > self._timeout_us:
                self._clear_locked()
                return None
            if self._active is not None and t - self._active_start >= self._active_duration:
                self._cursor = self._active_start + self._active_duration
                self._active = None
            if self._active is None:
                self._promote_locked(t)
            return self._active

    def active(self) -> Message | None:
        """The message to execute now, or ``None``."""
        return self._active

    @property
    def active_started_at(self) -> float | None:
        """When the active message started (seconds, virtual time), or ``None``."""
        with self._lock:
            return self._active_start / _US if self._active is not None else None

    def size(self) -> int:
        """Messages waiting (the active one not included)."""
        return self._size

    def __len__(self) -> int:
        return self._size

    def is_connected(self, now: float) -> bool:
        last = self._last_rx
        return last is not None and _us(now) - last <= self._timeout_us

    @property
    def last_receive_time(self) -> float | None:
        last = self._last_rx
        return None if last is None else last / _US

    @property
    def metrics(self) -> QueueMetrics:
        return QueueMetrics(self._received, self._overflows, self._skipped)

    def drain(self) -> list[Message]:
        """Remove and return every waiting message, decoded (diagnostics, tests)."""
        with self._lock:
            out: list[Message] = []
            for run in self._runs:
                out.extend(map(run[_SRC].__getitem__, range(run[_IDX], run[_END])))
            self._runs.clear()
            self._size = 0
            return out

    # -- internals -----------------------------------------------------------

    def _new_run(self, msgs: Sequence[Message] | PacketView) -> _Run:
        """A run over ``msgs`` (built outside the lock; its end is set on append)."""
        if isinstance(msgs, PacketView):
            spec = msgs.spec
            reader = self._readers.get(spec)
            if reader is None:
                reader = self._readers[spec] = self._reader(spec)
            return [0, 0, msgs, msgs._data, msgs._offset + reader[0], spec.wire_size, reader[1], None]
        items = list(msgs)
        for m in items:
            if not hasattr(m, self._field):
                raise TypeError(f"{m!r} has no {self._field!r} field: it cannot be queued")
        return [0, 0, items, None, 0, 0, None, None]

    def _reader(self, spec: MessageSpec) -> tuple[int, Callable[..., tuple[int]]]:
        """Offset and unpacker of the duration field inside one message of ``spec``."""
        try:
            field = spec.field(self._field)
        except KeyError:
            raise TypeError(f"{spec.name} has no {self._field!r} field: it cannot be queued") from None
        if field.is_float:
            raise TypeError(f"{spec.name}.{self._field} must be an integer field (milliseconds)")
        return field.offset, struct.Struct(">" + field.field_type.struct_code).unpack_from

    def _append_locked(self, run: _Run, count: int) -> int:
        self._received += count
        take = min(count, self._capacity - self._size)
        self._overflows += count - take
        if take > 0:
            if take < count and run[_DATA] is not None and (take * run[_STRIDE]) << 2 < len(run[_DATA]):
                _compact(run, take)
            run[_END] = take
            run[_ARRIVAL] = self._last_rx
            self._runs.append(run)
            self._size += take
        return take

    def _clear_locked(self) -> None:
        self._runs.clear()
        self._size = 0
        self._active = None
        self._cursor = None

    def _promote_locked(self, t: int) -> None:
        floor = t - self._lag_us
        runs = self._runs
        while runs:
            run = runs[0]
            index = run[_IDX]
            data = run[_DATA]
            if data is not None:
                ms = run[_UNPACK](data, run[_BASE] + index * run[_STRIDE])[0]
            else:
                ms = getattr(run[_SRC][index], self._field)
            duration = int(ms) * 1000
            run[_IDX] = index + 1
            if index + 1 >= run[_END]:
                runs.popleft()
            self._size -= 1
            cursor = self._cursor
            arrival = run[_ARRIVAL]
            if index == 0 and arrival is not None and self._on_packet_reached is not None:
                try:
                    self._on_packet_reached(arrival / _US, t / _US)
                except Exception as exc:  # a broken callback must not cost the message
                    self.callback_errors += 1
                    self.last_callback_error = exc
            if cursor is None or (arrival is not None and arrival - cursor > self._lag_us):
                start = t  # nothing to follow, or it came after a gap: a fresh start
            else:
                start = cursor
                if start + duration < floor:
                    self._skipped += 1  # stale: skipped, never executed late
                    self._cursor = start + duration
                    continue
                if start < floor:
                    start = floor
            if t - start >= duration:
                self._cursor = start + duration  # finished inside this tick
                continue
            self._active = run[_SRC][index]
            self._active_start = start
            self._active_duration = duration
            return
