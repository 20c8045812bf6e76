"""Trajectories from the planners teams use: PathPlanner ``.path`` files and Choreo ``.traj`` files.

A trajectory here is a :class:`Trajectory`: the planned robot state
(:class:`~bcnp.host.reference.RefState`: time, pose, chassis speeds) every
20 ms, one robot tick. :func:`to_commands` turns it into the timed drive
commands BCNP carries, one per tick, merged where two in a row are equal on
the wire; :func:`from_commands` goes the other way for our own CSV and JSON
path files (the commands integrated through the robot's speed and acceleration
limits), so the closed-loop follower can track any of them.

* **PathPlanner** (format ``2025.x``, what PathPlanner 2025 and 2026 write):
  the path is turned into a trajectory by robotpy-pathplannerlib with the
  robot's configuration: PathPlanner's ``settings.json`` when the project has
  one (beside the file, or one folder up, as PathPlanner lays out
  ``pathplanner/paths/X.path`` and ``pathplanner/settings.json``), otherwise
  :class:`DriveLimits` (the drivetrain constants). A holonomic (swerve)
  project is refused.
* **Choreo** (trajectory format version 3, what Choreo 2025 and 2026 write):
  a differential trajectory is read with Choreo's own library (choreolib);
  a swerve trajectory is refused.

Every problem is one :class:`~bcnp.host.paths.PathError` naming the file.
The planner libraries are imported only when such a file is read.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from ..defaults import KITBOT_TRACK_WIDTH_M
from .paths import MAX_DURATION_MS, PLANNER_SUFFIXES, PathCommand, PathError
from .reference import RefState

__all__ = [
    "PLANNER_SUFFIXES",
    "SAMPLE_S",
    "DriveLimits",
    "Trajectory",
    "from_commands",
    "load_choreo",
    "load_pathplanner",
    "load_trajectory",
    "to_commands",
]

#: One robot tick: the trajectory's sample period and the commands' length before merging.
SAMPLE_S = 0.02
#: The wire carries vx and omega as integers of 1/10,000.
_WIRE_DIGITS = 4
#: PathPlanner file format this reads (the major part of the file's ``version``).
_PATHPLANNER_FORMAT = "2025"


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
    def from_constants(cls, module: Any) -> DriveLimits:
        """From a project's ``constants`` module (the names ``constants.py`` uses); any name
        it lacks keeps its default."""
        names = {
            "track_width_m": "TRACK_WIDTH_M",
            "max_vx_mps": "MAX_VX_MPS",
            "max_omega_radps": "MAX_OMEGA_RADPS",
            "max_accel_mps2": "MAX_ACCEL_MPS2",
            "max_alpha_radps2": "MAX_ALPHA_RADPS2",
            "wheel_diameter_m": "WHEEL_DIAMETER_M",
            "gear_ratio": "GEAR_RATIO",
        }
        return cls(**{k: getattr(module, v) for k, v in names.items() if hasattr(module, v)})


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


# -- files ----------------------------------------------------------------------------------------


def _read_json(file: Path) -> tuple[str, Any]:
    name = str(file)
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise PathError(name, None, "no such file") from None
    except OSError as exc:
        raise PathError(name, None, exc.strerror or str(exc)) from None
    except UnicodeDecodeError:
        raise PathError(name, None, "not UTF-8 text") from None
    try:
        return text, json.loads(text)
    except json.JSONDecodeError as exc:
        raise PathError(name, exc.lineno, f"invalid JSON: {exc.msg}") from None


def load_trajectory(path: str | Path, limits: DriveLimits | None = None) -> Trajectory:
    """A ``.path`` (PathPlanner) or ``.traj`` (Choreo) file as a :class:`Trajectory`."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix == ".path":
        return load_pathplanner(file, limits)
    if suffix == ".traj":
        return load_choreo(file)
    raise PathError(str(file), None, f"not a planner file (expected {' or '.join(PLANNER_SUFFIXES)})")


def _sampled(name: str, total: float, state_at: Any) -> Trajectory:
    """``state_at(t) -> (x, y, heading, vx, omega)`` every tick over ``[0, total]``."""
    ticks = max(1, math.ceil(total / SAMPLE_S - 1e-9))
    states = []
    for k in range(ticks + 1):
        t = min(k * SAMPLE_S, total)
        states.append(RefState(round(k * SAMPLE_S, 6), *state_at(t)))
    return Trajectory(name, tuple(states))


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
    _, doc = _read_json(settings)
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
    _, doc = _read_json(file)
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
    return _checked(name, Trajectory(file.stem, tuple(states)))


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


def load_choreo(path: str | Path) -> Trajectory:
    """A differential Choreo trajectory (format version 3)."""
    file = Path(path)
    name = str(file)
    text, doc = _read_json(file)
    if not isinstance(doc, dict) or not isinstance(doc.get("trajectory"), dict):
        raise PathError(name, None, "not a Choreo trajectory (no 'trajectory' object)")
    version = doc.get("version")
    if version != 3:
        raise PathError(name, None, f"Choreo trajectory format {version!r}; this reads version 3")
    body = doc["trajectory"]
    samples = body.get("samples")
    kind = body.get("sampleType")
    if kind == "Swerve" or (
        isinstance(samples, list) and samples and isinstance(samples[0], dict) and "vy" in samples[0]
    ):
        raise PathError(
            name, None, "a swerve trajectory; this robot is a differential drive (Choreo: Differential)"
        )
    if not isinstance(samples, list) or not samples:
        raise PathError(name, None, "the trajectory has no samples (generate it in Choreo first)")

    import choreo

    if "name" not in doc:
        doc["name"] = file.stem
        text = json.dumps(doc)
    try:
        trajectory = choreo.load_differential_trajectory_string(text)
    except KeyError as exc:
        raise PathError(
            name, None, f"not a differential Choreo trajectory: a sample lacks {exc.args[0]!r}"
        ) from None
    except (TypeError, ValueError) as exc:
        raise PathError(name, None, f"bad Choreo trajectory: {exc}") from None
    times = [s.timestamp for s in trajectory.samples]
    if any(b < a for a, b in itertools.pairwise(times)):
        raise PathError(name, None, "the samples' times go backwards")

    def state_at(t: float) -> tuple[float, ...]:
        s = trajectory.sample_at(t)
        assert s is not None  # samples is not empty
        return float(s.x), float(s.y), float(s.heading), float(s.vl + s.vr) / 2, float(s.omega)

    return _checked(
        name, _sampled(file.stem, trajectory.get_total_time() - times[0], lambda t: state_at(t + times[0]))
    )


def _checked(name: str, trajectory: Trajectory) -> Trajectory:
    for s in trajectory.states:
        if not all(math.isfinite(v) for v in (s.x, s.y, s.heading, s.vx, s.omega)):
            raise PathError(name, None, f"the trajectory is not finite at {s.t:.2f} s")
    return trajectory
