"""Host tools: what runs on the laptop or coprocessor that drives a robot, grouped by job.

* ``link/``: :class:`~bcnp.host.link.client.Client` connects, handshakes, streams
  command batches, keeps the telemetry and reconnects after a lost link; it holds
  a :class:`~bcnp.host.link.keeper.LinkKeeper` (the socket and its thread), and
  the link's state machine (``link/core/``) decides when.
* ``sessions/``: replay a path (:mod:`~bcnp.host.sessions.replay`) or follow a
  trajectory (:mod:`~bcnp.host.sessions.follow`), each a sans-I/O core
  (``sessions/core/``) driven by one loop that pulls
  (:mod:`~bcnp.host.sessions.driver`); the telemetry recorder.
* ``nt/``: the robot's keys, mode and pose over NetworkTables.
* ``proxy/``: a fault proxy, a bad field network in user space.
* ``cli/``: ``python -m bcnp``: send, stop, replay, monitor, plot, schema, proxy.

Path files are :mod:`bcnp.paths`'s, shared with the robot. Every name a host
program needs is importable from here (``from bcnp.host import Client,
ReconnectPolicy, LinkDownError``). The robot never imports this package.
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
