"""On target: does the robot drive what it is commanded when the drivetrain is not the model?

    python -m benchmarks.on_target [--json PATH] [--image PNG | --no-image]
        [--wiring kitbot,sparkmax,talonfx] [--disturbance none,weak,scrub,sag,mass,all]
        [--device ideal,documented] [--delay-ms 0[,50,100,150]]
        [--paths arc-left,arc-right,figure8[,s-curve]]
        [--modes open,follow[,follow-wheels]] [--links clean[,drop]] [--repeat N]

For each wiring (``BCNP_DRIVETRAIN``, :data:`WIRINGS`) x disturbance (``sim.settings.Disturbances``,
:data:`DISTURBANCES`) x device models (``BCNP_SIM_DEVICE``: ``ideal``, exact sensors read at
once and REVLib's own simulation of the SPARK MAX loop, or ``documented``, the devices as
their makers document them: the SPARK MAX firmware's loop, REV's velocity filter and CAN
frames, the FPGA's encoder rate, the PWM deadband, a noisy gyro; the TalonFX wiring runs CTRE's
own firmware either way, so its ``ideal`` is not run twice: :data:`ONE_DEVICE_MODEL`) x extra
velocity delay
(``BCNP_SIM_VELOCITY_DELAY_MS``, on top of the filters: the delay sweep) it starts one
headless simulator (:class:`benchmarks.harness.sim.SimRobot`) and drives in it, one
after the other, pausing between them:

* ``arc-left``: a planned 4 s arc, as a planner (Choreo, PathPlanner) sends it:
  20 ms commands, speed up at 1.43 m/s² to 1 m/s and down again to rest at 4 s
  (3.3 m), turning 0.8 rad/s per m/s (2.64 rad);
* ``arc-right``: the same turning right;
* ``figure8``: ``paths/figure8.csv`` (12.6 s);
* ``s-curve`` (only when asked): ``paths/s_curve.path``, PathPlanner's, 4.6 s, as ``replay``
  turns it into commands;

each open loop (:class:`~bcnp.host.sessions.replay.Replay`) and closed loop as well
(:class:`~bcnp.host.sessions.follow.Follower`, ``replay --follow``) beside it: ``follow`` on the
robot's own pose (``Network/Pose`` over the simulator's NetworkTables, as ``replay
--follow`` follows when the robot offers it), ``follow-wheels`` on the wheel telemetry
alone (its fallback; not run unless asked). Open loop measures the robot's own loops: the
host only streams the commands. The path each is judged against is where the robot's
limits let it drive the commands (:func:`bcnp.paths.from_commands`, the trajectory
``--follow`` follows too). Each case on a clean link, and with ``--links clean,drop`` also
through a 1 s drop of the BCNP link (a partition in the fault proxy, :data:`DROP_S`) when
the path's time reaches half its length. ``--repeat N`` drives each case N times in its
simulator, one after the other: the table shows the first run, and a spread table after it
each case's end errors over the runs and its spread (the largest distance between two runs'
end positions, each relative to where its run began).

Truth is the simulator's own pose (``/SmartDashboard/Field/Robot``, the physics
model, over NetworkTables, :class:`benchmarks.harness.truth.FieldPose`), relative to where
the robot stood when the case began. Per case: the end position error (m), the
end heading error (rad) and the largest deviation (m: each true pose's distance
to the nearest point of the path). Targets (:data:`TARGETS`, printed beside the
table, never a pass/fail): open loop, the 4 s arcs, every wiring, end within
0.05 m on the ideal model; within 0.10 m and 0.05 rad with each disturbance and
with all together; ``--follow`` (on the robot's pose), the arcs, within
:data:`FOLLOW_TARGET_M` whatever the disturbance and the link, and never further
off than open loop on a clean link. Misses are listed after the table. Exit status
1 only when a case could not be driven (a lost link, a simulator that died).

NetworkTables: each simulator serves it on a port of its own (:class:`SimRobot`'s
``nt_port``), where :class:`FieldPose` reads its truth: no other simulator is ever read.

Run time, 2-core VM: about 45 s per (wiring, disturbance, device, delay) with the three
paths, both modes (each case runs in real time); the kitbot's and the SPARK MAX's 24 at no
extra delay take about 18 minutes, the TalonFX's 6 (documented devices only) 5.9 minutes
(2026-12-07). ``--wiring kitbot --disturbance none,weak`` takes 3 minutes. Writes
``docs/images/on-target.png`` (end error per case) unless told otherwise:
pass ``--image`` or ``--no-image`` when re-running a subset.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import constants
from bcnp.host.link.client import LinkError
from bcnp.paths import DriveLimits, PathCommand, Trajectory, from_commands, load_path
from benchmarks.harness import ROOT
from benchmarks.harness.rig import watched_drive
from benchmarks.harness.sim import SimRobot, wirings
from benchmarks.harness.truth import PAUSE_S, FieldPose, Path2D
from benchmarks.report import add_output_arguments, log, write_json
from sim import settings as sim_settings

IMAGE = ROOT / "docs" / "images" / "on-target.png"
FIGURE8 = ROOT / "paths" / "figure8.csv"
S_CURVE = ROOT / "paths" / "s_curve.path"

WIRINGS = wirings()  # kitbot, sparkmax, talonfx
DEVICES = sim_settings.DEVICE_MODES[::-1]  # ideal, documented
#: Wirings whose simulation is the same whatever the device models (``sim/talonfx.py``: CTRE's own
#: firmware either way): run once, with ``documented``; an ``ideal`` asked for is said and skipped.
ONE_DEVICE_MODEL = ("talonfx",)
#: Each disturbance field's variable.
DISTURBANCE_ENV = {
    "right_scale": sim_settings.RIGHT_SCALE,
    "scrub": sim_settings.SCRUB,
    "battery_ohms": sim_settings.BATTERY_OHMS,
    "mass_scale": sim_settings.MASS,
}
#: The arcs: top speed, turn rate at it (the curvature is constant), length, and how long
#: the speed takes to ramp up and down (3.3 m in 4 s).
ARC_VX_MPS = 1.0
ARC_OMEGA_RADPS = 0.8
ARC_MS = 4000
ARC_RAMP_MS = 700
ARC_STEP_MS = 20


def arc(turn: float) -> list[PathCommand]:
    """The planned arc: one command per 20 ms at the speed of the step's middle."""
    commands = []
    for start in range(0, ARC_MS, ARC_STEP_MS):
        t = start + ARC_STEP_MS / 2
        vx = ARC_VX_MPS * min(1.0, t / ARC_RAMP_MS, (ARC_MS - t) / ARC_RAMP_MS)
        commands.append(PathCommand(round(vx, 4), round(vx * turn / ARC_VX_MPS, 4), ARC_STEP_MS))
    return commands


