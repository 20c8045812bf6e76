"""What the host's NT4 clients share: an ntcore instance of their own, aimed at the robot.

``monitor``, the mode watch and the robot's pose each run their own instance, so that
one closing never takes the others' subscriptions with it. Each subscribes first, then
:func:`start` points it at the robot (an address, or a team's roboRIO); ntcore
reconnects by itself. :func:`stop` ends it. Needs ``pyntcore`` (the ``host`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["event_value", "new_instance", "server_name", "start", "stop"]


def server_name(host: str, port: int, team: int | None = None) -> str:
    """The server as the host tools name it: ``"host:port"`` or ``"team N robot:port"``."""
    return f"team {team} robot:{port}" if team is not None else f"{host}:{port}"


def new_instance() -> Any:
    """A new ntcore instance, not started yet; raises ``ImportError`` without pyntcore."""
    import ntcore

    return ntcore.NetworkTableInstance.create()


def start(inst: Any, name: str, host: str, port: int, team: int | None = None) -> None:
    """``inst`` as an NT4 client called ``name`` of the server at ``host:port`` (or team ``team``'s
    roboRIO on ``port``)."""
    inst.startClient4(name)
    if team is not None:
        inst.setServerTeam(team, port)
    else:
        inst.setServer(host, port)


def stop(inst: Any, closing: Iterable[Any] = ()) -> None:
    """Closes ``closing`` (its subscribers, pollers), stops the client and destroys ``inst``."""
    import ntcore

    for handle in closing:
        handle.close()
    inst.stopClient()
    ntcore.NetworkTableInstance.destroy(inst)


def event_value(event: Any) -> Any:
    """The value a listener event carries (``None`` for an event without one)."""
    value = getattr(getattr(getattr(event, "data", None), "value", None), "value", None)
    return value() if callable(value) else None
