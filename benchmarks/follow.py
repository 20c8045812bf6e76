"""Open loop against ``replay --follow``: the figure-8 with disturbances open loop cannot make up.

    python -m benchmarks.follow [--json PATH] [--image PNG] [--drivetrain kitbot|sparkmax]

Starts the real robot program headless (``benchmarks.harness.sim.SimRobot``) and
drives ``paths/figure8.csv`` (12.6 s) through the fault proxy, over TCP and
over UDP, open loop (:class:`~bcnp.host.sessions.replay.Replay`) and closed loop
(:class:`~bcnp.host.sessions.follow.Follower`), under two disturbances:

* **drop**: the proxy drops the link for 1 s when half the path's time has
  passed (a partition: nothing crosses either way);
* **weak side**: the simulator's right side gets ``RIGHT_SCALE`` of its
  voltage (``BCNP_SIM_RIGHT_SCALE``, physics.py); a 3 s straight run at 1 m/s
  first measures what share of the commanded speed it delivers.

Truth is the simulator's own pose (``/SmartDashboard/Field/Robot``, the
physics model, over NetworkTables), taken relative to where the robot stood
when the case began, against the path as the robot's limits let it drive
(:func:`bcnp.paths.from_commands`). Per case: the final position
error and the largest deviation (each true pose's distance to the nearest
point of the path). A ``--follow`` case that ends more than 0.10 m off is
listed as off target (exit status 1 only when a case could not be driven).
Writes the driven paths to ``docs/images/follow.png``.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import constants
from bcnp.host.link.client import ReconnectPolicy
from bcnp.paths import DriveLimits, PathCommand, Trajectory, from_commands, load_path
from benchmarks.harness import ROOT
from benchmarks.harness.rig import Rig, recorded_replay, watched_drive
from benchmarks.harness.sim import SimRobot
from benchmarks.harness.truth import PAUSE_S, FieldPose, Path2D
from benchmarks.report import add_output_arguments, failed, log, write_json

PATH = ROOT / "paths" / "figure8.csv"
IMAGE = ROOT / "docs" / "images" / "follow.png"
DROP_S = 1.0
#: The weak right side: its share of the applied voltage (the robot's own velocity loops make it
#: deliver 99.9 % of the speed).
RIGHT_SCALE = 0.85
#: --follow must end this close to the path's end.
TARGET_M = 0.10


@dataclass
class Case:
    transport: str
    disturbance: str  # "drop" or "weak"
    mode: str  # "open" or "follow"
    final_error_m: float = math.nan
    max_deviation_m: float = math.nan
    outages: int = 0
    seconds: float = math.nan
    error: str | None = None
    driven: Path2D = field(default_factory=lambda: ([], []))

    @property
    def name(self) -> str:
        return f"{self.transport} {self.disturbance} {self.mode}"

    def report(self) -> dict[str, object]:
        return {
            "transport": self.transport,
            "disturbance": self.disturbance,
            "mode": self.mode,
            "final_error_m": round(self.final_error_m, 4),
            "max_deviation_m": round(self.max_deviation_m, 4),
            "outages": self.outages,
            "seconds": round(self.seconds, 2),
            "error": self.error,
        }


def run_case(
    case: Case,
    robot_port: int,
    plan: tuple[Sequence[PathCommand], Trajectory],
    limits: DriveLimits,
    truth: FieldPose,
    log: Callable[[str], object],
) -> None:
    commands, reference = plan
    half = reference.total / 2 if case.mode == "follow" else sum(c.duration_ms for c in commands) / 2000
    watched, case.outages = watched_drive(
        truth,
        robot_port,
        case.mode,
        plan,
        limits,
        transport=case.transport,
        proxied=True,
        drop=(half, DROP_S) if case.disturbance == "drop" else None,
    )
    case.seconds, case.driven = watched.seconds, watched.driven
    case.error = watched.error or case.error
    case.final_error_m = watched.end_m(reference)
    case.max_deviation_m = watched.deviation_m(reference)
    log(f"{case.name}: final {case.final_error_m:.3f} m, largest {case.max_deviation_m:.3f} m")


def delivered_share(robot_port: int) -> float:
    """Right over left wheel speed while 1 m/s is commanded straight ahead for 3 s (steady part)."""
    with Rig(robot_port, "tcp", proxied=False) as rig:
        replay, recorder = recorded_replay(
            rig.connect(reconnect=ReconnectPolicy()), [PathCommand(1.0, 0.0, 3000)]
        )
        replay.run()
    cols = recorder.columns
    t, lv, rv = cols.index("hostTimeS"), cols.index("leftVelocity"), cols.index("rightVelocity")
    steady = [r for r in recorder.rows if 1.5 <= float(r[t]) <= 2.8]
    left = sum(float(r[lv]) for r in steady)
    right = sum(float(r[rv]) for r in steady)
    return right / left if left else math.nan


def table(cases: Sequence[Case]) -> str:
    lines = [
        "| transport | disturbance | open loop: final / largest (m) | --follow: final / largest (m) |",
        "|---|---|---|---|",
    ]
    for transport in ("tcp", "udp"):
        for disturbance in ("drop", "weak"):
            cells = []
            for mode in ("open", "follow"):
                c = next(
                    c for c in cases if (c.transport, c.disturbance, c.mode) == (transport, disturbance, mode)
                )
                cells.append(
                    f"{c.final_error_m:.3f} / {c.max_deviation_m:.3f}" + (" (error)" if c.error else "")
                )
            label = (
                "1 s drop at half time" if disturbance == "drop" else f"right side at {RIGHT_SCALE:g} voltage"
            )
            lines.append(f"| {transport.upper()} | {label} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def draw(cases: Sequence[Case], reference: Trajectory, output: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 10))
    ref_x, ref_y = [s.x for s in reference.states], [s.y for s in reference.states]
    for ax, (transport, disturbance) in zip(
        axes.flat, [(t, d) for t in ("tcp", "udp") for d in ("drop", "weak")], strict=True
    ):
        ax.plot(ref_x, ref_y, color="0.6", lw=4, alpha=0.5, label="path")
        for mode, color in (("open", "tab:red"), ("follow", "tab:blue")):
            c = next(
                c for c in cases if (c.transport, c.disturbance, c.mode) == (transport, disturbance, mode)
            )
            label = f"{'open loop' if mode == 'open' else '--follow'}: end {c.final_error_m:.2f} m off"
            ax.plot(*c.driven, color=color, lw=1.5, label=label)
            ax.plot(c.driven[0][-1], c.driven[1][-1], "o", color=color)
        ax.plot(ref_x[-1], ref_y[-1], "k+", ms=14, mew=2)
        what = (
            "1 s link drop at half time"
            if disturbance == "drop"
            else f"right side at {RIGHT_SCALE:g} of its voltage"
        )
        ax.set_title(f"{transport.upper()}: {what}")
        ax.set_aspect("equal")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
    fig.suptitle(title)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=90)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The figure-8, open loop against --follow, under disturbances."
    )
    add_output_arguments(parser, IMAGE)
    parser.add_argument("--drivetrain", default="kitbot", choices=("kitbot", "sparkmax"))
    args = parser.parse_args(argv)

    commands = load_path(PATH)
    limits = DriveLimits.from_constants(constants)
    reference = from_commands(commands, limits, PATH.stem)
    cases = [Case(t, d, m) for d in ("drop", "weak") for t in ("tcp", "udp") for m in ("open", "follow")]
    share = math.nan
    with tempfile.TemporaryDirectory(prefix="bcnp-follow-") as tmp:
        for disturbance in ("drop", "weak"):
            env = {"BCNP_SIM_RIGHT_SCALE": str(RIGHT_SCALE)} if disturbance == "weak" else {}
            robot = SimRobot(Path(tmp) / disturbance, drivetrain=args.drivetrain, env=env)
            truth: FieldPose | None = None
            try:
                log(f"starting the headless sim ({disturbance}) ...")
                robot.start()
                truth = FieldPose(robot.nt_port)
                truth.pose()
                if disturbance == "weak":
                    share = delivered_share(robot.port)
                    log(f"the weak right side delivers {share:.1%} of the commanded speed")
                for case in cases:
                    if case.disturbance != disturbance:
                        continue
                    time.sleep(PAUSE_S)
                    run_case(case, robot.port, (commands, reference), limits, truth, log)
            finally:
                if truth is not None:
                    truth.close()
                robot.close()

    print(
        f"{PATH.relative_to(ROOT)} ({reference.total:.1f} s), {args.drivetrain}; weak side: right at "
        f"{RIGHT_SCALE:g} of its voltage, delivering {share:.1%} of the commanded speed"
    )
    print(table(cases))
    failures = [f"{c.name}: {c.error}" for c in cases if c.error]
    misses = [
        f"{c.name}: ended {c.final_error_m:.3f} m from the path's end (target {TARGET_M} m)"
        for c in cases
        if c.mode == "follow" and not c.error and not c.final_error_m <= TARGET_M
    ]
    if misses:
        print("Off target:")
        for miss in misses:
            print(f"  {miss}")
    if args.json:
        write_json(
            {
                "path": str(PATH.relative_to(ROOT)),
                "drivetrain": args.drivetrain,
                "drop_s": DROP_S,
                "right_scale": RIGHT_SCALE,
                "right_delivered": round(share, 4),
                "cases": [c.report() for c in cases],
                "misses": misses,
                "failures": failures,
            },
            args.json,
        )
    if not args.no_image:
        date = time.strftime("%Y-%m-%d", time.gmtime())
        draw(
            cases,
            reference,
            args.image,
            f"paths/figure8.csv, open loop against --follow, headless sim, {date}",
        )
        log(f"figure: {args.image}")
    return failed(failures)


if __name__ == "__main__":
    sys.exit(main())
