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
  them). During a partition datagrams are dropped, or held with ``udp_hold`` (with
  ``reorder_held`` released each with the latency and jitter again: in another order).
* A reset aborts every TCP connection on both sides (RST), drops what a
  partition holds and forgets the UDP clients (their next datagram gets a new
  upstream socket), as a robot program restart or a radio reboot does.
* The bandwidth cap delays each chunk or datagram until the link has sent
  the bytes before it (payload bytes; TCP and UDP of one direction share it).

One background thread serves everything: a selector for the sockets and a heap
of scheduled deliveries. The fault model is :mod:`bcnp.host.proxy.core.faults`, the delivery
schedule :mod:`bcnp.host.proxy.core.delivery`; the relays are :mod:`bcnp.host.proxy.relay_tcp` and
:mod:`bcnp.host.proxy.relay_udp` (what they share: :mod:`bcnp.host.proxy.relay`); ``python -m
bcnp proxy`` is its command line (:mod:`bcnp.host.cli.proxy_cmd`).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from ipaddress import ip_address
from typing import Any, Literal

from ...transport.netio import Waker, format_address
from .core.delivery import DeliverySchedule, Direction
from .core.faults import Event, Faults, Heal, Partition, Reset, SetFaults, plain
from .relay import READ, ProxyCounters, Relay, Shared, bound, resolve
from .relay_tcp import Chunk, TcpRelay
from .relay_udp import Datagram, UdpRelay

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
        reorder_held: bool = False,
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
        self._schedule: DeliverySchedule[Chunk | Datagram] = DeliverySchedule(
            up or base, down or base, seed=seed, udp_hold=udp_hold, reorder_held=reorder_held, script=script
        )
        self._udp_hold, self._udp_idle = self._schedule.udp_hold, udp_idle_timeout
        self._clock, self._on_event = clock, on_event
        default_wait = 1.0 if clock is time.monotonic else 0.005
        self._max_wait = default_wait if poll_interval is None else poll_interval
        self._lock = threading.RLock()
        self._counters = ProxyCounters()
        self._sel: selectors.BaseSelector | None = None
        self._tcp: TcpRelay | None = None
        self._udp: UdpRelay | None = None
        self._waker: Waker | None = None
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
        target_tcp = resolve(*self.target, socket.SOCK_STREAM)
        target_udp = resolve(*self.target, socket.SOCK_DGRAM)
        self._sel = sel = selectors.DefaultSelector()
        self._waker = Waker()
        sel.register(self._waker.reader, READ, (None, "waker", self._waker))
        shared = Shared(sel, self._schedule, self._counters, self._event, format_address(self.target))
        if self._protocols[0]:
            self._tcp = TcpRelay(bound(socket.SOCK_STREAM, host, port), target_tcp, shared)
            self.tcp_port = self._tcp.port
        if self._protocols[1]:
            udp = None
            if port == 0 and self.tcp_port:  # BCNP uses one port number for both: the TCP one if free
                with contextlib.suppress(OSError):
                    udp = bound(socket.SOCK_DGRAM, host, self.tcp_port)
            udp = udp or bound(socket.SOCK_DGRAM, host, port)
            self._udp = UdpRelay(udp, target_udp, shared, idle_timeout=self._udp_idle)
            self.udp_port = self._udp.port
        target_host, target_port = target_tcp[1][:2]
        if target_port in (self.tcp_port, self.udp_port) and (
            ip_address(target_host).is_loopback or target_host == self._bound_host()
        ):
            raise OSError(f"the target {format_address(self.target)} is this proxy: give another port")

    def _relays(self) -> list[Relay]:
        return [relay for relay in (self._tcp, self._udp) if relay is not None]

    def _bound_host(self) -> str:
        relays = self._relays()
        return str(relays[0].sock.getsockname()[0]) if relays else ""

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
        relay, kind, obj = key.data
        if relay is None:
            obj.drain()  # the waker
        else:
            relay.handle(kind, obj, mask, now)

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
        healed = self._schedule.heal(self._clock())
        if healed is None:
            return
        held, released = healed
        if self._tcp is not None:
            self._tcp.heal()
        for item in held:
            self._guard(self._deliver, item)
        self._event(f"link back: {released} held bytes released")

    def _reset(self) -> None:
        self._counters.resets += 1
        conns = self._tcp.reset() if self._tcp is not None else 0
        self._schedule.reset()
        peers = self._udp.reset() if self._udp is not None else 0
        self._event(f"reset: {conns} tcp connection(s) aborted, {peers} udp client(s) forgotten")

    def _deliver(self, item: Chunk | Datagram) -> None:
        if isinstance(item, Chunk):
            assert self._tcp is not None
            self._tcp.deliver(item)
        else:
            assert self._udp is not None
            self._udp.deliver(item)

    def _close_all(self) -> None:
        for relay in self._relays():
            relay.close_all()
        self._tcp = self._udp = None
        self._schedule.clear()
        if self._waker is not None:
            if self._sel is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self._sel.unregister(self._waker.reader)
            self._waker.close()
            self._waker = None
        if self._sel is not None:
            self._sel.close()
            self._sel = None
