"""The figure-8 over a field network: the headless sim driven through the fault proxy.

    python -m benchmarks.field [--seed S] [--json PATH] [--image PNG] [--drivetrain kitbot|sparkmax]
    python -m benchmarks.field --held N [--seed S] [--json PATH]

Starts the real robot program headless (``benchmarks.harness.sim.SimRobot``, one
process for every case) and replays ``paths/figure8.csv`` (252 commands of
50 ms, 12.6 s) from this process through a :class:`bcnp.host.proxy.fault_proxy.Proxy` to
it, four times: over TCP and over UDP, each (a) with no fault and (b) with a
field profile: 5 ms ± 3 ms latency and 7 Mbit/s each way, 1 % of UDP
datagrams lost, and one 1 s link drop (a proxy partition) when half the path's
time has passed. Each case has its own proxy, seeded.

Per case it reports:

* late: commands the robot started more than the 200 ms link timeout after
  the host's plan (from the robot's ``.wpilog``; the host plans in wall time);
  a case with any is listed off the plan;
* dropped: commands the replay dropped for an outage (``Replay.outages``);
* heal → link, heal → driving: from the link's return (the proxy's heal) to
  the host's new connection, and to the first command the robot started
  afterwards (its log);
* the final pose error and the largest deviation of the driven path from the
  commanded one. Driven: differential-drive odometry from the wheel positions
  in the robot's telemetry, as ``bcnp plot`` draws it. Commanded: the path's
  commands integrated on the host's schedule (the plan), so in a drop case the
  deviations include what the drop cost. Two deviations: cross-track (each
  driven pose's distance to the nearest point of the commanded path: the
  shape) and same-time (to where the plan was at the pose's host time: the
  shape and the timing). The final error is the distance between the two end
  points.

To tell which command the robot started, each command carries a tag in its
lowest wire digits: vx and omega travel as integers of 1/10,000, and each
command's pair is moved by a few of those units (``benchmarks.harness.judge.tag_paths``; for the
figure-8 at most 8 units, 0.0008 m/s and 0.0008 rad/s, averaging zero), so no
two commands of a path are alike. The robot logs each command as it starts
(``BCNP/Command/*``, after clamping, which leaves these values alone), and the
tag names it. The commanded path integrates the tagged commands, which are
what was sent.

``--held N`` runs other cases instead, all over UDP: N held drops, each with its
own proxy seed (:data:`HELD`: 10 ms ± 30 ms of latency, more jitter than the gap
between the host's datagrams; one 1.5 s drop at half time in which the proxy
holds the datagrams, then releases each with the latency and jitter again, so a
handshake sent late in the drop can overtake a command sent early), and one
case where only the robot's datagrams to the host are lost for 1 s (the robot
still holds the host's old port when the host dials again). Each reports, besides
the above, the datagrams the robot refused as an earlier controller's
(``BCNP/Refused`` in its log).

Writes the commanded and driven paths of the four default cases to
``docs/images/field-paths.png``. Exit status 1 when a command started late (or
more than 200 ms before its plan: a clock or matching error), a started
command matches no command of the plan, the replay raised, or the robot died.
"""

from __future__ import annotations

import argparse
import bisect
import math
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bcnp.defaults import KITBOT_TRACK_WIDTH_M
from bcnp.host.cli.plotting import odometry
from bcnp.host.link.client import LinkError, ReconnectPolicy
from bcnp.host.proxy.core.faults import Faults
from bcnp.host.proxy.fault_proxy import Proxy
from bcnp.host.sessions.core.replay import Schedule
from bcnp.host.sessions.recorder import TelemetryRecorder
from bcnp.paths import PathCommand, load_path
from benchmarks.harness import ROOT
from benchmarks.harness.judge import LATE_S, Plan, early, judge, late, spread, tag_offsets, tag_paths, unknown
from benchmarks.harness.rig import FIELD, Drop, Rig, recorded_replay
from benchmarks.harness.robotlog import LOG_WRITE_S, CommandStart, read_command_starts, read_strings
from benchmarks.harness.sim import SimRobot
from benchmarks.harness.truth import PAUSE_S, TAIL_S, Path2D, deviation, plan_path
from benchmarks.report import add_output_arguments, failed, log, write_json

