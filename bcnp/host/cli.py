"""``python -m bcnp``: host tools for a BCNP robot.

User errors (robot unreachable, schema mismatch, bad input) print one line
starting with ``error:`` and exit with status 1 (2 for command-line misuse);
never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..codegen.info import render_info
from ..defaults import KITBOT_TRACK_WIDTH_M, NT_PORT, PORT
from ..paths import DriveLimits, PathCommand, PathError, is_planned, load_path, load_trajectory, to_commands
from ..schema import Message, Schema
from . import project
from .client import Client, LinkError, ReconnectPolicy
from .proxy import add_proxy_parser, run_proxy
from .replay import LEAD_S, UDP_LEAD_S, Outage, Progress, Replay, Schedule, TelemetryRecorder, telemetry_spec
from .robotmode import ModeWatch

__all__ = ["main"]

EPILOG_INFO = """example:
  python -m bcnp info                       the robot's built-in schema
  python -m bcnp info schema/messages.json
"""

EPILOG_SEND = """examples:
  python -m bcnp send 1.0 0 2000            1 m/s straight ahead for 2 s
  python -m bcnp send --clear 0.5 1.0 1500 0.5 -1.0 1500
  python -m bcnp send --host 10.12.34.2 --udp 0.3 0 1000
  python -m bcnp send --stop                stop now (zero-message CLEAR_QUEUE)

The link stays open (with keepalives) until the batch has run: the robot
stops at once when its controller disconnects. If the link is lost meanwhile,
send reconnects and sends what is left of the batch's time (never a command
whose time has passed). Ctrl-C sends a stop first.
"""


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

--follow closes the loop on the host: the robot's pose from the wheel
positions in its telemetry, corrected toward the path by WPILib's LTV unicycle
controller, re-planned 0.2 s ahead (CLEAR_QUEUE) on every telemetry packet.
While the link is down the path's clock waits; the path ends late, not cut.
"""

EPILOG_MONITOR = """examples:
  python -m bcnp monitor                    live view of the simulator's keys
  python -m bcnp monitor --team 1234        a roboRIO
  python -m bcnp monitor --once --json      one snapshot as JSON, for scripts
"""

EPILOG_PLOT = """examples:
  python -m bcnp replay paths/figure8.csv --telemetry run.csv
  python -m bcnp plot run.csv                      writes run.png
  python -m bcnp plot run.csv -o figure8.png
"""

HOST_EXTRA = 'python -m pip install -e ".[host]"'


class UserError(Exception):
    """A mistake to report in one line, without a traceback."""


