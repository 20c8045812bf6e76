"""The connection object: one BCNP connection's protocol state, with no I/O.

Implements "Handshake Protocol" of the BCNP 3.2.2 overview for either end of
a connection, over a byte stream (TCP) or datagrams (UDP):

* both ends send :attr:`Connection.handshake` (``b"BCNP"`` + our schema hash)
  when the connection opens, and nothing else until the peer's handshake matched;
* the peer's handshake is decided here: accepted, or rejected with a
  :class:`HandshakeFailure` (wrong magic, hash mismatch naming both hashes,
  too short, deadline passed);
* behind a passed handshake a :class:`~bcnp.parser.StreamParser` frames the
  packets, each handed to ``on_packet(packet, now)``;
* liveness: when bytes and packets last arrived, the idle timeout (a silent
  peer is dropped) and the link timeout (no packet: the robot stops);
* with ``end_on_link_loss`` (the robot's servers), a connection whose last packet
  is older than the link timeout has *lost* its link for good: :class:`LinkLost`, and
  nothing that arrives afterwards is parsed. Over a byte stream the robot
  cannot tell bytes a host sent before a drop, held back by retransmission,
  from bytes sent after it, so none of them may start a command: the peer
  connects (TCP) or handshakes (UDP) again, and the host decides what is
  still worth sending.

Bytes and ``now`` (seconds) go in; events come back as return values. The
socket loops around it (:mod:`bcnp.transport`, :class:`bcnp.host.link.client.Client`)
own the sockets, threads and clocks, and decide what an event costs the peer.

A passed handshake leaves the connection :attr:`ConnectionState.VERIFIED`: whatever the
peer sent behind its handshake is held until the owner calls :meth:`accept`
(after it has taken the controller's place and dropped the previous peer's commands), so a
new peer's packets never arrive before the owner is ready for them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from .defaults import HANDSHAKE_TIMEOUT_S, IDLE_TIMEOUT_S, LINK_TIMEOUT_S
from .parser import StreamParser
from .schema import Schema
from .timebase import elapsed_over
from .wire import (
    HANDSHAKE_MAGIC,
    HANDSHAKE_SIZE,
    MAX_MESSAGES_PER_PACKET,
    ErrorInfo,
    PacketView,
    encode_handshake,
)

__all__ = [
    "Connection",
    "ConnectionState",
    "HandshakeAccepted",
    "HandshakeFailure",
    "HandshakeRejected",
    "IdleTimeout",
    "LinkLost",
    "MAX_DATAGRAM",
    "check_handshake",
    "is_handshake_datagram",
]

#: ``on_packet(packet, now)``: ``now`` is the time passed with the bytes that completed it.
PacketCallback = Callable[[PacketView, float], object]

_MAGIC_SIZE = len(HANDSHAKE_MAGIC)

#: Largest UDP payload over IPv4 (65,535 - 20 IP - 8 UDP header bytes): a
#: packet sent over UDP must fit one datagram.
MAX_DATAGRAM = 65_507


class ConnectionState(enum.Enum):
    """Where a :class:`Connection` is in its life: the handshake, then open, then closed."""

    HANDSHAKE = "waiting for the peer's handshake"
    VERIFIED = "handshake passed, not yet accepted by the owner"
    OPEN = "open"
    CLOSED = "closed"


class HandshakeFailure(enum.Enum):
    """Why a peer's handshake was refused."""

    WRONG_MAGIC = "not a BCNP handshake"
    HASH_MISMATCH = "schema hash mismatch"
    TOO_SHORT = "too short"
    DEADLINE = "no handshake in time"


@dataclass(frozen=True)
class HandshakeAccepted:
    """The peer's handshake carried our schema hash."""

    remote_hash: int


@dataclass(frozen=True)
class HandshakeRejected:
    """The peer's handshake failed; ``reason`` is one line naming what was wrong.

    ``remote_hash`` is the peer's schema hash when its handshake had the right
    magic, else ``None``; ``received`` holds the handshake bytes that arrived.
    """

    failure: HandshakeFailure
    reason: str
    local_hash: int
    remote_hash: int | None
    received: bytes

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class IdleTimeout:
    """The peer sent nothing for ``idle_timeout`` seconds."""

    idle_timeout: float


