"""``replay``: stream a path file just in time (``--follow``: closed loop on the robot's telemetry)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ...paths import DriveLimits, PathError, Trajectory, is_planned, load_path, load_trajectory, to_commands
from ..link.client import Client
from ..sessions.core.replay import LEAD_S, MAX_AHEAD, UDP_LEAD_S, Schedule
from ..sessions.core.session import Outage
from ..sessions.recorder import TelemetryRecorder, telemetry_spec
from ..sessions.replay import Progress, Replay
from .common import (
    INTERRUPTED,
    MODE_WAIT_S,
    UserError,
    client_for,
    command_parser,
    connected,
    drive_limits,
    link_options,
    print_outage,
    reconnect_options,
    robot_schema,
    run_until_done,
    telemetry_path,
)
from .extras import missing, require

if TYPE_CHECKING:
    from ..nt.pose import RobotPose
    from .common import Subparsers

EPILOG_REPLAY = """examples:
  python -m bcnp replay paths/figure8.csv
  python -m bcnp replay paths/square.csv --telemetry square.csv
  python -m bcnp replay paths/slalom.json --host 10.12.34.2 --udp
  python -m bcnp replay paths/s_curve.path          a PathPlanner path
  python -m bcnp replay paths/j_turn.traj --follow  a Choreo trajectory, closed loop

A path file lists (vx m/s, omega rad/s, durationMs) commands, as CSV lines
"vx,omega,durationMs" or a JSON list of [vx, omega, durationMs]. A PathPlanner
.path is generated into a trajectory with the project's PathPlanner settings
(or constants.py), a Choreo .traj (differential) is read as it is; either is
sent as one command per 20 ms, merged where equal. Commands are
streamed just in time: about --lead seconds ahead of the robot (1 s; over UDP
0.15 s, so that a lost datagram never makes what follows run early by more),
never more than --max-ahead commands, so the robot's 200-command queue never overflows
and the link never times out. Ctrl-C sends a stop (CLEAR_QUEUE) first.

A lost link (closed, reset, or no telemetry for --silence seconds) is
reconnected with backoff; the path's clock keeps running, and after the
reconnect only commands whose time has not passed are sent, the first packet
with CLEAR_QUEUE. Each outage is printed: when the link went, when it came
back, how many commands were dropped. --give-up-after N ends the replay
(exit 1) after N seconds without a link.

