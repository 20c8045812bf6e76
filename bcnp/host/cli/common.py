"""What the subcommands share: one-line user errors, the link and reconnect options, the
project's schema and limits, the robot's mode, how outages and telemetry are reported."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from ...defaults import NT_PORT, PORT
from ...paths import DriveLimits
from ...schema import Schema
from ..link.client import Client, ReconnectPolicy
from ..nt.mode import ModeWatch
from ..sessions.replay import Outage, TelemetryRecorder
from .project import ProjectError, find_project, limits, schema

if TYPE_CHECKING:
    #: ``argparse``'s subparsers object, as each subcommand's ``add_parser`` takes it.
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

#: ``send --no-wait`` waits this long for the robot's mode before it exits.
MODE_WAIT_S = 1.0


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


def write_telemetry(recorder: TelemetryRecorder, path: Path) -> None:
    try:
        rows = recorder.write_csv(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
    print(f"telemetry: {rows} rows written to {path}")