#: ``s-curve``: ``paths/s_curve.path`` (PathPlanner, 4.6 s), its commands as ``replay`` makes
#: them; driven only when asked (a path no gain was tuned on).
PATHS = ("arc-left", "arc-right", "figure8", "s-curve")
DEFAULT_PATHS = PATHS[:3]
#: Each disturbance: the Disturbances fields it sets (DISTURBANCE_ENV names their variables).
DISTURBANCES: dict[str, dict[str, float]] = {
    "none": {},
    "weak": {"right_scale": 0.85},
    "scrub": {"scrub": 1.2},
    "sag": {"battery_ohms": 0.1},
    "mass": {"mass_scale": 1.3},
}
DISTURBANCES["all"] = {k: v for d in list(DISTURBANCES.values()) for k, v in d.items()}
#: What each disturbance is, in words.
DESCRIPTIONS = {
    "none": "the ideal model: the simulated chassis is what constants.py describes",
    "weak": "the right side gets 0.85 of the voltage its wiring applies (a dragging gearbox)",
    "scrub": "the chassis turns as if its track were 1.2 times wider (wheels scrubbing on carpet)",
    "sag": "a tired battery: 0.1 ohm internal resistance (WPILib's BatterySim: 0.02), "
    "the bus sags under the drive's current",
    "mass": "mass and moment of inertia 1.3 times the kit chassis'",
    "all": "all of weak, scrub, sag and mass at once",
}
#: Open loop, the 4 s arcs: (end position m, end heading rad) per disturbance (None: no target).
TARGETS: dict[str, tuple[float, float | None]] = {
    "none": (0.05, None),
    **{d: (0.10, 0.05) for d in DISTURBANCES if d != "none"},
}

