"""What the fault proxy's TCP and UDP relays share: the counters, the sockets' setup, the base.

:class:`~bcnp.host.proxy.fault_proxy.Proxy` runs one thread with one selector; each protocol
it forwards is a :class:`Relay` (:class:`~bcnp.host.proxy.relay_tcp.TcpRelay`,
:class:`~bcnp.host.proxy.relay_udp.UdpRelay`) over that selector, the proxy's
:class:`~bcnp.host.proxy.core.delivery.DeliverySchedule` and its :class:`ProxyCounters`. A
socket registers with ``(relay, kind, object)`` as its selector data (the listening
one: ``(relay, "listen", None)``): the proxy
hands each ready socket to its relay's :meth:`Relay.handle`, and each item that
falls due to :meth:`Relay.deliver`. Every call comes from the proxy's thread,
under its lock.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...transport.netio import format_address
from .core.delivery import DeliverySchedule, Direction

__all__ = ["READ", "WRITE", "Address", "ProxyCounters", "Relay", "Shared", "bound", "resolve"]

Address = tuple[Any, ...]

READ, WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
_LINGER_RST = struct.pack("HH" if os.name == "nt" else "ii", 1, 0)


@dataclass(slots=True)
class ProxyCounters:
    """What a proxy has counted since it started; ``tcp_open``, ``udp_clients`` and ``bytes_held`` are now."""

    tcp_accepted: int = 0  # client connections accepted
    tcp_open: int = 0  # client connections open
    upstream_refused: int = 0  # upstream connects refused or failed: the client was reset
    peer_errors: int = 0  # a peer reset or vanished (read, write, accept), or the target refused a datagram
    bytes_from_clients: int = 0  # payload read from clients, TCP and UDP
    bytes_to_target: int = 0  # payload delivered to the target
    bytes_from_target: int = 0
    bytes_to_clients: int = 0
    udp_received: int = 0  # datagrams read, either side
    udp_forwarded: int = 0  # datagrams delivered, duplicates included
    udp_dropped: int = 0  # lost on purpose, cut by a partition or reset, or refused by the OS
    udp_duplicated: int = 0
    udp_reordered: int = 0
    udp_clients: int = 0  # client source addresses with an upstream socket
    partitions: int = 0  # partitions started
    resets: int = 0
    bytes_held: int = 0  # held by the partition in force
    internal_errors: int = 0  # unexpected exceptions caught in the proxy's thread


def resolve(host: str, port: int, kind: int, passive: bool = False) -> tuple[int, Address]:
    """``(family, address)`` of ``host:port`` for sockets of ``kind``."""
    try:
        info = socket.getaddrinfo(host, port, type=kind, flags=socket.AI_PASSIVE if passive else 0)
    except OSError as exc:
        raise OSError(f"cannot resolve {host!r}: {exc.strerror or exc}") from None
    return info[0][0], info[0][4]


def bound(kind: int, host: str, port: int) -> socket.socket:
    """A non-blocking socket bound to ``host:port`` (TCP: listening)."""
    family, address = resolve(host, port, kind, passive=True)
    sock = socket.socket(family, kind)
    try:
        if kind == socket.SOCK_STREAM and os.name != "nt":  # a restart may reuse the port at once
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        if kind == socket.SOCK_STREAM:
            sock.listen(64)
    except OSError as exc:
        sock.close()
        protocol = "tcp" if kind == socket.SOCK_STREAM else "udp"
        raise OSError(
            f"cannot listen on {format_address((host, port))} ({protocol}): {exc.strerror or exc}"
        ) from None
    sock.setblocking(False)
    return sock


@dataclass(frozen=True)
class Shared:
    """What the relays share with the proxy and each other: the selector, the delivery
    schedule, the counters, ``event(message)`` for the proxy's log, and the target as given."""

    sel: selectors.BaseSelector
    schedule: DeliverySchedule[Any]
    counters: ProxyCounters
    event: Callable[[str], None]
    target_name: str


class Relay:
    """One protocol's relay: its listening ``sock``, the ``target`` resolved for its
    sockets (``(family, address)``) and what it shares (:class:`Shared`)."""

    def __init__(self, sock: socket.socket, target: tuple[int, Address], shared: Shared) -> None:
        self.sock = sock
        self.target = target
        self.sel = shared.sel
        self.schedule = shared.schedule
        self.counters = shared.counters
        self.event = shared.event
        self.target_name = shared.target_name
        self.sel.register(sock, READ, (self, "listen", None))

    @property
    def port(self) -> int:
        """The bound port of the listening socket."""
        return int(self.sock.getsockname()[1])

    # -- what each relay does ------------------------------------------------------------

    def handle(self, kind: str, obj: Any, mask: int, now: float) -> None:
        """A socket this relay registered (as ``(self, kind, obj)``) is ready for ``mask``."""
        raise NotImplementedError

    def deliver(self, item: Any) -> None:
        """An item of this relay's fell due (or a partition that held it healed)."""
        raise NotImplementedError

    def reset(self) -> int:
        """Abort or forget every connection or client (a reset); returns how many."""
        raise NotImplementedError

    def close_all(self) -> None:
        """Close every socket, the listening one last."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------

    def count_in(self, direction: Direction, size: int) -> None:
        if direction == "up":
            self.counters.bytes_from_clients += size
        else:
            self.counters.bytes_from_target += size

    def count_out(self, direction: Direction, size: int) -> None:
        if direction == "up":
            self.counters.bytes_to_target += size
        else:
            self.counters.bytes_to_clients += size

    def discard(self, sock: socket.socket, rst: bool = False) -> None:
        """Unwatch and close ``sock``; with ``rst``, the peer gets a reset, not an end."""
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(sock)
        if rst:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
        sock.close()
