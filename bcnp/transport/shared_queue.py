"""The command queue shared by receive threads and the robot loop, under one lock.

:class:`~bcnp.queue.MessageQueue` is sans-I/O and does no locking. A robot
that feeds it from a transport's receive thread and runs it from its loop
shares it through this wrapper: every call that changes it or reads more
than one of its fields takes the lock, briefly and never around I/O.
Counters (``queue.metrics``, ``queue.size()``) are plain reads and need none.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..queue import MessageQueue
from ..schema import Message
from ..wire import PacketView

__all__ = ["SharedQueue"]


class SharedQueue:
    def __init__(self, queue: MessageQueue) -> None:
        self.queue = queue
        self.lock = threading.Lock()

    def handle_packet(self, packet: PacketView, now: float) -> None:
        """Dispatcher handler (receive thread): CLEAR_QUEUE, batch push and liveness."""
        with self.lock:
            self.queue.handle_packet(packet, now)

    def push_batch(self, msgs: Sequence[Message] | PacketView, clear: bool = False) -> int:
        with self.lock:
            return self.queue.push_batch(msgs, clear)

    def clear(self) -> None:
        """A controller came or went (receive thread): its commands go."""
        with self.lock:
            self.queue.clear()

    def update(self, now: float) -> Message | None:
        """Advance to ``now`` (robot thread); the command to run."""
        with self.lock:
            return self.queue.update(now)

    def drain(self) -> list[Message]:
        with self.lock:
            return self.queue.drain()