MODES = ("open", "follow", "follow-wheels")
#: What each mode is, in the table's heads.
MODE_HEADS = {"open": "open loop", "follow": "`--follow`", "follow-wheels": "`--follow`, wheels only"}
#: The modes run unless ``--modes`` says otherwise.
DEFAULT_MODES = ("open", "follow")
#: ``--follow`` on the robot's pose, the arcs: end within this (m), every disturbance and link.
FOLLOW_TARGET_M = 0.05
#: The link: clean, or a drop of ``DROP_S`` s when the path's time reaches ``DROP_AT`` of it.
LINKS = ("clean", "drop")
DROP_S = 1.0
DROP_AT = 0.5


@dataclass
class Case:
    wiring: str
    disturbance: str
    device: str
    delay_ms: int
    path: str
    mode: str  # "open", "follow" (on the robot's pose) or "follow-wheels"
    link: str = "clean"  # or "drop"
    end_m: float = math.nan
    end_rad: float = math.nan
    max_deviation_m: float = math.nan
    seconds: float = math.nan
    outages: int = 0
    error: str | None = None
    driven: Path2D = field(default_factory=lambda: ([], []), repr=False)
    run: int = 0  # which of --repeat's runs

    @property
    def end_xy(self) -> tuple[float, float] | None:
        """Where the robot ended, relative to where the run began (None: nothing driven)."""
        xs, ys = self.driven
        return (xs[-1], ys[-1]) if xs else None

    @property
    def name(self) -> str:
        link = "" if self.link == "clean" else f" {self.link}"
        where = f"{self.wiring} {self.disturbance} {self.device} +{self.delay_ms} ms"
        return f"{where} {self.path}{link} {self.mode}"

    @property
    def column(self) -> str:
        return f"{self.device} {self.mode}"

    @property
    def row(self) -> tuple[str, str, int, str, str]:
        return (self.wiring, self.disturbance, self.delay_ms, self.link, self.path)

    def target(self) -> tuple[float, float | None] | None:
        """The targets this case has (an arc: open loop on a clean link, ``--follow`` on the
        robot's pose on any), else None."""
        if not self.path.startswith("arc"):
            return None
        if self.mode == "follow":
            return FOLLOW_TARGET_M, None
        if self.mode != "open" or self.link != "clean":
            return None
        return TARGETS[self.disturbance]

    def misses(self) -> list[str]:
        target = self.target()
        if target is None:
            return []
        metres, radians = target
        out = []
        if not self.end_m <= metres:
            out.append(f"end {self.end_m:.3f} m (target {metres:g} m)")
        if radians is not None and not self.end_rad <= radians:
            out.append(f"heading {self.end_rad:.3f} rad (target {radians:g} rad)")
        return out

    def report(self) -> dict[str, object]:
        return {
            "wiring": self.wiring,
            "disturbance": self.disturbance,
            "device": self.device,
            "delay_ms": self.delay_ms,
            "path": self.path,
            "mode": self.mode,
            "link": self.link,
            "end_m": round(self.end_m, 4),
            "end_rad": round(self.end_rad, 4),
            "max_deviation_m": round(self.max_deviation_m, 4),
            "seconds": round(self.seconds, 2),
            "outages": self.outages,
            "run": self.run,
            "error": self.error,
            "misses": self.misses(),
        }


def commands_of(path: str) -> list[PathCommand]:
    if path == "arc-left":
        return arc(ARC_OMEGA_RADPS)
    if path == "arc-right":
        return arc(-ARC_OMEGA_RADPS)
    if path == "figure8":
        return load_path(FIGURE8)
    if path == "s-curve":
        return load_path(S_CURVE, DriveLimits.from_constants(constants))
    raise ValueError(f"unknown path {path!r}")


