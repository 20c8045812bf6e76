"""``python -m bcnp``: host tools for a BCNP robot.

User errors (robot unreachable, schema mismatch, bad input) print one line
starting with ``error:`` and exit with status 1 (2 for command-line misuse);
never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .client import Client, LinkError
from .codegen.info import render_info
from .schema import Message, Schema, SchemaError, load_schema
from .transport.base import DEFAULT_PORT

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
stops at once when its controller disconnects. Ctrl-C sends a stop first.
"""


class UserError(Exception):
    """A mistake to report in one line, without a traceback."""


def _schema(path: str | None) -> Schema:
    if path is None:
        from .messages import SCHEMA

        return SCHEMA
    if not Path(path).is_file():
        raise UserError(f"{path}: no such schema file")
    try:
        return load_schema(Path(path))
    except SchemaError as exc:  # names the file and every problem
        raise UserError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: {exc}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bcnp",
        description="Host tools for a robot speaking BCNP 3.2 (batched, timed drive commands).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = sub.add_parser(
        "info",
        help="schema hash and message table",
        epilog=EPILOG_INFO,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    info.add_argument("schema", nargs="?", help="schema JSON file (default: the robot's built-in schema)")

    send = sub.add_parser(
        "send",
        help="send one batch of DriveCmds (VX OMEGA MS ...) or a stop",
        epilog=EPILOG_SEND,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _link_options(send)
    send.add_argument(
        "--clear", action="store_true", help="CLEAR_QUEUE: drop what the robot has queued first"
    )
    send.add_argument("--stop", action="store_true", help="send a zero-message CLEAR_QUEUE: stop now")
    send.add_argument("--no-wait", action="store_true", help="disconnect right after sending")
    send.add_argument("values", nargs="*", metavar="VX OMEGA MS", help="m/s, rad/s, milliseconds; repeatable")
    return parser


def _link_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="robot address (default 127.0.0.1, the simulator)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"BCNP port (default {DEFAULT_PORT})")
    p.add_argument("--udp", action="store_true", help="use UDP instead of TCP")
    p.add_argument("--schema", help="schema JSON file (default: the robot's built-in schema)")


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
    with Client(schema, args.host, args.port, udp=args.udp) as robot:
        transport = "udp" if args.udp else "tcp"
        print(f"connected to {robot.address} over {transport}, robot schema 0x{robot.remote_hash:08X}")
        if args.stop:
            robot.stop()
            print("sent: stop (zero-message CLEAR_QUEUE)")
            return 0
        packets = robot.send(commands, clear_queue=args.clear)
        rows = [c.as_dict() for c in commands]
        total_ms = sum(int(r["durationMs"]) for r in rows)
        flag = " with CLEAR_QUEUE" if args.clear else ""
        print(f"sent: {len(commands)} DriveCmd in {packets} packet(s){flag}, {total_ms / 1000:g} s in all")
        for r in rows:
            print(f"  vx {r['vx']:+.4f} m/s  omega {r['omega']:+.4f} rad/s  {r['durationMs']} ms")
        if args.no_wait:
            return 0
        try:
            deadline = time.monotonic() + total_ms / 1000 + 0.1
            while time.monotonic() < deadline:
                if not robot.connected:
                    raise UserError(f"the robot at {robot.address} closed the link before the batch finished")
                time.sleep(0.02)
        except KeyboardInterrupt:
            robot.stop()
            print("interrupted: sent stop")
            return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "info":
            print(render_info(_schema(args.schema)))
            return 0
        if args.command == "send":
            return _send(args)
    except (UserError, LinkError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 2  # pragma: no cover - argparse requires a command


if __name__ == "__main__":
    raise SystemExit(main())
