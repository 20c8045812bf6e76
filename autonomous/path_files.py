"""One mode per path file in ``AUTO_PATHS_DIR`` (``paths/``): "Path: square.csv", ...

Our own ``.csv`` and ``.json`` files are read when the robot starts (a file
that cannot be played is an error logged then). A PathPlanner ``.path`` or
Choreo ``.traj`` is planned into commands (``bcnp.paths``) only when
it is needed, because the planner libraries take a good part of a second to
import on a roboRIO: when the mode is selected while the robot is disabled
(robot.py asks each disabled tick; that one tick runs long, with the motors
off), or at the latest when autonomous starts.

The selector finds modes as the classes of this package's modules, through
``dir()`` and ``getattr()``, when the robot starts. A path file is a mode, so
this module makes one class per file (module ``__dir__`` and ``__getattr__``)
from the folder as it is at that moment: a file added before the robot
starts is a mode, and ``AUTO_PATHS_DIR`` is read then, not when this module
was first imported.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import ClassVar

import constants
from autonomous import PathMode
from bcnp.paths import PLANNER_SUFFIXES, SUFFIXES
from subsystems.link.bcnp_link import BcnpLink

__all__ = ["SUFFIXES", "PathFileMode"]


class PathFileMode(PathMode):
    """Plays ``FILE`` from the start of autonomous, while no controller holds the link. A
    controller that connects takes over at once (subsystems/link/local_path.py)."""

    FILE: ClassVar[Path]

    def __init__(self, link: BcnpLink) -> None:
        super().__init__(link)
        self.path, self.error = None, None
        self.prepared = False
        if self.FILE.suffix.lower() not in PLANNER_SUFFIXES:
            self.prepare()

    def prepare(self) -> None:
        """Reads (or plans) the file once."""
        if not self.prepared:
            self.prepared = True
            self._load(self.FILE)
            self.runs_queue = self.path is not None  # a path that cannot be played: stand still

    def on_enable(self) -> None:
        self.prepare()
        if self.path is None:
            self._refuse()
        else:
            self.path.start()

    def on_iteration(self, time_elapsed: float) -> None:
        if self.path is not None:
            self.path.feed()


def _modes() -> dict[str, type[PathFileMode]]:
    folder = Path(constants.AUTO_PATHS_DIR)
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in SUFFIXES) if folder.is_dir() else []
    return _classes(tuple(files))


@functools.cache
def _classes(files: tuple[Path, ...]) -> dict[str, type[PathFileMode]]:
    """The same files give the same classes: dir() and each getattr() ask again."""
    return {
        f"PathFile_{file.name}": type(
            f"PathFile_{file.name}", (PathFileMode,), {"MODE_NAME": f"Path: {file.name}", "FILE": file}
        )
        for file in files
    }


def __dir__() -> list[str]:
    return sorted([*globals(), *_modes()])


def __getattr__(name: str) -> type[PathFileMode]:
    mode = _modes().get(name)
    if mode is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return mode
