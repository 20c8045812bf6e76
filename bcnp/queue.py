"""Message queue: timed execution of queued commands on the robot side.

Implements "Command Execution Model" of the BCNP 3.2.2 overview with the
reference's timing rules:

* not connected (nothing received, or the last packet older than
  ``link_timeout``): the queue and the active message are cleared;
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

Time is kept in integer microseconds internally (:mod:`bcnp.timebase`), so
boundaries are exact. Packets are queued as runs over their
:class:`~bcnp.wire.PacketView`: no Python object is made per message until a
message becomes active or is inspected.

The queue is sans-I/O and not thread-safe: it never blocks, reads a clock or
takes a lock, and a caller that shares it between threads must lock around
every call.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .defaults import LINK_TIMEOUT_S, MAX_COMMAND_LAG_S, QUEUE_CAPACITY
from .schema import Message, MessageSpec
from .timebase import US_PER_S, to_us
from .wire import CLEAR_QUEUE, PacketView

__all__ = ["MessageQueue", "MessageQueueConfig", "QueueMetrics"]

#: A packet the full queue accepted only part of is copied down to the accepted
#: messages when they are under 1/4 of the buffer it arrived in. Below that
#: share the buffer would pin far more than is kept (655 KB for one 10-byte
#: command); at or above it, at most 4 times what is kept: not worth a copy.
COMPACT_RATIO = 4

_DurationReader = Callable[[bytes, int], tuple[int]]


@dataclass(frozen=True)
class MessageQueueConfig:
    """Queue limits; the defaults are the spec's (:mod:`bcnp.defaults`)."""

    capacity: int = QUEUE_CAPACITY
    link_timeout: float = LINK_TIMEOUT_S
    max_command_lag: float = MAX_COMMAND_LAG_S
    duration_field: str = "durationMs"

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError("capacity must be at least 1")
        if self.link_timeout < 0 or self.max_command_lag < 0:
            raise ValueError("link_timeout and max_command_lag must be >= 0 seconds")


@dataclass(frozen=True)
class QueueMetrics:
    received: int  # messages offered to the queue (accepted or not)
    overflows: int  # messages refused because the queue was full
    skipped: int  # stale messages skipped instead of executed late


class _Run:
    """Queued messages ``source[next:end]`` of one packet or one push.

    For a packet, durations are unpacked straight from ``buffer`` (the
    packet's bytes) by ``read_duration``, so skipping a stale message makes no
    message object; for a list of messages ``read_duration`` is ``None`` and
    the duration attribute is read instead.
    """

    __slots__ = (
        "next",
        "end",
        "source",
        "buffer",
        "duration_offset",
        "stride",
        "read_duration",
        "arrival",
        "unpacked",
    )

    def __init__(
        self,
        source: PacketView | list[Message],
        buffer: bytes,
        duration_offset: int,
        stride: int,
        read_duration: _DurationReader | None,
    ) -> None:
        self.next = 0  # index in source of the next message to take
        self.end = 0  # one past the last accepted message, set when queued
        self.source = source
        self.buffer = buffer
        self.duration_offset = duration_offset  # buffer index of message 0's duration field
        self.stride = stride  # bytes per message in buffer
        self.read_duration = read_duration
        self.arrival: int | None = None  # last receive time (us) when queued
        #: A packet's type and its accepted messages' wire integers, from the first peek_raw on.
        self.unpacked: tuple[MessageSpec, list[tuple[int, ...]]] | None = None

    def keep_only(self, take: int) -> None:
        """Point a packet's run at a copy of its first ``take`` messages only.

        A view of a 65,535-message packet of which the full queue took a few
        messages would otherwise keep all its 655 KB alive: a queue of 200
        such runs would pin 130 MB.
        """
        src = self.source
        assert isinstance(src, PacketView)
        start = src.payload_offset
        payload = self.buffer[start : start + take * self.stride]
        self.source = PacketView(src.spec, src.flags, take, payload, 0)
        self.buffer = payload
        self.unpacked = None
        self.duration_offset -= start


