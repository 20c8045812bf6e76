"""What the TCP and UDP servers share: config, status, the controller slot.

Implements the robot side of "Handshake Protocol" and "Transport Adapters" in
the BCNP 3.2.2 overview, with the reference's limits (one controller, zombie
timeout, bounded send buffer) and without its defects (see the servers).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..schema import Schema
from ..wire import HANDSHAKE_MAGIC, HANDSHAKE_SIZE

__all__ = [
    "DEFAULT_PORT",
    "Clock",
    "ControllerSlot",
    "LoopPriority",
    "PacketSink",
    "TransportConfig",
    "TransportStatus",
    "format_address",
]

DEFAULT_PORT = 5800

#: Seconds, monotonic. The robot passes FPGA time so simulated time drives every timeout.
Clock = Callable[[], float]

log = logging.getLogger("bcnp.transport")


class PacketSink(Protocol):
    """Where a transport delivers bytes: a :class:`~bcnp.dispatcher.Dispatcher`."""

    schema: Schema

    def push(self, data: bytes, now: float) -> None: ...

    def reset(self) -> None: ...

    @property
    def parse_errors(self) -> int: ...


@dataclass(frozen=True)
class TransportConfig:
    """Limits of one server. Times are seconds of the server's clock.

    ``handshake_timeout``, ``max_pending`` and ``send_buffer_limit`` apply to
    TCP; UDP sends one datagram per packet and keeps no buffer of its own.
    """

    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    #: A TCP peer must complete its 8-byte handshake within this time.
    handshake_timeout: float = 2.0
    #: A controller that sends nothing for this long is dropped (TCP) or unlocked (UDP).
    idle_timeout: float = 5.0
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


@dataclass(frozen=True)
class TransportStatus:
    """A snapshot of one server, cheap enough to take every robot tick."""

    transport: str  # "tcp" or "udp"
    running: bool
    port: int  # the bound port (useful when configured as 0)
    local_hash: int
    handshaken: bool  # a controller completed the handshake and still owns the link
    peer: str  # "ip:port" of that controller, "" when none
    remote_hash: int | None  # hash field of the last handshake received (good or bad)
    controllers: int  # controllers that completed a handshake since start
    bytes_in: int  # bytes handed to the parser
    bytes_out: int  # bytes the kernel accepted from us (handshakes included)
    packets_out: int  # packets accepted by send()
    handshake_rejects: int  # wrong magic or wrong hash
    handshake_timeouts: int  # TCP: no complete handshake within the deadline
    refused: int  # connections or handshakes refused because another controller owns the link
    idle_drops: int  # controllers dropped (TCP) or unlocked (UDP) after idle_timeout
    disconnects: int  # controllers that closed or reset the connection
    discarded_bytes: int  # bytes of a partial frame dropped when a link reset
    foreign_datagrams: int  # UDP: datagrams from a source other than the locked peer
    unpaired_datagrams: int  # UDP: non-handshake datagrams before pairing
    send_refused: int  # packets refused because the send buffer was full
    send_failures: int  # packets not sent for any other reason (no peer, too large, OS error)
    internal_errors: int  # unexpected exceptions caught in the receive thread
    parse_errors: int  # the dispatcher's parser errors
    last_reject: str = field(default="")  # why the last handshake or peer was refused


class ControllerSlot:
    """One controller per robot, across transports: the first handshake wins.

    Each server holds the slot while its controller is live and releases it
    when the controller goes; a server that cannot acquire it refuses its peer.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: object | None = None

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


