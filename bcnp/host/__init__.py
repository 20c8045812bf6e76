"""Host tools: what runs on the laptop or coprocessor that drives a robot.

* :class:`~bcnp.host.client.Client`: connect, handshake, stream command
  batches, receive telemetry, reconnect after a lost link
  (:mod:`~bcnp.host.linkstate` decides when).
* ``python -m bcnp`` (:mod:`bcnp.host.cli`): send, stop, replay a path file,
  monitor the robot's keys, plot a run, show a schema, a fault proxy
  (:mod:`~bcnp.host.proxy`).
* :mod:`~bcnp.host.paths`, :mod:`~bcnp.host.replay`, :mod:`~bcnp.host.plot`,
  :mod:`~bcnp.host.monitor`: the pieces behind those commands.

Unlike the protocol library, these may know this robot's messages (DriveCmd,
DrivetrainTelemetry).

Every name a host program needs is importable from here (``from bcnp.host
import Client, ReconnectPolicy, LinkDownError``), each on first use: the robot
reads path files with :mod:`bcnp.host.paths` (standard library only), and
importing that must not bring the client and its sockets along.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import (
        Client,
        LinkClosedError,
        LinkDownError,
        LinkError,
        LinkLoss,
        LinkState,
        LinkStatus,
        ReconnectPolicy,
        RobotUnreachableError,
        SchemaMismatchError,
    )
    from .paths import PathCommand, PathError, load_path
    from .replay import Outage, Progress, Replay

#: Each name this package offers, and the module it lives in (imported on first use).
_HOME = {
    **dict.fromkeys(
        (
            "Client",
            "LinkClosedError",
            "LinkDownError",
            "LinkError",
            "LinkLoss",
            "LinkState",
            "LinkStatus",
            "ReconnectPolicy",
            "RobotUnreachableError",
            "SchemaMismatchError",
        ),
        ".client",
    ),
    **dict.fromkeys(("PathCommand", "PathError", "load_path"), ".paths"),
    **dict.fromkeys(("Outage", "Progress", "Replay"), ".replay"),
}

__all__ = [
    "Client",
    "LinkClosedError",
    "LinkDownError",
    "LinkError",
    "LinkLoss",
    "LinkState",
    "LinkStatus",
    "Outage",
    "PathCommand",
    "PathError",
    "Progress",
    "ReconnectPolicy",
    "Replay",
    "RobotUnreachableError",
    "SchemaMismatchError",
    "load_path",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is not None:
        return getattr(importlib.import_module(home, __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