def _schema(path: str | None) -> Schema:
    """``--schema``, else the project's ``[tool.bcnp]`` schema, else an installed one (project.py)."""
    try:
        return project.schema(path, project.find_project())
    except project.ProjectError as exc:
        raise UserError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bcnp",
        description="Host tools for a robot speaking BCNP 3.2 (batched, timed drive commands).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = _command(sub, "info", "schema hash and message table", EPILOG_INFO)
    info.add_argument("schema", nargs="?", help="schema JSON file (default: the robot's built-in schema)")

    send = _command(sub, "send", "send one batch of DriveCmds (VX OMEGA MS ...) or a stop", EPILOG_SEND)
    _link_options(send)
    send.add_argument(
        "--clear", action="store_true", help="CLEAR_QUEUE: drop what the robot has queued first"
    )
    send.add_argument("--stop", action="store_true", help="send a zero-message CLEAR_QUEUE: stop now")
    send.add_argument("--no-wait", action="store_true", help="disconnect right after sending")
    send.add_argument("values", nargs="*", metavar="VX OMEGA MS", help="m/s, rad/s, milliseconds; repeatable")
    _reconnect_options(send)

    replay = _command(
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
    _link_options(replay)
    replay.add_argument("--telemetry", metavar="OUT.csv", help="record the robot's telemetry to a CSV file")
    replay.add_argument(
        "--lead",
        type=float,
        default=None,
        help=f"seconds of commands kept ahead of the robot (default {LEAD_S:g}, over UDP {UDP_LEAD_S:g})",
    )
    replay.add_argument(
        "--max-ahead", type=int, default=150, help="most commands queued ahead of the robot (default 150)"
    )
    replay.add_argument(
        "--follow",
        action="store_true",
        help="closed loop: correct from the robot's wheel telemetry (LTV unicycle controller)",
    )
    replay.add_argument(
        "--settings",
        metavar="SETTINGS.json",
        help="PathPlanner settings for a .path (default: settings.json beside it or one folder up, "
        "else this project's constants.py)",
    )
    _reconnect_options(replay)

    monitor = _command(
        sub, "monitor", "live view of the robot's Network/* keys (NetworkTables)", EPILOG_MONITOR
    )
    monitor.add_argument("--host", default="127.0.0.1", help="NetworkTables server (default 127.0.0.1)")
    monitor.add_argument("--team", type=int, help="find the roboRIO of this team number instead of --host")
    monitor.add_argument("--port", type=int, default=NT_PORT, help=f"NT4 port (default {NT_PORT})")
    monitor.add_argument("--once", action="store_true", help="print one snapshot and exit")
    monitor.add_argument("--json", action="store_true", help="with --once: print the snapshot as JSON")
    monitor.add_argument(
        "--timeout", type=float, default=3.0, help="seconds to wait for the server and its keys (default 3)"
    )

    add_proxy_parser(sub)

    plot = _command(
        sub, "plot", "PNG of the commanded against the driven path, and vx/omega against time", EPILOG_PLOT
    )
    plot.add_argument("telemetry", metavar="TELEMETRY.csv", help="written by replay --telemetry")
    plot.add_argument("-o", "--output", metavar="OUT.png", help="default: the CSV's name with .png")
    plot.add_argument(
        "--track-width",
        type=float,
        default=None,
        help=f"wheel track in metres for odometry (default {KITBOT_TRACK_WIDTH_M}, the simulated chassis)",
    )
    return parser


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str, epilog: str
) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with its examples, line breaks kept."""
    return sub.add_parser(
        name, help=help, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def _link_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="robot address (default 127.0.0.1, the simulator)")
    p.add_argument("--port", type=int, default=PORT, help=f"BCNP port (default {PORT})")
    p.add_argument(
        "--nt-port",
        type=int,
        default=NT_PORT,
        help=f"the robot's NetworkTables port, asked for its mode (default {NT_PORT})",
    )
    p.add_argument("--udp", action="store_true", help="use UDP instead of TCP")
    p.add_argument("--schema", help="schema JSON file (default: the robot's built-in schema)")


def _reconnect_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--silence",
        type=float,
        default=ReconnectPolicy.silence_timeout,
        metavar="S",
        help="no telemetry for S seconds counts as a lost link (default %(default)s)",
    )
    p.add_argument(
        "--give-up-after",
        type=float,
        default=None,
        metavar="S",
        help="exit 1 after S seconds without a link (default: keep reconnecting)",
    )
    p.add_argument("--no-reconnect", action="store_true", help="exit 1 on the first lost link")


def _policy(args: argparse.Namespace) -> ReconnectPolicy:
    if args.silence <= 0:
        raise UserError("--silence must be > 0 seconds")
    if args.give_up_after is not None and args.give_up_after < 0:
        raise UserError("--give-up-after must be >= 0 seconds")
    return ReconnectPolicy(
        enabled=not args.no_reconnect, silence_timeout=args.silence, give_up_after=args.give_up_after
    )


def _print_outage(outage: Outage) -> None:
    print(outage, flush=True)


#: ``send --no-wait`` waits this long for the robot's mode before it exits.
MODE_WAIT_S = 1.0


def _say(line: str) -> None:
    print(line, flush=True)


def _mode_watch(args: argparse.Namespace, client: Client) -> ModeWatch:
    """Says when the robot ``client`` drives is in a mode that does not drive BCNP commands."""
    return ModeWatch(args.host, lambda: client.local_address, args.nt_port, say=_say)


def _commands(schema: Schema, values: Sequence[str]) -> list[Message]:
    if len(values) % 3:
        raise UserError(f"expected VX OMEGA MS triples, got {len(values)} value(s)")
    drive = schema["DriveCmd"]
    out = []
    for i in range(0, len(values), 3):
        vx, omega, ms = values[i : i + 3]
        where = f"command {i // 3 + 1} ({vx} {omega} {ms})"
        try:
            out.append(drive(vx=float(vx), omega=float(omega), durationMs=int(ms)))
        except (ValueError, TypeError) as exc:
            raise UserError(f"{where}: {exc}") from None
    return out


def _send(args: argparse.Namespace) -> int:
    schema = _schema(args.schema)
    if args.stop and args.values:
        raise UserError("--stop takes no commands")
    if not args.stop and not args.values:
        raise UserError("nothing to send: give VX OMEGA MS triples, or --stop")
    commands: list[Message] = [] if args.stop else _commands(schema, args.values)
    policy = _policy(args)
    client = Client(schema, args.host, args.port, udp=args.udp, reconnect=policy)
    with _mode_watch(args, client) as watch, client as robot:
        transport = "udp" if args.udp else "tcp"
        print(f"connected to {robot.address} over {transport}, robot schema 0x{robot.remote_hash:08X}")
        if args.stop:
            robot.stop()
            print("sent: stop (zero-message CLEAR_QUEUE)")
            return 0
        rows = [c.as_dict() for c in commands]
        total_ms = sum(int(r["durationMs"]) for r in rows)
        flag = " with CLEAR_QUEUE" if args.clear else ""
        if args.no_wait:
            packets = robot.send(commands, clear_queue=args.clear)
        else:
            # Sent at once, as one batch; kept alive until it has run, and resumed
            # on its own clock after a lost link.
            path = [PathCommand(float(r["vx"]), float(r["omega"]), int(r["durationMs"])) for r in rows]
            replay = Replay(
                robot, path, lead=total_ms / 1000 + 1, max_ahead=len(path), settle=0.1, clear_first=args.clear
            )
            packets = len(robot.encode(commands, args.clear))
        print(f"sent: {len(commands)} DriveCmd in {packets} packet(s){flag}, {total_ms / 1000:g} s in all")
        for r in rows:
            print(f"  vx {r['vx']:+.4f} m/s  omega {r['omega']:+.4f} rad/s  {r['durationMs']} ms")
        if args.no_wait:
            watch.wait_known(MODE_WAIT_S)  # the robot's mode, if it answers at once
            return 0
        try:
            replay.run(on_outage=_print_outage)
        except KeyboardInterrupt:
            with contextlib.suppress(LinkError):
                robot.stop()
            print("interrupted: sent stop")
            return 130
        watch.wait_known(MODE_WAIT_S)  # a batch shorter than the robot's answer: still say it
    return 0


def _write_telemetry(recorder: TelemetryRecorder, path: Path) -> None:
    try:
        rows = recorder.write_csv(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    print(f"telemetry: {rows} rows written to {path}")


def _drive_limits() -> DriveLimits:
    """The project's drivetrain (``[tool.bcnp] limits``), else the kit chassis."""
    try:
        return project.limits(project.find_project())
    except project.ProjectError as exc:
        raise UserError(str(exc)) from None


