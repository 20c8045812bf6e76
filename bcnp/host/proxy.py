"""A network fault proxy in user space: rehearse a bad field network with real sockets.

:class:`Proxy` listens on a local port for TCP and/or UDP and forwards to a
target (a robot, or the simulator). On the way it can add latency and jitter,
cap the bandwidth, lose, duplicate or reorder UDP datagrams, cut the link for a
while (a partition) and abort every connection (a reset): directly, through
:meth:`Proxy.partition`, :meth:`Proxy.reset`, :meth:`Proxy.set_faults`, or from a
script of timed events. Random faults come from generators seeded with ``seed``,
so a run can be repeated; all timing follows the injectable ``clock``.

*Up* is client to target (towards the robot), *down* target to client; each
direction has its own :class:`Faults`.

* TCP: each accepted client gets its own upstream connection (refused: the
  client is reset at once). Bytes keep their order: a chunk is delivered at the
  later of the previous chunk's time and its own arrival plus delay. During a
  partition, bytes and closes in both directions are held and delivered at once,
  in order, when it ends, as TCP retransmission does after a radio fade; a client
  that connects meanwhile is accepted and connected upstream when it ends.
* UDP: each client source address gets its own upstream socket, so the target
  sees one peer per client; each datagram gets its own delay (jitter may reorder
  them). During a partition datagrams are dropped, or held with ``udp_hold``.
* A reset aborts every TCP connection on both sides (RST), drops what a
  partition holds and forgets the UDP clients (their next datagram gets a new
  upstream socket), as a robot program restart or a radio reboot does.
* The bandwidth cap delays each chunk or datagram until the link has sent
  the bytes before it (payload bytes; TCP and UDP of one direction share it).

One background thread serves everything: a selector for the sockets and a heap
of scheduled deliveries. The fault model is :mod:`bcnp.host.faults`;
``python -m bcnp proxy`` is its command line (:mod:`bcnp.host.cli.proxy`).
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from ipaddress import ip_address
from typing import Any, Literal

from ..transport.netio import Waker, format_address
from .delivery import DeliverySchedule, Direction
from .faults import Event, Faults, Heal, Partition, Reset, SetFaults, plain

__all__ = [
    "Event",
    "Faults",
    "Heal",
    "Partition",
    "Proxy",
    "ProxyCounters",
    "Reset",
    "SetFaults",
]

Address = tuple[Any, ...]

_RECV_SIZE = 64 * 1024
#: Bytes one TCP direction may have read and not yet delivered before its source is paused.
_PIPE_LIMIT = 1 << 20
#: Datagrams read from one socket per wake-up, so one busy socket cannot starve the rest.
_UDP_BURST = 64
#: What a non-blocking connect returns while it goes on (10035: WSAEWOULDBLOCK).
_CONNECTING = {0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, 10035}
_LINGER_RST = struct.pack("HH" if os.name == "nt" else "ii", 1, 0)
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


@dataclass(slots=True)
class ProxyCounters:
    """What a proxy has counted since it started; ``tcp_open``, ``udp_clients`` and ``bytes_held`` are now."""

    tcp_accepted: int = 0  # client connections accepted
    tcp_open: int = 0  # client connections open
    upstream_refused: int = 0  # upstream connects refused or failed: the client was reset
    peer_errors: int = 0  # a peer reset or vanished (read, write, accept), or the target refused a datagram
    bytes_from_clients: int = 0  # payload read from clients, TCP and UDP
    bytes_to_target: int = 0  # payload delivered to the target
    bytes_from_target: int = 0
    bytes_to_clients: int = 0
    udp_received: int = 0  # datagrams read, either side
    udp_forwarded: int = 0  # datagrams delivered, duplicates included
    udp_dropped: int = 0  # lost on purpose, cut by a partition or reset, or refused by the OS
    udp_duplicated: int = 0
    udp_reordered: int = 0
    udp_clients: int = 0  # client source addresses with an upstream socket
    partitions: int = 0  # partitions started
    resets: int = 0
    bytes_held: int = 0  # held by the partition in force
    internal_errors: int = 0  # unexpected exceptions caught in the proxy's thread


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
class _UdpPeer:
    client: Address
    sock: socket.socket
    last_seen: float
    closed: bool = False


@dataclass(eq=False)
class _Chunk:
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


@dataclass(eq=False)
class _Datagram:
    peer: _UdpPeer
    direction: Direction
    data: bytes
    datagram = True

    @property
    def size(self) -> int:
        return len(self.data)

    def dead(self) -> bool:
        return False


def _resolve(host: str, port: int, kind: int, passive: bool = False) -> tuple[int, Address]:
    try:
        info = socket.getaddrinfo(host, port, type=kind, flags=socket.AI_PASSIVE if passive else 0)
    except OSError as exc:
        raise OSError(f"cannot resolve {host!r}: {exc.strerror or exc}") from None
    return info[0][0], info[0][4]


def _bound(kind: int, host: str, port: int) -> socket.socket:
    """A non-blocking socket bound to ``host:port`` (TCP: listening)."""
    family, address = _resolve(host, port, kind, passive=True)
    sock = socket.socket(family, kind)
    try:
        if kind == socket.SOCK_STREAM and os.name != "nt":  # a restart may reuse the port at once
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        if kind == socket.SOCK_STREAM:
            sock.listen(64)
    except OSError as exc:
        sock.close()
        protocol = "tcp" if kind == socket.SOCK_STREAM else "udp"
        raise OSError(
            f"cannot listen on {format_address((host, port))} ({protocol}): {exc.strerror or exc}"
        ) from None
    sock.setblocking(False)
    return sock


class Proxy:
    """Forwards ``listen`` to ``target`` through faults; see the module's description.

    ``faults`` applies to both directions, ``up``/``down`` replace it for one.
    ``script`` lists ``(seconds after start, event)``. ``on_event(seconds after
    start, message)`` is called from the proxy's thread for each thing that
    happens to a link or connection. The thread waits at most ``poll_interval``
    wall seconds between looks at the clock (default: 1 s with the real clock,
    5 ms with an injected one, whose moves it cannot see); :meth:`wake` makes
    it look now.
    """

    def __init__(
        self,
        target: tuple[str, int],
        listen: tuple[str, int] = ("127.0.0.1", 0),
        *,
        tcp: bool = True,
        udp: bool = True,
        faults: Faults | None = None,
        up: Faults | None = None,
        down: Faults | None = None,
        udp_hold: bool = False,
        seed: int | None = None,
        script: Iterable[tuple[float, Event]] = (),
        clock: Callable[[], float] = time.monotonic,
        poll_interval: float | None = None,
        udp_idle_timeout: float = 60.0,
        on_event: Callable[[float, str], object] | None = None,
    ) -> None:
        if not (tcp or udp):
            raise ValueError("nothing to forward: enable tcp, udp or both")
        self.target, self.listen = target, listen
        self._protocols = (tcp, udp)
        base = faults if faults is not None else Faults()
        #: When each item arrives, and what a link drop does to it (sans-I/O).
        self._schedule: DeliverySchedule[_Chunk | _Datagram] = DeliverySchedule(
            up or base, down or base, seed=seed, udp_hold=udp_hold, script=script
        )
        self._udp_hold, self._udp_idle = udp_hold, udp_idle_timeout
        self._clock, self._on_event = clock, on_event
        default_wait = 1.0 if clock is time.monotonic else 0.005
        self._max_wait = default_wait if poll_interval is None else poll_interval
        self._lock = threading.RLock()
        self._counters = ProxyCounters()
        self._conns: set[_Conn] = set()
        self._awaiting: list[_Conn] = []  # accepted during a partition: connected when it ends
        self._udp_peers: dict[Address, _UdpPeer] = {}
        self._sel: selectors.BaseSelector | None = None
        self._tcp: socket.socket | None = None
        self._udp: socket.socket | None = None
        self._waker: Waker | None = None
        self._target_tcp: tuple[int, Address] = (0, ())
        self._target_udp: tuple[int, Address] = (0, ())
        self._thread: threading.Thread | None = None
        self._closing = False
        self._t0 = self._now = 0.0
        self._timeout = 0.0
        self.tcp_port = 0  # the bound ports once started; 0: not listening
        self.udp_port = 0

    # -- public ---------------------------------------------------------------------

    def start(self) -> None:
        """Bind the listening sockets (``OSError`` with a clear message if not) and start the thread."""
        if self._thread is not None or self._closing:
            raise RuntimeError("a proxy starts once")
        try:
            self._open()
        except BaseException:
            self._close_all()
            raise
        self._t0 = self._now = self._schedule.start = self._clock()
        self._thread = threading.Thread(target=self._run, name="bcnp-proxy", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Close every socket and join the thread; safe to call again."""
        self._closing = True
        thread = self._thread
        if thread is None:
            with self._lock:
                self._close_all()
            return
        self.wake()
        if thread is not threading.current_thread():
            thread.join()

    def __enter__(self) -> Proxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wake(self) -> None:
        """Make the thread look at the clock now (an injected clock moved)."""
        if self._waker is not None:
            self._waker.wake()

    def partition(self, seconds: float | None = None) -> None:
        """Cut the link now, for ``seconds`` or until :meth:`heal`."""
        self.apply(Partition(seconds))

    def heal(self) -> None:
        self.apply(Heal())

    def reset(self) -> None:
        self.apply(Reset())

    def set_faults(self, faults: Faults, direction: Literal["both", "up", "down"] = "both") -> None:
        """Faults for what arrives from now on (what is scheduled keeps its time)."""
        self.apply(SetFaults(**vars(plain(faults)), direction=direction))

    def apply(self, event: Event) -> None:
        """Apply one event now; it has taken effect when this returns."""
        with self._lock:
            self._now = self._clock()
            self._apply(event, self._now)
        self.wake()

    def counters(self) -> ProxyCounters:
        with self._lock:
            schedule = self._schedule
            return replace(
                self._counters,
                udp_dropped=self._counters.udp_dropped + schedule.udp_dropped,
                udp_duplicated=schedule.udp_duplicated,
                udp_reordered=schedule.udp_reordered,
                bytes_held=schedule.bytes_held,
            )

    def faults(self, direction: Direction) -> Faults:
        with self._lock:
            return self._schedule.faults[direction]

    @property
    def partitioned(self) -> bool:
        return self._schedule.partitioned

    # -- the thread -----------------------------------------------------------------

    def _open(self) -> None:
        host, port = self.listen
        self._target_tcp = _resolve(*self.target, socket.SOCK_STREAM)
        self._target_udp = _resolve(*self.target, socket.SOCK_DGRAM)
        self._sel = selectors.DefaultSelector()
        self._waker = Waker()
        self._sel.register(self._waker.reader, _READ, ("waker", self._waker))
        if self._protocols[0]:
            self._tcp = _bound(socket.SOCK_STREAM, host, port)
            self.tcp_port = self._tcp.getsockname()[1]
            self._sel.register(self._tcp, _READ, ("accept", None))
        if self._protocols[1]:
            if port == 0 and self.tcp_port:  # BCNP uses one port number for both: the TCP one if free
                with contextlib.suppress(OSError):
                    self._udp = _bound(socket.SOCK_DGRAM, host, self.tcp_port)
            self._udp = self._udp or _bound(socket.SOCK_DGRAM, host, port)
            self.udp_port = self._udp.getsockname()[1]
            self._sel.register(self._udp, _READ, ("udp", None))
        target_host, target_port = self._target_tcp[1][:2]
        if target_port in (self.tcp_port, self.udp_port) and (
            ip_address(target_host).is_loopback or target_host == self._bound_host()
        ):
            raise OSError(f"the target {format_address(self.target)} is this proxy: give another port")

    def _bound_host(self) -> str:
        sock = self._tcp or self._udp
        return str(sock.getsockname()[0]) if sock is not None else ""

    def _run(self) -> None:
        assert self._sel is not None
        try:
            while True:
                try:
                    ready = self._sel.select(self._timeout)
                except (OSError, ValueError):  # a socket closed by another thread mid-select
                    ready = []
                with self._lock:
                    if self._closing:
                        break
                    self._now = now = self._clock()  # once per wake-up: every rule sees one time
                    self._step(ready, now)
        finally:
            with self._lock:
                self._close_all()

    def _step(self, ready: list[tuple[selectors.SelectorKey, int]], now: float) -> None:
        schedule = self._schedule
        for at, event in schedule.script_due(now):
            self._guard(self._apply, event, at)
        if schedule.heal_due(now):
            self._guard(self._heal)
        for key, mask in ready:
            self._guard(self._handle, key, mask, now)
        for item in schedule.due(now):
            self._guard(self._deliver, item)
        self._timeout = schedule.wait(now, self._max_wait)

    def _guard(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # counted and reported: the thread must go on
            self._counters.internal_errors += 1
            self._event(f"internal error: {exc!r}")

    def _event(self, message: str) -> None:
        if self._on_event is not None:
            with contextlib.suppress(Exception):
                self._on_event(self._now - self._t0, message)

    def _handle(self, key: selectors.SelectorKey, mask: int, now: float) -> None:
        kind, obj = key.data
        if kind == "waker":
            obj.drain()
        elif kind == "accept":
            self._accept()
        elif kind == "udp":
            self._from_clients(now)
        elif kind == "udp-peer":
            self._from_target(obj, now)
        elif not obj.closed:
            conn: _Conn = obj
            if kind == "upstream" and conn.connecting:
                self._connected(conn)
                return
            read, write = (conn.up, conn.down) if kind == "client" else (conn.down, conn.up)
            if mask & _WRITE:
                self._flush(conn, write)
            if mask & _READ and not conn.closed:
                self._read(conn, read, now)

    def _apply(self, event: Event, at: float) -> None:
        if isinstance(event, Partition):
            self._partition(at, event.seconds)
        elif isinstance(event, Heal):
            self._heal()
        elif isinstance(event, Reset):
            self._reset()
        else:
            self._schedule.set_faults(event)
            self._event(f"faults {event.direction}: {event.describe()}")

    # -- partitions and resets ------------------------------------------------------

    def _partition(self, at: float, seconds: float | None) -> None:
        if not self._schedule.partition(at, seconds):
            return  # already cut: the later end wins, never shorter
        self._counters.partitions += 1
        length = "" if seconds is None else f" for {seconds:g} s"
        self._event(f"link drop{length}: tcp held, udp {'held' if self._udp_hold else 'dropped'}")

    def _heal(self) -> None:
        healed = self._schedule.heal()
        if healed is None:
            return
        held, released = healed
        awaiting, self._awaiting = self._awaiting, []
        for conn in awaiting:
            if not conn.closed:
                self._connect_upstream(conn)
        for item in held:
            self._guard(self._deliver, item)
        self._event(f"link back: {released} held bytes released")

    def _reset(self) -> None:
        self._counters.resets += 1
        conns = list(self._conns)
        for conn in conns:
            self._abort(conn)
        self._awaiting.clear()
        self._schedule.reset()
        peers = len(self._udp_peers)
        for peer in self._udp_peers.values():
            self._close_peer(peer)
        self._udp_peers.clear()
        self._counters.udp_clients = 0
        self._event(f"reset: {len(conns)} tcp connection(s) aborted, {peers} udp client(s) forgotten")

    def _deliver(self, item: _Chunk | _Datagram) -> None:
        if isinstance(item, _Chunk):
            if item.conn.closed:
                return
            if item.end is not None:
                item.pipe.end = item.end
            item.pipe.out += item.data
            self._flush(item.conn, item.pipe)
            return
        peer = item.peer
        try:
            if peer.closed:
                raise OSError("forgotten by a reset")
            if item.direction == "up":
                peer.sock.send(item.data)
            else:
                assert self._udp is not None
                self._udp.sendto(item.data, peer.client)
        except OSError:
            self._counters.udp_dropped += 1
            return
        self._counters.udp_forwarded += 1
        self._count_out(item.direction, len(item.data))

    def _count_out(self, direction: Direction, size: int) -> None:
        if direction == "up":
            self._counters.bytes_to_target += size
        else:
            self._counters.bytes_to_clients += size

    def _count_in(self, direction: Direction, size: int) -> None:
        if direction == "up":
            self._counters.bytes_from_clients += size
        else:
            self._counters.bytes_from_target += size

    # -- TCP --------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._tcp is not None
        for _ in range(16):
            try:
                client, address = self._tcp.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the client gave up before we took it, or we are out of descriptors
                self._counters.peer_errors += 1
                return
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(client, format_address(address))
            self._conns.add(conn)
            self._counters.tcp_accepted += 1
            self._counters.tcp_open = len(self._conns)
            self._event(f"tcp {conn.peer} connected ({len(self._conns)} open)")
            if self._schedule.partitioned:
                self._awaiting.append(conn)
            else:
                self._connect_upstream(conn)
            self._update(conn)

    def _connect_upstream(self, conn: _Conn) -> None:
        family, address = self._target_tcp
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
        self._counters.upstream_refused += 1
        target = format_address(self.target)
        self._abort(conn, f"upstream {target}: {os.strerror(error)}; client reset")

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
            self._count_in(pipe.direction, len(data))
        else:
            pipe.eof_read = True
            end = "eof" if data == b"" else "reset"
            self._counters.peer_errors += data is None
        chunk = _Chunk(conn, pipe, data or b"", end)
        pipe.last_due = self._schedule.stream(chunk, pipe.direction, now, pipe.last_due)
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
                self._counters.peer_errors += 1
                side = "target" if pipe is conn.up else "client"
                self._abort(conn, f"{side} gone ({exc.strerror or exc}); other side reset")
                return
            del pipe.out[:sent]
            pipe.pending -= sent
            self._count_out(pipe.direction, sent)
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
                self._event(f"tcp {conn.peer} closed ({len(self._conns)} open)")
                return
        self._update(conn)

    def _update(self, conn: _Conn) -> None:
        """Watch each socket of ``conn`` for what it can do next."""
        if conn.closed:
            return
        self._watch(conn.client, _READ * conn.up.readable() | _WRITE * bool(conn.down.out), ("client", conn))
        if conn.upstream is not None:
            events = _WRITE if conn.connecting else _READ * conn.down.readable() | _WRITE * bool(conn.up.out)
            self._watch(conn.upstream, events, ("upstream", conn))

    def _watch(self, sock: socket.socket, events: int, data: tuple[str, object]) -> None:
        assert self._sel is not None
        try:
            key = self._sel.get_key(sock)
        except KeyError:
            if events:
                self._sel.register(sock, events, data)
            return
        if not events:
            self._sel.unregister(sock)
        elif key.events != events:
            self._sel.modify(sock, events, data)

    def _abort(self, conn: _Conn, reason: str = "") -> None:
        """Close both sides with RST and forget what the connection had held."""
        if conn.closed:
            return
        self._close(conn, rst=True)
        self._schedule.forget(lambda item: isinstance(item, _Chunk) and item.conn is conn)
        if reason:
            self._event(f"tcp {conn.peer}: {reason} ({len(self._conns)} open)")

    def _close(self, conn: _Conn, rst: bool) -> None:
        conn.closed = True
        for sock in (conn.client, conn.upstream):
            if sock is not None:
                self._discard(sock, rst)
        self._conns.discard(conn)
        self._counters.tcp_open = len(self._conns)

    def _discard(self, sock: socket.socket, rst: bool = False) -> None:
        if self._sel is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(sock)
        if rst:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
        sock.close()

    # -- UDP --------------------------------------------------------------------------

    def _from_clients(self, now: float) -> None:
        assert self._udp is not None
        for _ in range(_UDP_BURST):
            try:
                data, address = self._udp.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # Windows reports an earlier ICMP error here
                continue
            peer = self._udp_peers.get(address) or self._new_peer(address, now)
            if peer is not None:
                self._datagram(peer, "up", data, now)

    def _from_target(self, peer: _UdpPeer, now: float) -> None:
        for _ in range(_UDP_BURST if not peer.closed else 0):
            try:
                data = peer.sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # ICMP port unreachable: nothing listens at the target
                self._counters.peer_errors += 1
                continue
            self._datagram(peer, "down", data, now)

    def _new_peer(self, address: Address, now: float) -> _UdpPeer | None:
        assert self._sel is not None
        for old in [p for p in self._udp_peers.values() if now - p.last_seen > self._udp_idle]:
            self._close_peer(old)
            del self._udp_peers[old.client]
        family, target = self._target_udp
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            sock.connect(target)  # replies come from the target only
        except OSError as exc:
            sock.close()
            self._counters.udp_dropped += 1
            self._event(f"udp {format_address(address)}: cannot reach the target ({exc.strerror or exc})")
            return None
        peer = self._udp_peers[address] = _UdpPeer(address, sock, now)
        self._sel.register(sock, _READ, ("udp-peer", peer))
        self._counters.udp_clients = len(self._udp_peers)
        port = sock.getsockname()[1]
        self._event(
            f"udp {format_address(address)} new client, upstream port {port} ({len(self._udp_peers)} clients)"
        )
        return peer

    def _close_peer(self, peer: _UdpPeer) -> None:
        peer.closed = True
        self._discard(peer.sock)

    def _datagram(self, peer: _UdpPeer, direction: Direction, data: bytes, now: float) -> None:
        peer.last_seen = now
        self._counters.udp_received += 1
        self._count_in(direction, len(data))
        self._schedule.datagram(lambda: _Datagram(peer, direction, data), direction, now, len(data))

    def _close_all(self) -> None:
        for conn in list(self._conns):
            self._close(conn, rst=True)
        for peer in self._udp_peers.values():
            self._close_peer(peer)
        self._udp_peers.clear()
        self._counters.udp_clients = 0
        self._schedule.clear()
        self._awaiting.clear()
        for sock in (self._tcp, self._udp):
            if sock is not None:
                self._discard(sock)
        if self._waker is not None:
            if self._sel is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self._sel.unregister(self._waker.reader)
            self._waker.close()
            self._waker = None
        if self._sel is not None:
            self._sel.close()
            self._sel = None
