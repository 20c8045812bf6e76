"""``send``: one batch of DriveCmds, kept alive until it has run, or a stop."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...paths import PathCommand
from ...schema import Message, Schema
from ..sessions.replay import Replay
from .common import (
    INTERRUPTED,
    MODE_WAIT_S,
    UserError,
    client_for,
    command_parser,
    connected,
    link_options,
    print_outage,
    reconnect_options,
    robot_schema,
    run_until_done,
)

if TYPE_CHECKING:
    from .common import Subparsers

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


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    """The ``send`` subcommand: one batch of DriveCmds or a stop."""
    send = command_parser(sub, "send", "send one batch of DriveCmds (VX OMEGA MS ...) or a stop", EPILOG_SEND)
    link_options(send)
    send.add_argument(
        "--clear", action="store_true", help="CLEAR_QUEUE: drop what the robot has queued first"
    )
    send.add_argument("--stop", action="store_true", help="send a zero-message CLEAR_QUEUE: stop now")
    send.add_argument("--no-wait", action="store_true", help="disconnect right after sending")
    send.add_argument("values", nargs="*", metavar="VX OMEGA MS", help="m/s, rad/s, milliseconds; repeatable")
    reconnect_options(send)
    return send


def drive_commands(schema: Schema, values: Sequence[str]) -> list[Message]:
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


def run(args: argparse.Namespace) -> int:
    schema = robot_schema(args.schema)
    if args.stop and args.values:
        raise UserError("--stop takes no commands")
    if not args.stop and not args.values:
        raise UserError("nothing to send: give VX OMEGA MS triples, or --stop")
    commands: list[Message] = [] if args.stop else drive_commands(schema, args.values)
    with connected(args, client_for(args, schema)) as (robot, watch):
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
        if run_until_done(robot, lambda: replay.run(on_outage=print_outage)) is None:
            print("interrupted: sent stop")
            return INTERRUPTED
        watch.wait_known(MODE_WAIT_S)  # a batch shorter than the robot's answer: still say it
    return 0
