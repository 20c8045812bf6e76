"""A path file played on the robot: the command queue fed by a local source instead of a host.

The autonomous modes that drive a path (``autonomous/``) hand it to
:class:`LocalPath`, which queues it into the link's :class:`~bcnp.MessageQueue`
(through its :class:`~bcnp.transport.SharedQueue`), the queue a host's packets
go to. So a path played here gets exactly what a host's commands get: the
clamp, the acceleration limits, every stop rule, commands chained end to start
(no drift with loop jitter), stale commands skipped rather than run late.

**Just in time.** Each tick, every command that starts within
``AUTO_PATH_LEAD_S`` (1 s) of now is queued, as far as the queue has room, as
``bcnp replay`` does from a host: a path longer than the queue's 200 commands
(figure8.csv has 252) plays whole, and the 1 s ahead rides out a late tick.

**Liveness.** The queue drops everything 200 ms after the last packet (the
link timeout). A local source is alive exactly while the robot loop runs it,
so each tick it plays, before the queue advances, it marks the queue alive
(``notify_received(now)``), as a host's keepalive does, until its last
command has run. When it stops (disable, the mode ends) it clears its
commands at once; a robot loop that stalls stops the motors through motor
safety, and on resuming the commands that ended more than 100 ms ago are
skipped as stale, as a host's would be.

**A controller always wins.** The path plays only while no controller holds
the link, and a controller that connects ends it for good. The check and the
push happen under the queue's lock. A receive thread takes the controller slot
before it clears the queue for the new controller (``on_controller_change``,
under the same lock), so either this tick sees the controller and queues
nothing, or its push is done before that clear, which removes it: no path
command is ever queued behind a controller's. For the same reason the path
never clears the queue itself once a controller came: what is queued then is
the controller's (its CLEAR_QUEUE and its stop rules apply as to any host).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING

import wpilib

from bcnp import MessageQueue
from bcnp.paths import PathCommand
from bcnp.timebase import to_us
from messages import DriveCmd

if TYPE_CHECKING:
    from subsystems.link.bcnp_link import BcnpLink

log = logging.getLogger("autonomous")


class ControllerWatch:
    """Whether a controller has held the link since :meth:`mark`: one holds it now, or one
    connected in between (even one that came and went between two ticks)."""

    def __init__(self, link: BcnpLink) -> None:
        self._link = link
        self._connected = link.counter("controllers")

    def mark(self) -> None:
        self._connected = self._link.counter("controllers")

    def came(self) -> bool:
        link = self._link
        return link.slot.owner is not None or link.counter("controllers") != self._connected


class LocalPath:
    """Plays one path through the link's queue: :meth:`start`, :meth:`feed` once per
    tick before the queue advances, :meth:`stop` when the mode ends."""

    def __init__(
        self,
        link: BcnpLink,
        name: str,
        commands: Sequence[PathCommand],
        *,
        lead: float,
        clock: Callable[[], float] = wpilib.Timer.getFPGATimestamp,
    ) -> None:
        if not commands:
            raise ValueError(f"{name}: a path needs at least one command")
        self.name = name
        # Made once at robot start: a value the wire cannot carry fails here, not in a match.
        self.messages = [DriveCmd(vx=c.vx, omega=c.omega, durationMs=c.duration_ms) for c in commands]
        self._starts_us = list(accumulate((c.duration_ms * 1000 for c in commands), initial=0))
        self._lead_us = to_us(lead)
        self._shared = link.parts.shared_queue
        self._watch = ControllerWatch(link)
        self._clock = clock
        self.playing = False
        self.taken_over = False
        self.sent = 0
        self._origin_us: int | None = None

    def start(self) -> None:
        """From the first command, at the next :meth:`feed`."""
        self._watch.mark()
        self.playing = True
        self.taken_over = False
        self.sent = 0
        self._origin_us = None

    def feed(self) -> None:
        """Queue what is due and keep the queue alive; nothing once a controller came."""
        if not self.playing or self.taken_over:
            return
        now = self._clock()
        now_us = to_us(now)
        shared = self._shared
        with shared.lock:
            # A controller's receive thread clears (or has cleared) the queue for it: nothing to undo.
            self.taken_over = self._watch.came()
            if not self.taken_over:
                self._push_due(shared.queue, now, now_us)
        if self.taken_over:
            log.info("autonomous: a controller holds the link: it drives; path %s stopped", self.name)

    def _push_due(self, queue: MessageQueue, now: float, now_us: int) -> None:
        """Under the queue's lock."""
        if self.sent == len(self.messages) and queue.size() == 0 and queue.active() is None:
            return  # over: nothing left to keep alive
        queue.notify_received(now)
        if self._origin_us is None:
            self._origin_us = now_us
        elapsed = now_us - self._origin_us
        due = max(1, bisect.bisect_left(self._starts_us, elapsed + self._lead_us, hi=len(self.messages)))
        take = min(due - self.sent, queue.config.capacity - queue.size())
        if take > 0:
            # The first push clears whatever is left from before, as a host's replay does.
            queue.push_batch(self.messages[self.sent : self.sent + take], clear=self.sent == 0)
            self.sent += take

    def stop(self) -> None:
        """The source ends: its commands go now (unless a controller took over; then they went already)."""
        if not self.playing:
            return
        self.playing = False
        shared = self._shared
        with shared.lock:
            if not self.taken_over and not self._watch.came():
                shared.queue.clear()