--follow closes the loop on the host: the robot's pose, corrected toward the
path by WPILib's LTV unicycle controller, re-planned 0.2 s ahead (CLEAR_QUEUE)
on every telemetry packet. The pose is the robot's own (its Network/Pose, on
its gyro, over NetworkTables at --host and --nt-port) when it offers it, else
the wheel positions' in its telemetry; one line says which. While the link is
down the path's clock waits; the path ends late, not cut.
"""

#: How long ``--follow`` waits for the robot's first pose before it follows on the wheels.
POSE_WAIT_S = 1.0


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    """The ``replay`` subcommand: stream a path file just in time."""
    replay = command_parser(
        sub,
        "replay",
        "stream a path file (CSV or JSON) just in time, optionally recording telemetry",
        EPILOG_REPLAY,
    )
    replay.add_argument(
        "path_file",
        metavar="PATH_FILE",
        help="CSV or JSON list of (vx, omega, durationMs), a PathPlanner .path or a Choreo .traj",
    )
    link_options(replay)
    replay.add_argument("--telemetry", metavar="OUT.csv", help="record the robot's telemetry to a CSV file")
    replay.add_argument(
        "--lead",
        type=float,
        default=None,
        help=f"seconds of commands kept ahead of the robot (default {LEAD_S:g}, over UDP {UDP_LEAD_S:g})",
    )
    replay.add_argument(
        "--max-ahead",
        type=int,
        default=MAX_AHEAD,
        help="most commands queued ahead of the robot (default %(default)s)",
    )
    replay.add_argument(
        "--follow",
        action="store_true",
        help="closed loop: correct from the robot's pose (Network/Pose; else its wheel telemetry) "
        "with an LTV unicycle controller",
    )
    replay.add_argument(
        "--settings",
        metavar="SETTINGS.json",
        help="PathPlanner settings for a .path (default: settings.json beside it or one folder up, "
        "else this project's constants.py)",
    )
    reconnect_options(replay)
    return replay


def run(args: argparse.Namespace) -> int:
    schema = robot_schema(args.schema)
    if (args.lead is not None and args.lead <= 0) or args.max_ahead < 1:
        raise UserError("--lead must be > 0 seconds and --max-ahead at least 1")
    planned = is_planned(args.path_file)
    if args.settings is not None and Path(args.path_file).suffix.lower() != ".path":
        raise UserError("--settings applies to a PathPlanner .path only")
    if args.follow:  # before connecting: the follower computes with WPILib's math
        require("replay --follow", "wpimath")
    trajectory = None
    limits = DriveLimits()
    try:
        if planned or args.follow:
            try:
                limits = drive_limits()
                trajectory = load_trajectory(args.path_file, limits, settings=args.settings)
            except ImportError as exc:  # the planner's library (PathPlanner, Choreo)
                raise missing(f"replay of {args.path_file}", exc) from None
            commands = to_commands(trajectory) if planned else load_path(args.path_file)
        else:
            commands = load_path(args.path_file)
    except PathError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:
        raise UserError(f"{args.path_file}: {exc}") from None
    telemetry_out = telemetry_path(args)
    client = client_for(args, schema)
    spec = telemetry_spec(schema, client.command_spec)
    if args.follow:
        if spec is None or "leftPosition" not in spec.field_names:
            raise UserError("--follow needs the robot's DrivetrainTelemetry (wheel positions) in the schema")
        assert trajectory is not None
        return follow(
            args, client, TelemetryRecorder(spec, Schedule(commands)), trajectory, limits, telemetry_out
        )
    if telemetry_out is not None and spec is None:
        raise UserError("the schema has no telemetry message type to record")
    with connected(args, client) as (robot, watch):
        try:
            replay = Replay(robot, commands, lead=args.lead, max_ahead=args.max_ahead)
        except (TypeError, ValueError) as exc:
            raise UserError(f"cannot build {robot.command_spec.name} commands from the path: {exc}") from None
        recorder = None
        if telemetry_out is not None and spec is not None:
            recorder = replay.recorder = TelemetryRecorder(spec, replay.schedule)
        print(f"replaying {args.path_file}: {len(commands)} commands, {replay.schedule.total:.1f} s")
        tty = sys.stderr.isatty()

        def show(p: Progress) -> None:
            if tty:
                line = progress_bar(p)
                if not robot.connected:
                    line += f"  link {robot.status().describe(robot.clock())}"
                sys.stderr.write("\r\033[K" + line[:200])
                sys.stderr.flush()

        def outage(event: Outage) -> None:
            if tty:
                sys.stderr.write("\n")
            print_outage(event)

        def run_replay() -> Progress:
            try:
                return replay.run(show, outage)
            finally:
                if tty:
                    sys.stderr.write("\n")

        done = run_until_done(robot, run_replay, recorder, telemetry_out)
        if done is None:
            print(f"interrupted at {replay.progress().elapsed:.1f} s: sent stop (CLEAR_QUEUE)")
            return INTERRUPTED
        watch.wait_known(MODE_WAIT_S)  # a path shorter than the robot's answer: still say it
        gaps = ""
        if replay.outages:
            down = sum(o.duration or 0.0 for o in replay.outages)
            gaps = (
                f"; {len(replay.outages)} outage(s), {down:.2f} s without a link, "
                f"{replay.dropped} command(s) dropped"
            )
        print(f"done: {done.sent} commands in {done.packets} packets over {done.elapsed:.1f} s{gaps}")
    return 0


def follow(
    args: argparse.Namespace,
    client: Client,
    recorder: TelemetryRecorder,
    trajectory: Trajectory,
    limits: DriveLimits,
    telemetry_out: Path | None,
) -> int:
    from ..sessions.follow import Follower

    robot_pose, why_not = open_robot_pose(args.host, args.nt_port)  # connects while the link does
    try:
        with connected(args, client) as (robot, _):
            poses, line = use_robot_pose(robot_pose, why_not)
            print(line, flush=True)
            follower = Follower(robot, trajectory, limits, recorder=recorder, poses=poses)
            print(
                f"following {args.path_file}: {trajectory.total:.1f} s, closed loop on the robot's telemetry"
            )
            result = run_until_done(
                robot, lambda: follower.run(on_outage=print_outage), recorder, telemetry_out
            )
            if result is None:
                print("interrupted: sent stop (CLEAR_QUEUE)")
                return INTERRUPTED
            print(
                f"done: {result.reference_time:.1f} s of path in {result.elapsed:.1f} s, "
                f"{result.packets} packets; "
                f"estimated end error {result.final_error:.3f} m, largest {result.max_error:.3f} m"
                + (f"; {len(result.outages)} outage(s)" if result.outages else "")
            )
    finally:
        if robot_pose is not None:
            robot_pose.close()
    return 0


def open_robot_pose(host: str, port: int) -> tuple[RobotPose | None, str]:
    """An NT4 client for the robot's ``Network/Pose`` at ``host:port``, or None and why not."""
    from ..nt.pose import RobotPose

    try:
        return RobotPose(host, port), ""
    except ImportError:  # pyntcore is in the host extra; the follower needs only wpimath
        return None, "no pyntcore to read the robot's Network/Pose"


def use_robot_pose(robot_pose: RobotPose | None, why_not: str) -> tuple[RobotPose | None, str]:
    """``robot_pose`` if the robot offers its pose within :data:`POSE_WAIT_S` (else it is
    closed, and None), and the one line that says which pose the follower follows on."""
    from ..nt.pose import NO_SERVER_S

    if robot_pose is None:
        return None, f"pose: from the wheel telemetry ({why_not})"
    if robot_pose.wait(POSE_WAIT_S, server_within=NO_SERVER_S) is not None:
        return robot_pose, f"pose: the robot's own (Network/Pose at {robot_pose.server})"
    connected = robot_pose.connected
    robot_pose.close()
    if not connected:
        return None, f"pose: from the wheel telemetry (no NetworkTables server at {robot_pose.server})"
    return None, f"pose: from the wheel telemetry (the robot at {robot_pose.server} offers no Network/Pose)"


def progress_bar(p: Progress, width: int = 30) -> str:
    fraction = min(p.elapsed / p.total, 1.0) if p.total > 0 else 1.0
    filled = round(width * fraction)
    bar = "#" * filled + "-" * (width - filled)
    rows = f"  telemetry {p.telemetry_rows}" if p.telemetry_rows else ""
    clock = f"{min(p.elapsed, p.total):5.1f}/{p.total:.1f} s"
    return f"[{bar}] {fraction:4.0%} {clock}  sent {p.sent}/{p.commands}{rows}"
