"""``python -m bcnp``: host tools for a BCNP robot, one module per subcommand.

Each of :mod:`~.info_cmd`, :mod:`~.send_cmd`, :mod:`~.replay_cmd`, :mod:`~.monitor_cmd`,
:mod:`~.plot_cmd` and :mod:`~.proxy_cmd` (a subcommand's module: its name and ``_cmd``) has
``add_parser(sub)`` and ``run(args) -> exit
status``; :mod:`~.common` holds what they share. User errors (robot
unreachable, schema mismatch, bad input) print one line starting with
``error:`` and exit with status 1 (2 for command-line misuse); never a
traceback. A command run without an optional library it needs (the ``host``
extra's) says which and how to install it here (:mod:`~.extras`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ..link.client import LinkError
from . import extras, info_cmd, monitor_cmd, plot_cmd, proxy_cmd, replay_cmd, send_cmd
from .common import UserError

__all__ = ["main"]

#: Each subcommand's module, in the order ``--help`` lists them.
SUBCOMMANDS = {
    "info": info_cmd,
    "send": send_cmd,
    "replay": replay_cmd,
    "monitor": monitor_cmd,
    "proxy": proxy_cmd,
    "plot": plot_cmd,
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m bcnp",
        description="Host tools for a robot speaking BCNP 3.2 (batched, timed drive commands).",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS.values():
        module.add_parser(sub)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = SUBCOMMANDS[args.command].run
    try:
        return run(args)
    except (UserError, LinkError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ImportError as exc:  # an optional library a command imported as it ran
        missing = extras.optional_module_missing(args.command, exc)
        if missing is None:
            raise
        print(f"error: {missing}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
