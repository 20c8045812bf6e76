"""The fault proxy's TCP relay: each client connection forwarded on its own upstream connection.

Each accepted client gets its own upstream connection to the target (refused: the
client is reset at once). Both directions are a :class:`_Pipe`: what is read becomes a
:class:`Chunk` that the proxy's :class:`~bcnp.host.proxy.core.delivery.DeliverySchedule` makes due
in order (a chunk is never due before the one read before it), and what falls due is
written as the destination takes it, then the end (a close or a reset) is passed on.
A source too far ahead of its destination (``_PIPE_LIMIT`` bytes) is not read until
it catches up. During a partition a new client is accepted and connected upstream
when it heals (:meth:`TcpRelay.heal`); a reset aborts every connection on both sides.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import socket
from dataclasses import dataclass
from typing import Any

from ...transport.netio import format_address
from .core.delivery import Direction
from .relay import READ, WRITE, Address, Relay, Shared

__all__ = ["Chunk", "TcpRelay"]

_RECV_SIZE = 64 * 1024
#: Bytes one TCP direction may have read and not yet delivered before its source is paused.
_PIPE_LIMIT = 1 << 20
#: What a non-blocking connect returns while it goes on (10035: WSAEWOULDBLOCK).
_CONNECTING = {0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, 10035}


class _Pipe:
    """One direction of one TCP connection."""

    def __init__(self, direction: Direction) -> None:
        self.direction: Direction = direction
        self.out = bytearray()  # due, waiting for the destination socket to take it
        self.pending = 0  # read and not yet written: scheduled, held or in ``out``
        self.last_due = -math.inf  # chunks leave in order
        self.eof_read = False  # the source closed or reset: read no more
        self.end: str | None = None  # "eof" or "reset", passed on after the last byte
        self.done = False  # the end was passed on

    def readable(self) -> bool:
        """Whether to read more from the source: not ended, and not too far ahead of the destination."""
        return not self.eof_read and self.pending < _PIPE_LIMIT


class _Conn:
    def __init__(self, client: socket.socket, peer: str) -> None:
        self.client = client
        self.peer = peer
        self.upstream: socket.socket | None = None
        self.connecting = False
        self.closed = False
        self.up, self.down = _Pipe("up"), _Pipe("down")

    def ends(self, pipe: _Pipe) -> tuple[socket.socket | None, socket.socket | None]:
        """(source, destination) of ``pipe``."""
        return (self.client, self.upstream) if pipe is self.up else (self.upstream, self.client)


@dataclass(eq=False)
class Chunk:
    conn: _Conn
    pipe: _Pipe
    data: bytes
    end: str | None = None
    datagram = False

    @property
    def size(self) -> int:
        return len(self.data)

    def dead(self) -> bool:
        return self.conn.closed


class TcpRelay(Relay):
    """Forwards the TCP clients of the listening ``sock`` to the target; see the module docs.
    ``conns`` are the open connections, ``awaiting`` those accepted during a partition."""

    def __init__(self, sock: socket.socket, target: tuple[int, Address], shared: Shared) -> None:
        super().__init__(sock, target, shared)
        self.conns: set[_Conn] = set()
        self.awaiting: list[_Conn] = []  # accepted during a partition: connected when it ends

    def handle(self, kind: str, obj: Any, mask: int, now: float) -> None:
        if kind == "listen":
            self._accept()
            return
        conn: _Conn = obj
        if conn.closed:
            return
        if kind == "upstream" and conn.connecting:
            self._connected(conn)
            return
        read, write = (conn.up, conn.down) if kind == "client" else (conn.down, conn.up)
        if mask & WRITE:
            self._flush(conn, write)
        if mask & READ and not conn.closed:
            self._read(conn, read, now)

    def deliver(self, item: Chunk) -> None:
        if item.conn.closed:
            return
        if item.end is not None:
            item.pipe.end = item.end
        item.pipe.out += item.data
        self._flush(item.conn, item.pipe)

    def heal(self) -> None:
        """The partition ended: the clients accepted meanwhile connect upstream."""
        awaiting, self.awaiting = self.awaiting, []
        for conn in awaiting:
            if not conn.closed:
                self._connect_upstream(conn)

    def reset(self) -> int:
        conns = list(self.conns)
        for conn in conns:
            self._abort(conn)
        self.awaiting.clear()
        return len(conns)

    def close_all(self) -> None:
        for conn in list(self.conns):
            self._close(conn, rst=True)
        self.awaiting.clear()
        self.discard(self.sock)

    def _accept(self) -> None:
        for _ in range(16):
            try:
                client, address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the client gave up before we took it, or we are out of descriptors
                self.counters.peer_errors += 1
                return
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(client, format_address(address))
            self.conns.add(conn)
            self.counters.tcp_accepted += 1
            self.counters.tcp_open = len(self.conns)
            self.event(f"tcp {conn.peer} connected ({len(self.conns)} open)")
            if self.schedule.partitioned:
                self.awaiting.append(conn)
            else:
                self._connect_upstream(conn)
            self._update(conn)

    def _connect_upstream(self, conn: _Conn) -> None:
        family, address = self.target
        conn.upstream = sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        error = sock.connect_ex(address)
        if error not in _CONNECTING:
            self._refused(conn, error)
            return
        conn.connecting = True  # finished (or failed) when the socket turns writable
        self._update(conn)

    def _connected(self, conn: _Conn) -> None:
        assert conn.upstream is not None
        error = conn.upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            self._refused(conn, error)
            return
        conn.connecting = False
        self._flush(conn, conn.up)

    def _refused(self, conn: _Conn, error: int) -> None:
        self.counters.upstream_refused += 1
        self._abort(conn, f"upstream {self.target_name}: {os.strerror(error)}; client reset")

    def _read(self, conn: _Conn, pipe: _Pipe, now: float) -> None:
        source = conn.ends(pipe)[0]
        if source is None or pipe.eof_read:
            return
        data: bytes | None
        try:
            data = source.recv(_RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = None  # reset by the peer
        end = None
        if data:
            pipe.pending += len(data)
            self.count_in(pipe.direction, len(data))
        else:
            pipe.eof_read = True
            end = "eof" if data == b"" else "reset"
            self.counters.peer_errors += data is None
        chunk = Chunk(conn, pipe, data or b"", end)
        pipe.last_due = self.schedule.stream(chunk, pipe.direction, now, pipe.last_due)
        self._update(conn)

    def _flush(self, conn: _Conn, pipe: _Pipe) -> None:
        """Write what is due to the destination, then pass on its end."""
        target = conn.ends(pipe)[1]
        if target is None or (pipe is conn.up and conn.connecting):
            self._update(conn)
            return
        while pipe.out:
            try:
                sent = target.send(pipe.out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self.counters.peer_errors += 1
                side = "target" if pipe is conn.up else "client"
                self._abort(conn, f"{side} gone ({exc.strerror or exc}); other side reset")
                return
            del pipe.out[:sent]
            pipe.pending -= sent
            self.count_out(pipe.direction, sent)
        if not pipe.out and pipe.end is not None and not pipe.done:
            if pipe.end == "reset":
                side = "client" if pipe is conn.up else "target"
                self._abort(conn, f"{side} reset the connection; passed on")
                return
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)
            pipe.done = True
            if conn.up.done and conn.down.done:
                self._close(conn, rst=False)
                self.event(f"tcp {conn.peer} closed ({len(self.conns)} open)")
                return
        self._update(conn)

    def _update(self, conn: _Conn) -> None:
        """Watch each socket of ``conn`` for what it can do next."""
        if conn.closed:
            return
        self._watch(conn.client, READ * conn.up.readable() | WRITE * bool(conn.down.out), "client", conn)
        if conn.upstream is not None:
            events = WRITE if conn.connecting else READ * conn.down.readable() | WRITE * bool(conn.up.out)
            self._watch(conn.upstream, events, "upstream", conn)

    def _watch(self, sock: socket.socket, events: int, kind: str, conn: _Conn) -> None:
        data = (self, kind, conn)
        try:
            key = self.sel.get_key(sock)
        except KeyError:
            if events:
                self.sel.register(sock, events, data)
            return
        if not events:
            self.sel.unregister(sock)
        elif key.events != events:
            self.sel.modify(sock, events, data)

    def _abort(self, conn: _Conn, reason: str = "") -> None:
        """Close both sides with RST and forget what the connection had held."""
        if conn.closed:
            return
        self._close(conn, rst=True)
        self.schedule.forget(lambda item: isinstance(item, Chunk) and item.conn is conn)
        if reason:
            self.event(f"tcp {conn.peer}: {reason} ({len(self.conns)} open)")

    def _close(self, conn: _Conn, rst: bool) -> None:
        conn.closed = True
        for sock in (conn.client, conn.upstream):
            if sock is not None:
                self.discard(sock, rst)
        self.conns.discard(conn)
        self.counters.tcp_open = len(self.conns)
