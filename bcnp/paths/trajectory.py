"""Trajectories: where the robot should be, and how fast it should go, every 20 ms robot tick.

A :class:`Trajectory` is the planned robot state (:class:`RefState`: time, pose,
chassis speeds) every :data:`SAMPLE_S`, one robot tick, from whatever planned
it (PathPlanner, Choreo, a command file through :func:`from_commands`).
:func:`to_commands` turns it into the timed drive commands BCNP carries, one per
tick, merged where two in a row are equal on the wire; :func:`from_commands`
goes the other way for command files (the commands integrated through the
robot's speed and acceleration limits, :class:`DriveLimits`), so the
closed-loop follower can track any of them. Standard library only.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from ..defaults import KITBOT_TRACK_WIDTH_M
from .commands import MAX_DURATION_MS, PathCommand, PathError

__all__ = [
    "SAMPLE_S",
    "DriveLimits",
    "RefState",
    "Trajectory",
    "from_commands",
    "to_commands",
]

#: One robot tick: the trajectory's sample period and the commands' length before merging.
SAMPLE_S = 0.02
#: The wire carries vx and omega as integers of 1/10,000.
_WIRE_DIGITS = 4


@dataclass(frozen=True, slots=True)
class RefState:
    """One sample: ``t`` seconds from the start, the pose (metres, radians, field frame,
    counter-clockwise positive) and the chassis speeds (m/s forward, rad/s CCW)."""

    t: float
    x: float
    y: float
    heading: float
    vx: float
    omega: float


@dataclass(frozen=True)
class DriveLimits:
    """What a planner needs of the drivetrain when the project has no PathPlanner settings,
    and what the robot does to every command (clamp, acceleration limits). The defaults are
    the kit-of-parts chassis of ``constants.py``."""

    track_width_m: float = KITBOT_TRACK_WIDTH_M
    max_vx_mps: float = 1.5
    max_omega_radps: float = 2.5
    max_accel_mps2: float | None = 3.0
    max_alpha_radps2: float | None = 6.0
    wheel_diameter_m: float = 0.1524
    gear_ratio: float = 10.71
    #: Mass and moment of inertia for PathPlanner's model (kit chassis with battery and bumpers).
    mass_kg: float = 50.0
    moi_kg_m2: float = 5.0
    wheel_cof: float = 1.2
    current_limit_a: float = 40.0

    @classmethod
    def from_constants(cls, constants: Any) -> DriveLimits:
        """From a project's constants (the names ``constants.py`` uses), as a module or a
        mapping of names; any name it lacks keeps its default."""
        values = constants if isinstance(constants, Mapping) else vars(constants)
        names = {
            "track_width_m": "TRACK_WIDTH_M",
            "max_vx_mps": "MAX_VX_MPS",
            "max_omega_radps": "MAX_OMEGA_RADPS",
            "max_accel_mps2": "MAX_ACCEL_MPS2",
            "max_alpha_radps2": "MAX_ALPHA_RADPS2",
            "wheel_diameter_m": "WHEEL_DIAMETER_M",
            "gear_ratio": "GEAR_RATIO",
        }
        return cls(**{k: values[v] for k, v in names.items() if v in values})


@dataclass(frozen=True)
class Trajectory:
    """The planned state every :data:`SAMPLE_S` from ``states[0].t == 0``."""

    name: str
    states: tuple[RefState, ...]
    _times: list[float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.states:
            raise ValueError("a trajectory needs at least one state")
        object.__setattr__(self, "_times", [s.t for s in self.states])

    @property
    def total(self) -> float:
        return self.states[-1].t

    @property
    def start(self) -> RefState:
        return self.states[0]

    @property
    def end(self) -> RefState:
        return self.states[-1]

    def sample(self, t: float) -> RefState:
        """The state at ``t`` (linear between samples, the heading the short way round;
        the first before the start, the last, at rest, after the end)."""
        states = self.states
        if t <= 0.0:
            return states[0]
        if t >= states[-1].t:
            last = states[-1]
            return RefState(t, last.x, last.y, last.heading, 0.0, 0.0)
        i = bisect.bisect_right(self._times, t)
        a, b = states[i - 1], states[i]
        u = (t - a.t) / (b.t - a.t) if b.t > a.t else 1.0
        turn = math.remainder(b.heading - a.heading, math.tau)
        return RefState(
            t,
            a.x + u * (b.x - a.x),
            a.y + u * (b.y - a.y),
            a.heading + u * turn,
            a.vx + u * (b.vx - a.vx),
            a.omega + u * (b.omega - a.omega),
        )

    def relative_to_start(self) -> Trajectory:
        """The same motion starting at the origin facing +x (how a command file is planned)."""
        s = self.start
        c, n = math.cos(-s.heading), math.sin(-s.heading)
        return Trajectory(
            self.name,
            tuple(
                RefState(
                    r.t,
                    c * (r.x - s.x) - n * (r.y - s.y),
                    n * (r.x - s.x) + c * (r.y - s.y),
                    r.heading - s.heading,
                    r.vx,
                    r.omega,
                )
                for r in self.states
            ),
        )


# -- commands -------------------------------------------------------------------------------------


def _step_speeds(a: RefState, b: RefState, dt: float) -> tuple[float, float]:
    """(vx, omega) held for ``dt`` that drive from ``a``'s pose to ``b``'s along an arc: the arc
    through both (its length from the chord and the turn), backwards when ``b`` lies behind."""
    turn = math.remainder(b.heading - a.heading, math.tau)
    dx, dy = b.x - a.x, b.y - a.y
    chord = math.hypot(dx, dy)
    half = turn / 2
    length = chord if abs(half) < 1e-9 else chord * half / math.sin(half)
    if dx * math.cos(a.heading + half) + dy * math.sin(a.heading + half) < 0:
        length = -length
    return length / dt, turn / dt


def to_commands(trajectory: Trajectory) -> list[PathCommand]:
    """One command per sample interval: the speeds that drive the arc from one sampled pose to
    the next in that time, so the commands integrate to the planned poses, rounded to the
    wire's resolution and merged with the one before where equal (up to 65,535 ms)."""
    commands: list[PathCommand] = []
    states = trajectory.states
    for a, b in itertools.pairwise(states):
        ms = round((b.t - a.t) * 1000)
        if ms <= 0:
            continue
        vx, omega = _step_speeds(a, b, ms / 1000)
        vx = round(vx, _WIRE_DIGITS) + 0.0  # + 0.0: no -0.0
        omega = round(omega, _WIRE_DIGITS) + 0.0
        last = commands[-1] if commands else None
        if (
            last is not None
            and (last.vx, last.omega) == (vx, omega)
            and last.duration_ms + ms <= MAX_DURATION_MS
        ):
            commands[-1] = PathCommand(vx, omega, last.duration_ms + ms)
        else:
            commands.append(PathCommand(vx, omega, ms))
    if not commands:
        raise ValueError(f"{trajectory.name}: the trajectory is shorter than one tick")
    return commands


