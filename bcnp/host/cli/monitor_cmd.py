"""``monitor``: the robot's ``Network/*`` keys and the pre-flight check's ``Preflight/*``, live or
once (NetworkTables)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ...defaults import NT_PORT
from .common import UserError, command_parser
from .extras import require

if TYPE_CHECKING:
    from .common import Subparsers

EPILOG_MONITOR = """examples:
  python -m bcnp monitor                    live view of the simulator's keys
  python -m bcnp monitor --team 1234        a roboRIO
  python -m bcnp monitor --once --json      one snapshot as JSON, for scripts
"""


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    """The ``monitor`` subcommand: live view of the robot's keys."""
    what = "live view of the robot's Network/* and Preflight/* keys (NetworkTables)"
    monitor = command_parser(sub, "monitor", what, EPILOG_MONITOR)
    monitor.add_argument("--host", default="127.0.0.1", help="NetworkTables server (default 127.0.0.1)")
    monitor.add_argument("--team", type=int, help="find the roboRIO of this team number instead of --host")
    monitor.add_argument("--port", type=int, default=NT_PORT, help=f"NT4 port (default {NT_PORT})")
    monitor.add_argument("--once", action="store_true", help="print one snapshot and exit")
    monitor.add_argument("--json", action="store_true", help="with --once: print the snapshot as JSON")
    monitor.add_argument(
        "--timeout", type=float, default=3.0, help="seconds to wait for the server and its keys (default 3)"
    )
    return monitor


def run(args: argparse.Namespace) -> int:
    if args.json and not args.once:
        raise UserError("--json needs --once")
    require("monitor", "ntcore")  # rich is optional: without it the live view is plain text
    from ..nt.monitor import Monitor, NoServerError, render_text, run_live

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
