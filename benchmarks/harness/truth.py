"""Where the robot went: the simulator's true pose, and the path geometry the benchmarks judge
a drive by.

:class:`FieldPose` reads the physics model's pose over the robot's own NetworkTables port;
:func:`watch_drive` samples it around a drive (:class:`Watched`: the end and the largest
deviation against a reference trajectory). :func:`plan_path` is a path as its commands
command it, exact arcs; :func:`relative` and :func:`deviation` compare paths.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bcnp.paths import PathCommand


class FieldPose:
    """A simulated robot's true pose (x, y, radians: the physics model's, published as
    ``/SmartDashboard/Field/Robot``) over NetworkTables on ``nt_port``, sampled in a thread."""

    def __init__(self, nt_port: int) -> None:
        import ntcore

        self.inst = ntcore.NetworkTableInstance.create()
        self.inst.startClient4("bcnp-field-pose")
        self.inst.setServer("127.0.0.1", nt_port)
        self.sub = self.inst.getDoubleArrayTopic("/SmartDashboard/Field/Robot").subscribe([])
        self.samples: list[tuple[float, float, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pose(self, timeout: float = 10.0) -> tuple[float, float, float]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.sub.get()
            if len(value) >= 3:
                return value[0], value[1], math.radians(value[2])
            time.sleep(0.02)
        raise RuntimeError("no pose from the simulator on NetworkTables")

    def record(self) -> None:
        with self._lock:
            self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            pose = self.pose()
            with self._lock:
                self.samples.append(pose)
            time.sleep(0.02)

    def finish(self) -> list[tuple[float, float, float]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            return list(self.samples)

    def close(self) -> None:
        import ntcore

        self.inst.stopClient()
        ntcore.NetworkTableInstance.destroy(self.inst)


# -- path geometry ------------------------------------------------------------------------------

#: A path as its x and y coordinates (metres).
Path2D = tuple[list[float], list[float]]
#: Between cases: the last controller has gone (link timeout) and the robot stands still.
PAUSE_S = 1.5
#: Truth still sampled after a case's host returns.
TAIL_S = 0.5


def relative(poses: Sequence[tuple[float, float, float]], origin: tuple[float, float, float]) -> Path2D:
    ox, oy, oh = origin
    c, s = math.cos(-oh), math.sin(-oh)
    xs = [c * (x - ox) - s * (y - oy) for x, y, _ in poses]
    ys = [s * (x - ox) + c * (y - oy) for x, y, _ in poses]
    return xs, ys


def deviation(driven: Path2D, commanded: Path2D) -> float:
    """The largest distance from a driven pose to the nearest point of the commanded polyline."""
    import numpy as np

    px, py = np.asarray(driven[0])[:, None], np.asarray(driven[1])[:, None]
    ax, ay = np.asarray(commanded[0][:-1])[None, :], np.asarray(commanded[1][:-1])[None, :]
    bx, by = np.asarray(commanded[0][1:])[None, :], np.asarray(commanded[1][1:])[None, :]
    dx, dy = bx - ax, by - ay
    norm = dx * dx + dy * dy
    safe = np.where(norm > 0, norm, 1.0)
    u = np.clip(((px - ax) * dx + (py - ay) * dy) / safe, 0.0, 1.0)
    u = np.where(norm > 0, u, 0.0)
    dist = np.hypot(ax + u * dx - px, ay + u * dy - py).min(axis=1)
    return float(dist.max())


def arcs(commands: Sequence[PathCommand], step: float) -> Iterator[tuple[float, float, float, float]]:
    """(seconds from the first command, x, y, heading) every ``step`` s along the path the
    commands command, each held for its duration as an exact arc, from the origin facing +x
    (the origin itself first)."""
    x = y = heading = t = 0.0
    yield t, x, y, heading
    for c in commands:
        left = c.duration_ms / 1000
        while left > 1e-12:
            dt = min(step, left)
            left -= dt
            t += dt
            ds, dtheta = c.vx * dt, c.omega * dt
            if abs(dtheta) < 1e-12:
                x, y = x + ds * math.cos(heading), y + ds * math.sin(heading)
            else:
                r = ds / dtheta
                x += r * (math.sin(heading + dtheta) - math.sin(heading))
                y -= r * (math.cos(heading + dtheta) - math.cos(heading))
                heading += dtheta
            yield t, x, y, heading


def plan_path(commands: Sequence[PathCommand], step: float = 0.005) -> tuple[Path2D, list[float]]:
    """The commanded path (:func:`arcs`), and each pose's time (seconds from the first command)."""
    ts, xs, ys, _ = (list(column) for column in zip(*arcs(commands, step), strict=True))
    return (xs, ys), ts


@dataclass
class Watched:
    """One drive watched through the simulator's true pose (:func:`watch_drive`)."""

    #: Every pose sampled (x, y, heading), the first where the robot stood at the start.
    poses: list[tuple[float, float, float]]
    seconds: float
    #: Why the drive ended early (``"LinkClosedError: ..."``), or ``""``.
    error: str

    @property
    def driven(self) -> Path2D:
        """The path driven, relative to the start pose (as a planned path is)."""
        return relative(self.poses, self.poses[0])

    def end_m(self, reference: Any) -> float:
        """Distance from where the robot ended to the end of ``reference`` (a Trajectory)."""
        xs, ys = self.driven
        return math.hypot(xs[-1] - reference.end.x, ys[-1] - reference.end.y)

    def end_rad(self, reference: Any) -> float:
        """Heading error at the end, against ``reference``'s end heading."""
        return abs(math.remainder(self.poses[-1][2] - self.poses[0][2] - reference.end.heading, math.tau))

    def deviation_m(self, reference: Any) -> float:
        """Largest distance from the driven path to ``reference``'s."""
        return deviation(self.driven, ([s.x for s in reference.states], [s.y for s in reference.states]))


def watch_drive(truth: FieldPose, drive: Callable[[], object]) -> Watched:
    """Runs ``drive()`` while ``truth`` samples the pose, then :data:`TAIL_S` more. A lost link
    (``LinkError``) ends the drive and is its ``error``."""
    from bcnp.host.link.client import LinkError

    origin = truth.pose()
    truth.record()
    start = time.monotonic()
    error = ""
    try:
        drive()
    except LinkError as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        seconds = time.monotonic() - start
        time.sleep(TAIL_S)
        poses = truth.finish()
    return Watched([origin, *poses], seconds, error)
