"""Opening a connection to a robot: the socket, then the handshake on it.

The client (:mod:`bcnp.host.link.client`) dials for its first connect and for every
reconnect (:mod:`bcnp.host.link.keeper`): :meth:`Dial.open` connects over TCP or UDP,
sends our handshake, reads the robot's through the fresh
:class:`~bcnp.connection.Connection` it is given and returns the socket once the
hashes matched. Whatever goes wrong is a :class:`~bcnp.host.link.core.errors.LinkError` that
names the robot; a refusal closes the socket and raises
:class:`~bcnp.host.link.core.errors.SchemaMismatchError` with both hashes.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from ...connection import (
    Connection,
    HandshakeAccepted,
    HandshakeRejected,
    check_handshake,
    is_handshake_datagram,
)
from ...defaults import START_SIM, UDP_HANDSHAKE_RETRY_S
from ...wire import HANDSHAKE_SIZE
from .core.errors import LinkClosedError, LinkError, RobotUnreachableError, SchemaMismatchError

__all__ = ["Dial", "Traffic"]

#: New sockets tried for a UDP source port this host has not used before.
_PORT_TRIES = 8


class Traffic(Protocol):
    """Where the bytes a handshake moves are counted (the client's counters)."""

    bytes_in: int
    bytes_out: int


@dataclass(frozen=True)
class Dial:
    """Where and how to connect: the robot's address, the transport, the time limit of
    the connect and of the handshake (each), and the clock the connection is fed with."""

    host: str
    port: int
    udp: bool
    timeout: float
    clock: Callable[[], float]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def open(
        self, connection: Connection, traffic: Traffic, avoid_udp_ports: Collection[int] = ()
    ) -> tuple[socket.socket, int]:
        """A socket whose handshake passed, and the robot's schema hash. ``connection`` is
        fresh; the caller accepts it (what came behind the handshake) once it has taken the
        socket. ``avoid_udp_ports``: UDP source ports this host used before, never used again."""
        if self.udp:
            sock, outcome = self._udp(connection, traffic, avoid_udp_ports)
        else:
            sock, outcome = self._tcp(connection, traffic)
        if isinstance(outcome, HandshakeRejected):
            sock.close()
            raise SchemaMismatchError(
                self.host, self.port, connection.local_hash, outcome.remote_hash, outcome.reason
            )
        return sock, outcome.remote_hash

    def unreachable(self, why: str) -> RobotUnreachableError:
        return RobotUnreachableError(
            f"cannot reach the robot at {self.address} ({why}): start the simulator "
            f"({START_SIM}) or check the robot's address and that its program is running",
            self.host,
            self.port,
            why,
        )

    def _tcp(
        self, connection: Connection, traffic: Traffic
    ) -> tuple[socket.socket, HandshakeAccepted | HandshakeRejected]:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except TimeoutError:
            raise self.unreachable(f"no answer within {self.timeout:g} s") from None
        except OSError as exc:
            raise self.unreachable(exc.strerror or str(exc)) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(connection.handshake)
            traffic.bytes_out += len(connection.handshake)
            outcome: HandshakeAccepted | HandshakeRejected | None = None
            while outcome is None:
                try:
                    chunk = sock.recv(1 << 16)
                except (ConnectionResetError, BrokenPipeError):
                    chunk = b""
                if not chunk:
                    connection.connection_lost()
                    raise LinkClosedError(
                        f"the robot at {self.address} closed the connection before its handshake "
                        "(another controller may own the link)",
                        self.host,
                        self.port,
                        "closed before the handshake",
                    )
                traffic.bytes_in += len(chunk)
                outcome = connection.receive_data(chunk, self.clock())  # type: ignore[assignment]
        except TimeoutError:
            sock.close()
            raise LinkError(
                f"the robot at {self.address} sent no handshake within {self.timeout:g} s",
                self.host,
                self.port,
                f"no handshake within {self.timeout:g} s",
            ) from None
        except OSError as exc:
            sock.close()
            if isinstance(exc, LinkError):
                raise
            raise LinkClosedError(f"link to {self.address} failed: {exc}", self.host, self.port) from None
        return sock, outcome

    def _udp(
        self, connection: Connection, traffic: Traffic, avoid_ports: Collection[int]
    ) -> tuple[socket.socket, HandshakeAccepted | HandshakeRejected]:
        try:
            infos = socket.getaddrinfo(self.host, self.port, socket.AF_INET, socket.SOCK_DGRAM)
        except OSError as exc:
            raise self.unreachable(exc.strerror or str(exc)) from None
        # A new source port for each connection: a command a network held through a drop
        # still comes from the old port, and the robot refuses it once we paired again
        # (the wire has no sequence number to tell it by). The kernel picks the port; one
        # we used before is given back and another taken.
        target = infos[0][4]
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.connect(target)
            for _ in range(_PORT_TRIES):
                if sock.getsockname()[1] not in avoid_ports:
                    break
                fresh = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                try:
                    fresh.connect(target)  # while the used one still holds its port
                except OSError:
                    fresh.close()
                    raise
                sock.close()
                sock = fresh
        except OSError as exc:
            sock.close()
            raise self.unreachable(exc.strerror or str(exc)) from None
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self.unreachable(
                        f"no UDP handshake answer within {self.timeout:g} s; if it is running, another "
                        "controller owns the link (a UDP peer is released after 5 s of silence)"
                    )
                sock.send(connection.handshake)
                traffic.bytes_out += len(connection.handshake)
                sock.settimeout(min(left, UDP_HANDSHAKE_RETRY_S))
                try:
                    data = sock.recv(65_536)
                except TimeoutError:
                    continue
                if len(data) == HANDSHAKE_SIZE:
                    traffic.bytes_in += len(data)
                    break
        except ConnectionRefusedError:
            sock.close()
            raise self.unreachable("port closed") from None
        except OSError as exc:
            sock.close()
            if isinstance(exc, LinkError):
                raise
            raise self.unreachable(exc.strerror or str(exc)) from None
        except BaseException:
            sock.close()
            raise
        outcome = connection.receive_datagram(data, self.clock()) if is_handshake_datagram(data) else None
        if isinstance(outcome, HandshakeAccepted | HandshakeRejected):
            return sock, outcome
        return sock, check_handshake(data, connection.local_hash)
