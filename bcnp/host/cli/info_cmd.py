"""``info``: a schema's hash and message table."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ...codegen.info import render_info
from .common import command_parser, robot_schema

if TYPE_CHECKING:
    from .common import Subparsers

EPILOG_INFO = """example:
  python -m bcnp info                       the robot's built-in schema
  python -m bcnp info schema/messages.json
"""


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    """The ``info`` subcommand: schema hash and message table."""
    info = command_parser(sub, "info", "schema hash and message table", EPILOG_INFO)
    info.add_argument("schema", nargs="?", help="schema JSON file (default: the robot's built-in schema)")
    return info


def run(args: argparse.Namespace) -> int:
    print(render_info(robot_schema(args.schema)))
    return 0
