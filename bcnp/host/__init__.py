"""Host tools: what runs on the laptop or coprocessor that drives a robot.

* :class:`~bcnp.host.client.Client`: connect, handshake, stream command
  batches, receive telemetry.
* ``python -m bcnp`` (:mod:`bcnp.host.cli`): send, stop, replay a path file,
  monitor the robot's keys, plot a run, show a schema.
* :mod:`~bcnp.host.paths`, :mod:`~bcnp.host.replay`, :mod:`~bcnp.host.plot`,
  :mod:`~bcnp.host.monitor`: the pieces behind those commands.

Unlike the protocol library, these may know this robot's messages (DriveCmd,
DrivetrainTelemetry).
"""

from .client import Client, LinkClosedError, LinkError, RobotUnreachableError, SchemaMismatchError

__all__ = ["Client", "LinkClosedError", "LinkError", "RobotUnreachableError", "SchemaMismatchError"]