def disturbance_env(disturbance: str) -> dict[str, str]:
    """The variables a disturbance sets."""
    return {DISTURBANCE_ENV[k]: f"{v:g}" for k, v in DISTURBANCES[disturbance].items()}


def environment(disturbance: str, device: str, delay_ms: int) -> dict[str, str]:
    """The robot's environment: every simulator variable set (empty: the default), so none
    leaks in from this process's environment, save those the launcher sets itself."""
    own = (sim_settings.AUTONOMOUS, sim_settings.NT_PORT, sim_settings.AUTO_MODE)
    env = {name: "" for name in sim_settings.VARIABLES if name not in own}
    env.update(disturbance_env(disturbance))
    env[sim_settings.DEVICE] = device
    env[sim_settings.VELOCITY_DELAY_MS] = str(delay_ms)
    return env


def worse_than_open_loop(cases: Sequence[Case]) -> list[str]:
    """``--follow`` (on the robot's pose) cases that ended further off than open loop did on
    the same link, path and robot (open loop through a drop never makes the drop up)."""
    out = []
    for case in cases:
        if case.mode != "follow":
            continue
        for other in cases:
            same = (other.row, other.device) == (case.row, case.device)
            if same and other.mode == "open" and case.end_m > other.end_m:
                out.append(f"{case.name}: end {case.end_m:.3f} m, open loop {other.end_m:.3f} m")
    return out


def run_case(
    case: Case,
    robot_port: int,
    nt_port: int,
    plan: tuple[list[PathCommand], Trajectory],
    limits: DriveLimits,
    truth: FieldPose,
    log: Callable[[str], object],
) -> None:
    """Drives ``case``: the follower on the robot's pose from its NetworkTables on ``nt_port``
    (mode ``follow``); through the fault proxy with a drop (link ``drop``)."""
    reference = plan[1]
    mode = "open" if case.mode == "open" else "follow"
    drop = (reference.total * DROP_AT, DROP_S) if case.link == "drop" else None
    watched, case.outages = watched_drive(
        truth,
        robot_port,
        mode,
        plan,
        limits,
        proxied=drop is not None,
        drop=drop,
        nt_port=nt_port if case.mode == "follow" else None,
    )
    case.seconds, case.driven = watched.seconds, watched.driven
    case.error = watched.error or case.error
    case.end_m, case.end_rad = watched.end_m(reference), watched.end_rad(reference)
    case.max_deviation_m = watched.deviation_m(reference)
    error = f" ({case.error})" if case.error else ""
    log(
        f"{case.name}: end {case.end_m:.3f} m, {case.end_rad:.3f} rad, "
        f"largest {case.max_deviation_m:.3f} m{error}"
    )


# -- the simulator ---------------------------------------------------------------------------


def run_combination(
    wiring: str,
    disturbance: str,
    device: str,
    delay_ms: int,
    cases: Sequence[Case],
    plans: dict[str, tuple[list[PathCommand], Trajectory]],
    limits: DriveLimits,
    tmp: Path,
    log: Callable[[str], object],
) -> None:
    """One simulator for the combination, reused by its cases (in order)."""
    robot = SimRobot(
        tmp / f"{wiring}-{disturbance}-{device}-{delay_ms}",
        drivetrain=wiring,
        env=environment(disturbance, device, delay_ms),
    )
    truth: FieldPose | None = None
    try:
        log(f"starting the headless sim: {wiring}, {disturbance}, {device} devices, +{delay_ms} ms ...")
        robot.start()
        robot.wait_ticking()
        truth = FieldPose(robot.nt_port)
        truth.pose()
        for case in cases:
            time.sleep(PAUSE_S)
            run_case(case, robot.port, robot.nt_port, plans[case.path], limits, truth, log)
            if not robot.alive():
                case.error = case.error or f"the robot died:\n{robot.output()}"
                break
    except (RuntimeError, OSError, LinkError) as exc:
        for case in cases:
            if math.isnan(case.end_m):
                case.error = case.error or f"{type(exc).__name__}: {exc}"
    finally:
        if truth is not None:
            truth.close()
        robot.close()


# -- output ----------------------------------------------------------------------------------


