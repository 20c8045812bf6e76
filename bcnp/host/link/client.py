"""Host client: connect to a robot, handshake, stream command batches, receive telemetry.

The controller side of the BCNP 3.2.2 "Handshake Protocol": the client sends
its handshake, reads the robot's and raises :class:`SchemaMismatchError`
(carrying both hashes) when they differ. After that:

* ``send(messages, clear_queue=False)`` splits a batch into packets of at most
  65,535 messages (fewer over UDP, where a packet must fit one datagram);
* ``stop()`` sends a zero-message CLEAR_QUEUE packet: the robot stops now;
* a background thread sends a zero-message keepalive every
  ``keepalive_interval`` seconds in which nothing else was sent, so long
  queued commands are not cut by the robot's 200 ms link timeout, and
  receives telemetry, delivered to ``on_telemetry`` or through
  :meth:`Client.packets`;
* the same thread keeps the link: a connection that closes, resets or goes
  silent (no telemetry for ``ReconnectPolicy.silence_timeout``) is lost, and
  the client connects and handshakes again with backoff
  (:mod:`bcnp.host.link.core.state` decides; :mod:`bcnp.host.link.keeper` does the I/O).
  :meth:`Client.status` and ``on_link_change`` tell the user; a send while the
  link is down raises :class:`LinkDownError` and sends nothing. Each new
  connection starts with an empty queue on the robot (``status().generation``
  counts them): what was queued before is gone, and the sender decides what is
  still worth sending. ``reconnect=False`` makes the first loss final. A loss is
  dated when the robot was last heard: by the robot's own ``timestampMs`` on the
  last telemetry when it has one, so a burst a stalled link released late does
  not make the robot seem there longer than it was.

Only the first :meth:`Client.connect` fails fast (nothing there, wrong schema);
a schema mismatch on a later attempt closes the client too.

Used as a context manager, the client closes its socket and thread on exit::

    with Client(load_schema("schema/messages.json"), "127.0.0.1") as robot:
        robot.send([DriveCmd(vx=1.0, omega=0.0, durationMs=2000)], clear_queue=True)

Where the parts live: this module says what is sent and keeps the telemetry;
the client holds a :class:`~bcnp.host.link.keeper.LinkKeeper` (``client.link``: the
socket, the thread, reconnects, the byte and packet counters);
:mod:`bcnp.host.link.dial` opens a connection and runs the handshake;
:mod:`bcnp.host.link.core.errors` defines the errors, importable from here too.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, overload

from ...connection import MAX_DATAGRAM
from ...defaults import PORT
from ...schema import Message, MessageSpec, Schema
from ...wire import CLEAR_QUEUE, MAX_MESSAGES_PER_PACKET, MIN_PACKET_SIZE, PacketView, encode_packet
from .core.errors import (
    LinkClosedError,
    LinkDownError,
    LinkError,
    RobotUnreachableError,
    SchemaMismatchError,
)
from .core.state import LinkLoss, LinkState, LinkStatus, ReconnectPolicy
from .keeper import Clock, LinkKeeper

__all__ = [
    "Client",
    "LinkClosedError",
    "LinkDownError",
    "LinkError",
    "LinkLoss",
    "LinkState",
    "LinkStatus",
    "ReconnectPolicy",
    "RobotUnreachableError",
    "SchemaMismatchError",
]


class _Counter:
    """One of the link's counters, read on the client (``client.bytes_in``: ``client.link.bytes_in``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, client: None, owner: type | None = None) -> _Counter: ...
    @overload
    def __get__(self, client: Client, owner: type | None = None) -> int: ...
    def __get__(self, client: Client | None, owner: type | None = None) -> _Counter | int:
        return self if client is None else int(getattr(client.link, self.name))


