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
  (:mod:`bcnp.host.linkstate` decides; this module only does the I/O).
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
"""

from __future__ import annotations

import contextlib
import itertools
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..connection import (
    MAX_DATAGRAM,
    Connection,
    HandshakeAccepted,
    HandshakeRejected,
    check_handshake,
    is_handshake_datagram,
)
from ..defaults import PORT, START_SIM, UDP_HANDSHAKE_RETRY_S
from ..schema import Message, MessageSpec, Schema
from ..transport.netio import format_address
from ..wire import (
    CLEAR_QUEUE,
    HANDSHAKE_SIZE,
    MAX_MESSAGES_PER_PACKET,
    MIN_PACKET_SIZE,
    PacketView,
    encode_packet,
)
from .linkstate import (
    Connect,
    Disconnect,
    GiveUp,
    LinkLoss,
    LinkMachine,
    LinkState,
    LinkStatus,
    ReconnectPolicy,
)

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

#: Seconds, monotonic.
Clock = Callable[[], float]
#: A telemetry field of this name (milliseconds of the robot's clock, as DrivetrainTelemetry
#: has) dates a lost link by when the robot sent the last packet, not when it arrived.
STAMP_FIELD = "timestampMs"


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


class Client:
    """A connection to one robot over TCP (default) or UDP. See the module docs."""

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
        self.schema = schema
        self.host = host
        self.port = port
        self.udp = udp
        self.timeout = timeout
        self.keepalive_interval = keepalive_interval
        #: Type of the zero-message keepalive and stop packets: the robot's command type.
        self.command_spec = (
            schema.messages[0]
            if command_type is None
            else command_type
            if isinstance(command_type, MessageSpec)
            else schema[command_type]
        )
        self.on_telemetry = on_telemetry
        #: Called with the new :class:`LinkStatus` on each change: the first connect (from
        #: :meth:`connect`'s caller), then each loss, attempt, reconnect and the close (from the
        #: client's thread).
        self.on_link_change = on_link_change
        self.clock = clock
        if isinstance(reconnect, bool):
            reconnect = ReconnectPolicy(enabled=reconnect)
        self.policy = reconnect
        self.remote_hash: int | None = None
        self._machine = LinkMachine(reconnect)
        self._changed = threading.Condition()  # guards _machine; notified on each change
        self._stamp_fields = {  # message id -> index of STAMP_FIELD, for the messages that have it
            spec.id: spec.field_names.index(STAMP_FIELD) for spec in schema if STAMP_FIELD in spec.field_names
        }
        self._sock: socket.socket | None = None
        self._udp_port = 0  # our UDP source port, kept across reconnects
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._closed_reason: str | None = None
        self._send_lock = threading.Lock()
        self._last_send = 0.0
        self._received: deque[PacketView] = deque(maxlen=max_queued_packets)
        self._arrived = threading.Condition()
        self._connection = self._new_connection()
        self._earlier_parse_errors = 0
        self._keepalive_packet = encode_packet(self.command_spec, ())
        self.bytes_in = 0
        self.bytes_out = 0
        self.packets_sent = 0
        self.keepalives_sent = 0
        self.telemetry_packets = 0
        self.telemetry_dropped = 0
        self.callback_errors = 0
        self.last_callback_error: BaseException | None = None

    # -- connection ------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._sock is not None and self._machine.state is LinkState.CONNECTED

    @property
    def local_address(self) -> str | None:
        """This end of the link, ``"ip:port"`` as the robot names its peer (``Network/Peer``);
        ``None`` while not connected."""
        sock = self._sock
        if sock is None:
            return None
        try:
            return format_address(sock.getsockname())
        except OSError:
            return None

    @property
    def closed_reason(self) -> str | None:
        """Why the client closed for good (``None`` while open or reconnecting, or before it was opened)."""
        return self._closed_reason

    @property
    def parse_errors(self) -> int:
        return self._earlier_parse_errors + self._connection.parser.errors

    def status(self) -> LinkStatus:
        """The link's state now: connected, reconnecting (since when, attempts, why) or closed."""
        with self._changed:
            return self._machine.status()

    def wait_connected(self, timeout: float | None = None) -> bool:
        """Wait until the link is up (True) or closed for good or ``timeout`` s passed (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while not self.connected:
                if self._closed_reason is not None:
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._changed.wait(0.5 if left is None else min(left, 0.5))
            return True

    def _new_connection(self) -> Connection:
        return Connection(
            self.schema,
            opened_at=self.clock(),
            on_packet=self._on_packet,
            handshake_timeout=self.timeout if self.timeout > 0 else 1.0,
            datagrams=self.udp,
        )

    def connect(self) -> Client:
        """Connect and handshake; raises :class:`LinkError` subclasses. Returns ``self``.

        Later losses are the background thread's: it reconnects (see the module docs)."""
        if self._thread is not None:
            raise RuntimeError("already connected")
        with self._arrived:
            self._received.clear()
        self._closing.clear()
        self._closed_reason = None
        with self._changed:
            self._machine = LinkMachine(self.policy)
        sock = self._open()
        now = self.clock()
        with self._changed:
            self._sock = sock
            self._machine.connected(now)
        self._last_send = now
        # The first connect is a change too: on_link_change hears it (from this thread,
        # before the client's own thread can report anything later).
        self._notify()
        self._thread = threading.Thread(target=self._run, name=f"bcnp-client-{self.address}", daemon=True)
        self._thread.start()
        return self

    def _open(self) -> socket.socket:
        """A new socket with a passed handshake (a fresh :class:`Connection`: parser and all)."""
        self._earlier_parse_errors += self._connection.parser.errors
        self._connection = self._new_connection()
        return self._connect_udp() if self.udp else self._connect_tcp()

    def _unreachable(self, why: str) -> RobotUnreachableError:
        return RobotUnreachableError(
            f"cannot reach the robot at {self.address} ({why}): start the simulator "
            f"({START_SIM}) or check the robot's address and that its program is running",
            self.host,
            self.port,
            why,
        )

    def _handshake_outcome(self, sock: socket.socket, outcome: HandshakeAccepted | HandshakeRejected) -> None:
        """Keep the robot's hash; a refusal closes the socket and raises."""
        self.remote_hash = outcome.remote_hash
        if isinstance(outcome, HandshakeRejected):
            sock.close()
            raise SchemaMismatchError(
                self.host, self.port, self.schema.hash, outcome.remote_hash, outcome.reason
            )

    def _connect_tcp(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except TimeoutError:
            raise self._unreachable(f"no answer within {self.timeout:g} s") from None
        except OSError as exc:
            raise self._unreachable(exc.strerror or str(exc)) from None
        connection = self._connection
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(connection.handshake)
            self.bytes_out += len(connection.handshake)
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
                self.bytes_in += len(chunk)
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
        self._handshake_outcome(sock, outcome)
        connection.accept(self.clock())  # telemetry that came with the handshake
        sock.settimeout(None)
        return sock

    def _connect_udp(self) -> socket.socket:
        try:
            infos = socket.getaddrinfo(self.host, self.port, socket.AF_INET, socket.SOCK_DGRAM)
        except OSError as exc:
            raise self._unreachable(exc.strerror or str(exc)) from None
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if self._udp_port:
            # The same source as before: a robot that still holds us as its peer
            # answers our handshake instead of waiting out its idle timeout.
            with contextlib.suppress(OSError):
                sock.bind(("", self._udp_port))
        try:
            sock.connect(infos[0][4])
        except OSError as exc:
            sock.close()
            raise self._unreachable(exc.strerror or str(exc)) from None
        connection = self._connection
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._unreachable(
                        f"no UDP handshake answer within {self.timeout:g} s; if it is running, another "
                        "controller owns the link (a UDP peer is released after 5 s of silence)"
                    )
                sock.send(connection.handshake)
                self.bytes_out += len(connection.handshake)
                sock.settimeout(min(left, UDP_HANDSHAKE_RETRY_S))
                try:
                    data = sock.recv(65_536)
                except TimeoutError:
                    continue
                if len(data) == HANDSHAKE_SIZE:
                    self.bytes_in += len(data)
                    break
        except ConnectionRefusedError:
            sock.close()
            raise self._unreachable("port closed") from None
        except OSError as exc:
            sock.close()
            if isinstance(exc, LinkError):
                raise
            raise self._unreachable(exc.strerror or str(exc)) from None
        except BaseException:
            sock.close()
            raise
        now = self.clock()
        outcome = connection.receive_datagram(data, now) if is_handshake_datagram(data) else None
        if isinstance(outcome, HandshakeAccepted | HandshakeRejected):
            self._handshake_outcome(sock, outcome)
        else:
            self._handshake_outcome(sock, check_handshake(data, self.schema.hash))
        connection.accept(now)
        sock.settimeout(None)
        self._udp_port = sock.getsockname()[1]
        return sock

    def close(self) -> None:
        """Close the socket and stop the background thread (idempotent)."""
        if self._sock is None and self._thread is None:
            return
        was_connected = self.connected
        self._closing.set()
        with self._changed:
            self._machine.close()
            if self._closed_reason is None:
                self._closed_reason = "closed by the client"
        sock = self._sock
        if sock is not None:
            if self.udp and was_connected:
                # UDP has no goodbye: one packet lets the robot apply its 200 ms link
                # timeout and free the link for the next host, instead of its 5 s idle.
                with contextlib.suppress(OSError), self._send_lock:
                    sock.send(self._keepalive_packet)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.timeout + 2.0)
        with self._send_lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
        self._thread = None
        self._notify()

    def __enter__(self) -> Client:
        if self._thread is None:
            self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the link's life (background thread) --------------------------------------------

    def _notify(self) -> None:
        """Wake whoever waits on the link, then tell the user (``on_link_change``)."""
        with self._changed:
            self._changed.notify_all()
            status = self._machine.status()
        with self._arrived:
            self._arrived.notify_all()
        callback = self.on_link_change
        if callback is not None:
            try:
                callback(status)
            except Exception as exc:  # a broken callback must not kill the link
                self.callback_errors += 1
                self.last_callback_error = exc

    def _link_lost(self, reason: str, sock: socket.socket) -> None:
        """The current connection is gone: tell the machine (it decides between
        reconnecting and closing for good) and close the socket."""
        self._mark_lost(reason)
        self._drop_socket(sock)
        self._notify()

    def _mark_lost(self, reason: str) -> None:
        with self._changed:
            self._machine.lost(self.clock(), reason)
            if self._machine.state is LinkState.CLOSED and self._closed_reason is None:
                self._closed_reason = reason
                self._closing.set()

    def _drop_socket(self, sock: socket.socket) -> None:
        with self._send_lock:
            if self._sock is sock:
                self._sock = None
            sock.close()

    def _run(self) -> None:
        while not self._closing.is_set():
            sock = self._sock
            if sock is not None:
                self._serve(sock)
                continue
            now = self.clock()
            with self._changed:
                action = self._machine.poll(now)
            if isinstance(action, Connect):
                self._notify()
                self._attempt()
            elif isinstance(action, GiveUp):
                with self._changed:
                    if self._closed_reason is None:
                        self._closed_reason = action.reason
                self._closing.set()
                self._notify()
            elif not isinstance(action, Disconnect):
                wait = 0.5 if action.until is None else action.until - now
                self._closing.wait(min(max(wait, 0.0), 0.5))

    def _attempt(self) -> None:
        try:
            sock = self._open()
        except SchemaMismatchError as exc:
            with self._changed:
                self._machine.failed(self.clock(), str(exc), fatal=True)
        except LinkError as exc:
            with self._changed:
                self._machine.failed(self.clock(), exc.reason)
        else:
            now = self.clock()
            with self._send_lock, self._changed:
                if self._closing.is_set():
                    sock.close()
                    return
                self._sock = sock
                self._machine.connected(now)
                self._last_send = now
        self._notify()

    def _serve(self, sock: socket.socket) -> None:
        """One connection's receive loop and keepalives, until it is lost or closed."""
        interval = self.keepalive_interval
        next_try = 0.0  # when the send lock was busy: don't retry before this
        with selectors.DefaultSelector() as sel:
            sel.register(sock, selectors.EVENT_READ)
            while not self._closing.is_set():
                now = self.clock()
                with self._changed:
                    action = self._machine.poll(now)
                if isinstance(action, Disconnect):
                    self._drop_socket(sock)
                    self._notify()
                    return
                if self._machine.state is not LinkState.CONNECTED:  # a send found it dead
                    self._drop_socket(sock)
                    return
                wait = 0.5 if action.until is None else max(0.0, action.until - now)  # type: ignore[union-attr]
                if interval is not None:
                    wait = min(wait, max(0.0, self._last_send + interval - now, next_try - now))
                if sel.select(wait):
                    try:
                        data = sock.recv(1 << 20)
                    except (BlockingIOError, InterruptedError):
                        data = None
                    except OSError as exc:
                        if not self._closing.is_set():
                            self._link_lost(f"receive failed: {exc.strerror or exc}", sock)
                        return
                    if data is not None:
                        if not data:
                            if not self._closing.is_set():
                                self._link_lost("closed by the robot", sock)
                            return
                        self.bytes_in += len(data)
                        if self.udp:  # a repeated handshake is answered by the connection, not parsed
                            self._connection.receive_datagram(data, self.clock())
                        else:
                            self._connection.receive_data(data, self.clock())
                if interval is not None:
                    now = self.clock()
                    if now - self._last_send >= interval and now >= next_try and not self._send_keepalive():
                        next_try = now + interval

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
            packets.append(encode_packet(self.command_spec, (), CLEAR_QUEUE))
        return packets

    def send(self, messages: Iterable[Message], clear_queue: bool = False) -> int:
        """Send a batch (CLEAR_QUEUE on its first packet if asked); returns the packet count."""
        packets = self.encode(messages, clear_queue)
        self.send_packets(packets)
        return len(packets)

    def stop(self) -> None:
        """A zero-message CLEAR_QUEUE packet: the robot drops its queue and stops now."""
        self.send_packets([encode_packet(self.command_spec, (), CLEAR_QUEUE)])

    def keepalive(self) -> None:
        """A zero-message packet with flags 0: proves the link alive, changes nothing."""
        self.send_packets([self._keepalive_packet])
        self.keepalives_sent += 1

    def _send_keepalive(self) -> bool:
        """From the background thread: never waits behind a user's send (which
        proves the link alive anyway). False when the lock was busy."""
        if not self._send_lock.acquire(blocking=False):
            return False
        try:
            self._send_locked([self._keepalive_packet])
            self.keepalives_sent += 1
        except LinkError:
            pass  # _link_lost() has recorded why
        finally:
            self._send_lock.release()
        return True

    def send_packets(self, packets: list[bytes]) -> None:
        """Send encoded packets (TCP: in one write; UDP: one datagram each)."""
        with self._send_lock:
            self._send_locked(packets)

    def _send_locked(self, packets: list[bytes]) -> None:
        started = self.clock()
        sock = self._sock
        if sock is None or self._machine.state is not LinkState.CONNECTED:
            raise self._not_sent()
        try:
            if self.udp:
                for packet in packets:
                    if len(packet) > MAX_DATAGRAM:
                        raise ValueError(f"a {len(packet)}-byte packet does not fit a UDP datagram")
                    sock.send(packet)
                    self.bytes_out += len(packet)
            else:
                data = packets[0] if len(packets) == 1 else b"".join(packets)
                sock.sendall(data)
                self.bytes_out += len(data)
        except OSError as exc:
            self._mark_lost(f"send failed: {exc.strerror or exc}")
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # the background thread wakes and takes it from here
            raise self._not_sent() from None
        self.packets_sent += len(packets)
        self._last_send = started

    def _not_sent(self) -> LinkError:
        """Why nothing could be sent: closed for good, or down and reconnecting."""
        if self._closed_reason is not None:
            return LinkClosedError(
                f"link to {self.address} is closed ({self._closed_reason})",
                self.host,
                self.port,
                self._closed_reason,
            )
        if self._thread is None and self._sock is None:
            return LinkClosedError(f"link to {self.address} is not connected", self.host, self.port)
        status = self.status()
        return LinkDownError(
            f"link to {self.address} is down, {status.describe(self.clock())}", self.host, self.port
        )

    # -- receiving -----------------------------------------------------------------------

    def _on_packet(self, packet: PacketView, now: float) -> None:
        self.telemetry_packets += 1
        stamp = None
        field = self._stamp_fields.get(packet.spec.id)
        if field is not None and packet.count:
            stamp = packet.raw(packet.count - 1)[field] / 1000  # the newest sample's
        with self._changed:
            self._machine.heard(now, stamp)
        callback = self.on_telemetry
        if callback is not None:
            try:
                callback(packet)
            except Exception as exc:  # a broken callback must not kill the link
                self.callback_errors += 1
                self.last_callback_error = exc
            return
        with self._arrived:
            if len(self._received) == self._received.maxlen:
                self.telemetry_dropped += 1
            self._received.append(packet)
            self._arrived.notify_all()

    def receive(self, timeout: float | None = None) -> PacketView | None:
        """The next received packet, or ``None`` after ``timeout`` seconds or once closed for good
        (it keeps waiting while the client reconnects)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._arrived:
            while not self._received:
                if self._closed_reason is not None:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._arrived.wait(left if left is not None else 0.5)
            return self._received.popleft()

    def packets(self, timeout: float | None = None) -> Iterator[PacketView]:
        """Received packets as they arrive; ends when closed or after ``timeout`` s of silence."""
        while True:
            packet = self.receive(timeout)
            if packet is None:
                return
            yield packet
