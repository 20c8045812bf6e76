"""``plot``: where the robot was told to go against where it went, from a replay's telemetry CSV.

Host only: needs ``matplotlib`` (the ``host`` extra); the robot never imports
this module.

* Commanded path: the scheduled ``cmdVx``/``cmdOmega`` of each row integrated
  over the robot's sample times (``timestampMs``).
* Driven path: differential-drive odometry from the wheel positions
  (``leftPosition``/``rightPosition``): heading from the wheel difference over
  the track width, each step an exact arc.

Both start at the origin facing +x.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...defaults import KITBOT_TRACK_WIDTH_M
from ..sessions.recorder import COMMAND_COLUMNS, TELEMETRY_COLUMNS, TIME_COLUMN

__all__ = ["DEFAULT_TRACK_WIDTH_M", "PlotError", "Run", "integrate", "load_run", "odometry", "plot_run"]

#: The simulated kit-of-parts chassis' track width.
DEFAULT_TRACK_WIDTH_M = KITBOT_TRACK_WIDTH_M
REQUIRED = (TIME_COLUMN, *TELEMETRY_COLUMNS, *COMMAND_COLUMNS)


class PlotError(ValueError):
    """A telemetry file that cannot be plotted: ``file[:line]: reason``."""


@dataclass
class Run:
    """The columns of a telemetry CSV, as floats."""

    file: str
    columns: dict[str, list[float]]

    def __len__(self) -> int:
        return len(self.columns[TIME_COLUMN])

    def __getitem__(self, name: str) -> list[float]:
        return self.columns[name]


def load_run(path: str | Path) -> Run:
    file = str(path)
    try:
        f = open(path, newline="", encoding="utf-8-sig")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise PlotError(f"{file}: no such file") from None
    except OSError as exc:
        raise PlotError(f"{file}: {exc.strerror or exc}") from None
    with f:
        reader = csv.reader(f)
        try:
            header = next(reader, None)
            if header is None:
                raise PlotError(f"{file}: empty file (no header line)")
            header = [h.strip() for h in header]
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise PlotError(
                    f"{file}:1: missing column(s) {', '.join(missing)} "
                    "(expected a telemetry CSV written by `python -m bcnp replay --telemetry`)"
                )
            index = {name: header.index(name) for name in REQUIRED}
            columns: dict[str, list[float]] = {name: [] for name in REQUIRED}
            for row in reader:
                if not row or all(not cell.strip() for cell in row):
                    continue
                for name, i in index.items():
                    try:
                        value = float(row[i])
                    except (IndexError, ValueError):
                        cell = row[i] if i < len(row) else "<missing>"
                        where = f"{file}:{reader.line_num}"
                        raise PlotError(f"{where}: {name} is not a number: {cell!r}") from None
                    if not math.isfinite(value):
                        raise PlotError(f"{file}:{reader.line_num}: {name} is not finite: {value}")
                    columns[name].append(value)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise PlotError(f"{file}: not a CSV file ({exc})") from None
    if len(columns[TIME_COLUMN]) < 2:
        raise PlotError(f"{file}: fewer than 2 telemetry rows: nothing to plot")
    return Run(file, columns)


Path2D = tuple[list[float], list[float], list[float]]  # x, y, heading


def odometry(left: Sequence[float], right: Sequence[float], track_width: float) -> Path2D:
    """Pose after each sample from cumulative wheel distances (metres)."""
    xs, ys, headings = [0.0], [0.0], [0.0]
    x = y = heading = 0.0
    for i in range(1, len(left)):
        dl, dr = left[i] - left[i - 1], right[i] - right[i - 1]
        x, y, heading = _arc(x, y, heading, (dl + dr) / 2, (dr - dl) / track_width)
        xs.append(x)
        ys.append(y)
        headings.append(heading)
    return xs, ys, headings


def integrate(times_s: Sequence[float], vx: Sequence[float], omega: Sequence[float]) -> Path2D:
    """Pose after each sample from velocities held over each interval."""
    xs, ys, headings = [0.0], [0.0], [0.0]
    x = y = heading = 0.0
    for i in range(1, len(times_s)):
        dt = times_s[i] - times_s[i - 1]
        x, y, heading = _arc(x, y, heading, vx[i - 1] * dt, omega[i - 1] * dt)
        xs.append(x)
        ys.append(y)
        headings.append(heading)
    return xs, ys, headings


def _arc(x: float, y: float, heading: float, ds: float, dtheta: float) -> tuple[float, float, float]:
    if abs(dtheta) < 1e-9:
        return x + ds * math.cos(heading), y + ds * math.sin(heading), heading
    radius = ds / dtheta
    new = heading + dtheta
    dx = radius * (math.sin(new) - math.sin(heading))
    dy = -radius * (math.cos(new) - math.cos(heading))
    return x + dx, y + dy, new


def length(xs: Sequence[float], ys: Sequence[float]) -> float:
    return sum(math.hypot(xs[i] - xs[i - 1], ys[i] - ys[i - 1]) for i in range(1, len(xs)))


@dataclass(frozen=True)
class PlotResult:
    output: Path
    rows: int
    driven_length_m: float
    commanded_length_m: float
    end_gap_m: float  # distance between the two paths' end points


def plot_run(run: Run, output: str | Path, track_width: float = DEFAULT_TRACK_WIDTH_M) -> PlotResult:
    """Draws the run to a PNG: paths (left), vx and omega against time (right)."""
    if track_width <= 0:
        raise PlotError(f"track width must be > 0 m, got {track_width}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    robot_t = [ms / 1000 for ms in run["timestampMs"]]
    driven = odometry(run["leftPosition"], run["rightPosition"], track_width)
    commanded = integrate(robot_t, run["cmdVx"], run["cmdOmega"])
    t = run[TIME_COLUMN]
    measured_vx = [(lv + rv) / 2 for lv, rv in zip(run["leftVelocity"], run["rightVelocity"], strict=True)]
    measured_w = [
        (rv - lv) / track_width for lv, rv in zip(run["leftVelocity"], run["rightVelocity"], strict=True)
    ]

    fig = Figure(figsize=(12, 6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 2, width_ratios=(1.15, 1))
    ax_path = fig.add_subplot(grid[:, 0])
    ax_vx = fig.add_subplot(grid[0, 1])
    ax_w = fig.add_subplot(grid[1, 1], sharex=ax_vx)

    ax_path.plot(commanded[0], commanded[1], "--", color="tab:blue", lw=2, label="commanded (integrated)")
    ax_path.plot(driven[0], driven[1], "-", color="tab:orange", lw=2, label="driven (wheel odometry)")
    ax_path.plot([0], [0], "o", color="black", label="start")
    ax_path.set_aspect("equal", adjustable="datalim")
    ax_path.set_xlabel("x (m)")
    ax_path.set_ylabel("y (m)")
    ax_path.grid(True, alpha=0.3)
    ax_path.legend(loc="best")
    ax_path.set_title("Path")

    ax_vx.step(t, run["cmdVx"], where="post", color="tab:blue", ls="--", label="commanded")
    ax_vx.plot(t, measured_vx, color="tab:orange", label="measured")
    ax_vx.set_ylabel("vx (m/s)")
    ax_vx.grid(True, alpha=0.3)
    ax_vx.legend(loc="best")
    ax_w.step(t, run["cmdOmega"], where="post", color="tab:blue", ls="--", label="commanded")
    ax_w.plot(t, measured_w, color="tab:orange", label="measured")
    ax_w.set_ylabel("omega (rad/s)")
    ax_w.set_xlabel("time since the first command was sent (s)")
    ax_w.grid(True, alpha=0.3)

    driven_len = length(driven[0], driven[1])
    commanded_len = length(commanded[0], commanded[1])
    gap = math.hypot(driven[0][-1] - commanded[0][-1], driven[1][-1] - commanded[1][-1])
    fig.suptitle(
        f"{Path(run.file).name}: {len(run)} samples, driven {driven_len:.2f} m, "
        f"commanded {commanded_len:.2f} m, ends {gap:.2f} m apart"
    )
    out = Path(output)
    try:
        fig.savefig(out, format="png")
    except OSError as exc:
        raise PlotError(f"{out}: cannot write ({exc.strerror or exc})") from None
    return PlotResult(out, len(run), driven_len, commanded_len, gap)