class Client:
    """The host's end of a link to one robot, over TCP (default) or UDP. See the module docs.

    The link itself (the socket, the background thread, reconnects, the counters) is
    ``self.link``'s, a :class:`~bcnp.host.link.keeper.LinkKeeper`; this class says what is
    sent (batches, stops, keepalives) and keeps the telemetry that arrives: for
    ``on_telemetry`` if set (on the link's thread), else in a bounded queue that
    :meth:`receive`, :meth:`packets` and :meth:`drain` take from."""

    def __init__(
        self,
        schema: Schema,
        host: str = "127.0.0.1",
        port: int = PORT,
        *,
        udp: bool = False,
        timeout: float = 2.0,
        keepalive_interval: float | None = 0.05,
        command_type: int | str | MessageSpec | None = None,
        on_telemetry: Callable[[PacketView], object] | None = None,
        max_queued_packets: int = 1024,
        reconnect: ReconnectPolicy | bool = True,
        on_link_change: Callable[[LinkStatus], object] | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        if keepalive_interval is not None and keepalive_interval <= 0:
            raise ValueError("keepalive_interval must be > 0 seconds, or None to disable keepalives")
        if not schema.messages:
            raise ValueError("the schema defines no messages")
        #: Type of the zero-message keepalive and stop packets: the robot's command type.
        self.command_spec = (
            schema.messages[0]
            if command_type is None
            else command_type
            if isinstance(command_type, MessageSpec)
            else schema[command_type]
        )
        self.schema = schema
        self.host = host
        self.port = port
        self.udp = udp
        self.clock = clock
        self.address = f"{host}:{port}"
        self.on_telemetry = on_telemetry
        #: Called with the new :class:`LinkStatus` on each change: the first connect (from
        #: :meth:`connect`'s caller), then each loss, attempt, reconnect and the close (from
        #: the link's thread).
        self.on_link_change = on_link_change
        self._received: deque[tuple[float, PacketView]] = deque(maxlen=max_queued_packets)
        self._arrived = threading.Condition()  # notified on each packet kept, and each change
        self.telemetry_dropped = 0
        self.link = LinkKeeper(
            schema,
            host,
            port,
            udp=udp,
            timeout=timeout,
            keepalive_interval=keepalive_interval,
            command_spec=self.command_spec,
            reconnect=reconnect,
            on_packet=self._deliver,
            on_change=self._changed,
            clock=clock,
        )
        self._stop_packet = encode_packet(self.command_spec, (), CLEAR_QUEUE)

    # -- the link: what a host program asks of it ----------------------------------------

    bytes_in = _Counter()
    bytes_out = _Counter()
    packets_sent = _Counter()
    keepalives_sent = _Counter()
    telemetry_packets = _Counter()
    parse_errors = _Counter()
    #: Callbacks (``on_telemetry``, ``on_link_change``) that raised; the link stays up.
    callback_errors = _Counter()

    @property
    def connected(self) -> bool:
        return self.link.connected

    @property
    def closed_reason(self) -> str | None:
        """Why the client closed for good (``None`` while open or reconnecting, or before it was opened)."""
        return self.link.closed_reason

    @property
    def remote_hash(self) -> int | None:
        """The robot's schema hash, from its last handshake."""
        return self.link.remote_hash

    @property
    def local_address(self) -> str | None:
        """This end of the link, ``"ip:port"`` as the robot names its peer; ``None`` while not connected."""
        return self.link.local_address

    def status(self) -> LinkStatus:
        """The link's state now: connected, reconnecting (since when, attempts, why) or closed."""
        return self.link.status()

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Wait until the link is up (True) or closed for good or ``timeout`` s passed (False)."""
        return self.link.wait_connected(timeout)

    def connect(self) -> Client:
        """Connect and handshake; raises :class:`LinkError` subclasses. Returns ``self``. Telemetry
        still kept from an earlier connect is dropped. Later losses are the link's thread's: it
        reconnects (see the module docs)."""
        with self._arrived:
            self._received.clear()
        self.link.connect()
        return self

    def close(self) -> None:
        """Close the socket and end the background thread (idempotent)."""
        self.link.close()

    def __enter__(self) -> Client:
        if not self.link.opened:
            self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending -----------------------------------------------------------------------

    def _max_per_packet(self, spec: MessageSpec) -> int:
        if not self.udp:
            return MAX_MESSAGES_PER_PACKET
        return min(MAX_MESSAGES_PER_PACKET, (MAX_DATAGRAM - MIN_PACKET_SIZE) // spec.wire_size)

    def _spec_of(self, msg: Any) -> MessageSpec:
        spec = getattr(type(msg), "spec", None)
        if isinstance(spec, MessageSpec):
            ours = self.schema.get(spec.id)
            if ours is not None and ours.name == spec.name and ours.struct.format == spec.struct.format:
                return spec
        raise TypeError(f"{msg!r} is not a message of this schema (0x{self.schema.hash:08X})")

    def encode(self, messages: Iterable[Message], clear_queue: bool = False) -> list[bytes]:
        """The packets :meth:`send` would send: runs of one type, split to fit."""
        packets: list[bytes] = []
        flags = CLEAR_QUEUE if clear_queue else 0
        for spec, run in itertools.groupby(messages, self._spec_of):
            batch = list(run)
            step = self._max_per_packet(spec)
            for i in range(0, len(batch), step):
                packets.append(encode_packet(spec, batch[i : i + step], flags))
                flags = 0
        if flags:  # clear_queue with no messages: a stop
            packets.append(self._stop_packet)
        return packets

    def send(
        self, messages: Iterable[Message], clear_queue: bool = False, *, generation: int | None = None
    ) -> int:
        """Send a batch (CLEAR_QUEUE on its first packet if asked); returns the packet count.

        ``generation``: the connection the batch was decided on (``status().generation``).
        If the client has connected again since, nothing is sent (:class:`LinkDownError`):
        the new connection's queue on the robot is empty, and a batch meant to follow
        what the old one held would run as the first thing there."""
        packets = self.encode(messages, clear_queue)
        self.link.send_packets(packets, generation)
        return len(packets)

    def send_packets(self, packets: list[bytes], generation: int | None = None) -> None:
        """Send encoded packets (TCP: in one write; UDP: one datagram each); raises as :meth:`send`."""
        self.link.send_packets(packets, generation)

    def stop(self) -> None:
        """A zero-message CLEAR_QUEUE packet: the robot drops its queue and stops now."""
        self.link.send_packets([self._stop_packet])

    def keepalive(self) -> None:
        """A zero-message packet with flags 0: proves the link alive, changes nothing."""
        self.link.send_keepalive()

    # -- receiving -----------------------------------------------------------------------

    def _deliver(self, packet: PacketView, now: float) -> None:
        """To ``on_telemetry`` if set, else kept with the moment it arrived (the oldest dropped
        when full)."""
        callback = self.on_telemetry
        if callback is not None:
            callback(packet)
            return
        with self._arrived:
            if len(self._received) == self._received.maxlen:
                self.telemetry_dropped += 1
            self._received.append((now, packet))
            self._arrived.notify_all()

    def _changed(self, status: LinkStatus) -> None:
        with self._arrived:
            self._arrived.notify_all()
        callback = self.on_link_change
        if callback is not None:
            callback(status)

    def receive(self, timeout: float | None = None) -> PacketView | None:
        """The next received packet, or ``None`` after ``timeout`` seconds or once closed for good
        (it keeps waiting while the client reconnects)."""
        with self._arrived:
            if not self.link.wait(self._arrived, lambda: bool(self._received), timeout):
                return None
            return self._received.popleft()[1]

    def packets(self, timeout: float | None = None) -> Iterator[PacketView]:
        """Received packets as they arrive; ends when closed or after ``timeout`` s of silence."""
        while True:
            packet = self.receive(timeout)
            if packet is None:
                return
            yield packet

    def drain(self) -> list[tuple[float, PacketView]]:
        """Every packet kept so far, oldest first, each with when it arrived (on ``clock``);
        never waits. A host session's loop takes its telemetry this way, at each step."""
        with self._arrived:
            arrived = list(self._received)
            self._received.clear()
        return arrived
