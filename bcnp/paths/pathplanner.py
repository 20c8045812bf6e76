"""PathPlanner ``.path`` files (format ``2025.x``, what PathPlanner 2025 and 2026 write).

The path is turned into a trajectory by robotpy-pathplannerlib with the
robot's configuration: PathPlanner's ``settings.json`` when the project has one
(beside the file, or one folder up, as PathPlanner lays out
``pathplanner/paths/X.path`` and ``pathplanner/settings.json``), otherwise
:class:`~bcnp.paths.trajectory.DriveLimits` (the drivetrain constants). A
holonomic (swerve) project is refused. Every problem is one
:class:`~bcnp.paths.commands.PathError` naming the file; PathPlanner's library
and WPILib's math are imported only when a file is read.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .commands import PathError, read_json
from .trajectory import SAMPLE_S, DriveLimits, RefState, Trajectory, checked

__all__ = ["load_pathplanner"]

#: PathPlanner file format this reads (the major part of the file's ``version``).
_PATHPLANNER_FORMAT = "2025"


def _settings_file(file: Path, settings: Path | None) -> Path | None:
    if settings is not None:
        return settings
    for folder in (file.parent, file.parent.parent):
        candidate = folder / "settings.json"
        if candidate.is_file():
            return candidate
    return None


def _robot_config(limits: DriveLimits, settings: Path | None) -> Any:
    """PathPlanner's RobotConfig: from its settings file, else from ``limits``."""
    from pathplannerlib.config import ModuleConfig, RobotConfig
    from wpimath.system.plant import DCMotor

    if settings is None:
        gearbox = DCMotor.CIM(2).withReduction(limits.gear_ratio)
        # PathPlanner wants the speed the wheels reach at full output (it models the motor's
        # torque there), not the robot's clamp: 90 % of the geared free speed. The path's own
        # constraints set how fast it is planned.
        top_speed = 0.9 * gearbox.freeSpeed * limits.wheel_diameter_m / 2
        module = ModuleConfig(
            limits.wheel_diameter_m / 2,
            top_speed,
            limits.wheel_cof,
            gearbox,
            limits.current_limit_a,
            2,
        )
        return RobotConfig(limits.mass_kg, limits.moi_kg_m2, module, trackwidthMeters=limits.track_width_m)
    _, doc = read_json(settings)
    name = str(settings)
    try:
        if bool(doc.get("holonomicMode", False)):
            raise PathError(
                name, None, "a holonomic (swerve) PathPlanner project; this robot is a differential drive"
            )
        motors = {
            "krakenX60": DCMotor.krakenX60,
            "krakenX60FOC": DCMotor.krakenX60FOC,
            "falcon500": DCMotor.falcon500,
            "falcon500FOC": DCMotor.falcon500FOC,
            "vortex": DCMotor.neoVortex,
            "NEO": DCMotor.NEO,
            "CIM": DCMotor.CIM,
            "miniCIM": DCMotor.miniCIM,
        }
        motor = str(doc["driveMotorType"])
        if motor not in motors:
            raise PathError(name, None, f"unknown driveMotorType {motor!r}")
        module = ModuleConfig(
            float(doc["driveWheelRadius"]),
            float(doc["maxDriveSpeed"]),
            float(doc["wheelCOF"]),
            motors[motor](2).withReduction(float(doc["driveGearing"])),
            float(doc["driveCurrentLimit"]),
            2,
        )
        return RobotConfig(
            float(doc["robotMass"]),
            float(doc["robotMOI"]),
            module,
            trackwidthMeters=float(doc["robotTrackwidth"]),
        )
    except KeyError as exc:
        raise PathError(name, None, f"PathPlanner settings lack {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise PathError(name, None, f"bad PathPlanner settings: {exc}") from None


def load_pathplanner(
    path: str | Path, limits: DriveLimits | None = None, *, settings: str | Path | None = None
) -> Trajectory:
    """A PathPlanner path, generated into a trajectory (see the module docs)."""
    file = Path(path)
    name = str(file)
    _, doc = read_json(file)
    if not isinstance(doc, dict) or "waypoints" not in doc:
        raise PathError(name, None, "not a PathPlanner path (no waypoints)")
    version = str(doc.get("version", ""))
    if version.split(".")[0] != _PATHPLANNER_FORMAT:
        raise PathError(
            name, None, f"PathPlanner format {version or '?'}; this reads {_PATHPLANNER_FORMAT}.x"
        )
    config = _robot_config(
        limits or DriveLimits(), _settings_file(file, None if settings is None else Path(settings))
    )

    from pathplannerlib.path import PathPlannerPath
    from wpimath.kinematics import ChassisSpeeds

    try:
        planned = PathPlannerPath._fromJson(doc)  # what PathPlannerPath.fromPathFile parses with
        start = planned.getStartingDifferentialPose()
        trajectory = planned.generateTrajectory(ChassisSpeeds(), start.rotation(), config)
    except KeyError as exc:
        raise PathError(name, None, f"not a PathPlanner path: no {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError) as exc:
        raise PathError(name, None, f"PathPlanner could not make a trajectory of it: {exc}") from None

    total = trajectory.getTotalTimeSeconds()
    if not total > 0:
        raise PathError(
            name,
            None,
            "PathPlanner planned no motion: the robot it was given cannot move "
            "(check maxDriveSpeed, driveCurrentLimit and wheelCOF in its settings)",
        )
    try:
        curve = _BezierPath([_waypoint(w) for w in doc["waypoints"]])
    except (KeyError, TypeError, ValueError) as exc:
        raise PathError(name, None, f"bad waypoints: {exc}") from None
    reverse = bool(doc.get("reversed", False))
    ticks = max(1, math.ceil(total / SAMPLE_S - 1e-9))
    times = [min(k * SAMPLE_S, total) for k in range(ticks + 1)]
    speeds = [abs(trajectory.sample(t).linearVelocity) for t in times]
    travelled = [0.0]
    for k in range(1, len(times)):
        travelled.append(travelled[-1] + (speeds[k - 1] + speeds[k]) / 2 * (times[k] - times[k - 1]))
    # The planner's distance and the curve's length differ by its own sampling (under 1 %):
    # stretch the profile so the robot ends at the path's end.
    stretch = curve.length / travelled[-1] if travelled[-1] > 0 else 0.0
    sign = -1.0 if reverse else 1.0
    states: list[RefState] = []
    for k, _t in enumerate(times):
        x, y, tangent = curve.at(travelled[k] * stretch)
        heading = tangent + (math.pi if reverse else 0.0)
        omega = 0.0
        if states:
            heading = states[-1].heading + math.remainder(heading - states[-1].heading, math.tau)
            omega = (heading - states[-1].heading) / SAMPLE_S
        states.append(RefState(round(k * SAMPLE_S, 6), x, y, heading, sign * speeds[k] * stretch, omega))
    return checked(name, Trajectory(file.stem, tuple(states)))


def _waypoint(w: Any) -> tuple[tuple[float, float], tuple[float, float] | None, tuple[float, float] | None]:
    def point(p: Any) -> tuple[float, float] | None:
        return None if p is None else (float(p["x"]), float(p["y"]))

    anchor = point(w["anchor"])
    if anchor is None:
        raise ValueError("a waypoint has no anchor")
    return anchor, point(w["prevControl"]), point(w["nextControl"])


class _BezierPath:
    """A PathPlanner path's shape: cubic Bézier segments from each anchor through its next
    control and the next anchor's previous control, tabulated by arc length."""

    PER_SEGMENT = 400

    def __init__(self, waypoints: Sequence[tuple[Any, Any, Any]]) -> None:
        if len(waypoints) < 2:
            raise ValueError("a path needs at least 2 waypoints")
        pts: list[tuple[float, float]] = []
        for (p0, _, c0), (p3, c1, _) in itertools.pairwise(waypoints):
            c0 = c0 if c0 is not None else p0
            c1 = c1 if c1 is not None else p3
            for n in range(1 if pts else 0, self.PER_SEGMENT + 1):
                u = n / self.PER_SEGMENT
                a, b, c, d = (1 - u) ** 3, 3 * u * (1 - u) ** 2, 3 * u * u * (1 - u), u**3
                pts.append(
                    (
                        a * p0[0] + b * c0[0] + c * c1[0] + d * p3[0],
                        a * p0[1] + b * c0[1] + c * c1[1] + d * p3[1],
                    )
                )
        self.points = pts
        self.s = [0.0]
        for (ax, ay), (bx, by) in itertools.pairwise(pts):
            self.s.append(self.s[-1] + math.hypot(bx - ax, by - ay))
        self.length = self.s[-1]
        if self.length <= 0:
            raise ValueError("the path has no length")

    def at(self, distance: float) -> tuple[float, float, float]:
        """(x, y, direction of travel) ``distance`` along the path."""
        distance = max(0.0, min(self.length, distance))
        i = min(max(bisect.bisect_right(self.s, distance) - 1, 0), len(self.points) - 2)
        (ax, ay), (bx, by) = self.points[i], self.points[i + 1]
        seg = self.s[i + 1] - self.s[i]
        u = (distance - self.s[i]) / seg if seg > 0 else 0.0
        return ax + u * (bx - ax), ay + u * (by - ay), math.atan2(by - ay, bx - ax)
