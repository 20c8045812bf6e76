"""UDP server, robot side: handshake pairing and peer lock.

Implements the UDP row of "Handshake Protocol" in the BCNP 3.2.2 overview.
Unlike the reference, nothing is parsed before pairing: until a peer has sent
the exact 8-byte handshake with our hash, every datagram is dropped and
counted. The handshake locks that peer (address and port); datagrams from any
other source are dropped and counted, never parsed. A locked peer silent for
``idle_timeout`` is unlocked so another can pair.

Each datagram from the locked peer is fed to the parser as it is (one may hold
several packets). An 8-byte datagram cannot be a packet (the smallest is 11
bytes), so a handshake from the locked peer is recognised, answered and never
parsed.
"""

from __future__ import annotations

import contextlib
import selectors
import socket

from ..queue import elapsed_over
from ..wire import HANDSHAKE_MAGIC, HANDSHAKE_SIZE
from .base import ServerBase, Waker, describe_handshake, format_address, log

__all__ = ["MAX_DATAGRAM", "UdpServer"]

#: Largest UDP payload over IPv4 (65,535 - 20 IP - 8 UDP header bytes).
MAX_DATAGRAM = 65_507

_SOCK, _WAKE = "sock", "wake"


class UdpServer(ServerBase):
    """Serves one paired BCNP controller over UDP; feeds its datagrams to ``sink``.

    ``send(packet)`` (robot thread) sends one datagram to the locked peer and
    never blocks: when the kernel's send buffer is full the packet is refused
    and counted. A packet larger than a datagram cannot be sent over UDP.
    """

    kind = "udp"

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
        self._last_rx = 0.0
        return int(sock.getsockname()[1])

    def _serve(self, waker: Waker) -> None:
        for key, _mask in self._sel.select(self.config.poll_interval):
            if key.data is _SOCK:
                self._read()
            else:
                waker.drain()
        peer = self._peer
        if peer is not None and elapsed_over(self.clock(), self._last_rx, self.config.idle_timeout):
            self.idle_drops += 1
            self._unlock(f"silent for {self.config.idle_timeout:g} s")

    def _read(self) -> None:
        recvfrom = self._sock.recvfrom
        push = self.sink.push
        clock = self.clock
        pause = self._sink_pause()
        for _ in range(self.MAX_DATAGRAMS_PER_WAKE):
            if pause is not None:
                pause()  # no new datagram while the robot loop runs a tick (LoopPriority)
            try:
                data, source = recvfrom(65_536)
            except BlockingIOError:
                return
            except OSError:  # e.g. an ICMP error queued on the socket: not data
                return
            peer = self._peer
            if peer is None:
                self._pair(data, source)
                continue
            if source != peer:
                self.foreign_datagrams += 1
                continue
            now = clock()
            self._last_rx = now
            if len(data) == HANDSHAKE_SIZE and data[:4] == HANDSHAKE_MAGIC:
                remote, reason = describe_handshake(data, self.local_hash)
                self.remote_hash = remote
                if reason is None:
                    self._answer(source)
                else:
                    self._reject(source, reason)
                continue
            self.bytes_in += len(data)
            push(data, now)

    def _pair(self, data: bytes, source: tuple[object, ...]) -> None:
        if len(data) != HANDSHAKE_SIZE or data[:4] != HANDSHAKE_MAGIC:
            self.unpaired_datagrams += 1
            return
        remote, reason = describe_handshake(data, self.local_hash)
        self.remote_hash = remote
        if reason is not None:
            self._reject(source, reason)
            # Answer anyway: our hash is what the host needs to report the mismatch.
            self._answer(source)
            return
        if not self.slot.acquire(self):
            self.refused += 1
            self.last_reject = f"{format_address(source)}: refused, another controller owns the link"
            self._log.warning("BCNP udp: %s", self.last_reject)
            return
        self._reset_sink()
        self._last_rx = self.clock()
        with self._send_lock:
            self._peer = source
        self.controllers += 1
        log.info("BCNP udp: paired with %s (hash 0x%08X)", format_address(source), remote)
        self._answer(source)

    def _answer(self, target: tuple[object, ...]) -> None:
        with self._send_lock:
            try:
                self.bytes_out += self._sock.sendto(self._handshake, target)
            except OSError as exc:
                self.send_failures += 1
                self.last_send_error = exc

    def _unlock(self, reason: str) -> None:
        peer = self._peer
        self._end_controller()
        log.info("BCNP udp: unlocked %s: %s", format_address(peer), reason)

    def _close_all(self) -> None:
        if self._peer is not None:
            self._end_controller()
        self._sel.close()
        self._sock.close()

    # -- robot thread ----------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        """Send one packet as one datagram to the locked peer, without blocking."""
        size = len(data)
        with self._send_lock:
            peer = self._peer
            if peer is None or size > MAX_DATAGRAM:
                self.send_failures += 1
                if peer is not None:
                    self.last_send_error = ValueError(
                        f"packet of {size} bytes does not fit a UDP datagram ({MAX_DATAGRAM})"
                    )
                return False
            try:
                n = self._sock.sendto(data, peer)
            except BlockingIOError:
                self.send_refused += 1
                return False
            except OSError as exc:
                self.send_failures += 1
                self.last_send_error = exc
                return False
            self.bytes_out += n
            self.packets_out += 1
            return True