def _cell(case: Case | None) -> str:
    if case is None:
        return "—"
    if case.error and math.isnan(case.end_m):
        return "error"
    text = f"{case.end_m:.3f} / {case.end_rad:.3f} / {case.max_deviation_m:.3f}"
    if case.misses():
        text += " ✗"
    if case.error:
        text += " (error)"
    return text


def columns_of(cases: Sequence[Case]) -> list[str]:
    present = {c.column for c in cases}
    return [f"{device} {mode}" for device in DEVICES for mode in MODES if f"{device} {mode}" in present]


def table(cases: Sequence[Case]) -> str:
    """One row per (wiring, disturbance, extra delay, link, path), one column per device
    models and mode; each cell end (m) / end heading (rad) / largest deviation (m); ✗: an arc
    off its target."""
    columns = columns_of(cases)
    heads = {f"{d} {m}": f"{d} devices, {MODE_HEADS[m]}" for d in DEVICES for m in MODES}
    lines = [
        "| wiring | disturbance | extra delay | link | path | "
        + " | ".join(heads[c] for c in columns)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(columns),
    ]
    rows: list[tuple[str, str, int, str, str]] = []
    for c in cases:
        if c.row not in rows:
            rows.append(c.row)
    for row in rows:
        cells = []
        for column in columns:
            match = [c for c in cases if c.row == row and c.column == column]
            cells.append(_cell(match[0] if match else None))
        wiring, disturbance, delay_ms, link, path = row
        lines.append(
            f"| {wiring} | {disturbance} | {delay_ms} ms | {link} | {path} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def spreads(cases: Sequence[Case]) -> dict[str, tuple[int, float, float, float]]:
    """Each case driven more than once: its runs, its smallest and largest end error (m) and
    its spread (m: the largest distance between two runs' end positions)."""
    runs: dict[str, list[Case]] = {}
    for case in cases:
        if case.end_xy is not None and not case.error:
            runs.setdefault(case.name, []).append(case)
    out = {}
    for name, same in runs.items():
        if len(same) < 2:
            continue
        ends = [c.end_xy for c in same if c.end_xy is not None]
        spread = max(math.dist(a, b) for a in ends for b in ends)
        errors = [c.end_m for c in same]
        out[name] = (len(same), min(errors), max(errors), spread)
    return out


def spread_table(cases: Sequence[Case]) -> str:
    lines = ["| case | runs | end error, least to most (m) | spread (m) |", "|---|---|---|---|"]
    for name, (runs, least, most, spread) in spreads(cases).items():
        lines.append(f"| {name} | {runs} | {least:.3f} to {most:.3f} | {spread:.3f} |")
    return "\n".join(lines)


def targets_text() -> str:
    lines = ["Targets (open loop on a clean link, the 4 s arcs, every wiring; not a pass/fail):"]
    for name, (metres, radians) in TARGETS.items():
        heading = f" and {radians:g} rad" if radians is not None else ""
        lines.append(f"  {name:<6} end within {metres:g} m{heading}")
    lines.append(
        f"  --follow (on the robot's pose), the arcs: end within {FOLLOW_TARGET_M:g} m, every "
        "disturbance and link, and never further off than open loop"
    )
    return "\n".join(lines)


def draw(cases: Sequence[Case], output: Path, title: str) -> None:
    """End position error per case: one panel per (path, wiring), a group of bars per
    disturbance, one bar per device models and mode; the arcs' open-loop targets dashed. With a
    delay sweep, the cases at the least extra delay; with a drop, those on a clean link (the
    table has the rest)."""
    least = min(c.delay_ms for c in cases)
    cases = [c for c in cases if c.delay_ms == least]
    if any(c.link == "clean" for c in cases):
        cases = [c for c in cases if c.link == "clean"]
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    wirings = [w for w in WIRINGS if any(c.wiring == w for c in cases)]
    paths = [p for p in PATHS if any(c.path == p for c in cases)]
    disturbances = [d for d in DISTURBANCES if any(c.disturbance == d for c in cases)]
    columns = columns_of(cases)
    colors = {
        "ideal open": "tab:gray",
        "ideal follow": "tab:olive",
        "ideal follow-wheels": "tab:brown",
        "documented open": "tab:blue",
        "documented follow": "tab:green",
        "documented follow-wheels": "tab:red",
    }
    labels = {c: f"{c.split()[0]} devices, {MODE_HEADS[c.split()[1]].strip('`')}" for c in colors}
    fig = Figure(figsize=(5.5 * len(wirings) + 1, 3.6 * len(paths) + 0.8), dpi=90, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(paths), len(wirings), squeeze=False)
    width = 0.8 / max(1, len(columns))
    for row, path in enumerate(paths):
        for col, wiring in enumerate(wirings):
            ax = axes[row][col]
            for k, column in enumerate(columns):
                xs, ys = [], []
                for i, disturbance in enumerate(disturbances):
                    match = [
                        c
                        for c in cases
                        if (c.wiring, c.disturbance, c.path, c.column) == (wiring, disturbance, path, column)
                    ]
                    if match and not math.isnan(match[0].end_m):
                        xs.append(i + (k - (len(columns) - 1) / 2) * width)
                        ys.append(max(match[0].end_m, 1e-3))
                ax.bar(xs, ys, width, color=colors[column], label=labels[column])
                for x, y in zip(xs, ys, strict=True):
                    ax.text(x, y * 1.1, f"{y:.3f}", ha="center", va="bottom", rotation=90, fontsize=6)
            if path.startswith("arc"):
                for i, disturbance in enumerate(disturbances):
                    metres = TARGETS[disturbance][0]
                    label = "open-loop target" if i == 0 else None
                    ax.plot([i - 0.45, i + 0.45], [metres, metres], "k--", lw=1, label=label)
            ax.set_yscale("log")
            ax.set_ylim(1e-3, 10)
            ax.set_xticks(range(len(disturbances)), disturbances)
            ax.set_ylabel("end position error (m)")
            ax.set_title(f"{path}, {wiring}", fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=len(names), fontsize=8)
    fig.suptitle(title, fontsize=10)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, format="png")


