"""TCP server, robot side: handshake gate, one controller, zombie timeout.

Implements the TCP row of "Handshake Protocol" in the BCNP 3.2.2 overview:
both sides send the 8-byte handshake on connect and nothing streams before the
peer's hash matched. Each connection is a :class:`~bcnp.connection.Connection`,
which decides the handshake (the magic is checked too) and frames packets; not
one byte from a peer whose handshake failed reaches the parser. Bytes that
follow the handshake in the same segment are data. A peer outside
``allowed_peers`` is closed at accept, before our handshake. A controller
whose link is lost (no packet for the link timeout) is closed with whatever
it sent still unread (``end_on_link_loss``): it must connect again.

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

from ..connection import Connection, HandshakeRejected, IdleTimeout, LinkLost
from .base import ServerBase, ending, log
from .netio import Waker, format_address

__all__ = ["TcpServer"]

_LISTEN, _WAKE = "listen", "wake"


class _Peer:
    """The socket side of one accepted connection; its protocol state is ``connection``."""

    __slots__ = ("sock", "address", "connection", "out", "out_bytes", "writing")

    def __init__(self, sock: socket.socket, address: tuple[object, ...], connection: Connection) -> None:
        self.sock = sock
        self.address = address
        self.connection = connection
        self.out: deque[memoryview] = deque()
        self.out_bytes = 0
        self.writing = False  # registered for EVENT_WRITE


class TcpServer(ServerBase):
    """Serves one BCNP controller over TCP; feeds its bytes to ``sink``.

    ``start()`` binds ``config.host:config.port`` and starts a daemon receive
    thread; ``close()`` ends it and closes everything. ``send(packet)`` is for the robot
    thread and never blocks. ``status()`` is a snapshot for dashboards.
    """

    kind = "tcp"
    warnings = ("not_allowed", "refused", "handshake", "timeout", "accept")

    #: Reads per wake-up of the receive thread (each up to ``recv_size`` bytes).
    MAX_READS_PER_WAKE = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: list[_Peer] = []
        self._controller: _Peer | None = None
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
        controller = self._controller
        if controller is not None and (lost := self._lost_by_request()) is not None:
            # Before this wake-up reads: what it sent since is not even parsed.
            self._drop(controller, *ending(lost))
        for key, mask in events:
            tag = key.data
            if tag is _LISTEN:
                self._accept()
            elif tag is _WAKE:
                waker.drain()
            else:
                conn: _Peer = tag
                if mask & selectors.EVENT_WRITE:
                    self._flush(conn)
                if mask & selectors.EVENT_READ and conn.sock.fileno() >= 0:
                    if conn is self._controller:
                        self._read_data(conn)
                    else:
                        self._read_handshake(conn)
        controller = self._controller
        if controller is not None and controller.out and not controller.writing:
            # Deferred sends (flush_sends woke us), once the tick is over; the rest waits for room.
            if self.pause is not None:
                self.pause()
            self._flush(controller)
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
                self._warn["accept"].warning("BCNP tcp: accept failed: %s", exc)
                self._sel.unregister(self._listener)
                self._accept_paused_until = time.monotonic() + self.config.poll_interval
                return
            if not self._admit(peer):
                # Before our handshake: a peer that may not drive learns nothing,
                # not even which schema this robot speaks.
                sock.close()  # after counting: whoever sees it closed sees it counted
                continue
            busy = self._controller is not None or self.slot.owner not in (None, self)
            if busy or len(self._pending) >= self.config.max_pending:
                # One controller at a time: close at once, without our handshake,
                # so the refused peer learns nothing and the controller is undisturbed.
                self._refuse(
                    peer, "a controller is connected" if busy else "too many pending handshakes", "refused"
                )
                self.counters.refused += 1
                sock.close()  # last: whoever sees it closed sees it counted
                continue
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.config.socket_send_buffer:
                    # A refusal (an OS without the option) keeps the kernel's default.
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.socket_send_buffer)
                connection = self._new_connection(self.clock())
                sent = sock.send(connection.handshake)
            except OSError:
                sock.close()
                continue
            if sent != len(connection.handshake):  # pragma: no cover - 8 bytes always fit a new socket
                sock.close()
                continue
            with self._send_lock:
                self.counters.bytes_out += sent
            conn = _Peer(sock, peer, connection)
            self._pending.append(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _read_handshake(self, conn: _Peer) -> None:
        try:
            data = conn.sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the peer gave up before completing its handshake
            conn.connection.connection_lost()
            self._close_pending(conn)
            return
        now = self.clock()
        outcome = conn.connection.receive_data(data, now)
        if outcome is None or isinstance(outcome, LinkLost):  # undecided (no packet yet: nothing to lose)
            return
        self._note_handshake(outcome, conn.address)
        if isinstance(outcome, HandshakeRejected):
            self._close_pending(conn)
            return
        if self._controller is not None or not self.slot.acquire(self):
            self._refuse(conn.address, "another controller owns the link", "refused")
            self.counters.refused += 1
            self._close_pending(conn)
            return
        self._pending.remove(conn)
        with self._send_lock:
            self._controller = conn
        self._take_controller(conn.connection, conn.address, now)
        log.info(
            "BCNP tcp: controller %s connected (hash 0x%08X)",
            format_address(conn.address),
            outcome.remote_hash,
        )

    def _read_data(self, conn: _Peer) -> None:
        recv = conn.sock.recv
        size = self.config.recv_size
        feed = self._feed
        connection = conn.connection
        clock = self.clock
        pause = self.pause
        for _ in range(self.MAX_READS_PER_WAKE):
            if pause is not None:
                pause()  # no new read while the robot loop runs a tick (LoopPriority)
            try:
                data = recv(size)
            except BlockingIOError:
                return
            except OSError as exc:
                self._drop(conn, f"reset by the peer ({exc.strerror or exc})", "disconnects")
                return
            if not data:
                self._drop(conn, "closed by the peer", "disconnects")
                return
            lost = feed(connection, data, clock())
            if lost is not None:
                self._drop(conn, *ending(lost))
                return
            if len(data) < size:
                return

    def _flush(self, conn: _Peer) -> None:
        # The lock guards the buffer, not the write: this thread is the one that closes
        # the socket, and a sender waiting on the lock must not wait for a system call.
        # A chunk leaves the buffer only once written, so send() keeps appending behind it.
        lock = self._send_lock
        out = conn.out
        while True:
            with lock:
                if not out:
                    return
                chunk = out[0]
            try:
                n = conn.sock.send(chunk)
            except BlockingIOError:
                return
            except OSError:
                with lock:
                    out.clear()  # the read side sees the reset and drops the link
                    conn.out_bytes = 0
                return
            with lock:
                self.counters.bytes_out += n
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
        for conn in list(self._pending):
            outcome = conn.connection.check_deadlines(now)
            if isinstance(outcome, HandshakeRejected):
                self._refuse(conn.address, outcome.reason, "timeout")
                self.counters.handshake_timeouts += 1
                self._close_pending(conn)
        controller = self._controller
        if controller is not None:
            event = controller.connection.check_deadlines(now)
            if isinstance(event, LinkLost | IdleTimeout):
                self._drop(controller, *ending(event))

    def _close_pending(self, conn: _Peer) -> None:
        self._sel.unregister(conn.sock)
        conn.sock.close()
        self._pending.remove(conn)  # last: whoever sees it gone sees it closed

    def _drop(self, conn: _Peer, reason: str, counter: str, discarded: int = 0) -> None:
        """The controller went away: free the link for the next one and count why.
        Its socket is closed with what it sent still unread: the kernel resets
        the connection, and the host knows it must connect again."""
        self._sel.unregister(conn.sock)

        def close_socket() -> None:
            self._controller = None  # no send reaches the socket from here on
            conn.sock.close()
            conn.out.clear()

        self._end_controller(reason, counter, close_socket, discarded)
        log.info("BCNP tcp: controller %s dropped: %s", format_address(conn.address), reason)

    def _close_all(self) -> None:
        for conn in self._pending:
            conn.sock.close()
        self._pending.clear()
        controller = self._controller
        if controller is not None:

            def close_socket() -> None:
                self._controller = None
                controller.sock.close()

            self._end_controller("the server stopped", close_socket=close_socket)
        self._sel.close()
        self._listener.close()

    # -- robot thread ----------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        """Queue one packet for the controller without blocking.

        ``False`` when there is no controller, the send buffer is full
        (``send_refused``) or the socket failed (``send_failures``). With
        ``defer_sends`` the packet only joins the send buffer; the receive
        thread writes it after :meth:`flush_sends`.
        """
        if type(data) is not bytes:  # what waits in the buffer must not change under us
            data = bytes(data)
        size = len(data)
        with self._send_lock:
            conn = self._controller
            counters = self.counters
            if conn is None:
                counters.send_failures += 1
                return False
            if conn.out or self.defer_sends:
                # One packet over the limit still goes onto an empty buffer (a 65,535-message one).
                if conn.out and conn.out_bytes + size > self.config.send_buffer_limit:
                    counters.send_refused += 1
                    return False
                conn.out.append(memoryview(data))
                conn.out_bytes += size
                counters.packets_out += 1
                self._sends_queued = self.defer_sends
                return True
            try:
                n = conn.sock.send(data)
            except BlockingIOError:
                n = 0
            except OSError as exc:
                counters.send_failures += 1
                self.last_send_error = exc
                return False
            counters.bytes_out += n
            counters.packets_out += 1
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
