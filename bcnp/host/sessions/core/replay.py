"""Streaming a path just in time, sans-I/O: the schedule and the replay session's core.

The robot's queue holds 200 commands and drops the link after 200 ms without a
packet, so a long path is neither sent at once (it would overflow) nor
trickled late (stale commands are skipped). :func:`due` decides how much of the
path to have sent at each moment: everything that starts within ``lead``
seconds, but never more than ``max_ahead`` commands beyond the one running.
:class:`ReplaySession` answers, at each step, what to send on that schedule, and
after a lost link resumes *now*: the running command's remainder, then the
rest, the first packet with CLEAR_QUEUE (the robot's queue is empty on a new
connection). A robot that sends telemetry must be heard from after the path's end for the
session to end clean: one that fell silent before it may have dropped the link, and stopped,
short of the end. No sockets, threads or clocks: :mod:`bcnp.host.sessions.replay` drives it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from itertools import accumulate

from ....paths import PathCommand
from ....schema import Message, MessageSpec
from ....wire import PacketView
from .session import EndedDown, Outage, Send, StampedPose

__all__ = [
    "HEARD_WAIT_S",
    "LEAD_S",
    "MAX_AHEAD",
    "MIN_REMAINDER_MS",
    "SETTLE_S",
    "STEP_S",
    "UDP_LEAD_S",
    "ReplaySession",
    "Schedule",
    "due",
]

#: Seconds of commands kept sent ahead of the robot over TCP ...
LEAD_S = 1.0
#: ... and over UDP, under the robot's 200 ms link timeout: a lost datagram can make
#: what follows run this much early at most.
UDP_LEAD_S = 0.15
#: A command cut by an outage resumes with what is left of it when at least this
#: much is (one robot tick); less is dropped and the next command is sent.
MIN_REMAINDER_MS = 20
#: Most commands sent ahead of the one running: the robot's queue holds 200.
MAX_AHEAD = 150
#: Seconds the session waits after the path's end for the robot to run it.
SETTLE_S = 0.3
#: Seconds more, past that, it waits to hear from a robot that sent telemetry during the
#: session but none since the path's end. A client that judges the link by its telemetry
#: (after 0.5 s of silence, by default) finds the loss first; without that judgement the
#: session then ends with the doubt, as it would with the loss.
HEARD_WAIT_S = 1.0
#: Seconds between two steps of the loop that drives a session: one robot tick.
STEP_S = 0.02


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


class ReplaySession:
    """A path streamed on the :func:`due` schedule, riding through lost links: the sans-I/O
    core of :class:`Replay` (a :class:`~bcnp.host.sessions.core.session.Session`; see the module docs)."""

    def __init__(
        self,
        commands: Sequence[PathCommand],
        command_spec: MessageSpec,
        *,
        lead: float,
        max_ahead: int = MAX_AHEAD,
        settle: float = SETTLE_S,
        clear_first: bool = True,
    ) -> None:
        if lead <= 0 or max_ahead < 1:
            raise ValueError("lead must be > 0 s and max_ahead >= 1")
        self.schedule = Schedule(commands)
        self._drive = command_spec.message_class
        self.messages = [self._drive(vx=c.vx, omega=c.omega, durationMs=c.duration_ms) for c in commands]
        self.lead = lead
        self.max_ahead = max_ahead
        self.settle = settle
        self.sent = 0
        self.packets = 0
        self.elapsed = 0.0
        self._clear_next = clear_first
        self._remainder: Message | None = None  # replaces messages[sent] in the next send
        self._target = 0  # what has been sent once the pending Send has gone
        self._heard: float | None = None  # when telemetry last arrived, on the loop's clock
        self._origin: float | None = None  # the loop's clock at session time 0

    @property
    def end(self) -> float:
        """Session seconds at which the path has run, settle included."""
        return self.schedule.total + self.settle

    def on_telemetry(self, packet: PacketView, now: float) -> None:
        """Open loop: the schedule alone says what to send. When the robot was last heard
        from decides whether the path ended clean (:meth:`finished`)."""
        if self._heard is None or now > self._heard:
            self._heard = now

    @property
    def last_heard(self) -> float | None:
        """Session seconds at which telemetry last arrived; ``None`` before any did."""
        if self._heard is None or self._origin is None:
            return None
        return self._heard - self._origin

    def on_pose(self, pose: StampedPose, now: float) -> None:
        pass

    def went(self, outage: Outage, elapsed: float) -> None:
        pass  # nothing is sent while the link is down; the clock runs on

    def back(self, outage: Outage, elapsed: float) -> None:
        """Start again from now: the running command's remainder, then the rest."""
        schedule = self.schedule
        n = len(schedule)
        running = schedule.index_at(elapsed)
        first = max(running, 0)
        self._remainder = None
        if 0 <= running < n:
            left_ms = int((schedule.starts[running + 1] - elapsed) * 1000)
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
        outage.resumed_at = first
        self.sent = first
        self._clear_next = True

    def step(self, elapsed: float, now: float, connected: bool) -> Send | None:
        self.elapsed = elapsed
        self._origin = now - elapsed
        if not connected:
            return None
        target = due(self.schedule, self.sent, elapsed, self.lead, self.max_ahead)
        if target <= self.sent:
            return None
        batch = self.messages[self.sent : target]
        if self._remainder is not None:
            batch[0] = self._remainder
        self._target = target
        return Send(batch, self._clear_next)

    def delivered(self, send: Send, packets: int) -> None:
        self.packets += packets
        self._clear_next = False
        self._remainder = None
        self.sent = self._target

    def finished(self, elapsed: float, down: Outage | None) -> bool:
        """Over once every command was sent and the path has run (settle included), and a
        robot that sends telemetry was heard from after the path's end. Raises
        :class:`EndedDown` when the link was down at the end, or when such a robot stayed
        silent :data:`HEARD_WAIT_S` past it (no client judged the silence)."""
        n = len(self.schedule)
        if down is None:
            if self.sent != n or elapsed < self.end:
                return False
            heard = self.last_heard
            total = self.schedule.total
            if heard is None or heard >= total:
                return True  # heard after the end, or a robot that sends no telemetry
            if elapsed < self.end + HEARD_WAIT_S:
                return False  # a silence the client may yet judge a loss
            raise EndedDown(
                f"the robot was last heard at {heard:.2f} s, before the path's end at {total:.2f} s, "
                f"and not in the {elapsed - total:.1f} s since: it may have dropped the link and stopped"
            )
        if elapsed < self.end:
            return False
        if down.lost_at >= self.schedule.total and self.sent == n:
            return True  # lost after the path had run
        raise EndedDown(str(down))

    def where(self) -> str:
        return f"{self.sent}/{len(self.schedule)} commands sent"