PATH = ROOT / "paths" / "figure8.csv"
IMAGE = ROOT / "docs" / "images" / "field-paths.png"

#: One link drop of this long, when half of the path's time has passed.
DROP_S = 1.0
#: ``--held``: 10 ms ± 30 ms each way (the host sends a datagram every 20-50 ms), no loss,
#: and a drop of HELD_DROP_S in which UDP is held, then released in that jitter.
HELD = Faults(latency=0.010, jitter=0.030)
HELD_DROP_S = 1.5
#: ``--held``: the robot's datagrams to the host lost for this long (the host's still arrive;
#: ``--down-lost``).
DOWN_LOST_S = 1.0
#: How the robot's log names a datagram from an earlier controller's port (``BCNP/Refused``).
STALE = "from an earlier controller"


# -- paths ------------------------------------------------------------------------------------------


def driven_path(recorder: TelemetryRecorder, track_width: float) -> tuple[Path2D, list[float]]:
    """Wheel odometry over the recorded telemetry (sorted by the robot's time, repeats
    dropped), and each pose's host time."""
    columns = recorder.columns
    t_col, ms_col = columns.index("hostTimeS"), columns.index("timestampMs")
    l_col, r_col = columns.index("leftPosition"), columns.index("rightPosition")
    rows: dict[float, tuple[float | int, ...]] = {}
    for row in list(recorder.rows):
        rows.setdefault(float(row[ms_col]), row)
    ordered = [rows[k] for k in sorted(rows)]
    xs, ys, _ = odometry([float(r[l_col]) for r in ordered], [float(r[r_col]) for r in ordered], track_width)
    return (xs, ys), [float(r[t_col]) for r in ordered]


def same_time_deviation(
    driven: Path2D, times: Sequence[float], commanded: Path2D, commanded_times: Sequence[float]
) -> float:
    """The largest distance between a driven pose and where the plan was at the same host time
    (before the first command: its start; after the last: its end)."""
    import numpy as np

    t = np.asarray(times)
    x = np.interp(t, commanded_times, commanded[0])
    y = np.interp(t, commanded_times, commanded[1])
    return float(np.hypot(np.asarray(driven[0]) - x, np.asarray(driven[1]) - y).max())


def end_gap(driven: Path2D, commanded: Path2D) -> float:
    return math.hypot(driven[0][-1] - commanded[0][-1], driven[1][-1] - commanded[1][-1])


class DownLoss:
    """Called with a path's time like :class:`~benchmarks.harness.rig.Drop`: from ``at`` s on,
    every datagram and chunk from the robot to the host is lost for ``seconds`` (the host's
    still reach the robot). ``healed``: the wall time the robot's got through again."""

    def __init__(self, proxy: Proxy, at: float, seconds: float) -> None:
        self.proxy, self.at, self.seconds = proxy, at, seconds
        self.at_s: float | None = None
        self.healed: float | None = None
        self._timer: threading.Timer | None = None

    def __call__(self, elapsed: float) -> None:
        if self.at_s is not None or elapsed < self.at:
            return
        self.at_s = elapsed
        self.proxy.set_faults(Faults(loss=1.0), "down")
        self._timer = threading.Timer(self.seconds, self._heal)
        self._timer.start()

    def _heal(self) -> None:
        self.proxy.set_faults(Faults(), "down")
        self.healed = time.time()


def stale_count(text: str) -> int:
    """How many datagrams one ``BCNP/Refused`` record refused as an earlier controller's
    (a record may say "(and N more)")."""
    if STALE not in text:
        return 0
    more = re.search(r"\(and (\d+) more\)", text)
    return 1 + (int(more.group(1)) if more else 0)


# -- one case ---------------------------------------------------------------------------------------