def _replay(args: argparse.Namespace) -> int:
    schema = _schema(args.schema)
    if (args.lead is not None and args.lead <= 0) or args.max_ahead < 1:
        raise UserError("--lead must be > 0 seconds and --max-ahead at least 1")
    planned = is_planned(args.path_file)
    if args.settings is not None and Path(args.path_file).suffix.lower() != ".path":
        raise UserError("--settings applies to a PathPlanner .path only")
    trajectory = None
    limits = DriveLimits()
    try:
        if planned or args.follow:
            try:
                limits = _drive_limits()
                trajectory = load_trajectory(args.path_file, limits, settings=args.settings)
            except ImportError as exc:
                raise UserError(
                    f"{args.path_file}: needs the host tools' extra ({HOST_EXTRA}): {exc}"
                ) from None
            commands = to_commands(trajectory) if planned else load_path(args.path_file)
        else:
            commands = load_path(args.path_file)
    except PathError as exc:
        raise UserError(str(exc)) from None
    except ValueError as exc:
        raise UserError(f"{args.path_file}: {exc}") from None
    if args.follow:
        return _follow(args, schema, trajectory, limits)
    telemetry_out = Path(args.telemetry) if args.telemetry else None
    if telemetry_out is not None and not telemetry_out.parent.is_dir():
        raise UserError(f"{telemetry_out}: no such directory {telemetry_out.parent}")
    recorder = None
    client = Client(schema, args.host, args.port, udp=args.udp, reconnect=_policy(args))
    if telemetry_out is not None:
        spec = telemetry_spec(schema, client.command_spec)
        if spec is None:
            raise UserError("the schema has no telemetry message type to record")
    with _mode_watch(args, client) as watch, client as robot:
        transport = "udp" if args.udp else "tcp"
        print(f"connected to {robot.address} over {transport}, robot schema 0x{robot.remote_hash:08X}")
        try:
            replay = Replay(robot, commands, lead=args.lead, max_ahead=args.max_ahead)
        except (TypeError, ValueError) as exc:
            raise UserError(f"cannot build {robot.command_spec.name} commands from the path: {exc}") from None
        if telemetry_out is not None and spec is not None:
            recorder = TelemetryRecorder(spec, replay.schedule)
            replay.recorder = recorder
            robot.on_telemetry = recorder
        total = replay.schedule.total
        print(f"replaying {args.path_file}: {len(commands)} commands, {total:.1f} s")
        tty = sys.stderr.isatty()

        def show(p: Progress) -> None:
            if tty:
                line = _progress_bar(p)
                if not robot.connected:
                    line += f"  link {robot.status().describe(robot.clock())}"
                sys.stderr.write("\r\033[K" + line[:200])
                sys.stderr.flush()

        def outage(event: Outage) -> None:
            if tty:
                sys.stderr.write("\n")
            _print_outage(event)

        status = 0
        try:
            done = replay.run(show, outage)
        except KeyboardInterrupt:
            with contextlib.suppress(LinkError):
                robot.stop()
            done = replay.progress()
            status = 130
        finally:
            if tty:
                sys.stderr.write("\n")
            if recorder is not None and telemetry_out is not None:
                _write_telemetry(recorder, telemetry_out)
        if status:
            print(f"interrupted at {done.elapsed:.1f} s: sent stop (CLEAR_QUEUE)")
            return status
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


