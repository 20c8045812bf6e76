"""What the TCP and UDP servers share: the socket loop's thread, the controller
slot, counters and status.

Implements the robot side of "Transport Adapters" in the BCNP 3.2.2 overview,
with the reference's limits (one controller, zombie timeout, bounded send
buffer). The protocol itself (handshake, framing, liveness) is decided by a
:class:`~bcnp.connection.Connection` per peer; a server only moves bytes
between its socket and that object and acts on what it returns.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ..connection import Connection, HandshakeAccepted, HandshakeRejected, IdleTimeout, LinkLost
from ..parser import SEARCH_STEP
from ..schema import Schema
from ..wire import ErrorInfo, PacketView
from .config import COUNTER_NAMES, TransportConfig, TransportCounters, TransportStatus
from .netio import Waker, format_address

__all__ = [
    "Clock",
    "ControllerSlot",
    "PacketSink",
    "ServerBase",
]

#: Seconds, monotonic. The robot passes FPGA time so simulated time drives every timeout.
Clock = Callable[[], float]

log = logging.getLogger("bcnp.transport")


class PacketSink(Protocol):
    """Where a server delivers packets: a :class:`~bcnp.dispatcher.Dispatcher`."""

    schema: Schema
    link_timeout: float
    max_buffer: int | None
    max_messages: int

    def dispatch(self, packet: PacketView, now: float) -> None: ...


class ControllerSlot:
    """One controller per robot, across transports: the first handshake wins.

    Each server holds the slot while its controller is live and releases it
    when the controller goes; a server that cannot acquire it refuses its peer.
    ``last_drop`` is the servers' ``last_drop`` of the last controller that
    went, whichever transport it used.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: object | None = None
        self.last_drop = ""

    def acquire(self, owner: object) -> bool:
        with self._lock:
            if self._owner is None or self._owner is owner:
                self._owner = owner
                return True
            return False

    def release(self, owner: object) -> None:
        with self._lock:
            if self._owner is owner:
                self._owner = None

    @property
    def owner(self) -> object | None:
        return self._owner


def _lower_priority(nice: int) -> int:
    """Raises this thread's nice value by ``nice`` where the OS supports per-thread
    priorities (Linux); returns the increase applied (0 elsewhere or on refusal)."""
    setpriority = getattr(os, "setpriority", None)
    if nice <= 0 or setpriority is None or not sys.platform.startswith("linux"):
        return 0
    tid = threading.get_native_id()  # on Linux a thread's id is a PRIO_PROCESS target
    try:
        setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
    except OSError:
        return 0
    return nice


def ending(event: LinkLost | IdleTimeout) -> tuple[str, str, int]:
    """A controller this event ends: why it went, the counter that counts it, the bytes dropped."""
    if isinstance(event, LinkLost):
        return str(event), "link_losses", event.discarded
    return f"idle: silent for {event.idle_timeout:g} s", "idle_drops", 0