class LoopPriority:
    """Gives the robot loop first claim on the interpreter while it runs a tick.

    CPython runs one thread at a time. A receive thread parsing a flood holds
    the interpreter lock, and the robot thread, which gives the lock up in
    every WPILib call, waits up to a switch interval to get it back, dozens
    of times a tick. So the robot loop calls :meth:`busy` when its tick starts
    and :meth:`idle` when it ends, and the receive thread calls :meth:`pause`
    at every safe point (before each packet, each parse error, each read, and
    every ``SEARCH_STEP`` bytes searched): while the loop is busy it waits,
    lock released, until the tick ends, at most ``max_pause`` seconds.

    With ``period`` (the loop period, seconds) it also steps aside *before* a
    tick: from ``lead`` seconds before the next tick is due (the last start
    plus ``period``), ``pause`` waits until that tick has ended, so the tick
    does not start while the receive thread is in the middle of a packet. It
    never waits past ``max_pause`` after the due time: a late or stopped loop
    costs ingest at most that once per tick. Ingest loses about ``lead`` plus
    a tick's work per period (about 4 % of a 20 ms period).
    """

    def __init__(
        self,
        max_pause: float = 0.005,
        *,
        period: float | None = None,
        lead: float = 0.0005,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_pause <= 0:
            raise ValueError("max_pause must be > 0 seconds")
        if period is not None and not 0 <= lead < period:
            raise ValueError("lead must be >= 0 and shorter than the period")
        self.max_pause = max_pause
        self.period = period
        self.lead = lead
        self.clock = clock
        self.pauses = 0  # times a receive thread waited for the loop
        self.anticipated = 0  # of which: waits for a tick that was about to start
        self._cond = threading.Condition(threading.Lock())
        self._busy = False
        self._ticks = 0  # ticks ended
        self._due = math.inf  # when the next tick should start (clock seconds)

    def busy(self) -> None:
        """The robot loop starts its work (robot thread)."""
        self._busy = True
        if self.period is not None:
            self._due = self.clock() + self.period

    def idle(self) -> None:
        """The robot loop has finished its work (robot thread)."""
        with self._cond:
            self._busy = False
            self._ticks += 1
            self._cond.notify_all()

    def pause(self) -> None:
        """Receive thread, at a safe point: wait while a tick runs or is about to."""
        ticks = self._ticks
        if self._busy:
            timeout = self.max_pause
            anticipated = False
        else:
            now = self.clock()
            due = self._due
            if not due - self.lead <= now < due + self.max_pause:
                return
            timeout = due + self.max_pause - now
            anticipated = True
        with self._cond:
            if self._ticks != ticks:
                return  # that tick has ended in the meantime
            self.pauses += 1
            self.anticipated += anticipated
            self._cond.wait_for(lambda: self._ticks != ticks, timeout)


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


def format_address(address: tuple[object, ...] | None) -> str:
    """``"ip:port"`` (IPv6 in brackets), ``""`` for none."""
    if not address:
        return ""
    host, port = str(address[0]), address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def describe_handshake(data: bytes, local_hash: int) -> tuple[int | None, str | None]:
    """Check an 8-byte handshake: ``(remote_hash, None)`` when it matches,
    else ``(remote hash field or None, reason naming both hashes)``."""
    magic, remote = data[:4], int.from_bytes(data[4:HANDSHAKE_SIZE], "big")
    if magic != HANDSHAKE_MAGIC:
        return None, (
            f"not a BCNP handshake: magic {magic!r} is not {HANDSHAKE_MAGIC!r} "
            f"(hash field 0x{remote:08X}, ours 0x{local_hash:08X})"
        )
    if remote != local_hash:
        return remote, f"schema hash mismatch: peer 0x{remote:08X}, ours 0x{local_hash:08X}"
    return remote, None


class RateLimitedLog:
    """Warnings at most once per ``interval`` wall seconds; the rest are counted."""

    def __init__(self, logger: logging.Logger, interval: float = 1.0) -> None:
        self.logger = logger
        self.interval = interval
        self._next = 0.0
        self.suppressed = 0

    def warning(self, msg: str, *args: object) -> None:
        t = time.monotonic()
        if t < self._next:
            self.suppressed += 1
            return
        self._next = t + self.interval
        if self.suppressed:
            msg += f" ({self.suppressed} similar messages suppressed)"
            self.suppressed = 0
        self.logger.warning(msg, *args)


class Waker:
    """A socket pair that wakes a thread blocked in ``select`` from another thread."""

    def __init__(self) -> None:
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        self.writer.setblocking(False)

    def wake(self) -> None:
        # Full: a wake-up is already pending. Closed: the thread is gone.
        with contextlib.suppress(OSError):
            self.writer.send(b"\0")

    def drain(self) -> None:
        try:
            while self.reader.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


class ServerBase:
    """Thread, wake-up and counters common to the TCP and UDP servers.

    Subclasses open their socket in :meth:`_open`, serve it in :meth:`_serve`
    (one call per wake-up of the receive thread) and close what they own in
    :meth:`_close_all`.
    """

    kind = ""

    def __init__(
        self,
        sink: PacketSink,
        config: TransportConfig | None = None,
        *,
        clock: Clock = time.monotonic,
        slot: ControllerSlot | None = None,
        on_controller_change: Callable[[], object] | None = None,
    ) -> None:
        self.sink = sink
        self.config = config if config is not None else TransportConfig()
        self.clock = clock
        self.slot = slot if slot is not None else ControllerSlot()
        #: Called in the receive thread whenever a controller comes or goes, before
        #: any byte of a new controller is delivered: the robot drops the previous
        #: controller's queued commands here, so a new one never inherits them.
        self.on_controller_change = on_controller_change
        self.local_hash = sink.schema.hash
        self._handshake = HANDSHAKE_MAGIC + self.local_hash.to_bytes(4, "big")
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._waker: Waker | None = None
        self._port = 0
        # Sends (robot thread) and peer changes (receive thread) take this lock,
        # so a send never reaches a socket that is being closed.
        self._send_lock = threading.Lock()
        self._log = RateLimitedLog(log)
        self._peer: tuple[object, ...] | None = None
        self.remote_hash: int | None = None
        self.last_reject = ""
        self.last_internal_error: BaseException | None = None
        self.last_send_error: BaseException | None = None
        self.controllers = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.packets_out = 0
        self.handshake_rejects = 0
        self.handshake_timeouts = 0
        self.refused = 0
        self.idle_drops = 0
        self.disconnects = 0
        self.discarded_bytes = 0
        self.foreign_datagrams = 0
        self.unpaired_datagrams = 0
        self.send_refused = 0
        self.send_failures = 0
        self.internal_errors = 0
        #: Nice increase the receive thread applied to itself (see TransportConfig.receive_nice).
        self.receive_nice = 0

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
                raise RuntimeError(f"{self.kind} server already started (or still stopping)")
            self._thread = None
        self._stopping.clear()
        waker = Waker()
        try:
            self._port = self._open(waker)
        except BaseException:
            waker.close()
            raise
        self._waker = waker
        self._thread = threading.Thread(target=self._run, name=f"bcnp-{self.kind}-{self._port}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop the thread, which closes every socket on its way out; returns within ``timeout``."""
        thread = self._thread
        if thread is None:
            return
        self._stopping.set()
        waker = self._waker
        if waker is not None:
            waker.wake()
        thread.join(timeout)
        if thread.is_alive():  # pragma: no cover - every wake-up is bounded (see _serve)
            # Keep the handle: start() refuses until the thread has closed its sockets.
            log.error("BCNP %s receive thread did not stop within %.1f s", self.kind, timeout)
            return
        self._thread = None
        self._waker = None

    def __enter__(self) -> ServerBase:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        waker = self._waker
        assert waker is not None
        self.receive_nice = _lower_priority(self.config.receive_nice)
        try:
            while not self._stopping.is_set():
                try:
                    self._serve(waker)
                except Exception as exc:  # the link must outlive any one bad event
                    self.internal_errors += 1
                    self.last_internal_error = exc
                    log.exception("BCNP %s receive thread: unexpected error (continuing)", self.kind)
                    self._stopping.wait(self.config.poll_interval)
        finally:
            # The thread owns its sockets: nothing closes them under its feet.
            with self._send_lock:
                self._close_all()
            waker.close()

    # -- subclass hooks ----------------------------------------------------------

    def _open(self, waker: Waker) -> int:
        """Bind; register the socket and ``waker.reader`` with a selector; return the port."""
        raise NotImplementedError

    def _serve(self, waker: Waker) -> None:
        """One wake-up: wait at most ``poll_interval``, handle a bounded amount of
        input, check timeouts. Bounded so that a flood cannot keep the thread
        from seeing ``stop()``, new connections or timeouts."""
        raise NotImplementedError

    def _close_all(self) -> None:
        """Close every socket and selector, release the slot (send lock held)."""
        raise NotImplementedError

    # -- shared helpers ------------------------------------------------------------

    def _reject(self, peer: tuple[object, ...], reason: str) -> None:
        self.handshake_rejects += 1
        self.last_reject = f"{format_address(peer)}: {reason}"
        self._log.warning("BCNP %s: rejected %s", self.kind, self.last_reject)

    def _end_controller(self) -> None:
        """The controller went away: nobody to send to, its partial frame
        dropped, then the slot freed (not before: another server could take it
        and push while the parser is being reset)."""
        self._peer = None
        self._reset_sink()
        self.slot.release(self)

    def _sink_pause(self) -> Callable[[], object] | None:
        """The sink's ``pause`` hook (a Dispatcher's, see LoopPriority), if it has one."""
        pause: Callable[[], object] | None = getattr(self.sink, "pause", None)
        return pause

    def _reset_sink(self) -> None:
        """A controller came or went: drop any partial frame and restart the parser."""
        parser = getattr(self.sink, "parser", None)
        if parser is not None:
            self.discarded_bytes += parser.buffered
        self.sink.reset()
        callback = self.on_controller_change
        if callback is not None:
            try:
                callback()
            except Exception as exc:  # a broken callback must not take the link down
                self.internal_errors += 1
                self.last_internal_error = exc
                log.exception("BCNP %s: on_controller_change failed", self.kind)

    def status(self) -> TransportStatus:
        peer = self._peer
        return TransportStatus(
            transport=self.kind,
            running=self.running,
            port=self._port,
            local_hash=self.local_hash,
            handshaken=peer is not None,
            peer=format_address(peer),
            remote_hash=self.remote_hash,
            controllers=self.controllers,
            bytes_in=self.bytes_in,
            bytes_out=self.bytes_out,
            packets_out=self.packets_out,
            handshake_rejects=self.handshake_rejects,
            handshake_timeouts=self.handshake_timeouts,
            refused=self.refused,
            idle_drops=self.idle_drops,
            disconnects=self.disconnects,
            discarded_bytes=self.discarded_bytes,
            foreign_datagrams=self.foreign_datagrams,
            unpaired_datagrams=self.unpaired_datagrams,
            send_refused=self.send_refused,
            send_failures=self.send_failures,
            internal_errors=self.internal_errors,
            parse_errors=self.sink.parse_errors,
            last_reject=self.last_reject,
        )
