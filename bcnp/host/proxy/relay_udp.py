"""The fault proxy's UDP relay: each client source address forwarded from its own upstream socket.

Each client source address gets its own upstream socket, connected to the target, so
the target sees one peer per client, and its replies go back to that client from the
listening socket. Each datagram is a :class:`Datagram` the proxy's
:class:`~bcnp.host.proxy.core.delivery.DeliverySchedule` gives its own delay (jitter may reorder
them), loses or duplicates; during a partition datagrams are dropped, or held with
``udp_hold``. A reset forgets every client: its next datagram gets a new upstream
socket. A client silent for ``idle_timeout`` seconds is forgotten when a new one comes.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from ...transport.netio import format_address
from .core.delivery import Direction
from .relay import READ, Address, Relay, Shared

__all__ = ["Datagram", "UdpRelay"]

#: Datagrams read from one socket per wake-up, so one busy socket cannot starve the rest.
_UDP_BURST = 64


@dataclass(eq=False)
class _UdpPeer:
    client: Address
    sock: socket.socket
    last_seen: float
    closed: bool = False


@dataclass(eq=False)
class Datagram:
    peer: _UdpPeer
    direction: Direction
    data: bytes
    datagram = True

    @property
    def size(self) -> int:
        return len(self.data)

    def dead(self) -> bool:
        return False


class UdpRelay(Relay):
    """Forwards the datagrams of the listening ``sock`` to the target; see the module docs.
    ``peers`` maps each client address to its upstream socket."""

    def __init__(
        self, sock: socket.socket, target: tuple[int, Address], shared: Shared, *, idle_timeout: float
    ) -> None:
        super().__init__(sock, target, shared)
        self.idle_timeout = idle_timeout
        self.peers: dict[Address, _UdpPeer] = {}

    def handle(self, kind: str, obj: Any, mask: int, now: float) -> None:
        if kind == "listen":
            self._from_clients(now)
        else:
            self._from_target(obj, now)

    def deliver(self, item: Datagram) -> None:
        peer = item.peer
        try:
            if peer.closed:
                raise OSError("forgotten by a reset")
            if item.direction == "up":
                peer.sock.send(item.data)
            else:
                self.sock.sendto(item.data, peer.client)
        except OSError:
            self.counters.udp_dropped += 1
            return
        self.counters.udp_forwarded += 1
        self.count_out(item.direction, len(item.data))

    def reset(self) -> int:
        return self._forget_peers()

    def close_all(self) -> None:
        self._forget_peers()
        self.discard(self.sock)

    def _forget_peers(self) -> int:
        peers = len(self.peers)
        for peer in self.peers.values():
            self._close_peer(peer)
        self.peers.clear()
        self.counters.udp_clients = 0
        return peers

    def _from_clients(self, now: float) -> None:
        for _ in range(_UDP_BURST):
            try:
                data, address = self.sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # Windows reports an earlier ICMP error here
                continue
            peer = self.peers.get(address) or self._new_peer(address, now)
            if peer is not None:
                self._datagram(peer, "up", data, now)

    def _from_target(self, peer: _UdpPeer, now: float) -> None:
        for _ in range(_UDP_BURST if not peer.closed else 0):
            try:
                data = peer.sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # ICMP port unreachable: nothing listens at the target
                self.counters.peer_errors += 1
                continue
            self._datagram(peer, "down", data, now)

    def _new_peer(self, address: Address, now: float) -> _UdpPeer | None:
        for old in [p for p in self.peers.values() if now - p.last_seen > self.idle_timeout]:
            self._close_peer(old)
            del self.peers[old.client]
        family, target = self.target
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            sock.connect(target)  # replies come from the target only
        except OSError as exc:
            sock.close()
            self.counters.udp_dropped += 1
            self.event(f"udp {format_address(address)}: cannot reach the target ({exc.strerror or exc})")
            return None
        peer = self.peers[address] = _UdpPeer(address, sock, now)
        self.sel.register(sock, READ, (self, "peer", peer))
        self.counters.udp_clients = len(self.peers)
        port = sock.getsockname()[1]
        self.event(
            f"udp {format_address(address)} new client, upstream port {port} ({len(self.peers)} clients)"
        )
        return peer

    def _close_peer(self, peer: _UdpPeer) -> None:
        peer.closed = True
        self.discard(peer.sock)

    def _datagram(self, peer: _UdpPeer, direction: Direction, data: bytes, now: float) -> None:
        peer.last_seen = now
        self.counters.udp_received += 1
        self.count_in(direction, len(data))
        self.schedule.datagram(lambda: Datagram(peer, direction, data), direction, now, len(data))