class ServerBase:
    """Thread, wake-up, counters and controller bookkeeping common to both servers.

    Subclasses open their socket in :meth:`_open`, serve it in :meth:`_serve`
    (one call per wake-up of the receive thread) and close what they own in
    :meth:`_close_all`. ``pause`` (a :meth:`LoopPriority.pause`) is called at
    every safe point of the receive thread: before each read, each packet,
    each parse error, and every ``SEARCH_STEP`` bytes fed to a connection.

    With ``defer_sends``, :meth:`send` never touches a socket: it queues the
    packet (refusing it, as always, when the queue is over
    ``send_buffer_limit``) and :meth:`flush_sends` has the receive thread
    write what is queued. The robot queues its telemetry during a tick and
    flushes after it: a send on loopback runs the peer's side of the network
    stack in the sender's thread, the longest single step of a live tick.
    """

    kind = ""
    #: The warnings a flood of bad input can repeat, each on its own logger,
    #: ``bcnp.transport.<kind>.<warning>``: the library logs every one, and
    #: whoever runs the server limits each kind separately (the robot: one line
    #: a second), so a flood of one kind never hides the first of another.
    warnings: tuple[str, ...] = ()

    @classmethod
    def warning_loggers(cls) -> tuple[str, ...]:
        """The names of the loggers this server warns on, one per kind of warning."""
        return tuple(f"{log.name}.{cls.kind}.{warning}" for warning in cls.warnings)

    def __init__(
        self,
        sink: PacketSink,
        config: TransportConfig | None = None,
        *,
        clock: Clock = time.monotonic,
        slot: ControllerSlot | None = None,
        on_controller_change: Callable[[], object] | None = None,
        pause: Callable[[], object] | None = None,
        defer_sends: bool = False,
    ) -> None:
        self.sink = sink
        self.config = config if config is not None else TransportConfig()
        self.clock = clock
        self.slot = slot if slot is not None else ControllerSlot()
        #: Called in the receive thread whenever a controller comes or goes, before
        #: any byte of a new controller is delivered: the robot drops the previous
        #: controller's queued commands here, so a new one never inherits them.
        self.on_controller_change = on_controller_change
        self.pause = pause
        self.defer_sends = defer_sends
        self._sends_queued = False  # deferred sends wait for flush_sends()
        self.local_hash = sink.schema.hash
        self.counters = TransportCounters()
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._waker: Waker | None = None
        self._port = 0
        # Sends (robot thread) and peer changes (receive thread) take this lock,
        # so a send never reaches a socket that is being closed.
        self._send_lock = threading.Lock()
        self._warn = {
            warning: logging.getLogger(name)
            for warning, name in zip(self.warnings, self.warning_loggers(), strict=True)
        }
        #: The controller's connection and address while one owns this server.
        self._connection: Connection | None = None
        self._peer: tuple[object, ...] | None = None
        self.remote_hash: int | None = None
        self.last_reject = ""
        #: ``"ip:port: why"`` of the last controller that went (link lost, idle, closed, reset).
        self.last_drop = ""
        # end_lost_link(): the connection whose link the robot found lost, and for how long it
        # had been silent.
        self._lost_connection: tuple[Connection, float] | None = None
        self.last_internal_error: BaseException | None = None
        self.last_send_error: BaseException | None = None
        #: Nice increase the receive thread applied to itself (see TransportConfig.receive_nice).
        self.receive_nice = 0
        dispatch = sink.dispatch
        if pause is None:
            self._on_packet: Callable[[PacketView, float], object] = dispatch
        else:

            def on_packet(packet: PacketView, now: float) -> None:
                pause()  # the robot loop first (LoopPriority)
                dispatch(packet, now)

            self._on_packet = on_packet

    # -- lifecycle -------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def port(self) -> int:
        """The bound port (the configured one, or the kernel's pick for port 0)."""
        return self._port

    def start(self) -> None:
        """Bind and start the receive thread. Bind errors (port in use) raise here."""
        if self._thread is not None:
            if self._thread.is_alive():
                raise RuntimeError(f"{self.kind} server already started (or still closing)")
            self._thread = None
        self._closing.clear()
        waker = Waker()
        try:
            self._port = self._open(waker)
        except BaseException:
            waker.close()
            raise
        self._waker = waker
        self._thread = threading.Thread(target=self._run, name=f"bcnp-{self.kind}-{self._port}", daemon=True)
        self._thread.start()

    def flush_sends(self) -> None:
        """Deferred sends (``defer_sends``): wake the receive thread to write what
        :meth:`send` queued since the last flush. Nothing queued: no system call."""
        if self._sends_queued:
            self._sends_queued = False
            waker = self._waker
            if waker is not None:
                waker.wake()

    def close(self, timeout: float = 1.0) -> None:
        """End the receive thread, which closes every socket on its way out; returns within
        ``timeout``. Safe to call again; :meth:`start` opens the server anew."""
        thread = self._thread
        if thread is None:
            return
        self._closing.set()
        waker = self._waker
        if waker is not None:
            waker.wake()
        thread.join(timeout)
        if thread.is_alive():  # pragma: no cover - every wake-up is bounded (see _serve)
            # Keep the handle: start() refuses until the thread has closed its sockets.
            log.error("BCNP %s receive thread did not end within %.1f s", self.kind, timeout)
            return
        self._thread = None
        self._waker = None

    def __enter__(self) -> ServerBase:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        waker = self._waker
        assert waker is not None
        self.receive_nice = _lower_priority(self.config.receive_nice)
        try:
            while not self._closing.is_set():
                try:
                    self._serve(waker)
                except Exception as exc:  # the receive thread must outlive any one bad event
                    self.counters.internal_errors += 1
                    self.last_internal_error = exc
                    log.exception("BCNP %s receive thread: unexpected error (continuing)", self.kind)
                    self._closing.wait(self.config.poll_interval)
        finally:
            # The thread owns its sockets: nothing closes them under its feet.
            self._close_all()
            waker.close()

    # -- subclass hooks ----------------------------------------------------------

    def _open(self, waker: Waker) -> int:
        """Bind; register the socket and ``waker.reader`` with a selector; return the port."""
        raise NotImplementedError

    def _serve(self, waker: Waker) -> None:
        """One wake-up: wait at most ``poll_interval``, handle a bounded amount of
        input, check timeouts. Bounded so that a flood cannot keep the thread
        from seeing ``close()``, new connections or timeouts."""
        raise NotImplementedError

    def _close_all(self) -> None:
        """Close every socket and selector, release the slot; a socket that ``send``
        uses is closed under the send lock."""
        raise NotImplementedError

    # -- connections -------------------------------------------------------------

    def _new_connection(self, now: float, *, datagrams: bool = False) -> Connection:
        """A connection for a new peer, delivering its packets to the sink."""
        sink, cfg = self.sink, self.config
        return Connection(
            sink.schema,
            opened_at=now,
            on_packet=self._on_packet,
            on_error=self._on_parse_error,
            handshake_timeout=cfg.handshake_timeout,
            idle_timeout=cfg.idle_timeout,
            link_timeout=sink.link_timeout,
            datagrams=datagrams,
            max_buffer=sink.max_buffer,
            max_messages=sink.max_messages,
            # With the robot loop to yield to, no call searches more than a step.
            search_budget=SEARCH_STEP if self.pause is not None else None,
            end_on_link_loss=cfg.end_on_link_loss,
        )

    def _on_parse_error(self, info: ErrorInfo) -> None:
        pause = self.pause
        if pause is not None:
            pause()
        self.counters.parse_errors += 1

    def _feed(self, connection: Connection, data: bytes, now: float) -> LinkLost | None:
        """Hand received bytes to the controller's connection. When the robot loop may need
        the interpreter: ``SEARCH_STEP`` bytes at a time, and a search the connection's
        budget cut short goes on a step at a time, with a pause between steps.

        :class:`LinkLost` when the bytes came after the link was lost: none of them
        was parsed (nor counted in ``bytes_in``), and the caller drops the controller."""
        pause = self.pause
        if pause is None:
            outcome = connection.receive_data(data, now)
            if isinstance(outcome, LinkLost):
                return outcome
            self.counters.bytes_in += len(data)
            return None
        with memoryview(data) as view:
            for start in range(0, len(data), SEARCH_STEP):
                if start:
                    pause()
                outcome = connection.receive_data(view[start : start + SEARCH_STEP], now)  # type: ignore[arg-type]
                if isinstance(outcome, LinkLost):  # only the first step can find it: the rest go too
                    rest = len(data) - min(SEARCH_STEP, len(data))
                    return LinkLost(outcome.link_timeout, outcome.silent_for, outcome.discarded + rest)
                while connection.search_pending:
                    pause()
                    connection.resume()
        self.counters.bytes_in += len(data)
        return None

    def end_lost_link(self, connection: Connection, silent_for: float) -> None:
        """The robot found the link of ``connection`` lost first: its queue, at its tick,
        had no packet for the link timeout (``silent_for`` seconds) while the receive
        thread had not yet looked. The receive thread ends that controller as if it had
        found the loss itself, unless it has gone already. Any thread; never blocks."""
        self._lost_connection = (connection, silent_for)
        waker = self._waker
        if waker is not None:
            waker.wake()

    def _lost_by_request(self) -> LinkLost | None:
        """Receive thread: the loss :meth:`end_lost_link` asked for, if its connection is
        still the controller's (the connection is closed here; the caller drops it)."""
        request = self._lost_connection
        if request is None:
            return None
        self._lost_connection = None
        connection, silent_for = request
        return connection.lose(silent_for) if connection is self._connection else None

    def _take_controller(self, connection: Connection, peer: tuple[object, ...], now: float) -> None:
        """A verified peer becomes the controller (slot already held): the previous
        controller's commands go first, then whatever the peer sent behind its handshake."""
        self._controller_changed()
        with self._send_lock:
            self._connection = connection
            self._peer = peer
            self.counters.controllers += 1
        self.counters.bytes_in += connection.accept(now)

    def _end_controller(
        self,
        why: str,
        counter: str | None = None,
        close_socket: Callable[[], object] | None = None,
        discarded: int = 0,
    ) -> None:
        """The controller went away: nobody to send to, its socket closed, its
        partial frame and its commands dropped, the slot freed (after those:
        another server could take it and deliver), ``why`` noted and ``counter``
        counted, all under the send lock, which :meth:`status` takes too: a peer
        that sees the socket close, or a status that shows no controller, sees
        all of it. ``discarded``: bytes dropped besides the partial frame."""
        with self._send_lock:
            connection, peer, self._connection, self._peer = self._connection, self._peer, None, None
            self._lost_connection = None
            self.last_drop = self.slot.last_drop = f"{format_address(peer)}: {why}"
            self.counters.discarded_bytes += discarded
            if close_socket is not None:
                close_socket()
            if connection is not None:
                self.counters.discarded_bytes += connection.close()
            self._controller_changed()
            self.slot.release(self)
            if counter is not None:
                setattr(self.counters, counter, getattr(self.counters, counter) + 1)

    def _controller_changed(self) -> None:
        callback = self.on_controller_change
        if callback is not None:
            try:
                callback()
            except Exception as exc:  # a broken callback must not take the link down
                self.counters.internal_errors += 1
                self.last_internal_error = exc
                log.exception("BCNP %s: on_controller_change failed", self.kind)

    def _note_handshake(
        self, outcome: HandshakeAccepted | HandshakeRejected, peer: tuple[object, ...]
    ) -> None:
        """Keep the peer's hash; count and log a refusal."""
        if outcome.remote_hash is not None:
            self.remote_hash = outcome.remote_hash
        if isinstance(outcome, HandshakeRejected):
            self.counters.handshake_rejects += 1
            self._refuse(peer, outcome.reason, "handshake")

    def _refuse(self, peer: tuple[object, ...], reason: str, warning: str) -> None:
        self.last_reject = f"{format_address(peer)}: {reason}"
        self._warn[warning].warning("BCNP %s: refused %s", self.kind, self.last_reject)

    def _admit(self, peer: tuple[object, ...]) -> bool:
        """Whether ``peer`` may become controller; a refusal is counted, noted and logged."""
        if self.config.allows(str(peer[0])):
            return True
        self.counters.peers_refused += 1
        self.last_reject = f"{format_address(peer)}: refused, not an allowed peer"
        self._warn["not_allowed"].warning("BCNP %s: %s", self.kind, self.last_reject)
        return False

    # -- state (any thread) ----------------------------------------------------------

    @property
    def handshaken(self) -> bool:
        """A controller completed the handshake and still owns this server's link."""
        return self._peer is not None

    @property
    def peer(self) -> str:
        return format_address(self._peer)

    @property
    def peer_address(self) -> tuple[object, ...] | None:
        """The controller's address as the socket gives it; ``None`` while no controller."""
        return self._peer

    @property
    def connection(self) -> Connection | None:
        """The controller's connection (its parser, liveness), ``None`` while no controller."""
        return self._connection

    @property
    def buffered(self) -> int:
        """Bytes the controller's connection holds for an incomplete frame."""
        connection = self._connection
        return connection.parser.buffered if connection is not None else 0

    def link_alive(self, now: float) -> bool:
        """This server's controller sent a packet within the link timeout."""
        connection = self._connection
        return connection is not None and connection.link_alive(now)

    def status(self) -> TransportStatus:
        """A consistent snapshot: taken under the send lock, so never halfway
        through a controller's arrival or departure."""
        counters = self.counters
        with self._send_lock:
            status = TransportStatus(
                transport=self.kind,
                running=self.running,
                port=self._port,
                local_hash=self.local_hash,
                handshaken=self._peer is not None,
                peer=format_address(self._peer),
                remote_hash=self.remote_hash,
                last_reject=self.last_reject,
                last_drop=self.last_drop,
            )
            for name in COUNTER_NAMES:
                setattr(status, name, getattr(counters, name))
        return status