def _follow(args: argparse.Namespace, schema: Schema, trajectory: Any, limits: DriveLimits) -> int:
    from .follow import Follower

    telemetry_out = Path(args.telemetry) if args.telemetry else None
    if telemetry_out is not None and not telemetry_out.parent.is_dir():
        raise UserError(f"{telemetry_out}: no such directory {telemetry_out.parent}")
    client = Client(schema, args.host, args.port, udp=args.udp, reconnect=_policy(args))
    spec = telemetry_spec(schema, client.command_spec)
    if spec is None or "leftPosition" not in spec.field_names:
        raise UserError("--follow needs the robot's DrivetrainTelemetry (wheel positions) in the schema")
    recorder = TelemetryRecorder(spec, Schedule(to_commands(trajectory)))
    with _mode_watch(args, client), client as robot:
        transport = "udp" if args.udp else "tcp"
        print(f"connected to {robot.address} over {transport}, robot schema 0x{robot.remote_hash:08X}")
        follower = Follower(robot, trajectory, limits, recorder=recorder)
        robot.on_telemetry = follower.on_telemetry
        print(f"following {args.path_file}: {trajectory.total:.1f} s, closed loop on the robot's telemetry")
        status = 0
        try:
            result = follower.run(on_outage=_print_outage)
        except KeyboardInterrupt:
            with contextlib.suppress(LinkError):
                robot.stop()
            status = 130
        finally:
            if telemetry_out is not None:
                _write_telemetry(recorder, telemetry_out)
        if status:
            print("interrupted: sent stop (CLEAR_QUEUE)")
            return status
        print(
            f"done: {result.reference_time:.1f} s of path in {result.elapsed:.1f} s, "
            f"{result.packets} packets; "
            f"estimated end error {result.final_error:.3f} m, largest {result.max_error:.3f} m"
            + (f"; {len(result.outages)} outage(s)" if result.outages else "")
        )
    return 0


