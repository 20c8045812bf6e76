"""A reference trajectory: where the robot should be, and how fast it should go, over time.

Planned paths (PathPlanner, Choreo) and command files alike can be seen as a
list of :class:`RefState` sampled in time order; the closed-loop follower
tracks one.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RefState"]


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
