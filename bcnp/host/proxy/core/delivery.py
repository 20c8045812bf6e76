"""The fault proxy's delivery schedule, sans-I/O: when each chunk or datagram reaches the other
side, and what a link drop does to it.

The proxy's relays (:mod:`bcnp.host.proxy.relay_tcp`, :mod:`bcnp.host.proxy.relay_udp`) tell it
what arrived and when (:meth:`DeliverySchedule.stream` for a TCP chunk,
:meth:`DeliverySchedule.datagram` for a UDP datagram); the proxy
(:class:`~bcnp.host.proxy.fault_proxy.Proxy`) tells it which events happen
(:meth:`~DeliverySchedule.partition`, :meth:`~DeliverySchedule.heal`,
:meth:`~DeliverySchedule.reset`, :meth:`~DeliverySchedule.set_faults`, or the script's,
:meth:`~DeliverySchedule.script_due`) and asks what is due at a moment
(:meth:`~DeliverySchedule.due`). No sockets, threads or clock: every call is told the time.

* Each direction has its :class:`~bcnp.host.proxy.core.faults.Faults`: latency and jitter per
  item (a seeded random generator per direction, so a run repeats), a bandwidth
  cap shared by everything of that direction, and for datagrams loss,
  duplication and reordering.
* A TCP chunk is never due before the chunk read before it (``not_before``): bytes
  keep their order.
* While the link is cut (a partition) what falls due is held, in order, and
  handed back when it heals, as TCP retransmission does after a radio fade;
  datagrams are dropped instead, unless ``udp_hold``. A reset drops everything held.
  With ``reorder_held`` the held datagrams leave as a radio empties its buffer: each
  with the link's latency and jitter again from the heal, so they may come out in
  another order (a handshake sent late in the drop ahead of a command sent early).

The items are the relay's own; the schedule only asks their ``size``, whether
each is a ``datagram``, and whether it is ``dead()`` (its connection gone).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Iterable
from typing import Generic, Literal, Protocol, TypeVar

from .faults import Event, Faults, SetFaults, plain

__all__ = ["DeliverySchedule", "Direction", "Item"]

Direction = Literal["up", "down"]


class Item(Protocol):
    @property
    def size(self) -> int: ...
    @property
    def datagram(self) -> bool: ...
    def dead(self) -> bool: ...


T = TypeVar("T", bound=Item)


class DeliverySchedule(Generic[T]):
    """See the module docs. ``script`` lists ``(seconds after start, event)``; ``start`` is set
    when the relay starts. Counts what it drops, holds, duplicates and reorders in ``counts``."""

    def __init__(
        self,
        up: Faults,
        down: Faults,
        *,
        seed: int | None = None,
        udp_hold: bool = False,
        reorder_held: bool = False,
        script: Iterable[tuple[float, Event]] = (),
    ) -> None:
        self.faults: dict[Direction, Faults] = {"up": up, "down": down}
        self._rng = {d: random.Random(None if seed is None else f"{seed}/{d}") for d in ("up", "down")}
        self.script = sorted(script, key=lambda item: item[0])
        if any(at < 0 or not isinstance(ev, Event) for at, ev in self.script):
            raise ValueError("script: each item must be (seconds >= 0, Partition | Heal | Reset | SetFaults)")
        self.udp_hold = udp_hold or reorder_held
        self.reorder_held = reorder_held
        self.start = 0.0
        self.partitioned = False
        self.partition_until: float | None = None
        self.held: list[T] = []
        self.bytes_held = 0
        #: Datagrams dropped (lost, cut by a partition, forgotten by a reset), duplicated, reordered.
        self.udp_dropped = self.udp_duplicated = self.udp_reordered = 0
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()
        self._link_free: dict[Direction, float] = {"up": 0.0, "down": 0.0}
        self._script_pos = 0

    # -- what arrives ------------------------------------------------------------------------

    def arrival(self, direction: Direction, size: int, now: float) -> float:
        """When something of ``size`` bytes sent ``now`` reaches the other side: after the bytes
        before it have gone through the bandwidth cap, plus latency and jitter."""
        faults = self.faults[direction]
        sent = now
        if faults.bandwidth is not None and size:
            sent = max(now, self._link_free[direction]) + size * 8 / faults.bandwidth
            self._link_free[direction] = sent
        delay = faults.latency
        if faults.jitter:
            delay += self._rng[direction].uniform(-faults.jitter, faults.jitter)
        return sent + max(0.0, delay)

    def stream(self, item: T, direction: Direction, now: float, not_before: float) -> float:
        """A TCP chunk read ``now``: scheduled no earlier than the one before it; returns when."""
        due = max(self.arrival(direction, item.size, now), not_before)
        self._push(due, item)
        return due

    def datagram(self, copies: Callable[[], T], direction: Direction, now: float, size: int) -> int:
        """A datagram received ``now``: lost, cut by a partition, or scheduled (twice when
        duplicated, late when reordered). ``copies()`` makes each item; returns how many."""
        faults, rng = self.faults[direction], self._rng[direction]
        if (self.partitioned and not self.udp_hold) or (faults.loss and rng.random() < faults.loss):
            self.udp_dropped += 1
            return 0
        count = 1
        if faults.duplicate and rng.random() < faults.duplicate:
            count = 2
            self.udp_duplicated += 1
        for _ in range(count):
            due = self.arrival(direction, size, now)
            if faults.reorder and rng.random() < faults.reorder:
                due += faults.reorder_delay
                self.udp_reordered += 1
            self._push(due, copies())
        return count

    def _push(self, due: float, item: T) -> None:
        heapq.heappush(self._heap, (due, next(self._seq), item))

    # -- what is due -----------------------------------------------------------------------

    def due(self, now: float) -> list[T]:
        """What reaches the other side by ``now``, in order; while cut, held or dropped instead."""
        out: list[T] = []
        while self._heap and self._heap[0][0] <= now:
            item = heapq.heappop(self._heap)[2]
            if not self.partitioned:
                out.append(item)
            elif item.datagram and not self.udp_hold:
                self.udp_dropped += 1
            elif not item.dead():
                self.held.append(item)
                self.bytes_held += item.size
        return out

    def script_due(self, now: float) -> list[tuple[float, Event]]:
        """The script's events due by ``now``, each with the moment it was due."""
        out = []
        while self._script_pos < len(self.script) and self.start + self.script[self._script_pos][0] <= now:
            at, event = self.script[self._script_pos]
            self._script_pos += 1
            out.append((self.start + at, event))
        return out

    def heal_due(self, now: float) -> bool:
        """Whether a timed partition has ended by ``now``."""
        return self.partition_until is not None and now >= self.partition_until

    def wait(self, now: float, longest: float) -> float:
        """How long nothing is due after ``now`` (at most ``longest``)."""
        due = [self._heap[0][0]] if self._heap else []
        if self._script_pos < len(self.script):
            due.append(self.start + self.script[self._script_pos][0])
        if self.partition_until is not None:
            due.append(self.partition_until)
        return min(longest, max(0.0, min(due) - now)) if due else longest

    # -- events ------------------------------------------------------------------------------

    def partition(self, at: float, seconds: float | None) -> bool:
        """Cut the link at ``at`` for ``seconds`` (``None``: until healed). True when a new cut
        began; an existing one only lasts longer (never shorter)."""
        until = None if seconds is None else at + seconds
        if self.partitioned:
            if self.partition_until is not None:
                self.partition_until = None if until is None else max(self.partition_until, until)
            return False
        self.partitioned, self.partition_until = True, until
        return True

    def heal(self, now: float = 0.0) -> tuple[list[T], int] | None:
        """End the cut at ``now``: what was held, in order, to deliver now, and its bytes;
        ``None`` when the link was not cut. With ``reorder_held`` the held datagrams are
        scheduled again from ``now`` instead (:meth:`due` hands them out)."""
        if not self.partitioned:
            return None
        self.partitioned, self.partition_until = False, None
        held, self.held = self.held, []
        released, self.bytes_held = self.bytes_held, 0
        if self.reorder_held:
            for item in held:
                if item.datagram:
                    direction: Direction = getattr(item, "direction", "up")
                    self._push(self.arrival(direction, item.size, now), item)
            held = [item for item in held if not item.datagram]
        return held, released

    def reset(self) -> None:
        """Everything held is dropped (a reset aborts the connections it belonged to)."""
        self.udp_dropped += sum(item.datagram for item in self.held)
        self.held.clear()
        self.bytes_held = 0

    def set_faults(self, event: SetFaults) -> None:
        directions: tuple[Direction, ...] = (
            ("up", "down") if event.direction == "both" else (event.direction,)
        )
        for d in directions:
            self.faults[d] = plain(event)

    def forget(self, gone: Callable[[T], bool]) -> None:
        """Drop the held items ``gone`` says belong to something closed."""
        if any(gone(item) for item in self.held):
            self.held = [item for item in self.held if not gone(item)]
            self.bytes_held = sum(item.size for item in self.held)

    def clear(self) -> None:
        self._heap.clear()
        self.held.clear()
        self.bytes_held = 0
