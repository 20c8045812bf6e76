"""A server's knobs, counters and status snapshot (plain data)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

from ..defaults import HANDSHAKE_TIMEOUT_S, IDLE_TIMEOUT_S, PORT

__all__ = ["COUNTER_NAMES", "TransportConfig", "TransportCounters", "TransportStatus"]

Network = IPv4Network | IPv6Network

#: An IPv4 address as a dual-stack IPv6 socket reports it (``::ffff:a.b.c.d``).
_IPV4_MAPPED = IPv6Network("::ffff:0:0/96")


def _parse_peer(entry: object) -> Network:
    """One ``allowed_peers`` entry as a network; an address is a network of one."""
    if not isinstance(entry, str):
        raise ValueError(f"allowed_peers: {entry!r} is not a string (an IP address or CIDR subnet)")
    try:
        network = ip_network(entry)
    except ValueError as exc:
        raise ValueError(f"allowed_peers: {entry!r} is not an IP address or CIDR subnet ({exc})") from None
    if isinstance(network, IPv6Network) and network.subnet_of(_IPV4_MAPPED):
        # Written in its mapped form, it still means IPv4 peers, which an IPv4
        # socket reports plainly: compare it as the IPv4 subnet it is.
        mapped = network.network_address.ipv4_mapped
        assert mapped is not None
        return IPv4Network((mapped, network.prefixlen - 96))
    return network


@dataclass(frozen=True)
class TransportConfig:
    """Limits of one server. Times are seconds of the server's clock.

    ``handshake_timeout``, ``max_pending`` and ``send_buffer_limit`` apply to
    TCP; UDP sends one datagram per packet and keeps no buffer of its own.
    """

    host: str = "0.0.0.0"
    port: int = PORT
    #: A TCP peer must complete its 8-byte handshake within this time.
    handshake_timeout: float = HANDSHAKE_TIMEOUT_S
    #: A controller that sends nothing for this long is dropped (TCP) or unlocked (UDP).
    idle_timeout: float = IDLE_TIMEOUT_S
    #: Bytes a stalled peer may leave queued before new packets are refused.
    #: A packet larger than this is still accepted onto an empty buffer, so one
    #: packet of any legal size can always be sent.
    send_buffer_limit: int = 1 << 20
    #: The kernel send buffer asked for each accepted TCP connection (SO_SNDBUF;
    #: Linux doubles it for bookkeeping). Without it Linux grows the buffer to
    #: megabytes for a peer that never reads. 0 leaves the kernel's default.
    socket_send_buffer: int = 64 * 1024
    #: Connections allowed to be mid-handshake at once; more are closed at accept.
    max_pending: int = 4
    #: Longest wait of the receive thread between timeout checks (wall seconds).
    poll_interval: float = 0.05
    #: Bytes asked of the kernel per read (TCP).
    recv_size: int = 256 * 1024
    #: Added to the receive thread's nice value where the OS allows it (Linux):
    #: when the CPUs are busy, the scheduler runs the robot loop first and a
    #: flood is parsed with what is left. 0 leaves the priority alone.
    receive_nice: int = 5
    #: A controller whose link is lost (no packet for the link timeout) is
    #: dropped (TCP: the connection is closed, unread bytes and all) or unlocked
    #: (UDP: it must handshake again), so nothing it sent before the loss can
    #: start late when the network gives it back. ``False``: the reference's
    #: behaviour (the link is kept, and a late burst runs from the next tick).
    end_on_link_loss: bool = True
    #: Who may become controller: IP addresses or CIDR subnets ("10.12.34.0/24",
    #: "127.0.0.1"); empty: anyone. Anyone else is closed at accept (TCP) or
    #: ignored (UDP), never answered.
    allowed_peers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 0xFFFF:
            raise ValueError(f"port must be 0..65535, got {self.port}")
        for name in ("handshake_timeout", "idle_timeout", "poll_interval"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0 seconds")
        if self.send_buffer_limit < 0 or self.socket_send_buffer < 0:
            raise ValueError("send_buffer_limit and socket_send_buffer must be >= 0")
        if self.max_pending < 1 or self.recv_size < 1:
            raise ValueError("max_pending and recv_size must be >= 1")
        peers: object = self.allowed_peers
        if isinstance(peers, str):  # its characters would be taken as entries
            raise ValueError(f"allowed_peers must be a tuple of strings, not the string {peers!r}")
        object.__setattr__(self, "allowed_peers", tuple(self.allowed_peers))  # a list would not hash
        _ = self.allowed_networks  # parsed here, once: a bad entry fails when the config is built

    @cached_property
    def allowed_networks(self) -> tuple[Network, ...]:
        """``allowed_peers`` parsed; empty when anyone may become controller."""
        return tuple(_parse_peer(entry) for entry in self.allowed_peers)

    def allows(self, host: str) -> bool:
        """Whether a peer at ``host`` (its IP address as a socket reports it) may become controller."""
        networks = self.allowed_networks
        if not networks:
            return True
        try:
            address: IPv4Address | IPv6Address = ip_address(host)
        except ValueError:
            return False
        # An IPv4 peer on a dual-stack socket arrives mapped; either form may be listed.
        forms: list[IPv4Address | IPv6Address] = [address]
        if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
            forms.append(address.ipv4_mapped)
        return any(form in network for network in networks for form in forms)


@dataclass(slots=True)
class TransportCounters:
    """What one server has counted since it was made: one field per counter.

    Written by the server's receive thread (and ``send`` by the robot
    thread); read from anywhere. A new counter is one line here."""

    controllers: int = 0  # controllers that completed a handshake
    bytes_in: int = 0  # bytes handed to the parser
    bytes_out: int = 0  # bytes the kernel accepted from us (handshakes included)
    packets_out: int = 0  # packets accepted by send()
    handshake_rejects: int = 0  # wrong magic or wrong hash
    handshake_timeouts: int = 0  # TCP: no complete handshake within the deadline
    refused: int = 0  # connections or handshakes refused because another controller owns the link
    peers_refused: int = 0  # connections (TCP) or datagrams (UDP) from a peer outside allowed_peers
    idle_drops: int = 0  # controllers dropped (TCP) or unlocked (UDP) after idle_timeout
    disconnects: int = 0  # controllers that closed or reset the connection
    link_losses: int = 0  # controllers dropped (TCP) or unlocked (UDP): no packet for the link timeout
    discarded_bytes: int = 0  # bytes dropped when a controller went: a partial frame, what came after a loss
    foreign_datagrams: int = 0  # UDP: datagrams from a source other than the locked peer
    unpaired_datagrams: int = 0  # UDP: non-handshake datagrams before pairing
    stale_datagrams: int = (
        0  # UDP: datagrams from an earlier controller's source while another holds the link
    )
    same_port_pairings: int = 0  # UDP: an earlier controller paired again from its old source port
    send_refused: int = 0  # packets refused because the send buffer was full
    send_failures: int = 0  # packets not sent for any other reason (no peer, too large, OS error)
    internal_errors: int = 0  # unexpected exceptions caught in the receive thread
    parse_errors: int = 0  # parser errors (resyncs) on this server's connections


#: The counter names, in declaration order.
COUNTER_NAMES = tuple(f.name for f in fields(TransportCounters))


@dataclass(slots=True)
class TransportStatus(TransportCounters):
    """A snapshot of one server: its counters and who holds its link."""

    transport: str = ""  # "tcp" or "udp"
    running: bool = False
    port: int = 0  # the bound port (useful when configured as 0)
    local_hash: int = 0
    handshaken: bool = False  # a controller completed the handshake and still owns the link
    peer: str = ""  # "ip:port" of that controller, "" when none
    remote_hash: int | None = None  # hash field of the last handshake received (good or bad)
    last_reject: str = ""  # why the last handshake or peer was refused
    last_drop: str = ""  # "ip:port: why" of the last controller that went (link lost, idle, closed, reset)