@dataclass
class Case:
    transport: str  # "tcp" or "udp"
    profile: str  # "none", "field", "held" (UDP held through a drop, released reordered) or "down"
    seed: int = 0
    down_lost_s: float = DOWN_LOST_S
    commands: int = 0
    started: int = 0  # command starts the robot logged during the case
    late: int = 0
    worst_lateness_ms: float = math.nan
    unknown: int = 0  # starts no plan knows
    early: int = 0  # starts more than LATE_S before their plan: a clock or matching error
    outages: int = 0
    dropped: int = 0
    reconnects: int = 0
    outage_s: float = 0.0  # host's view: last heard to connected again
    drop_at_s: float | None = None  # host seconds from the first send
    back_to_link_ms: float | None = None  # heal to the host's new connection
    back_to_driving_ms: float | None = None  # heal to the first command the robot started
    final_error_m: float = math.nan
    max_deviation_m: float = math.nan  # cross-track: to the nearest point of the commanded path
    max_same_time_m: float = math.nan  # to where the plan was at that moment
    telemetry_rows: int = 0
    stale_refused: int | None = None  # datagrams the robot refused as an earlier controller's
    proxy: dict[str, int] = field(default_factory=dict)
    error: str = ""
    # not reported: what the figure and the checks need
    start_wall: float = field(default=0.0, repr=False)
    end_wall: float = field(default=0.0, repr=False)
    heal_wall: float | None = field(default=None, repr=False)
    plan: Plan | None = field(default=None, repr=False)
    commanded: Path2D = field(default=([], []), repr=False)
    driven: Path2D = field(default=([], []), repr=False)
    drop_span: tuple[int, int] | None = field(default=None, repr=False)  # driven poses during the drop

    @property
    def name(self) -> str:
        what = {
            "none": "no fault",
            "field": "field profile + 1 s drop",
            "held": f"held {HELD_DROP_S:g} s drop, seed {self.seed}",
            "down": f"robot→host lost {self.down_lost_s:g} s",
        }[self.profile]
        return f"{self.transport.upper()}, {what}"

    def report(self) -> dict[str, Any]:
        skip = {"start_wall", "end_wall", "heal_wall", "plan", "commanded", "driven", "drop_span"}
        return {k: v for k, v in asdict(self).items() if k not in skip}


def run_case(
    case: Case,
    robot_port: int,
    commands: Sequence[PathCommand],
    seed: int,
    track_width: float,
    log: Callable[[str], object],
) -> None:
    """Replays ``commands`` through a new proxy to the robot and fills in ``case``
    (all but the figures from the robot's log: :func:`judge_cases`)."""
    profile = case.profile
    faults = {"none": None, "field": FIELD, "held": HELD, "down": None}[profile]
    with Rig(robot_port, case.transport, faults=faults, seed=seed, reorder_held=profile == "held") as rig:
        try:
            client = rig.connect(reconnect=ReconnectPolicy())
            replay, recorder = recorded_replay(client, commands, clock=time.time)
            assert rig.proxy is not None
            half = replay.schedule.total / 2
            drop: Drop | DownLoss
            if profile == "down":
                drop = DownLoss(rig.proxy, half, case.down_lost_s)
            else:
                drop = rig.drop_once(
                    half if profile != "none" else math.inf, HELD_DROP_S if profile == "held" else DROP_S
                )
            case.commands = len(commands)
            case.start_wall = time.time()
            try:
                replay.run(lambda p: drop(p.elapsed))
            except LinkError as exc:
                case.error = f"replay raised {type(exc).__name__}: {exc}"
            case.drop_at_s = drop.at_s
            time.sleep(TAIL_S)
            case.end_wall = time.time()
            assert replay.start is not None
            case.start_wall = replay.start
            case.plan = Plan.tagged(replay.start, commands)
            case.outages = len(replay.outages)
            case.dropped = replay.dropped
            case.outage_s = sum(o.duration or 0.0 for o in replay.outages)
            case.reconnects = client.status().generation - 1
            case.heal_wall = drop.healed if isinstance(drop, DownLoss) else rig.events.first("link back")
            if case.heal_wall is not None:
                back = [o.back_at for o in replay.outages if o.back_at is not None]
                if back:
                    case.back_to_link_ms = (replay.start + back[0] - case.heal_wall) * 1000
            case.commanded, commanded_times = plan_path(commands)
            case.driven, times = driven_path(recorder, track_width)
            case.telemetry_rows = len(times)
            if case.drop_at_s is not None:
                first = bisect.bisect_left(times, case.drop_at_s)
                last = bisect.bisect_right(times, case.drop_at_s + drop.seconds)
                case.drop_span = (max(first - 1, 0), min(last, len(times) - 1))
            if len(case.driven[0]) > 1:
                case.final_error_m = end_gap(case.driven, case.commanded)
                case.max_deviation_m = deviation(case.driven, case.commanded)
                case.max_same_time_m = same_time_deviation(
                    case.driven, times, case.commanded, commanded_times
                )
            counters = rig.proxy.counters()
            case.proxy = {
                k: getattr(counters, k)
                for k in ("tcp_accepted", "udp_received", "udp_forwarded", "udp_dropped", "partitions")
            }
        except Exception as exc:  # reported as the case's error: the benchmark fails, the others still run
            case.error = f"{type(exc).__name__}: {exc}"
    error = f", {case.error}" if case.error else ""
    log(f"{case.name}: {case.outages} outage(s), {case.dropped} dropped{error}")


