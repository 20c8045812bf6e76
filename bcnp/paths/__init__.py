"""Paths: what a robot should drive, from the files teams write, as timed drive commands or a trajectory.

* :mod:`~bcnp.paths.commands`: command files (CSV, JSON): ``vx, omega, durationMs``
  rows, read with the standard library alone (the robot's autonomous modes read them);
* :mod:`~bcnp.paths.trajectory`: :class:`DriveLimits`, :class:`Trajectory` sampled
  every 20 ms robot tick (:data:`SAMPLE_S`), :func:`to_commands` and :func:`from_commands`;
* :mod:`~bcnp.paths.pathplanner` (``.path``) and :mod:`~bcnp.paths.choreo` (``.traj``):
  planner files, through the planners' own libraries, imported only when one is read.

:func:`load_path` and :func:`load_trajectory` are the one place that picks a
reader by suffix; the robot and the host tools both read paths through them.
Every problem is one :class:`PathError` naming the file (and the line where
there is one).
"""

from __future__ import annotations

from pathlib import Path

from .commands import COMMAND_SUFFIXES, MAX_DURATION_MS, PathCommand, PathError, parse_path, read_commands
from .trajectory import SAMPLE_S, DriveLimits, RefState, Trajectory, from_commands, to_commands

__all__ = [
    "COMMAND_SUFFIXES",
    "MAX_DURATION_MS",
    "PLANNER_SUFFIXES",
    "SAMPLE_S",
    "SUFFIXES",
    "DriveLimits",
    "PathCommand",
    "PathError",
    "RefState",
    "Trajectory",
    "from_commands",
    "is_planned",
    "load_path",
    "load_trajectory",
    "parse_path",
    "to_commands",
]

#: Planner files: PathPlanner paths and Choreo trajectories.
PLANNER_SUFFIXES = (".path", ".traj")
#: Every path file suffix this package reads.
SUFFIXES = (*COMMAND_SUFFIXES, *PLANNER_SUFFIXES)


def is_planned(path: str | Path) -> bool:
    """Whether ``path`` is a planner file (a trajectory to plan into commands)."""
    return Path(path).suffix.lower() in PLANNER_SUFFIXES


def load_trajectory(
    path: str | Path, limits: DriveLimits | None = None, *, settings: str | Path | None = None
) -> Trajectory:
    """Any path file as a :class:`Trajectory`: a PathPlanner ``.path`` generated with its
    project's settings (``settings``: another settings file) or ``limits``; a Choreo
    ``.traj`` as planned; a command file driven through ``limits`` (:func:`from_commands`)."""
    file = Path(path)
    suffix = file.suffix.lower()
    if settings is not None and suffix != ".path":
        raise PathError(str(file), None, "PathPlanner settings apply to a PathPlanner .path only")
    if suffix == ".path":
        from .pathplanner import load_pathplanner

        return load_pathplanner(file, limits, settings=settings)
    if suffix == ".traj":
        from .choreo import load_choreo

        return load_choreo(file)
    return from_commands(read_commands(file), limits or DriveLimits(), file.stem)


def load_path(path: str | Path, limits: DriveLimits | None = None) -> list[PathCommand]:
    """Any path file as timed drive commands: a command file as written; a planner file
    planned into 20 ms commands (with ``limits`` for a PathPlanner project without settings)."""
    if not is_planned(path):
        return read_commands(path)
    try:
        return to_commands(load_trajectory(path, limits))
    except PathError:
        raise
    except ValueError as exc:
        raise PathError(str(path), None, str(exc)) from None
