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

The client's names are imported on first use: the robot reads path files
with :mod:`bcnp.host.paths` (standard library only), and importing that must
not bring the client and its sockets along.
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
        LinkState,
        LinkStatus,
        ReconnectPolicy,
        RobotUnreachableError,
        SchemaMismatchError,
    )

__all__ = [
    "Client",
    "LinkClosedError",
    "LinkDownError",
    "LinkError",
    "LinkState",
    "LinkStatus",
    "ReconnectPolicy",
    "RobotUnreachableError",
    "SchemaMismatchError",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(".client", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