def judge_cases(
    cases: Sequence[Case], starts: Sequence[CommandStart], refused: Sequence[tuple[float, str]] = ()
) -> None:
    """The robot-log figures of each case: late, unknown, started, back to driving, and for
    the ``--held`` cases the datagrams refused as an earlier controller's."""
    for case in cases:
        if case.plan is None:
            continue
        if case.profile in ("held", "down"):
            case.stale_refused = sum(
                stale_count(text) for wall, text in refused if case.start_wall <= wall <= case.end_wall
            )
        mine = [s for s in starts if case.start_wall - 0.05 <= s.wall_time <= case.end_wall]
        judged = judge(mine, [case.plan])
        case.started = len(judged)
        case.unknown = len(unknown(judged))
        case.late = len(late(judged))
        case.early = len(early(judged))
        known = spread(judged)
        case.worst_lateness_ms = known[1] * 1000 if known else math.nan
        if case.heal_wall is not None:
            after = [s.wall_time for s in mine if s.wall_time >= case.heal_wall]
            if after:
                case.back_to_driving_ms = (min(after) - case.heal_wall) * 1000


# -- output -----------------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def table(cases: Sequence[Case]) -> str:
    head: tuple[str, ...] = (
        "case",
        "late",
        "worst start (ms after plan)",
        "dropped",
        "outages",
        "heal → link (ms)",
        "heal → driving (ms)",
        "final error (m)",
        "max deviation (m)",
        "max same-time (m)",
        "starts logged",
    )
    stale = any(c.stale_refused is not None for c in cases)
    if stale:
        head += ("refused as stale",)
    rows = [
        (
            c.name,
            str(c.late) + (f" (+{c.unknown} unknown)" if c.unknown else ""),
            _fmt(c.worst_lateness_ms, ".0f"),
            str(c.dropped),
            str(c.outages),
            _fmt(c.back_to_link_ms, ".0f"),
            _fmt(c.back_to_driving_ms, ".0f"),
            _fmt(c.final_error_m, ".3f"),
            _fmt(c.max_deviation_m, ".3f"),
            _fmt(c.max_same_time_m, ".3f"),
            f"{c.started}/{c.commands}",
        )
        + ((_fmt(c.stale_refused, "d"),) if stale else ())
        for c in cases
    ]
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def draw(cases: Sequence[Case], output: Path, title: str) -> None:
    """Commanded against driven path for each case, two rows (TCP, UDP) of two (no fault, field)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 10), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2)
    for ax, case in zip(axes.flat, cases, strict=False):
        cx, cy = case.commanded
        dx, dy = case.driven
        ax.plot(cx, cy, "--", color="tab:blue", lw=2, label="commanded (plan)")
        ax.plot(dx, dy, "-", color="tab:orange", lw=1.6, label="driven (wheel odometry)")
        if case.drop_span is not None and dx:
            a, b = case.drop_span
            ax.plot(dx[a : b + 1], dy[a : b + 1], "-", color="tab:red", lw=3, label=f"{DROP_S:g} s link drop")
        ax.plot([0], [0], "o", color="black", label="start")
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(True, alpha=0.3)
        ax.set_title(
            f"{case.name}\nfinal error {_fmt(case.final_error_m, '.2f')} m, "
            f"max deviation {_fmt(case.max_deviation_m, '.2f')} m (same time: "
            f"{_fmt(case.max_same_time_m, '.2f')} m), {case.late} late",
            fontsize=10,
        )
        ax.legend(loc="lower left", fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("x (m)")
    for ax in axes[:, 0]:
        ax.set_ylabel("y (m)")
    fig.suptitle(title)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, format="png")


# -- main -------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Replay the figure-8 through the fault proxy to the headless sim: TCP and UDP, "
        "no fault and a field profile with a 1 s link drop.",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the proxies' random faults (default 1)")
    add_output_arguments(parser, IMAGE)
    parser.add_argument("--drivetrain", default="kitbot", choices=("kitbot", "sparkmax"))
    parser.add_argument(
        "--held",
        type=int,
        metavar="N",
        help="instead: N UDP cases with a held drop released reordered (seeds SEED*100 ... ), and one "
        "with the robot's datagrams to the host lost (no image)",
    )
    parser.add_argument(
        "--down-lost",
        type=float,
        default=DOWN_LOST_S,
        metavar="S",
        help="--held: how long the robot's datagrams to the host are lost (default 1 s)",
    )
    parser.add_argument("--down-runs", type=int, default=1, metavar="N", help="--held: how many such cases")
    args = parser.parse_args(argv)

    base = load_path(PATH)
    (commands,) = tag_paths(base)
    dv, dw = tag_offsets(base, commands)
    if args.held is not None:
        cases = [Case("udp", "held", seed=args.seed * 100 + n) for n in range(args.held)]
        cases += [
            Case("udp", "down", seed=args.seed * 100 + args.held + n, down_lost_s=args.down_lost)
            for n in range(args.down_runs)
        ]
        args.no_image = True
    else:
        cases = [
            Case(t, p, seed=args.seed * 100 + n)
            for n, (t, p) in enumerate((t, p) for t in ("tcp", "udp") for p in ("none", "field"))
        ]
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bcnp-field-") as tmp:
        log_dir = Path(tmp)
        robot = SimRobot(log_dir, drivetrain=args.drivetrain)
        try:
            log("starting the headless sim ...")
            robot.start()
            log(f"robot listening on port {robot.port}")
            for case in cases:
                time.sleep(PAUSE_S)
                log(f"{case.name} ...")
                run_case(case, robot.port, commands, case.seed, KITBOT_TRACK_WIDTH_M, log)
                if not robot.alive():
                    failures.append(f"the robot died during {case.name}")
                    break
            time.sleep(LOG_WRITE_S)
            starts = read_command_starts(log_dir)  # while it runs: a stop loses the last 0.25 s
            refused = read_strings(log_dir, "BCNP/Refused")
            if not robot.alive():
                failures.append("the robot was not running at the end")
        finally:
            robot.close()
    judge_cases(cases, starts, refused)

    print(
        f"figure-8 ({len(commands)} commands, {Schedule(commands).total:.1f} s; tags up to "
        f"{dv:.4f} m/s and {dw:.4f} rad/s), seed {args.seed}, "
        + (
            f"held: {HELD.describe()}, one {HELD_DROP_S:g} s drop at half time, UDP held and released "
            f"in that jitter; robot→host lost {args.down_lost:g} s at half time"
            if args.held is not None
            else f"field profile: {FIELD.describe()}, one {DROP_S:g} s drop at half time"
        )
    )
    print(table(cases))
    off_plan: list[str] = []
    for case in cases:
        if case.error:
            failures.append(f"{case.name}: {case.error}")
        if not case.started:
            failures.append(f"{case.name}: the robot logged no command start")
        if case.late:
            off_plan.append(f"{case.name}: {case.late} command(s) started late")
        if case.unknown:
            off_plan.append(f"{case.name}: {case.unknown} started command(s) not in the plan")
        if case.early:
            off_plan.append(f"{case.name}: {case.early} command(s) started before their plan")
    if off_plan:
        print("Off the plan:")
        for line in off_plan:
            print(f"  {line}")
    if args.json:
        write_json(
            {
                "seed": args.seed,
                "path": str(PATH.relative_to(ROOT)),
                "field_profile": FIELD.describe(),
                "drop_s": DROP_S,
                "late_after_s": LATE_S,
                "tag_max": {"vx": dv, "omega": dw},
                "cases": [c.report() for c in cases],
                "off_plan": off_plan,
                "failures": failures,
            },
            args.json,
        )
    if not args.no_image:
        date = time.strftime("%Y-%m-%d", time.gmtime())
        draw(cases, args.image, f"paths/figure8.csv through the fault proxy to the headless sim, {date}")
        log(f"figure: {args.image}")
    return failed(failures)


if __name__ == "__main__":
    sys.exit(main())