@dataclass(frozen=True)
class LinkLost:
    """No packet for more than ``link_timeout`` seconds (the robot has stopped):
    the link is lost and the connection closed. ``silent_for`` is how long since the last packet;
    ``discarded`` counts the bytes dropped with it (a partial frame, and what
    arrived after the loss)."""

    link_timeout: float
    silent_for: float
    discarded: int

    def __str__(self) -> str:
        return f"link lost: no packet for {self.silent_for:.3f} s (link timeout {self.link_timeout:g} s)"


Event = HandshakeAccepted | HandshakeRejected | IdleTimeout | LinkLost


def check_handshake(
    data: bytes | bytearray | memoryview, local_hash: int
) -> HandshakeAccepted | HandshakeRejected:
    """Decide a peer's handshake from its first bytes (at most 8 are looked at)."""
    received = bytes(data[:HANDSHAKE_SIZE])
    if len(received) < HANDSHAKE_SIZE:
        return HandshakeRejected(
            HandshakeFailure.TOO_SHORT,
            f"handshake too short: {len(received)} of {HANDSHAKE_SIZE} bytes ({received.hex(' ') or 'none'})",
            local_hash,
            None,
            received,
        )
    magic, field = received[:_MAGIC_SIZE], int.from_bytes(received[_MAGIC_SIZE:], "big")
    if magic != HANDSHAKE_MAGIC:
        return HandshakeRejected(
            HandshakeFailure.WRONG_MAGIC,
            f"not a BCNP handshake: magic {magic!r} is not {HANDSHAKE_MAGIC!r} "
            f"(hash field 0x{field:08X}, ours 0x{local_hash:08X})",
            local_hash,
            None,
            received,
        )
    if field != local_hash:
        return HandshakeRejected(
            HandshakeFailure.HASH_MISMATCH,
            f"schema hash mismatch: peer 0x{field:08X}, ours 0x{local_hash:08X}",
            local_hash,
            field,
            received,
        )
    return HandshakeAccepted(field)


def is_handshake_datagram(data: bytes) -> bool:
    """An 8-byte datagram starting with the magic: a handshake, never a packet
    (the smallest packet is 11 bytes)."""
    return len(data) == HANDSHAKE_SIZE and data[:_MAGIC_SIZE] == HANDSHAKE_MAGIC