def _toward(value: float, target: float, step: float | None) -> float:
    if step is None:
        return target
    return value + max(-step, min(step, target - value))


def from_commands(
    commands: Sequence[PathCommand], limits: DriveLimits, name: str = "path", *, settle_s: float = 0.5
) -> Trajectory:
    """Where the robot drives when it runs ``commands`` from the origin facing +x, tick by tick
    as the robot does: at each 20 ms tick the command whose time it is, clamped to the speed
    limits, the speeds brought toward it at the acceleration limits and held for the tick; a
    stop (no ramp) after the last command; then ``settle_s`` at rest."""
    dt = SAMPLE_S
    accel = None if limits.max_accel_mps2 is None else limits.max_accel_mps2 * dt
    alpha = None if limits.max_alpha_radps2 is None else limits.max_alpha_radps2 * dt
    ends = list(accumulate(c.duration_ms for c in commands))
    x = y = heading = vx = omega = 0.0
    states = [RefState(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)]
    tick = 0
    while tick * dt * 1000 < ends[-1] - 1e-6:
        i = bisect.bisect_right(ends, tick * dt * 1000 + 1e-6)
        command = commands[i]
        vx = _toward(vx, max(-limits.max_vx_mps, min(limits.max_vx_mps, command.vx)), accel)
        omega = _toward(
            omega, max(-limits.max_omega_radps, min(limits.max_omega_radps, command.omega)), alpha
        )
        x, y, heading = _arc(x, y, heading, vx * dt, omega * dt)
        tick += 1
        states.append(RefState(round(tick * dt, 6), x, y, heading, vx, omega))
    for _ in range(round(settle_s / dt)):
        tick += 1
        states.append(RefState(round(tick * dt, 6), x, y, heading, 0.0, 0.0))
    return Trajectory(name, tuple(states))


def _arc(x: float, y: float, heading: float, ds: float, dtheta: float) -> tuple[float, float, float]:
    """The pose after driving ``ds`` along an arc turning ``dtheta`` (a twist's exponential)."""
    if abs(dtheta) < 1e-9:
        return x + ds * math.cos(heading), y + ds * math.sin(heading), heading
    r = ds / dtheta
    return (
        x + r * (math.sin(heading + dtheta) - math.sin(heading)),
        y - r * (math.cos(heading + dtheta) - math.cos(heading)),
        heading + dtheta,
    )


def sampled(name: str, total: float, state_at: Any) -> Trajectory:
    """``state_at(t) -> (x, y, heading, vx, omega)`` every tick over ``[0, total]``."""
    ticks = max(1, math.ceil(total / SAMPLE_S - 1e-9))
    states = []
    for k in range(ticks + 1):
        t = min(k * SAMPLE_S, total)
        states.append(RefState(round(k * SAMPLE_S, 6), *state_at(t)))
    return Trajectory(name, tuple(states))


def checked(name: str, trajectory: Trajectory) -> Trajectory:
    for s in trajectory.states:
        if not all(math.isfinite(v) for v in (s.x, s.y, s.heading, s.vx, s.omega)):
            raise PathError(name, None, f"the trajectory is not finite at {s.t:.2f} s")
    return trajectory
