"""Host tools: what runs on the laptop or coprocessor that drives a robot.

* :class:`~bcnp.host.link.client.Client`: connect, handshake, stream command
  batches, receive telemetry, reconnect after a lost link
  (:mod:`~bcnp.host.link.core.state` decides when).
* ``python -m bcnp`` (:mod:`bcnp.host.cli`): send, stop, replay a path file,
  monitor the robot's keys, plot a run, show a schema, a fault proxy
  (:mod:`~bcnp.host.proxy.fault_proxy`).
* :mod:`~bcnp.host.sessions.replay`, :mod:`~bcnp.host.sessions.follow`, :mod:`~bcnp.host.cli.plotting`,
  :mod:`~bcnp.host.nt.monitor`, :mod:`~bcnp.host.nt.mode`: the pieces behind
  those commands. Path files are :mod:`bcnp.paths`'s, shared with the robot.

Every name a host program needs is importable from here (``from bcnp.host
import Client, ReconnectPolicy, LinkDownError``). The robot never imports this
package.
"""

from __future__ import annotations

from ..paths import PathCommand, PathError, load_path
from .link.client import (
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
from .sessions.replay import Outage, Progress, Replay

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