class MessageQueue:
    """Queue of timed messages (any type with a ``durationMs`` field).

    The receiving side pushes (``push``, ``push_batch``, ``handle_packet``);
    the robot loop calls ``update(now)`` once per tick and executes
    ``active()``. No method blocks or does I/O. Not thread-safe: when a
    receive thread and the robot loop share a queue, the owner holds one lock
    around every call (each is brief).

    ``on_packet_reached(arrival, now)`` (seconds) is called by ``update(now)``
    when it takes the first message of a packet off the queue, with the
    arrival time recorded for that packet (see the module docs). It runs
    inside ``update``, under any lock its caller holds: it must be quick and
    must not call back into the queue. An exception it raises is counted in
    ``callback_errors`` (the last one kept in ``last_callback_error``); the
    message is executed all the same.
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
        self._timeout_us = to_us(self.config.link_timeout)
        self._lag_us = to_us(self.config.max_command_lag)
        self._field = self.config.duration_field
        self._runs: deque[_Run] = deque()
        self._size = 0
        self._active: Message | None = None
        self._active_start = 0
        self._active_duration = 0
        self._cursor: int | None = None
        self._last_rx: int | None = None
        # handle_packet's last receive time and its conversion: converting for
        # every packet would add about a fifth to what handle_packet costs.
        self._rx_seconds: float | None = None
        self._rx_us = 0
        # Counters, read as they are (``metrics`` is a snapshot of the three).
        self.received = 0  # commands offered
        self.overflows = 0  # commands refused by a full queue
        self.skipped = 0  # stale commands skipped
        self._readers: dict[MessageSpec, tuple[int, _DurationReader]] = {}
        self.callback_errors = 0  # exceptions raised by on_packet_reached
        self.last_callback_error: BaseException | None = None

    # -- receive side --------------------------------------------------------

    def push(self, msg: Message) -> bool:
        """Queue one message; ``False`` (and an overflow counted) when full."""
        return self.push_batch((msg,)) == 1

    def push_batch(self, msgs: Sequence[Message] | PacketView, clear: bool = False) -> int:
        """Queue a packet's worth at once; returns how many were accepted.

        With ``clear`` the queue and the active message are dropped first.
        Messages beyond the free space are refused and counted as overflows.
        """
        run = self._new_run(msgs)
        if clear:
            self._clear()
        return self._append(run, len(msgs))

    def handle_packet(self, packet: PacketView, now: float) -> None:
        """Dispatcher handler: CLEAR_QUEUE, batch push and liveness in one call."""
        run = self._packet_run(packet)
        if packet.flags & CLEAR_QUEUE:
            self._clear()
        if now != self._rx_seconds:  # the packets of one push share their receive time
            self._rx_seconds = now
            self._rx_us = to_us(now)
        self._last_rx = self._rx_us
        self._append(run, packet.count)

    def notify_received(self, now: float) -> None:
        """A good packet arrived at ``now``: the link is alive."""
        self._last_rx = to_us(now)

    def clear(self) -> None:
        """Drop every queued message and the active one (stop now)."""
        self._clear()

    # -- robot side ----------------------------------------------------------

    def update(self, now: float) -> Message | None:
        """Advance time to ``now`` (seconds); returns the message to execute."""
        t = to_us(now)
        last = self._last_rx
        if last is None or t - last > self._timeout_us:
            self._clear()
            return None
        if self._active is not None and t - self._active_start >= self._active_duration:
            self._cursor = self._active_start + self._active_duration
            self._active = None
        if self._active is None:
            self._promote(t)
        return self._active

    def active(self) -> Message | None:
        """The message to execute now, or ``None``."""
        return self._active

    @property
    def active_started_at(self) -> float | None:
        """When the active message started (seconds, virtual time), or ``None``."""
        return self._active_start / US_PER_S if self._active is not None else None

    def size(self) -> int:
        """Messages waiting (the active one not included)."""
        return self._size

    def __len__(self) -> int:
        return self._size

    def link_alive(self, now: float) -> bool:
        last = self._last_rx
        return last is not None and to_us(now) - last <= self._timeout_us

    @property
    def last_receive_time(self) -> float | None:
        last = self._last_rx
        return None if last is None else last / US_PER_S

    @property
    def metrics(self) -> QueueMetrics:
        return QueueMetrics(self.received, self.overflows, self.skipped)

    def peek(self, limit: int) -> list[Message]:
        """Up to ``limit`` waiting messages, decoded, in order; they stay queued
        (the active one not included)."""
        out: list[Message] = []
        for run in self._runs:
            take = min(run.end, run.next + limit - len(out))
            out.extend(map(run.source.__getitem__, range(run.next, take)))
            if len(out) >= limit:
                break
        return out

    def peek_raw(self, limit: int) -> list[tuple[MessageSpec, list[tuple[int, ...]]]]:
        """Up to ``limit`` waiting messages as their wire integers (what ``Message.raw``
        gives), in order, in chunks of one type: ``(spec, [raw, ...])``. They stay queued
        (the active one not included). A packet's messages are unpacked straight from its
        bytes, all of its run at the first peek, and kept with the run: no message object
        is made, a run still queued at the next peek is not unpacked again, and its
        messages are the same tuples from peek to peek. A full queue holds many runs of
        one message (a packet it had room for one of), so the work per run is kept small."""
        out: list[tuple[MessageSpec, list[tuple[int, ...]]]] = []
        raws: list[tuple[int, ...]] = []
        last: MessageSpec | None = None
        left = limit
        for run in self._runs:
            if left <= 0:
                break
            first = run.next
            take = run.end - first
            if take > left:
                take = left
            left -= take
            unpacked = run.unpacked
            if unpacked is None:
                source = run.source
                if isinstance(source, list):  # a push: its messages, whatever their types
                    for message in source[first : first + take]:
                        spec = type(message).spec
                        if spec is not last:
                            last, raws = spec, []
                            out.append((spec, raws))
                        raws.append(message.raw)
                    continue
                # A packet's accepted messages, unpacked once: a run stays queued for many peeks.
                start = source.payload_offset
                unpacked = run.unpacked = (
                    source.spec,
                    list(source.spec.struct.iter_unpack(run.buffer[start : start + run.end * run.stride])),
                )
            spec, messages = unpacked
            if spec is not last:
                last, raws = spec, []
                out.append((spec, raws))
            if take == 1:
                raws.append(messages[first])
            else:
                raws.extend(messages[first : first + take])
        return out

    def drain(self) -> list[Message]:
        """Remove and return every waiting message, decoded (diagnostics, tests)."""
        out: list[Message] = []
        for run in self._runs:
            out.extend(map(run.source.__getitem__, range(run.next, run.end)))
        self._runs.clear()
        self._size = 0
        return out

    # -- internals -----------------------------------------------------------

    def _new_run(self, msgs: Sequence[Message] | PacketView) -> _Run:
        """A run over ``msgs``, checked before anything is dropped (its end is set on append)."""
        if isinstance(msgs, PacketView):
            return self._packet_run(msgs)
        items = list(msgs)
        for m in items:
            if not hasattr(m, self._field):
                raise TypeError(f"{m!r} has no {self._field!r} field: it cannot be queued")
        return _Run(items, b"", 0, 0, None)

    def _packet_run(self, packet: PacketView) -> _Run:
        """A run over a received packet (handle_packet's own path: no type test)."""
        spec = packet.spec
        reader = self._readers.get(spec)
        if reader is None:
            reader = self._readers[spec] = self._reader(spec)
        offset, read = reader
        return _Run(packet, packet.buffer, packet.payload_offset + offset, spec.wire_size, read)

    def _reader(self, spec: MessageSpec) -> tuple[int, _DurationReader]:
        """Offset and unpacker of the duration field inside one message of ``spec``."""
        try:
            field = spec.field(self._field)
        except KeyError:
            raise TypeError(f"{spec.name} has no {self._field!r} field: it cannot be queued") from None
        if field.is_float:
            raise TypeError(f"{spec.name}.{self._field} must be an integer field (milliseconds)")
        return field.offset, struct.Struct(">" + field.field_type.struct_code).unpack_from

    def _append(self, run: _Run, count: int) -> int:
        self.received += count
        free = self._capacity - self._size
        take = count
        if count > free:  # a comparison, not min(): this runs once per received packet
            take = free
            self.overflows += count - take
        if take > 0:
            if (
                take < count
                and run.read_duration is not None
                and take * run.stride * COMPACT_RATIO < len(run.buffer)
            ):
                run.keep_only(take)
            run.end = take
            run.arrival = self._last_rx
            self._runs.append(run)
            self._size += take
        return take

    def _clear(self) -> None:
        self._runs.clear()
        self._size = 0
        self._active = None
        self._cursor = None

    def _promote(self, t: int) -> None:
        """Take messages off the queue at ``t`` (us) until one is left running, or none."""
        floor = t - self._lag_us
        runs = self._runs
        while runs:
            run = runs[0]
            index = run.next
            read = run.read_duration
            if read is not None:
                ms = read(run.buffer, run.duration_offset + index * run.stride)[0]
            else:
                ms = getattr(run.source[index], self._field)
            duration = int(ms) * 1000
            run.next = index + 1
            if index + 1 >= run.end:
                runs.popleft()
            self._size -= 1
            cursor = self._cursor
            arrival = run.arrival
            if index == 0 and arrival is not None and self._on_packet_reached is not None:
                try:
                    self._on_packet_reached(arrival / US_PER_S, t / US_PER_S)
                except Exception as exc:  # a broken callback must not cost the message
                    self.callback_errors += 1
                    self.last_callback_error = exc
            if cursor is None or (arrival is not None and arrival - cursor > self._lag_us):
                start = t  # nothing to follow, or it came after a gap: a fresh start
            else:
                start = cursor
                if start + duration < floor:
                    self.skipped += 1  # stale: skipped, never executed late
                    self._cursor = start + duration
                    continue
                if start < floor:
                    start = floor
            if t - start >= duration:
                self._cursor = start + duration  # finished inside this tick
                continue
            self._active = run.source[index]
            self._active_start = start
            self._active_duration = duration
            return
