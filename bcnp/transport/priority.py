"""The robot loop's first claim on the interpreter while it runs a tick (:class:`LoopPriority`).

Not a transport: the robot loop marks its tick busy and idle, and whatever
threads share the interpreter with it (the servers' receive threads) pause at
their safe points. The servers take its :meth:`LoopPriority.pause` as a plain
callable.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["LoopPriority"]


class LoopPriority:
    """Gives the robot loop first claim on the interpreter while it runs a tick.

    CPython runs one thread at a time. A receive thread parsing a flood holds
    the interpreter lock, and the robot thread, which gives the lock up in
    every WPILib call, waits up to a switch interval to get it back, dozens
    of times a tick. So the robot loop calls :meth:`busy` when its tick starts
    and :meth:`idle` when it ends, and the receive thread calls :meth:`pause`
    at every safe point (before each packet, each parse error, each read, and
    every ``SEARCH_STEP`` bytes searched): while the loop is busy it waits,
    lock released, until the tick ends, at most ``max_pause`` seconds.

    With ``period`` (the loop period, seconds) it also steps aside *before* a
    tick: from ``lead`` seconds before the next tick is due (the last start
    plus ``period``), ``pause`` waits until that tick has ended, so the tick
    does not start while the receive thread is in the middle of a packet. It
    never waits past ``max_pause`` after the due time: a late or stopped loop
    costs ingest at most that once per tick. Ingest loses about ``lead`` plus
    a tick's work per period (about 4 % of a 20 ms period).
    """

    def __init__(
        self,
        max_pause: float = 0.005,
        *,
        period: float | None = None,
        lead: float = 0.0005,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_pause <= 0:
            raise ValueError("max_pause must be > 0 seconds")
        if period is not None and not 0 <= lead < period:
            raise ValueError("lead must be >= 0 and shorter than the period")
        self.max_pause = max_pause
        self.period = period
        self.lead = lead
        self.clock = clock
        self.pauses = 0  # times a receive thread waited for the loop
        self.anticipated = 0  # of which: waits for a tick that was about to start
        self._cond = threading.Condition(threading.Lock())
        self._busy = False
        self._ticks = 0  # ticks ended
        self._waiting = 0  # receive threads in pause(), counted before they look at _ticks
        self._due = math.inf  # when the next tick should start (clock seconds)

    def busy(self) -> None:
        """The robot loop starts its work (robot thread)."""
        self._busy = True
        if self.period is not None:
            self._due = self.clock() + self.period

    def idle(self) -> None:
        """The robot loop has finished its work (robot thread)."""
        self._busy = False
        self._ticks += 1
        # A pause() counts itself in _waiting before it compares _ticks: either it
        # sees the new count and returns, or it is counted here and gets woken.
        if self._waiting:
            with self._cond:
                self._cond.notify_all()

    def pause(self) -> None:
        """Receive thread, at a safe point: wait while a tick runs or is about to."""
        ticks = self._ticks
        if self._busy:
            timeout = self.max_pause
            anticipated = False
        else:
            now = self.clock()
            due = self._due
            if not due - self.lead <= now < due + self.max_pause:
                return
            timeout = due + self.max_pause - now
            anticipated = True
        with self._cond:
            self._waiting += 1
            try:
                if self._ticks != ticks:
                    return  # that tick has ended in the meantime
                self.pauses += 1
                self.anticipated += anticipated
                self._cond.wait_for(lambda: self._ticks != ticks, timeout)
            finally:
                self._waiting -= 1
