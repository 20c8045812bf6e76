"""Why a host could not reach its robot, or lost it: the client's errors.

Every one is a :class:`LinkError` (a :class:`ConnectionError`) naming the robot's
address; ``reason`` is the short cause and ``str()`` the whole sentence. Sans-I/O:
the client (:mod:`bcnp.host.link.client`) raises them, this module only defines them.
"""

from __future__ import annotations

__all__ = [
    "LinkClosedError",
    "LinkDownError",
    "LinkError",
    "RobotUnreachableError",
    "SchemaMismatchError",
]


class LinkError(ConnectionError):
    """A link to a robot could not be made or was lost; names the robot's address.
    ``reason`` is the short cause (``str()`` is the whole sentence)."""

    def __init__(self, message: str, host: str, port: int, reason: str = "") -> None:
        super().__init__(message)
        self.host = host
        self.port = port
        self.reason = reason or message


class RobotUnreachableError(LinkError):
    """Nothing answered at host:port."""


class SchemaMismatchError(LinkError):
    """The robot's schema hash differs from ours."""

    def __init__(self, host: str, port: int, local_hash: int, remote_hash: int | None, detail: str) -> None:
        super().__init__(f"schema mismatch with the robot at {host}:{port}: {detail}", host, port)
        self.local_hash = local_hash
        self.remote_hash = remote_hash


class LinkClosedError(LinkError):
    """The link is closed for good (by us, by the robot with reconnecting off, a
    fatal error, or after giving up)."""


class LinkDownError(LinkError):
    """The link is down and the client is reconnecting: nothing was sent."""
