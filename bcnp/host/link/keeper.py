"""The client's link keeper: one link to a robot, kept up by a background thread.

:class:`LinkKeeper` is what a :class:`~bcnp.host.link.client.Client` holds: it
connects and handshakes (:mod:`bcnp.host.link.dial`), runs the background thread that
receives, sends keepalives and reconnects after a loss (:mod:`bcnp.host.link.core.state`
decides when; this module only does the I/O), and sends encoded packets. What the
packets say (batches, stops) and where telemetry goes are the client's: the keeper hands
each packet it receives to ``on_packet`` with the moment it arrived, and each change of
the link to ``on_change``.

A loss is dated when the robot was last heard: by the robot's own ``timestampMs``
on the last telemetry when it has one (:data:`STAMP_FIELD`), so a burst a stalled
link released late does not make the robot seem there longer than it was.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Self

from ...connection import MAX_DATAGRAM, Connection
from ...schema import MessageSpec, Schema
from ...transport.netio import format_address
from ...wire import PacketView, encode_packet
from .core.errors import LinkClosedError, LinkDownError, LinkError, SchemaMismatchError
from .core.state import (
    Connect,
    Disconnect,
    GiveUp,
    LinkMachine,
    LinkState,
    LinkStatus,
    ReconnectPolicy,
)
from .dial import Dial

__all__ = ["STAMP_FIELD", "Clock", "LinkKeeper"]

#: Seconds, monotonic.
Clock = Callable[[], float]
#: A telemetry field of this name (milliseconds of the robot's clock, as DrivetrainTelemetry
#: has) dates a lost link by when the robot sent the last packet, not when it arrived.
STAMP_FIELD = "timestampMs"


class LinkKeeper:
    """Connects to one robot and keeps the link: the socket, the background thread, the
    link's state and the counters. Each received packet goes to ``on_packet(packet, now)``
    (``now``: when it arrived, on ``clock``), each change to ``on_change(status)``, both
    from the background thread (the first connect's from the caller of :meth:`connect`);
    a callback that raises is counted in ``callback_errors``, never kills the link."""

    def __init__(
        self,
        schema: Schema,
        host: str,
        port: int,
        *,
        udp: bool,
        timeout: float,
        keepalive_interval: float | None,
        command_spec: MessageSpec,
        reconnect: ReconnectPolicy | bool,
        on_packet: Callable[[PacketView, float], object],
        on_change: Callable[[LinkStatus], object],
        clock: Clock,
    ) -> None:
        self.schema = schema
        self.host = host
        self.port = port
        self.udp = udp
        self.timeout = timeout
        self.keepalive_interval = keepalive_interval
        #: Type of the zero-message keepalive and stop packets: the robot's command type.
        self.command_spec = command_spec
        self.on_packet = on_packet
        #: Called with the new :class:`LinkStatus` on each change: the first connect, then
        #: each loss, attempt, reconnect and the close.
        self.on_change = on_change
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
        #: Our recent UDP source ports: each connection takes a new one (see :mod:`bcnp.host.link.dial`).
        self._udp_ports: deque[int] = deque(maxlen=32)
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._closed_reason: str | None = None
        self._send_lock = threading.Lock()
        self._last_send = 0.0
        self._connection = self._new_connection()
        self._earlier_parse_errors = 0
        self._keepalive_packet = encode_packet(self.command_spec, ())
        self.bytes_in = 0
        self.bytes_out = 0
        self.packets_sent = 0
        self.keepalives_sent = 0
        self.telemetry_packets = 0
        self.callback_errors = 0
        self.last_callback_error: BaseException | None = None

    # -- connection ------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def opened(self) -> bool:
        """Whether :meth:`connect` ran and :meth:`close` has not (the link may be down)."""
        return self._thread is not None

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
        with self._changed:
            return self.wait(self._changed, lambda: self.connected, timeout)

    def wait(self, changed: threading.Condition, ready: Callable[[], bool], timeout: float | None) -> bool:
        """With ``changed`` held: wait until ``ready()`` (True), or until the client closed for
        good or ``timeout`` seconds passed (False). It keeps waiting while the client reconnects."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not ready():
            if self._closed_reason is not None:
                return False
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            changed.wait(0.5 if left is None else min(left, 0.5))
        return True

    def _new_connection(self) -> Connection:
        return Connection(
            self.schema,
            opened_at=self.clock(),
            on_packet=self._on_packet,
            handshake_timeout=self.timeout if self.timeout > 0 else 1.0,
            datagrams=self.udp,
        )

    def connect(self) -> Self:
        """Connect and handshake; raises :class:`LinkError` subclasses. Returns ``self``.

        Later losses are the background thread's: it reconnects (see the module docs)."""
        if self._thread is not None:
            raise RuntimeError("already connected")
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
        # The first connect is a change too: on_change hears it (from this thread,
        # before the client's own thread can report anything later).
        self._notify()
        self._thread = threading.Thread(target=self._run, name=f"bcnp-client-{self.address}", daemon=True)
        self._thread.start()
        return self

    def _open(self) -> socket.socket:
        """A new socket with a passed handshake (a fresh :class:`Connection`: parser and all)."""
        self._earlier_parse_errors += self._connection.parser.errors
        self._connection = connection = self._new_connection()
        dial = Dial(self.host, self.port, self.udp, self.timeout, self.clock)
        try:
            sock, self.remote_hash = dial.open(connection, self, self._udp_ports)
        except SchemaMismatchError as exc:
            self.remote_hash = exc.remote_hash
            raise
        connection.accept(self.clock())  # telemetry that came with the handshake
        sock.settimeout(None)
        if self.udp:
            self._udp_ports.append(sock.getsockname()[1])
        return sock

    def close(self) -> None:
        """Close the socket and end the background thread (idempotent)."""
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

    # -- the link's life (background thread) --------------------------------------------

    def _notify(self) -> None:
        """Wake whoever waits on the link, then tell ``on_change``."""
        with self._changed:
            self._changed.notify_all()
            status = self._machine.status()
        self._call(self.on_change, status)

    def _call(self, callback: Callable[..., object], *args: object) -> None:
        """A callback that raises is counted in ``callback_errors``, never kills the link."""
        try:
            callback(*args)
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
                    # A send found it dead: the reconnect is _run's. Asked first, the machine
                    # would hand out that attempt here (its state then "connecting"), unmade.
                    dead = self._machine.state is not LinkState.CONNECTED
                    action = None if dead else self._machine.poll(now)
                if dead:
                    self._drop_socket(sock)
                    return
                if isinstance(action, Disconnect):
                    self._drop_socket(sock)
                    self._notify()
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

    def send_keepalive(self) -> None:
        """A zero-message packet with flags 0: proves the link alive, changes nothing."""
        self.send_packets([self._keepalive_packet])
        self.keepalives_sent += 1

    def send_packets(self, packets: list[bytes], generation: int | None = None) -> None:
        """Send encoded packets (TCP: in one write; UDP: one datagram each). With
        ``generation``, only on that connection (``LinkStatus.generation``): a sender that
        decided on one connection never reaches the empty queue of the next."""
        with self._send_lock:
            self._send_locked(packets, generation)

    def _send_locked(self, packets: list[bytes], generation: int | None = None) -> None:
        started = self.clock()
        sock = self._sock
        if sock is None or self._machine.state is not LinkState.CONNECTED:
            raise self._not_sent()
        if generation is not None and generation != self._machine.generation:
            raise LinkDownError(
                f"link to {self.address}: connection {generation} was replaced by connection "
                f"{self._machine.generation} (the robot's queue is empty); nothing sent",
                self.host,
                self.port,
            )
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
        """The connection parsed a packet: the robot was heard (when, by its own stamp if the
        packet has one); ``on_packet`` gets it."""
        self.telemetry_packets += 1
        stamp = None
        field = self._stamp_fields.get(packet.spec.id)
        if field is not None and packet.count:
            stamp = packet.raw(packet.count - 1)[field] / 1000  # the newest sample's
        with self._changed:
            self._machine.heard(now, stamp)
        self._call(self.on_packet, packet, now)
