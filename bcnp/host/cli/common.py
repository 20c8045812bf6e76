"""What the subcommands share: one-line user errors, the link and reconnect options, the
project's schema and limits, the one way a command connects (the robot's mode watched, one
line said), is interrupted (Ctrl-C: a stop first) and writes its telemetry."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from ...defaults import NT_PORT, PORT
from ...paths import DriveLimits
from ...schema import Schema
from ..link.client import Client, LinkError, ReconnectPolicy
from ..nt.mode import ModeWatch
from ..sessions.core.session import Outage
from ..sessions.recorder import TelemetryRecorder
from .project import ProjectError, find_project, limits, schema

if TYPE_CHECKING:
    #: ``argparse``'s subparsers object, as each subcommand's ``add_parser`` takes it.
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

#: ``send --no-wait`` waits this long for the robot's mode before it exits.
MODE_WAIT_S = 1.0
#: Exit status of a command stopped by Ctrl-C (128 + SIGINT), after it sent a stop.
INTERRUPTED = 130

T = TypeVar("T")


class UserError(Exception):
    """A mistake to report in one line, without a traceback."""


def command_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str, epilog: str
) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with its examples, line breaks kept."""
    return sub.add_parser(
        name, help=help, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def link_options(p: argparse.ArgumentParser) -> None:
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


def reconnect_options(p: argparse.ArgumentParser) -> None:
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


def reconnect_policy(args: argparse.Namespace) -> ReconnectPolicy:
    if args.silence <= 0:
        raise UserError("--silence must be > 0 seconds")
    if args.give_up_after is not None and args.give_up_after < 0:
        raise UserError("--give-up-after must be >= 0 seconds")
    return ReconnectPolicy(
        enabled=not args.no_reconnect, silence_timeout=args.silence, give_up_after=args.give_up_after
    )


def robot_schema(path: str | None) -> Schema:
    """``--schema``, else the project's ``[tool.bcnp]`` schema, else an installed one (project.py)."""
    try:
        return schema(path, find_project())
    except ProjectError as exc:
        raise UserError(str(exc)) from None


def drive_limits() -> DriveLimits:
    """The project's drivetrain (``[tool.bcnp] limits``), else the kit chassis."""
    try:
        return limits(find_project())
    except ProjectError as exc:
        raise UserError(str(exc)) from None


def print_outage(outage: Outage) -> None:
    print(outage, flush=True)


def say(line: str) -> None:
    print(line, flush=True)


def mode_watch(args: argparse.Namespace, client: Client) -> ModeWatch:
    """Says when the robot ``client`` drives is in a mode that does not drive BCNP commands."""
    return ModeWatch(args.host, lambda: client.local_address, args.nt_port, say=say)


def client_for(args: argparse.Namespace, schema: Schema) -> Client:
    """The client a command drives the robot with: ``--host``, ``--port``, ``--udp`` and the
    reconnect options."""
    return Client(schema, args.host, args.port, udp=args.udp, reconnect=reconnect_policy(args))


@contextlib.contextmanager
def connected(args: argparse.Namespace, client: Client) -> Iterator[tuple[Client, ModeWatch]]:
    """``client`` connected, the robot's mode watched, and one line that says so; both closed
    at the end."""
    with mode_watch(args, client) as watch, client as robot:
        transport = "udp" if robot.udp else "tcp"
        print(f"connected to {robot.address} over {transport}, robot schema 0x{robot.remote_hash:08X}")
        yield robot, watch


def telemetry_path(args: argparse.Namespace) -> Path | None:
    """``--telemetry``, checked before anything is sent: its folder must exist."""
    if not getattr(args, "telemetry", None):
        return None
    out = Path(args.telemetry)
    if not out.parent.is_dir():
        raise UserError(f"{out}: no such directory {out.parent}")
    return out


def run_until_done(
    robot: Client,
    run: Callable[[], T],
    recorder: TelemetryRecorder | None = None,
    telemetry_out: Path | None = None,
) -> T | None:
    """``run()``'s result; ``None`` after Ctrl-C, which sends the robot a stop (CLEAR_QUEUE)
    first. The telemetry recorded so far is written to ``telemetry_out`` either way."""
    try:
        return run()
    except KeyboardInterrupt:
        with contextlib.suppress(LinkError):
            robot.stop()
        return None
    finally:
        if recorder is not None and telemetry_out is not None:
            write_telemetry(recorder, telemetry_out)


def write_telemetry(recorder: TelemetryRecorder, path: Path) -> None:
    try:
        rows = recorder.write_csv(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    print(f"telemetry: {rows} rows written to {path}")
