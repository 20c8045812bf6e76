"""How long the robot loop takes, how regularly it starts, and how fast commands take effect.

Two clocks, each where it is honest:

* **Duration** of ``robotPeriodic`` is wall time (``time.perf_counter_ns``,
  monotonic, nanoseconds): what the code really cost, whatever the robot's
  clock does. In pyfrc tests simulated time stands still while a tick runs,
  so FPGA time would report every tick as free.
* **Period** (start of one ``robotPeriodic`` to the start of the next) is
  robot time (``wpilib.Timer.getFPGATimestamp``, microseconds): the clock
  TimedRobot schedules ticks by and the command queue runs on. On a roboRIO
  and in ``robotpy sim`` it follows real time; in pyfrc tests it is stepped,
  so there every period is exactly what the test stepped.

Statistics are kept in :class:`RollingWindow` s of fixed size: nothing grows
with run time, and a tick costs a few microseconds (two clock reads, two
window inserts).
"""

from __future__ import annotations

import time
from bisect import bisect_left, insort
from collections.abc import Callable

import wpilib

import constants

_US = 1_000_000


class RollingWindow:
    """The last ``size`` samples, with their 99th percentile and maximum.

    A ring holds the samples in arrival order and a sorted copy answers
    queries in O(1). The first :attr:`INCREMENTAL` samples added between two
    queries are moved into the sorted copy one by one (a binary search and a
    short memmove each); a larger burst is only written to the ring, and the
    next query sorts it once. So one ``add`` never costs more than about a
    microsecond, and a query at most one sort of ``size`` floats. Memory is
    fixed at two lists of ``size`` floats.
    """

    INCREMENTAL = 16

    __slots__ = ("size", "total", "_ring", "_next", "_sorted", "_pending")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a window holds at least one sample")
        self.size = size
        self.total = 0  # samples ever added
        self._ring: list[float] = []
        self._next = 0  # ring slot the next sample overwrites, once full
        self._sorted: list[float] = []
        self._pending = 0  # samples added since the last query

    def add(self, value: float) -> None:
        ring = self._ring
        self.total += 1
        pending = self._pending = self._pending + 1
        if len(ring) < self.size:
            ring.append(value)
            old = None
        else:
            slot = self._next
            old = ring[slot]
            ring[slot] = value
            self._next = slot + 1 if slot + 1 < self.size else 0
        if pending <= self.INCREMENTAL:
            ordered = self._sorted
            if old is not None:
                del ordered[bisect_left(ordered, old)]
            insort(ordered, value)

    def _ordered(self) -> list[float]:
        if self._pending > self.INCREMENTAL:
            self._sorted = sorted(self._ring)
        self._pending = 0
        return self._sorted

    def __len__(self) -> int:
        return len(self._ring)

    def percentile(self, pct: int) -> float:
        """Nearest-rank percentile (``pct`` in 1..100) of the window; 0.0 when empty."""
        ordered = self._ordered()
        n = len(ordered)
        if n == 0:
            return 0.0
        rank = (pct * n + 99) // 100  # ceil(pct/100 * n), in integers
        return ordered[max(rank, 1) - 1]

    def max(self) -> float:
        """The largest sample in the window; 0.0 when empty."""
        ordered = self._ordered()
        return ordered[-1] if ordered else 0.0


class LoopTiming:
    """Per-tick timing of ``robotPeriodic``: call :meth:`begin` first, :meth:`end` last.

    Published through ``subsystems/observe/network_keys.py`` (before :meth:`end`, so
    the writes are part of the measured tick; the figures then cover ticks up
    to the previous one):

    * ``Network/LoopP99Ms``: 99th percentile (nearest rank) of the
      ``robotPeriodic`` duration, wall time, over the last 500 ticks, in ms.
    * ``Network/LoopMaxMs``: the longest of those durations, in ms.
    * ``Network/LoopPeriodMaxMs``: the longest period (robot time from one
      ``robotPeriodic`` start to the next) over the same window, in ms.
    * ``Network/Overruns``: ticks since start whose period exceeded the loop
      period plus a margin (20 + 5 ms): the drivetrain went that long without
      new outputs. The period catches whatever delays the loop: slow robot
      code, another thread holding the interpreter, the operating system. One
      late tick counts once, however many 20 ms slots it missed (TimedRobot
      skips missed slots rather than running them back to back). TimedRobot's
      own loop-overrun watchdog is not used: it only prints, and it sees
      durations, not late starts.
    """

    def __init__(
        self,
        period: float = constants.LOOP_PERIOD_S,
        *,
        margin: float = constants.LOOP_OVERRUN_MARGIN_S,
        window: int = constants.LOOP_TIMING_WINDOW_TICKS,
        clock: Callable[[], float] = wpilib.Timer.getFPGATimestamp,
        wall: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.clock = clock
        self.wall = wall
        self.period = period
        self.margin = margin
        self._late_us = round((period + margin) * _US)  # integer microseconds, as the FPGA clock
        self.durations_ms = RollingWindow(window)
        self.periods_ms = RollingWindow(window)
        self.overruns = 0
        self.ticks = 0  # ticks measured from begin() to end()
        self._last_start: float | None = None
        self._wall_start = 0

    def begin(self) -> None:
        """The tick starts: take both clocks; count an overrun if it started late."""
        self._wall_start = self.wall()
        start = self.clock()
        last = self._last_start
        self._last_start = start
        if last is not None:
            period_us = round((start - last) * _US)
            self.periods_ms.add(period_us / 1000)
            if period_us > self._late_us:
                self.overruns += 1

    def end(self) -> None:
        """The tick is over: record its wall-time duration."""
        self.durations_ms.add((self.wall() - self._wall_start) / 1e6)
        self.ticks += 1
