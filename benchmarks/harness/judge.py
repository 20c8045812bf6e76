"""The judge of command starts: which command of which host plan each start the robot logged
is, and how late or early the robot started it against that plan.

A plan (:class:`Plan`) is what a host meant: when it sent its first command (wall seconds, the
``time.time()`` scale the robot's log is put on, :mod:`.robotlog`), when each command was due
from then (``Schedule.starts``: one more than the commands, the last is the path's end), and
how to tell which of its commands a logged start is. A whole command is due at its start; a
start shorter than planned is a remainder resumed after an outage: it was due its duration
before its command's planned end.

Which command a start is. A test may say it itself (a command's index carried in its omega;
the nearest step of its kind). A benchmark tags its commands (:func:`tag_paths`): each
command's vx and omega move by a few units of their lowest wire digits (vx and omega travel
as integers of 1/10,000), so no two commands of a path, or of several copies of it, are alike,
and the robot logs each as it starts, after clamping, which leaves these values alone.

:func:`judge` matches each start to the latest plan that knows it and began before it, with
its lateness; :func:`late` and :func:`early` say which started more than a tolerance after or
before their plan (the rule: never more than the robot's link timeout, :data:`LATE_S`, after;
one started well before its plan is a clock or matching error, or over UDP, commands run
early after a lost datagram); :func:`unknown`: starts no plan knows.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bcnp.defaults import LINK_TIMEOUT_S
from bcnp.paths import PathCommand
from benchmarks.harness.robotlog import CommandStart
from messages import DriveCmd

#: A command is late when the robot starts it more than this after the host's plan.
LATE_S = LINK_TIMEOUT_S
#: Wire units of vx and omega (1 / the schema's float scale).
UNIT = 1 / DriveCmd.spec.fields[0].effective_scale
#: A start is matched to plans that began at most this long after it (the two clocks' error).
SLACK_S = 0.05


# -- commands that say which they are -----------------------------------------------------------


def _units(value: float) -> int:
    return round(value / UNIT)


def command_key(vx: float, omega: float) -> tuple[int, int]:
    """What identifies a tagged command: vx and omega in wire units (not the duration: a
    resumed remainder is shorter)."""
    return _units(vx), _units(omega)


def tag_paths(commands: Sequence[PathCommand], variants: int = 1) -> list[list[PathCommand]]:
    """``variants`` copies of the path, every command of every copy made distinct.

    Tag ``n`` (``variant * len + index``) moves vx by ``n % k - k // 2`` and omega
    by ``n // k - m // 2`` wire units, ``k`` the square root of the number of tags
    rounded up and ``m`` the number of rows: tags average about zero. Raises
    ``ValueError`` when two tagged commands would still be alike.
    """
    total = len(commands) * variants
    k = math.isqrt(total - 1) + 1 if total > 1 else 1
    rows = -(-total // k)
    out: list[list[PathCommand]] = []
    seen: set[tuple[int, int]] = set()
    for variant in range(variants):
        tagged = []
        for i, c in enumerate(commands):
            n = variant * len(commands) + i
            vx = (_units(c.vx) + n % k - k // 2) * UNIT
            omega = (_units(c.omega) + n // k - rows // 2) * UNIT
            key = command_key(vx, omega)
            if key in seen:
                raise ValueError(f"command {i} of variant {variant} is not distinct after tagging")
            seen.add(key)
            tagged.append(PathCommand(vx, omega, c.duration_ms))
        out.append(tagged)
    return out


def tag_offsets(commands: Sequence[PathCommand], tagged: Sequence[PathCommand]) -> tuple[float, float]:
    """The largest tag, in vx (m/s) and omega (rad/s)."""
    dv = max(abs(t.vx - c.vx) for c, t in zip(commands, tagged, strict=True))
    dw = max(abs(t.omega - c.omega) for c, t in zip(commands, tagged, strict=True))
    return dv, dw


# -- plans and starts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """One run of a host's path: when it sent its first command (wall seconds), when each
    command was due from then (``Schedule.starts``), and which command a start is (a
    negative index: not this plan's)."""

    start_wall: float
    starts: Sequence[float]
    index_of: Callable[[CommandStart], int]

    @classmethod
    def tagged(cls, start_wall: float, commands: Sequence[PathCommand]) -> Plan:
        """A plan of commands made distinct by :func:`tag_paths`: a start is the command its tag names."""
        from bcnp.host.sessions.core.replay import Schedule

        keys = {command_key(c.vx, c.omega): i for i, c in enumerate(commands)}
        return cls(
            start_wall,
            Schedule(commands).starts,
            lambda start: keys.get(command_key(start.vx, start.omega), -1),
        )

    @property
    def commands(self) -> int:
        return len(self.starts) - 1

    def due(self, index: int, duration_ms: int) -> float:
        """When the robot should start command ``index`` run for ``duration_ms`` (wall seconds):
        a whole command at its start, a shorter remainder its duration before the command's end."""
        if not 0 <= index < self.commands:
            raise ValueError(f"index {index} is outside the plan ({self.commands} commands)")
        end = self.starts[index + 1]
        planned_ms = round((end - self.starts[index]) * 1000)
        due = end - duration_ms / 1000 if duration_ms < planned_ms else self.starts[index]
        return self.start_wall + due


@dataclass(frozen=True)
class Judged:
    """A command start the robot logged, matched to a plan."""

    start: CommandStart
    plan: int  # index into the plans given to :func:`judge`; -1: no plan knows it
    index: int  # the command's index in its plan; -1: unknown
    lateness: float  # robot start minus the plan's (seconds); nan when unknown


def judge(starts: Sequence[CommandStart], plans: Sequence[Plan], slack: float = SLACK_S) -> list[Judged]:
    """Each start matched to the latest plan that knows it and began before it (``slack``
    allows for the two clocks' error), with its lateness (:meth:`Plan.due`)."""
    order = sorted(range(len(plans)), key=lambda p: plans[p].start_wall)
    begun = [plans[p].start_wall for p in order]
    out = []
    for s in starts:
        found = (-1, -1, math.nan)
        for pos in range(bisect.bisect_right(begun, s.wall_time + slack) - 1, -1, -1):
            p = order[pos]
            index = plans[p].index_of(s)
            if index >= 0:
                found = (p, index, s.wall_time - plans[p].due(index, s.duration_ms))
                break
        out.append(Judged(s, *found))
    return out


def late(judged: Sequence[Judged], tolerance: float = LATE_S) -> list[Judged]:
    """The starts more than ``tolerance`` after their plan."""
    return [j for j in judged if j.lateness > tolerance]


def early(judged: Sequence[Judged], tolerance: float = LATE_S) -> list[Judged]:
    """The starts more than ``tolerance`` before their plan."""
    return [j for j in judged if j.lateness < -tolerance]


def unknown(judged: Sequence[Judged]) -> list[Judged]:
    """The starts no plan knows."""
    return [j for j in judged if j.index < 0]


def spread(judged: Sequence[Judged]) -> tuple[float, float] | None:
    """The earliest and the latest start against its plan (seconds), of the known ones."""
    known = [j.lateness for j in judged if j.index >= 0]
    return (min(known), max(known)) if known else None