def _progress_bar(p: Progress, width: int = 30) -> str:
    fraction = min(p.elapsed / p.total, 1.0) if p.total > 0 else 1.0
    filled = round(width * fraction)
    bar = "#" * filled + "-" * (width - filled)
    rows = f"  telemetry {p.telemetry_rows}" if p.telemetry_rows else ""
    clock = f"{min(p.elapsed, p.total):5.1f}/{p.total:.1f} s"
    return f"[{bar}] {fraction:4.0%} {clock}  sent {p.sent}/{p.commands}{rows}"


def _monitor(args: argparse.Namespace) -> int:
    if args.json and not args.once:
        raise UserError("--json needs --once")
    try:
        from .monitor import Monitor, NoServerError, render_text, run_live
    except ImportError:  # pragma: no cover - depends on the environment
        raise UserError(f"monitor needs pyntcore, a host-only extra: {HOST_EXTRA}") from None
    try:
        with Monitor(args.host, args.port, args.team) as monitor:
            monitor.wait_for_keys(args.timeout)
            if not args.once:
                try:
                    run_live(monitor)
                except KeyboardInterrupt:
                    return 0
            if monitor.values.get("Network/Connected") is True:
                monitor.measure(1.0)
            snapshot = monitor.snapshot()
    except NoServerError as exc:
        raise UserError(str(exc)) from None
    print(json.dumps(snapshot.as_json(), indent=2) if args.json else render_text(snapshot))
    return 0


def _plot(args: argparse.Namespace) -> int:
    try:
        from .plot import DEFAULT_TRACK_WIDTH_M, PlotError, load_run, plot_run
    except ImportError:  # pragma: no cover - depends on the environment
        raise UserError(f"plot needs matplotlib, a host-only extra: {HOST_EXTRA}") from None
    output = Path(args.output) if args.output else Path(args.telemetry).with_suffix(".png")
    width = DEFAULT_TRACK_WIDTH_M if args.track_width is None else args.track_width
    try:
        result = plot_run(load_run(args.telemetry), output, width)
    except PlotError as exc:
        raise UserError(str(exc)) from None
    except ImportError:  # pragma: no cover - depends on the environment
        raise UserError(f"plot needs matplotlib, a host-only extra: {HOST_EXTRA}") from None
    print(
        f"wrote {result.output}: {result.rows} samples, driven {result.driven_length_m:.2f} m, "
        f"commanded {result.commanded_length_m:.2f} m, end points {result.end_gap_m:.2f} m apart"
    )
    return 0


COMMANDS = {"send": _send, "replay": _replay, "monitor": _monitor, "plot": _plot, "proxy": run_proxy}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "info":
            print(render_info(_schema(args.schema)))
            return 0
        return COMMANDS[args.command](args)
    except (UserError, LinkError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
