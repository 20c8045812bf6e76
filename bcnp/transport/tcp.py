"""TCP server, robot side: handshake gate, one controller, zombie timeout.

Implements the TCP row of "Handshake Protocol" in the BCNP 3.2.2 overview:
both sides send the 8-byte handshake on connect and nothing streams before the
peer's hash matched. Unlike the reference, the magic is checked, and not one
byte from a peer whose handshake failed reaches the parser. Bytes that follow
the handshake in the same segment are data.

Outgoing packets (telemetry) are written from the robot thread without
blocking: what the kernel does not take at once waits in a bounded buffer that
the receive thread flushes; a full buffer refuses new packets.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import time
from collections import deque
from typing import Any

from ..queue import elapsed_over
from .base import ServerBase, Waker, describe_handshake, format_address, log

__all__ = ["TcpServer"]

_HANDSHAKE_SIZE = 8
_LISTEN, _WAKE = "listen", "wake"


class _Connection:
    __slots__ = ("sock", "peer", "opened", "last_rx", "handshake", "out", "out_bytes", "writing")

    def __init__(self, sock: socket.socket, peer: tuple[object, ...], now: float) -> None:
        self.sock = sock
        self.peer = peer
        self.opened = now
        self.last_rx = now
        self.handshake = bytearray()
        self.out: deque[memoryview] = deque()
        self.out_bytes = 0
        self.writing = False  # registered for EVENT_WRITE


class TcpServer(ServerBase):
    """Serves one BCNP controller over TCP; feeds its bytes to ``sink``.

    ``start()`` binds ``config.host:config.port`` and starts a daemon receive
    thread; ``stop()`` closes everything. ``send(packet)`` is for the robot
    thread and never blocks. ``status()`` is a snapshot for dashboards.
    """

    kind = "tcp"

    #: Reads per wake-up of the receive thread (each up to ``recv_size`` bytes).
    MAX_READS_PER_WAKE = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: list[_Connection] = []
        self._controller: _Connection | None = None
        self._accept_paused_until: float | None = None

    def _open(self, waker: Waker) -> int:
        cfg = self.config
        listener = socket.create_server((cfg.host, cfg.port), backlog=cfg.max_pending)
        listener.setblocking(False)
        self._listener = listener
        self._sel = selectors.DefaultSelector()
        self._sel.register(listener, selectors.EVENT_READ, _LISTEN)
        self._sel.register(waker.reader, selectors.EVENT_READ, _WAKE)
        self._pending = []
        self._controller = None
        self._accept_paused_until = None
        return int(listener.getsockname()[1])

    # -- receive thread ----------------------------------------------------------

    def _serve(self, waker: Waker) -> None:
        events = self._sel.select(self.config.poll_interval)
        for key, mask in events:
            tag = key.data
            if tag is _LISTEN:
                self._accept()
            elif tag is _WAKE:
                waker.drain()
            else:
                conn: _Connection = tag
                if mask & selectors.EVENT_WRITE:
                    self._flush(conn)
                if mask & selectors.EVENT_READ and conn.sock.fileno() >= 0:
                    if conn is self._controller:
                        self._read_data(conn)
                    else:
                        self._read_handshake(conn)
        self._update_write_interest()
        self._check_timeouts(self.clock())
        resume = self._accept_paused_until
        if resume is not None and time.monotonic() >= resume:
            self._accept_paused_until = None
            self._sel.register(self._listener, selectors.EVENT_READ, _LISTEN)

    def _accept(self) -> None:
        while True:
            try:
                sock, peer = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                # E.g. out of file descriptors: the listener stays readable, so
                # stop watching it for a while instead of spinning on it.
                self._log.warning("BCNP tcp: accept failed: %s", exc)
                self._sel.unregister(self._listener)
                self._accept_paused_until = time.monotonic() + self.config.poll_interval
                return
            busy = self._controller is not None or self.slot.owner not in (None, self)
            if busy or len(self._pending) >= self.config.max_pending:
                # One controller at a time: close at once, without our handshake,
                # so the refused peer learns nothing and the controller is undisturbed.
                self.refused += 1
                owner = "a controller is connected" if busy else "too many pending handshakes"
                self.last_reject = f"{format_address(peer)}: refused, {owner}"
                self._log.warning("BCNP tcp: %s", self.last_reject)
                sock.close()
                continue
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.config.socket_send_buffer:
                    # A refusal (an OS without the option) keeps the kernel's default.
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.socket_send_buffer)
                sent = sock.send(self._handshake)
            except OSError:
                sock.close()
                continue
            if sent != _HANDSHAKE_SIZE:  # pragma: no cover - 8 bytes always fit a new socket
                sock.close()
                continue
            with self._send_lock:
                self.bytes_out += sent
            conn = _Connection(sock, peer, self.clock())
            self._pending.append(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _read_handshake(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the peer gave up before completing its handshake
            self._close_pending(conn)
            return
        conn.handshake += data
        if len(conn.handshake) < _HANDSHAKE_SIZE:
            return
        now = self.clock()
        remote, reason = describe_handshake(bytes(conn.handshake[:_HANDSHAKE_SIZE]), self.local_hash)
        if remote is not None:
            self.remote_hash = remote
        if reason is not None:
            self._reject(conn.peer, reason)
            self._close_pending(conn)
            return
        if self._controller is not None or not self.slot.acquire(self):
            self.refused += 1
            self.last_reject = f"{format_address(conn.peer)}: refused, another controller owns the link"
            self._log.warning("BCNP tcp: %s", self.last_reject)
            self._close_pending(conn)
            return
        self._pending.remove(conn)
        rest = bytes(conn.handshake[_HANDSHAKE_SIZE:])
        conn.handshake = bytearray()
        conn.last_rx = now
        self._reset_sink()
        with self._send_lock:
            self._controller = conn
            self._peer = conn.peer
        self.controllers += 1
        log.info("BCNP tcp: controller %s connected (hash 0x%08X)", format_address(conn.peer), remote)
        if rest:
            self.bytes_in += len(rest)
            self.sink.push(rest, now)

    def _read_data(self, conn: _Connection) -> None:
        recv = conn.sock.recv
        size = self.config.recv_size
        push = self.sink.push
        clock = self.clock
        pause = self._sink_pause()
        for _ in range(self.MAX_READS_PER_WAKE):
            if pause is not None:
                pause()  # no new read while the robot loop runs a tick (LoopPriority)
            try:
                data = recv(size)
            except BlockingIOError:
                return
            except OSError as exc:
                self.disconnects += 1
                self._drop(conn, f"reset ({exc})")
                return
            if not data:
                self.disconnects += 1
                self._drop(conn, "closed by peer")
                return
            now = clock()
            conn.last_rx = now
            self.bytes_in += len(data)
            push(data, now)
            if len(data) < size:
                return

    def _flush(self, conn: _Connection) -> None:
        with self._send_lock:
            out = conn.out
            while out:
                chunk = out[0]
                try:
                    n = conn.sock.send(chunk)
                except BlockingIOError:
                    return
                except OSError:
                    out.clear()  # the read side sees the reset and drops the link
                    conn.out_bytes = 0
                    return
                self.bytes_out += n
                conn.out_bytes -= n
                if n < len(chunk):
                    out[0] = chunk[n:]
                    return
                out.popleft()

    def _update_write_interest(self) -> None:
        conn = self._controller
        if conn is None:
            return
        want = bool(conn.out)
        if want != conn.writing:
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0)
            self._sel.modify(conn.sock, events, conn)
            conn.writing = want

    def _check_timeouts(self, now: float) -> None:
        cfg = self.config
        for conn in [c for c in self._pending if elapsed_over(now, c.opened, cfg.handshake_timeout)]:
            self.handshake_timeouts += 1
            self.last_reject = (
                f"{format_address(conn.peer)}: no handshake within {cfg.handshake_timeout:g} s "
                f"({len(conn.handshake)} of {_HANDSHAKE_SIZE} bytes)"
            )
            self._log.warning("BCNP tcp: %s", self.last_reject)
            self._close_pending(conn)
        controller = self._controller
        if controller is not None and elapsed_over(now, controller.last_rx, cfg.idle_timeout):
            self.idle_drops += 1
            self._drop(controller, f"silent for {cfg.idle_timeout:g} s")

    def _close_pending(self, conn: _Connection) -> None:
        self._pending.remove(conn)
        self._sel.unregister(conn.sock)
        conn.sock.close()

    def _drop(self, conn: _Connection, reason: str) -> None:
        """The controller went away: free the link for the next one."""
        self._sel.unregister(conn.sock)
        with self._send_lock:
            self._controller = None
            self._peer = None  # before the close: whoever sees the socket end sees no controller
            conn.sock.close()
            conn.out.clear()
        self._end_controller()
        log.info("BCNP tcp: controller %s dropped: %s", format_address(conn.peer), reason)

    def _close_all(self) -> None:
        for conn in self._pending:
            conn.sock.close()
        self._pending.clear()
        if self._controller is not None:
            self._controller.sock.close()
            self._controller = None
            self._end_controller()
        self._sel.close()
        self._listener.close()

    # -- robot thread ----------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        """Queue one packet for the controller without blocking.

        ``False`` when there is no controller, the send buffer is full
        (``send_refused``) or the socket failed (``send_failures``).
        """
        if type(data) is not bytes:  # what waits in the buffer must not change under us
            data = bytes(data)
        size = len(data)
        with self._send_lock:
            conn = self._controller
            if conn is None:
                self.send_failures += 1
                return False
            if conn.out:
                if conn.out_bytes + size > self.config.send_buffer_limit:
                    self.send_refused += 1
                    return False
                conn.out.append(memoryview(data))
                conn.out_bytes += size
                self.packets_out += 1
                return True
            try:
                n = conn.sock.send(data)
            except BlockingIOError:
                n = 0
            except OSError as exc:
                self.send_failures += 1
                self.last_send_error = exc
                return False
            self.bytes_out += n
            self.packets_out += 1
            if n == size:
                return True
            conn.out.append(memoryview(data)[n:])
            conn.out_bytes += size - n
        waker = self._waker
        if waker is not None:
            waker.wake()  # the receive thread takes over the rest when the socket drains
        return True

    @property
    def send_buffered(self) -> int:
        """Bytes waiting in the send buffer."""
        conn = self._controller
        return conn.out_bytes if conn is not None else 0