class Connection:
    """One connection's protocol state, fed with bytes and the time they arrived.

    ``opened_at`` is when the connection opened (the handshake deadline counts from
    it). Over a stream, call :meth:`receive_data` with every chunk read and
    :meth:`connection_lost` when the stream ends; over datagrams, call
    :meth:`receive_datagram` with each one from the peer. Call
    :meth:`check_deadlines` now and then (each wake-up of a socket loop).

    Not thread-safe: one thread feeds it. Counters and :meth:`link_alive`
    may be read from another thread (plain attribute reads).
    """

    def __init__(
        self,
        schema: Schema,
        *,
        opened_at: float,
        on_packet: PacketCallback | None = None,
        on_error: Callable[[ErrorInfo], object] | None = None,
        handshake_timeout: float = HANDSHAKE_TIMEOUT_S,
        idle_timeout: float = IDLE_TIMEOUT_S,
        link_timeout: float = LINK_TIMEOUT_S,
        datagrams: bool = False,
        max_buffer: int | None = None,
        max_messages: int = MAX_MESSAGES_PER_PACKET,
        search_budget: int | None = None,
        end_on_link_loss: bool = False,
    ) -> None:
        if min(handshake_timeout, idle_timeout) <= 0 or link_timeout < 0:
            raise ValueError("handshake and idle timeouts must be > 0 seconds, the link timeout >= 0")
        self.schema = schema
        self.local_hash = schema.hash
        #: Our 8-byte handshake: send it when the connection opens (and, over UDP, answer each of the peer's).
        self.handshake = encode_handshake(schema.hash)
        self.datagrams = datagrams
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self.link_timeout = link_timeout
        #: Close for good once a packet is older than ``link_timeout`` (the link is lost; see the
        #: module docs).
        self.end_on_link_loss = end_on_link_loss
        self.on_packet = on_packet
        self.state = ConnectionState.HANDSHAKE
        self.opened_at = opened_at
        #: The peer's schema hash once its handshake passed (or failed with the right magic).
        self.remote_hash: int | None = None
        #: When the peer last sent anything (its handshake included).
        self.last_receive = opened_at
        #: When the last packet arrived (``None`` before the first).
        self.last_packet: float | None = None
        self.packets = 0
        #: Frames the packets behind a passed handshake. With ``search_budget``
        #: (bytes, see :data:`~bcnp.parser.SEARCH_STEP`) a call searches at most
        #: that much behind a waiting frame: call :meth:`resume` while
        #: :attr:`search_pending`, yielding in between.
        self.parser = StreamParser(
            schema,
            self._deliver,
            on_error,
            max_buffer=max_buffer,
            max_messages=max_messages,
            search_budget=search_budget,
        )
        self._received = bytearray()  # the handshake so far, then what followed it until accept()
        self._now = opened_at

    # -- input ---------------------------------------------------------------------------

    def receive_data(
        self, data: bytes, now: float
    ) -> HandshakeAccepted | HandshakeRejected | LinkLost | None:
        """Bytes read from the stream at ``now``. Returns the handshake's outcome
        when these bytes decide it, :class:`LinkLost` when they came after the
        link was lost (they are dropped), else ``None``."""
        state = self.state
        if state is ConnectionState.OPEN:
            if self.end_on_link_loss and (lost := self._lost(now, len(data))) is not None:
                return lost
            self.last_receive = self._now = now
            self.parser.push(data)
            return None
        if state is ConnectionState.CLOSED or not data:
            return None
        self.last_receive = now
        self._received += data
        if state is ConnectionState.VERIFIED or len(self._received) < HANDSHAKE_SIZE:
            return None
        return self._decide(self._received)

    def receive_datagram(
        self, data: bytes, now: float
    ) -> HandshakeAccepted | HandshakeRejected | LinkLost | None:
        """One datagram from the peer at ``now``.

        Before the handshake passed, only a handshake datagram decides it
        (anything else returns ``None`` and is not counted as activity); after,
        a handshake datagram is the peer asking again (returns its outcome: the
        owner answers with :attr:`handshake`) and anything else is packets.
        Any datagram that comes after the link was lost returns :class:`LinkLost`
        and is dropped: the owner pairs the peer again only on a new handshake.
        """
        state = self.state
        if state is ConnectionState.CLOSED:
            return None
        if state is ConnectionState.OPEN and self.end_on_link_loss:
            lost = self._lost(now, len(data))
            if lost is not None:
                return lost
        if is_handshake_datagram(data):
            self.last_receive = now
            if state is ConnectionState.HANDSHAKE:
                return self._decide(data)
            outcome = check_handshake(data, self.local_hash)
            if outcome.remote_hash is not None:
                self.remote_hash = outcome.remote_hash
            return outcome
        if state is not ConnectionState.OPEN:
            return None
        self.last_receive = self._now = now
        self.parser.push(data)
        return None

    def accept(self, now: float) -> int:
        """The owner takes the verified connection: what came behind the handshake is
        delivered now. Returns how many bytes that was."""
        if self.state is not ConnectionState.VERIFIED:
            raise RuntimeError(f"accept() on a connection that is {self.state.value}")
        self.state = ConnectionState.OPEN
        held, self._received = bytes(self._received), bytearray()
        if held:
            self._now = now
            self.parser.push(held)
        return len(held)

    def connection_lost(self) -> HandshakeRejected | None:
        """The stream ended. Before a complete handshake that is a refusal
        (``TOO_SHORT``); after, the connection simply closes."""
        state = self.state
        self.close()
        if state is not ConnectionState.HANDSHAKE:
            return None
        outcome = check_handshake(self._received, self.local_hash)
        return outcome if isinstance(outcome, HandshakeRejected) else None

    def check_deadlines(self, now: float) -> HandshakeRejected | IdleTimeout | LinkLost | None:
        """The handshake deadline (stream connections), the link loss (with
        ``end_on_link_loss``) or the idle timeout, if passed at ``now``.

        A passed deadline or a lost link closes the connection; after an idle timeout
        the owner closes it (:meth:`close` says how many bytes of a partial
        frame went)."""
        state = self.state
        if state is ConnectionState.HANDSHAKE and not self.datagrams:
            if elapsed_over(now, self.opened_at, self.handshake_timeout):
                got = len(self._received)
                self.close()
                return HandshakeRejected(
                    HandshakeFailure.DEADLINE,
                    f"no handshake within {self.handshake_timeout:g} s ({got} of {HANDSHAKE_SIZE} bytes)",
                    self.local_hash,
                    None,
                    bytes(self._received),
                )
        elif state is ConnectionState.OPEN:
            if self.end_on_link_loss and (lost := self._lost(now, 0)) is not None:
                return lost
            if elapsed_over(now, self.last_receive, self.idle_timeout):
                return IdleTimeout(self.idle_timeout)
        return None

    def lose(self, silent_for: float) -> LinkLost:
        """The owner found the link lost first (the robot's queue, at its tick,
        ``silent_for`` seconds after the last packet it took): closed as a loss
        found here is."""
        return LinkLost(self.link_timeout, silent_for, self.close())

    def close(self) -> int:
        """Close the connection; returns the bytes of a partial frame it drops."""
        if self.state is ConnectionState.CLOSED:
            return 0
        self.state = ConnectionState.CLOSED
        dropped = self.parser.buffered
        self.parser.reset()
        return dropped

    @property
    def search_pending(self) -> bool:
        """The parser's search budget cut a search short: :meth:`resume` goes on."""
        return self.parser.search_pending

    def resume(self) -> None:
        """Go on with a search the budget cut short (packets it finds keep their receive time)."""
        self.parser.resume()

    # -- state ------------------------------------------------------------------------------

    def link_alive(self, now: float) -> bool:
        """A packet arrived no more than ``link_timeout`` before ``now``."""
        last = self.last_packet
        return (
            last is not None
            and self.state is ConnectionState.OPEN
            and not elapsed_over(now, last, self.link_timeout)
        )

    @property
    def handshake_received(self) -> int:
        """Bytes of the peer's handshake received so far (at most 8)."""
        return (
            min(len(self._received), HANDSHAKE_SIZE)
            if self.state is ConnectionState.HANDSHAKE
            else HANDSHAKE_SIZE
        )

    # -- internals -------------------------------------------------------------------------

    def _lost(self, now: float, arriving: int) -> LinkLost | None:
        """Closes the connection and says so when its last packet is older than the link
        timeout at ``now``; ``arriving`` bytes came with this check and are dropped.
        Before the first packet there is nothing to lose: the idle timeout applies."""
        last = self.last_packet
        if last is None or not elapsed_over(now, last, self.link_timeout):
            return None
        return LinkLost(self.link_timeout, now - last, self.close() + arriving)

    def _decide(self, received: bytes | bytearray) -> HandshakeAccepted | HandshakeRejected:
        outcome = check_handshake(received, self.local_hash)
        if outcome.remote_hash is not None:
            self.remote_hash = outcome.remote_hash
        if isinstance(outcome, HandshakeAccepted):
            self.state = ConnectionState.VERIFIED
            del self._received[:HANDSHAKE_SIZE]
            if self.datagrams:
                self._received.clear()  # a handshake datagram carries nothing else
        else:
            self.close()
        return outcome

    def _deliver(self, packet: PacketView) -> None:
        now = self._now
        self.last_packet = now
        self.packets += 1
        on_packet = self.on_packet
        if on_packet is not None:
            on_packet(packet, now)
