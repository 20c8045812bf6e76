"""The command queue shared by receive threads and the robot loop, under one lock.

:class:`~bcnp.queue.MessageQueue` is sans-I/O and does no locking. A robot
that feeds it from a transport's receive thread and runs it from its loop
shares it through this wrapper: every call that changes it or reads more
than one of its fields takes the lock, briefly and never around I/O.
Counters (``queue.metrics``, ``queue.size()``) are plain reads and need none.

With ``end_on_link_loss`` (the servers' knob of the same name), the queue's
own declaration of link loss is final too: once an :meth:`update` found no
packet within the link timeout, every packet is refused until the controller
changes (:meth:`clear`), and ``on_link_lost`` is told, so that the robot has
the controller's server end it. A receive thread stamps bytes when it reads
them and queues their packets later (it yields to the tick in between), so a
packet read just inside the timeout can reach the queue after the tick that
stopped the robot: the refusal holds here, under the lock the tick takes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ..queue import MessageQueue
from ..schema import Message, MessageSpec
from ..wire import PacketView

__all__ = ["SharedQueue"]


class SharedQueue:
    def __init__(
        self,
        queue: MessageQueue,
        *,
        end_on_link_loss: bool = False,
        on_link_lost: Callable[[float], object] | None = None,
    ) -> None:
        self.queue = queue
        self.lock = threading.Lock()
        self.end_on_link_loss = end_on_link_loss
        #: ``on_link_lost(silent_for)``: called by :meth:`update`, under the lock, when
        #: the queue declares the link lost (``end_on_link_loss``); quick, no I/O.
        self.on_link_lost = on_link_lost
        #: The queue declared the controller's link lost: its packets are refused.
        self.link_lost = False
        self.refused_after_loss = 0  # packets refused while link_lost
        self.last_callback_error: BaseException | None = None  # raised by on_link_lost
        self._fed = False  # a controller's packet was queued since the last clear()

    def handle_packet(self, packet: PacketView, now: float) -> bool:
        """Dispatcher handler (receive thread): CLEAR_QUEUE, batch push and liveness.
        ``False``: refused, the queue declared the link lost."""
        with self.lock:
            if self.link_lost:
                self.refused_after_loss += 1
                return False
            self.queue.handle_packet(packet, now)
            self._fed = True
            return True

    def push_batch(self, msgs: Sequence[Message] | PacketView, clear: bool = False) -> int:
        with self.lock:
            return self.queue.push_batch(msgs, clear)

    def clear(self) -> None:
        """A controller came or went (receive thread): its commands go, and a link
        loss declared for it is forgotten."""
        with self.lock:
            self.queue.clear()
            self.link_lost = self._fed = False

    def update(self, now: float) -> Message | None:
        """Advance to ``now`` (robot thread); the command to run."""
        with self.lock:
            queue = self.queue
            active = queue.update(now)
            if active is None and self._fed and not queue.link_alive(now):
                # A local source (notify_received without packets) is not a link: only
                # a controller's packets make a loss here.
                self._fed = False
                if self.end_on_link_loss:
                    self.link_lost = True
                    last = queue.last_receive_time
                    callback = self.on_link_lost
                    if callback is not None and last is not None:
                        try:
                            callback(now - last)
                        except Exception as exc:  # the tick goes on; the refusal holds anyway
                            self.last_callback_error = exc
            return active

    def peek(self, limit: int) -> tuple[Message | None, float | None, list[Message]]:
        """The active command, when it started, and up to ``limit`` waiting ones, read together."""
        with self.lock:
            queue = self.queue
            return queue.active(), queue.active_started_at, queue.peek(limit)

    def peek_raw(
        self, limit: int
    ) -> tuple[Message | None, float | None, list[tuple[MessageSpec, list[tuple[int, ...]]]]]:
        """:meth:`peek` with the waiting ones as wire integers (``MessageQueue.peek_raw``)."""
        with self.lock:
            queue = self.queue
            return queue.active(), queue.active_started_at, queue.peek_raw(limit)

    def drain(self) -> list[Message]:
        with self.lock:
            return self.queue.drain()