def commit() -> str:
    """The commit measured (with ``+changes`` when the work tree differs from it)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def _choices(text: str, allowed: Sequence[str], what: str) -> list[str]:
    chosen = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in chosen if t not in allowed]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"{what}: expected some of {','.join(allowed)}, got {text!r}")
    return [a for a in allowed if a in chosen]


def _delays(text: str) -> list[int]:
    try:
        delays = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        delays = []
    if not delays or any(not 0 <= d <= 1000 for d in delays):
        raise argparse.ArgumentTypeError(f"--delay-ms: expected whole ms in 0..1000, got {text!r}")
    return delays


def _runs(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 20:
        raise argparse.ArgumentTypeError(f"--repeat: expected a whole number of runs in 1..20, got {text!r}")
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="How well the robot drives what it is commanded when the simulated drivetrain "
        "differs from the model: arcs and the figure-8, ideal against documented devices, open loop "
        "and --follow.",
    )
    add_output_arguments(parser, IMAGE)
    # One case's cell can be re-run alone: each dimension takes a comma-separated subset.
    subsets: dict[str, Sequence[str]] = {
        "--wiring": WIRINGS,
        "--disturbance": list(DISTURBANCES),
        "--device": DEVICES,
        "--paths": PATHS,
        "--modes": MODES,
        "--links": LINKS,
    }
    defaults: dict[str, Sequence[str]] = {
        "--modes": DEFAULT_MODES,
        "--links": ("clean",),
        "--paths": DEFAULT_PATHS,
    }
    for flag, choices in subsets.items():
        default = defaults.get(flag, choices)
        parser.add_argument(
            flag,
            type=lambda t, c=choices, f=flag: _choices(t, c, f),
            default=list(default),
            help=f"comma-separated, of {','.join(choices)} (default {','.join(default)})",
        )
    parser.add_argument(
        "--repeat",
        type=_runs,
        default=1,
        help="drive each case this many times, one after the other in its simulator, and print "
        "each case's spread (default 1)",
    )
    parser.add_argument(
        "--delay-ms",
        type=_delays,
        default=[0],
        help="comma-separated extra velocity delays in ms (BCNP_SIM_VELOCITY_DELAY_MS; default 0)",
    )
    args = parser.parse_args(argv)

    for disturbance in args.disturbance:  # the simulator would refuse a bad value; say so first
        sim_settings.read(disturbance_env(disturbance))
    limits = DriveLimits.from_constants(constants)
    plans: dict[str, tuple[list[PathCommand], Trajectory]] = {}
    for path in args.paths:
        commands = commands_of(path)
        plans[path] = (commands, from_commands(commands, limits, path))
    measured_at = commit()
    began = time.monotonic()
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="bcnp-on-target-") as tmp:
        for wiring in args.wiring:
            devices = list(args.device)
            if wiring in ONE_DEVICE_MODEL and "ideal" in devices:
                devices.remove("ideal")
                log(f"{wiring}: its ideal devices are its documented ones (the same firmware): run once")
                if "documented" not in devices:
                    devices.append("documented")
            for disturbance in args.disturbance:
                for device in devices:
                    for delay_ms in args.delay_ms:
                        mine = [
                            Case(wiring, disturbance, device, delay_ms, path, mode, link, run=run)
                            for run in range(args.repeat)
                            for link in args.links
                            for path in args.paths
                            for mode in args.modes
                        ]
                        cases += mine
                        run_combination(
                            wiring, disturbance, device, delay_ms, mine, plans, limits, Path(tmp), log
                        )
    seconds = time.monotonic() - began

    date = time.strftime("%Y-%m-%d", time.gmtime())
    arc = plans.get("arc-left", plans.get("arc-right"))
    print(f"On target, {date}, commit {measured_at}, {seconds / 60:.1f} min")
    print(
        f"arcs: up to {ARC_VX_MPS:g} m/s, ±{ARC_OMEGA_RADPS:g} rad/s per m/s, {ARC_MS / 1000:g} s,"
        f" ramps of {ARC_RAMP_MS} ms"
        + (f" ({arc[1].end.t:.2f} s with the settle)" if arc else "")
        + f"; figure8: {FIGURE8.relative_to(ROOT)}"
    )
    for name in args.disturbance:
        env = " ".join(f"{k}={v}" for k, v in disturbance_env(name).items())
        print(f"  {name:<6} {DESCRIPTIONS[name]}" + (f" ({env})" if env else ""))
    print("Each cell: end position error (m) / end heading error (rad) / largest deviation from the path (m)")
    first = [c for c in cases if c.run == 0]
    print(table(first))
    if args.repeat > 1:
        print(f"Spread over {args.repeat} runs of each case:")
        print(spread_table(cases))
    print(targets_text())
    runs = (lambda c: f" (run {c.run + 1})") if args.repeat > 1 else (lambda c: "")
    misses = [f"{c.name}{runs(c)}: {', '.join(c.misses())}" for c in cases if c.misses()]
    if misses:
        print("Off target (✗):")
        for miss in misses:
            print(f"  {miss}")
    worse = worse_than_open_loop(first)
    if worse:
        print("--follow further off than open loop:")
        for line in worse:
            print(f"  {line}")
    errors = [f"{c.name}: {c.error}" for c in cases if c.error]
    for error in errors:
        print(f"ERROR: {error}")
    if args.json:
        write_json(
            {
                "date": date,
                "commit": measured_at,
                "seconds": round(seconds, 1),
                "arc": {"vx": ARC_VX_MPS, "omega": ARC_OMEGA_RADPS, "duration_ms": ARC_MS},
                "disturbances": {d: DISTURBANCES[d] for d in args.disturbance},
                "targets": {d: {"end_m": m, "end_rad": r} for d, (m, r) in TARGETS.items()},
                "cases": [c.report() for c in cases],
                "spreads": {
                    name: {"runs": n, "least_m": round(a, 4), "most_m": round(b, 4), "spread_m": round(d, 4)}
                    for name, (n, a, b, d) in spreads(cases).items()
                },
                "worse_than_open_loop": worse,
                "errors": errors,
            },
            args.json,
        )
    if not args.no_image:
        draw(first, args.image, f"End position error per case, headless sim, {date}, commit {measured_at}")
        log(f"figure: {args.image}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
