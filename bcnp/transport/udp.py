"""UDP server, robot side: handshake pairing and peer lock.

Implements the UDP row of "Handshake Protocol" in the BCNP 3.2.2 overview;
the handshake is decided and the packets framed by a
:class:`~bcnp.connection.Connection` for the paired peer. Nothing is parsed
before pairing: until a peer has sent
the exact 8-byte handshake with our hash, every datagram is dropped and
counted. The handshake locks that peer (address and port); datagrams from any
other source are dropped and counted, never parsed. A locked peer silent for
``idle_timeout`` is unlocked so another can pair; one whose link is lost (no
packet for the link timeout) is unlocked at once (``end_on_link_loss``), and
what it sends afterwards is dropped until it handshakes again. A source outside
``allowed_peers`` is ignored altogether: never answered, paired or parsed.

Datagrams a network held through a drop look like new ones: the wire has no
sequence number. What tells them apart is their source. Our host reconnects from
a new source port, so whatever still comes from an earlier controller's address
while another holds the link is refused and counted (``stale_datagrams``). A
client that handshakes again from its old port is paired, as the reference robot
pairs it; when it had sent commands from that port, it is counted
(``same_port_pairings``) and warned about once, because what the network held
from it can no longer be told from what it sends now
(docs/reliability.md, "Held datagrams").

Each datagram from the locked peer is fed to the parser as it is (one may hold
several packets). An 8-byte datagram cannot be a packet (the smallest is 11
bytes), so a handshake from the locked peer is recognised, answered and never
parsed.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
from collections import deque

from ..connection import MAX_DATAGRAM, HandshakeRejected, IdleTimeout, LinkLost, is_handshake_datagram
from ..wire import encode_handshake
from .base import ServerBase, ending, log
from .netio import Waker, format_address

__all__ = ["MAX_DATAGRAM", "UdpServer"]

_SOCK, _WAKE = "sock", "wake"


class UdpServer(ServerBase):
    """Serves one paired BCNP controller over UDP; feeds its datagrams to ``sink``.

    ``send(packet)`` (robot thread) sends one datagram to the locked peer and
    never blocks: when the kernel's send buffer is full the packet is refused
    and counted. A packet larger than a datagram cannot be sent over UDP.
    With ``defer_sends`` the datagrams wait (up to ``send_buffer_limit`` bytes)
    for :meth:`flush_sends`; one the kernel then refuses counts in
    ``send_refused``.
    """

    kind = "udp"
    warnings = ("not_allowed", "refused", "handshake", "stale")

    #: Earlier controllers' addresses remembered: their datagrams are stale.
    EARLIER_CONTROLLERS = 8

    #: Datagrams handled per wake-up of the receive thread.
    MAX_DATAGRAMS_PER_WAKE = 16

    def _open(self, waker: Waker) -> int:
        cfg = self.config
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((cfg.host, cfg.port))
            sock.setblocking(False)
            with contextlib.suppress(OSError):  # room for bursts of large datagrams; best effort
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._sel = selectors.DefaultSelector()
        self._sel.register(sock, selectors.EVENT_READ, _SOCK)
        self._sel.register(waker.reader, selectors.EVENT_READ, _WAKE)
        self._handshake = encode_handshake(self.local_hash)
        self._outbox: deque[tuple[bytes, tuple[object, ...]]] = deque()  # deferred sends
        self._outbox_bytes = 0
        # Earlier controllers, oldest first: whether each sent more than its handshake.
        self._earlier: dict[tuple[object, ...], bool] = {}
        self._peer_sent = False  # the controller sent more than its handshake
        self._warned_same_port = False
        return int(sock.getsockname()[1])

    def _serve(self, waker: Waker) -> None:
        events = self._sel.select(self.config.poll_interval)
        if self._connection is not None and (lost := self._lost_by_request()) is not None:
            # Before reading: what it sent after the robot stopped waits for a new handshake.
            self._unlock(*ending(lost))
        for key, _mask in events:
            if key.data is _SOCK:
                self._read()
            else:
                waker.drain()
        if self._outbox:
            if self.pause is not None:
                self.pause()  # deferred sends: once the tick is over
            self._send_queued()
        connection = self._connection
        if connection is not None:
            event = connection.check_deadlines(self.clock())
            if isinstance(event, LinkLost | IdleTimeout):
                self._unlock(*ending(event))

    def _read(self) -> None:
        recvfrom = self._sock.recvfrom
        clock = self.clock
        pause = self.pause
        for _ in range(self.MAX_DATAGRAMS_PER_WAKE):
            if pause is not None:
                pause()  # no new datagram while the robot loop runs a tick (LoopPriority)
            try:
                data, source = recvfrom(65_536)
            except BlockingIOError:
                return
            except OSError:  # e.g. an ICMP error queued on the socket: not data
                return
            peer, connection = self._peer, self._connection
            if peer is None or connection is None or source != peer:
                # A source that may not drive is never answered, paired or parsed,
                # and the controller's idle time is not its to refresh.
                if not self._admit(source):
                    continue
                if peer is None or connection is None:
                    self._pair(data, source)
                elif source in self._earlier:
                    self._stale(source)
                else:
                    self.counters.foreign_datagrams += 1
                continue
            now = clock()
            if is_handshake_datagram(data):
                outcome = connection.receive_datagram(data, now)
                if isinstance(outcome, LinkLost):
                    # Lost first, then asking again: a new pairing, with an empty queue.
                    self._unlock(str(outcome), "link_losses", outcome.discarded - len(data))
                    self._pair(data, source)
                elif outcome is not None:
                    self._note_handshake(outcome, source)
                    if not isinstance(outcome, HandshakeRejected):
                        self._answer(source)
                continue
            lost = self._feed(connection, data, now)
            if lost is not None:
                self._unlock(*ending(lost))
            else:
                self._peer_sent = True

    def _pair(self, data: bytes, source: tuple[object, ...]) -> None:
        if not is_handshake_datagram(data):
            self.counters.unpaired_datagrams += 1
            return
        now = self.clock()
        connection = self._new_connection(now, datagrams=True)
        outcome = connection.receive_datagram(data, now)
        if outcome is None or isinstance(outcome, LinkLost):  # pragma: no cover - a new connection decides it
            return
        self._note_handshake(outcome, source)
        if isinstance(outcome, HandshakeRejected):
            # Answer anyway: our hash is what the host needs to report the mismatch.
            self._answer(source)
            return
        if not self.slot.acquire(self):
            self._refuse(source, "another controller owns the link", "refused")
            self.counters.refused += 1
            return
        self._take_controller(connection, source, now)
        log.info("BCNP udp: paired with %s (hash 0x%08X)", format_address(source), outcome.remote_hash)
        self._peer_sent = False
        if self._earlier.pop(source, False):  # it sent commands from this port before
            self.counters.same_port_pairings += 1
            if not self._warned_same_port:
                self._warned_same_port = True
                log.warning(
                    "BCNP udp: %s paired again from the same source port after sending from it: what "
                    "the network held from its earlier link cannot be told from what it sends now (a "
                    "client should reconnect from a new source port; docs/reliability.md)",
                    format_address(source),
                )
        self._answer(source)

    def _stale(self, source: tuple[object, ...]) -> None:
        """A datagram from an earlier controller while another holds the link: held by the
        network through a drop, or sent by a host that has since reconnected. Refused."""
        self.counters.stale_datagrams += 1
        self.last_reject = f"{format_address(source)}: from an earlier controller, refused"
        self._warn["stale"].warning("BCNP udp: %s", self.last_reject)

    def _send_queued(self) -> None:
        # As TCP's flush: the lock guards the queue, not the write (this thread closes the socket).
        lock = self._send_lock
        counters = self.counters
        outbox = self._outbox
        while True:
            with lock:
                if not outbox:
                    return
                data, peer = outbox.popleft()
                self._outbox_bytes -= len(data)
            try:
                n = self._sock.sendto(data, peer)
            except BlockingIOError:
                with lock:  # send() counts too: one writer at a time
                    counters.send_refused += 1
                continue
            except OSError as exc:
                with lock:
                    counters.send_failures += 1
                    self.last_send_error = exc
                continue
            with lock:
                counters.bytes_out += n
                counters.packets_out += 1

    def _drop_queued(self) -> None:
        """The peer is gone (under the send lock): its queued datagrams go with it."""
        self._outbox.clear()
        self._outbox_bytes = 0

    def _answer(self, target: tuple[object, ...]) -> None:
        with self._send_lock:
            try:
                self.counters.bytes_out += self._sock.sendto(self._handshake, target)
            except OSError as exc:
                self.counters.send_failures += 1
                self.last_send_error = exc

    def _unlock(self, reason: str, counter: str | None = None, discarded: int = 0) -> None:
        peer = self._peer
        self._end_controller(reason, counter, self._drop_queued, discarded)
        if peer is not None:
            self._earlier.pop(peer, None)
            self._earlier[peer] = self._peer_sent
            if len(self._earlier) > self.EARLIER_CONTROLLERS:
                del self._earlier[next(iter(self._earlier))]
        log.info("BCNP udp: unlocked %s: %s", format_address(peer), reason)

    def _close_all(self) -> None:
        if self._peer is not None:
            self._end_controller("the server stopped", close_socket=self._drop_queued)
        self._sel.close()
        with self._send_lock:
            self._sock.close()

    # -- robot thread ----------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        """Send one packet as one datagram to the locked peer, without blocking."""
        size = len(data)
        counters = self.counters
        with self._send_lock:
            peer = self._peer
            if peer is None or size > MAX_DATAGRAM:
                counters.send_failures += 1
                if peer is not None:
                    self.last_send_error = ValueError(
                        f"packet of {size} bytes does not fit a UDP datagram ({MAX_DATAGRAM})"
                    )
                return False
            if self.defer_sends:
                if self._outbox and self._outbox_bytes + size > self.config.send_buffer_limit:
                    counters.send_refused += 1
                    return False
                self._outbox.append((data, peer))
                self._outbox_bytes += size
                self._sends_queued = True
                return True
            try:
                n = self._sock.sendto(data, peer)
            except BlockingIOError:
                counters.send_refused += 1
                return False
            except OSError as exc:
                counters.send_failures += 1
                self.last_send_error = exc
                return False
            counters.bytes_out += n
            counters.packets_out += 1
            return True
