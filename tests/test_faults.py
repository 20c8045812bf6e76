"""Fault injection on real loopback sockets, and every limit hit with its counter checked.

The robot's receive path as it runs on the roboRIO: a TcpServer and a UdpServer
sharing one ControllerSlot feed one Dispatcher and one MessageQueue, and a
controller that comes or goes clears the queue. Every timeout runs on an
injected FakeClock; wall-clock waits only bound how long a receive thread may
take to react (``wait_until``) or wait for it to look at the clock again
(``ClockReader.settle``).
"""

from __future__ import annotations

import contextlib
import gc
import random
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from support import (
    ClockReader,
    FakeClock,
    close_with_reset,
    open_and_quiet,
    open_fds,
    peer_closed,
    recv_exactly,
    wait_until,
)

import bcnp
from bcnp import (
    CLEAR_QUEUE,
    Dispatcher,
    MessageQueue,
    MessageQueueConfig,
    PacketError,
    TelemetryAccumulator,
    encode_handshake,
    encode_packet,
)
from bcnp.host.link.client import Client
from bcnp.timebase import elapsed_over
from bcnp.transport import ControllerSlot, SharedQueue, TcpServer, TransportConfig, UdpServer
from benchmarks.harness import ROOT

SCHEMA = bcnp.load_schema(ROOT / "schema" / "messages.json")
DRIVE = SCHEMA["DriveCmd"]
TELEMETRY = SCHEMA["DrivetrainTelemetry"]
HANDSHAKE = encode_handshake(SCHEMA.hash)
KEEPALIVE = encode_packet(DRIVE, [])


def commands(first: int, n: int, duration_ms: int = 20) -> list[bcnp.Message]:
    """DriveCmds number ``first`` .. ``first + n - 1``; the number is the raw vx, so each is distinct."""
    return [DRIVE.message_from_raw((k, -k, duration_ms)) for k in range(first, first + n)]


def ident(msg: bcnp.Message | None) -> int | None:
    return None if msg is None else msg.raw[0]


def drive_packet(first: int, n: int, flags: int = 0, duration_ms: int = 20) -> bytes:
    return encode_packet(DRIVE, commands(first, n, duration_ms), flags)


@dataclass
class Rig:
    """The robot's receive path on loopback, with peers to talk to it."""

    clock: FakeClock
    tcp_clock: ClockReader
    udp_clock: ClockReader
    dispatcher: Dispatcher
    queue: MessageQueue
    shared: SharedQueue  # the queue under its lock, as the robot shares it between threads
    slot: ControllerSlot
    tcp: TcpServer
    udp: UdpServer
    packets: list[bytes] = field(default_factory=list)  # every packet handed to the queue, in order

    def close(self) -> None:
        self.tcp.close()
        self.udp.close()

    def tcp_parser(self) -> bcnp.StreamParser:
        """The parser of the TCP controller's connection."""
        connection = self.tcp.connection
        assert connection is not None, "no TCP controller"
        return connection.parser

    def tcp_peer(self, rcvbuf: int | None = None) -> socket.socket:
        """A TCP connection that has read the robot's handshake and sent nothing yet."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect(): it sets the window the peer offers
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(5)
        sock.connect(("127.0.0.1", self.tcp.port))
        assert recv_exactly(sock, 8) == HANDSHAKE
        return sock

    def tcp_controller(self, rcvbuf: int | None = None) -> socket.socket:
        before = self.tcp.counters.controllers
        sock = self.tcp_peer(rcvbuf)
        sock.sendall(HANDSHAKE)
        wait_until(lambda: self.tcp.counters.controllers == before + 1, what="the TCP handshake")
        return sock

    def udp_socket(self, host: str = "127.0.0.1", port: int = 0) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            raise
        sock.settimeout(5)
        sock.connect(("127.0.0.1", self.udp.port))
        return sock

    def udp_controller(self) -> socket.socket:
        sock = self.udp_socket()
        sock.send(HANDSHAKE)
        assert sock.recv(100) == HANDSHAKE  # answered once paired
        return sock

    def controller(self, transport: str) -> tuple[socket.socket, Callable[[bytes], object]]:
        """A controller on ``transport`` and the function that sends it one packet."""
        if transport == "tcp":
            sock = self.tcp_controller()
            return sock, sock.sendall
        sock = self.udp_controller()
        return sock, sock.send


def make_rig(*, capacity: int = 70_000, max_buffer: int | None = None, **config: object) -> Rig:
    clock = FakeClock()
    dispatcher = Dispatcher(SCHEMA, max_buffer=max_buffer)
    queue = MessageQueue(MessageQueueConfig(capacity=capacity))
    shared = SharedQueue(queue)
    slot = ControllerSlot()
    cfg = TransportConfig(host="127.0.0.1", port=0, **config)  # type: ignore[arg-type]
    tcp_clock, udp_clock = clock.reader(), clock.reader()
    tcp = TcpServer(dispatcher, cfg, clock=tcp_clock, slot=slot, on_controller_change=shared.clear)
    udp = UdpServer(dispatcher, cfg, clock=udp_clock, slot=slot, on_controller_change=shared.clear)
    rig = Rig(clock, tcp_clock, udp_clock, dispatcher, queue, shared, slot, tcp, udp)

    def handle(packet: bcnp.PacketView, now: float) -> None:
        rig.packets.append(packet.to_bytes())
        shared.handle_packet(packet, now)

    dispatcher.register(DRIVE, handle)
    tcp.start()
    try:
        udp.start()
    except BaseException:
        tcp.close()
        raise
    return rig


@pytest.fixture
def rigs() -> Iterator[Callable[..., Rig]]:
    """Builds rigs (``make_rig`` arguments) and stops them all at the end of the test."""
    made: list[Rig] = []

    def make(**kwargs: object) -> Rig:
        rig = make_rig(**kwargs)  # type: ignore[arg-type]
        made.append(rig)
        return rig

    yield make
    for rig in made:
        rig.close()


# -- A1: a peer vanishes mid-packet ------------------------------------------------------------------


@pytest.mark.parametrize("vanish", ["close", "reset"])
def test_peer_vanishing_mid_packet_discards_the_partial_frame(rigs: Callable[..., Rig], vanish: str) -> None:
    """Half a packet then FIN or RST: the half is dropped and counted, the queue is cleared at
    once, and the rest of that packet sent by the next controller cannot complete it."""
    rig = rigs()
    first = drive_packet(0, 3, duration_ms=500)
    broken = drive_packet(10, 5)
    after = drive_packet(20, 2)
    half = len(broken) // 2
    sock = rig.tcp_controller()
    sock.sendall(first + broken[:half])
    wait_until(lambda: len(rig.packets) == 1 and rig.tcp.buffered == half)
    assert ident(rig.shared.update(rig.clock())) == 0 and rig.queue.size() == 2

    if vanish == "reset":
        close_with_reset(sock)
    else:
        sock.close()
    wait_until(lambda: rig.tcp.counters.disconnects == 1, what="the robot to see the peer go")
    status = rig.tcp.status()
    assert not status.handshaken and status.peer == "" and rig.slot.owner is None
    assert status.discarded_bytes == half and rig.tcp.buffered == 0
    # Cleared when the controller went, not by the queue's 200 ms link timeout: the clock has not moved.
    assert rig.queue.active() is None and rig.queue.size() == 0
    assert status.parse_errors == 0

    with rig.tcp_controller() as nxt:
        nxt.sendall(broken[half:] + after)
        wait_until(lambda: len(rig.packets) == 2, what="the next controller's packet")
        assert rig.packets == [first, after]  # the two halves never joined up across controllers
        assert rig.tcp.status().parse_errors > 0  # the orphaned half is garbage to the new link
        assert [ident(m) for m in rig.shared.drain()] == [20, 21]
        status = rig.tcp.status()
        assert status.controllers == 2 and status.handshaken and status.internal_errors == 0


# -- A2: half-open connections ------------------------------------------------------------------------


def test_connections_that_never_handshake_time_out_and_free_their_slots(rigs: Callable[..., Rig]) -> None:
    """A peer that connects and says nothing and one that stops one byte short of a handshake
    fill both pending slots; each is closed exactly after its own deadline on the fake clock,
    and the freed slot takes a controller that the later timeout does not disturb."""
    rig = rigs(handshake_timeout=1.0, max_pending=2)
    mute = rig.tcp_peer()
    wait_until(lambda: len(rig.tcp._pending) == 1)
    rig.clock.advance(0.25)
    stalled = rig.tcp_peer()
    stalled.sendall(HANDSHAKE[:7])
    wait_until(lambda: len(rig.tcp._pending) == 2)
    with socket.create_connection(("127.0.0.1", rig.tcp.port), timeout=5) as extra:
        assert peer_closed(extra)  # both pending slots taken: refused at once
    assert rig.tcp.counters.refused == 1

    # 1.25 s after the mute peer connected, exactly 1.0 s after the stalled one: only the mute one is past.
    rig.clock.advance(1.0)
    assert peer_closed(mute)
    rig.tcp_clock.settle()
    status = rig.tcp.status()
    assert status.handshake_timeouts == 1 and "(0 of 8 bytes)" in status.last_reject
    assert open_and_quiet(stalled)

    ctrl = rig.tcp_controller()  # takes the freed pending slot, then the link
    ctrl.sendall(drive_packet(0, 2))
    wait_until(lambda: len(rig.packets) == 1)
    rig.clock.advance(0.1)  # now the stalled peer is past its deadline too (the link timeout is not)
    assert peer_closed(stalled)
    wait_until(lambda: rig.tcp.counters.handshake_timeouts == 2)
    assert "(7 of 8 bytes)" in rig.tcp.status().last_reject
    ctrl.sendall(drive_packet(2, 2))
    wait_until(lambda: len(rig.packets) == 2)

    status = rig.tcp.status()
    assert status.handshaken and status.controllers == 1 and status.refused == 1
    assert status.idle_drops == 0 and status.disconnects == 0 and status.handshake_rejects == 0
    assert status.bytes_in == 2 * len(drive_packet(0, 2))  # not one byte of the other three peers
    assert [ident(m) for m in rig.shared.drain()] == [0, 1, 2, 3]
    for sock in (mute, stalled, ctrl):
        sock.close()


def test_deadlines_compare_whole_microseconds_as_the_queue_does() -> None:
    assert 4.03 - 2.03 > 2.0  # in float seconds "exactly the timeout" is already past it
    assert not elapsed_over(4.03, 2.03, 2.0)
    assert elapsed_over(4.030001, 2.03, 2.0)
    assert 0.55 - 0.35 > 0.2
    assert not elapsed_over(0.55, 0.35, 0.2) and elapsed_over(0.550001, 0.35, 0.2)


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_controller_gone_silent_is_dropped_after_the_idle_timeout(
    rigs: Callable[..., Rig], transport: str
) -> None:
    """A controller that handshakes, sends, then goes silent: kept while it sends (keepalives
    count), dropped (TCP) or unlocked (UDP) just past idle_timeout after its last packet, its
    queue cleared, and the shared slot free for a controller on the other transport. As the
    reference: without end_on_link_loss (by default the link timeout ends it first, below)."""
    rig = rigs(idle_timeout=2.0, end_on_link_loss=False)
    server = rig.tcp if transport == "tcp" else rig.udp
    reader = rig.tcp_clock if transport == "tcp" else rig.udp_clock
    zombie, send = rig.controller(transport)
    send(drive_packet(0, 3, duration_ms=10_000))
    wait_until(lambda: len(rig.packets) == 1)
    assert ident(rig.shared.update(rig.clock())) == 0

    rig.clock.advance(1.5)
    send(KEEPALIVE)
    wait_until(lambda: len(rig.packets) == 2)
    rig.clock.advance(2.0)  # 3.5 s since the handshake, exactly idle_timeout since the keepalive
    reader.settle()
    assert server.status().handshaken and server.counters.idle_drops == 0 and rig.queue.size() == 2

    rig.clock.advance(0.25)
    wait_until(lambda: server.counters.idle_drops == 1, what="the idle drop")
    status = server.status()
    assert not status.handshaken and status.peer == "" and rig.slot.owner is None
    assert rig.queue.active() is None and rig.queue.size() == 0  # cleared at the drop, not by a tick
    if transport == "tcp":
        assert peer_closed(zombie)
        assert status.disconnects == 0  # a drop, not a disconnect

    other = "udp" if transport == "tcp" else "tcp"
    nxt, send_next = rig.controller(other)
    send_next(drive_packet(10, 2))
    wait_until(lambda: len(rig.packets) == 3)
    assert [ident(m) for m in rig.shared.drain()] == [10, 11]
    assert rig.slot.owner is (rig.udp if other == "udp" else rig.tcp)
    assert rig.tcp.counters.parse_errors + rig.udp.counters.parse_errors == 0
    nxt.close()
    zombie.close()


# -- A3: a handshake in one-byte segments -------------------------------------------------------------


def test_handshake_and_packets_in_one_byte_segments(rigs: Callable[..., Rig]) -> None:
    """TCP_NODELAY, one byte per send, and the next byte only once the robot has read the last
    one: every byte is a read of its own. The handshake takes 0.875 s of its 1 s deadline."""
    rig = rigs(handshake_timeout=1.0)
    sock = rig.tcp_peer()
    wait_until(lambda: len(rig.tcp._pending) == 1)
    conn = rig.tcp._pending[0]
    for i, byte in enumerate(HANDSHAKE[:-1]):
        sock.send(bytes([byte]))
        wait_until(lambda i=i: conn.connection.handshake_received == i + 1, what=f"handshake byte {i}")
        rig.clock.advance(0.125)
    rig.tcp_clock.settle()
    assert rig.tcp.counters.handshake_timeouts == 0 and not rig.tcp.status().handshaken
    sock.send(HANDSHAKE[-1:])
    wait_until(lambda: rig.tcp.status().handshaken, what="the last handshake byte")

    slow = [drive_packet(0, 1), drive_packet(1, 3)]
    for n, byte in enumerate(b"".join(slow), start=1):
        sock.send(bytes([byte]))
        wait_until(lambda n=n: rig.tcp.counters.bytes_in == n, what=f"data byte {n}")
    assert rig.packets == slow
    fast = drive_packet(4, 2)
    sock.sendall(fast)
    wait_until(lambda: len(rig.packets) == 3)

    assert rig.packets == [*slow, fast]
    assert [ident(m) for m in rig.shared.drain()] == list(range(6))
    status = rig.tcp.status()
    assert status.parse_errors == 0 and status.handshake_rejects == 0 and status.handshake_timeouts == 0
    assert status.controllers == 1 and status.bytes_in == sum(map(len, rig.packets))
    sock.close()


# -- A4: ten megabytes of garbage ------------------------------------------------------------------------


def test_ten_megabytes_of_garbage_then_every_valid_packet_is_delivered(rigs: Callable[..., Rig]) -> None:
    """10 MiB of random bytes, sprinkled with DriveCmd headers claiming up to 65,535 messages
    and ending in one that still waits for 655 KB, then 300 valid packets: all 300 arrive,
    intact and in order, and close() ends the receive thread during an endless flood."""
    rig = rigs()
    rng = random.Random(20_260_101)
    garbage = bytearray(rng.randbytes(10 * 1024 * 1024))
    for pos in range(0, len(garbage), 256 * 1024):
        garbage[pos : pos + 7] = bytes([3, 2, 0, 0, DRIVE.id]) + rng.randbytes(2)
    garbage[-7:] = bytes([3, 2, 0, 0, DRIVE.id, 0xFF, 0xFF])
    valid = [drive_packet(100 * i, rng.randint(1, 8)) for i in range(300)]
    sock = rig.tcp_controller()
    sock.sendall(garbage)  # as fast as the kernel takes it
    sock.sendall(b"".join(valid))
    wait_until(lambda: len(rig.packets) == len(valid), timeout=60, what="every valid packet")

    assert rig.packets == valid
    expected = [m for p in valid for m in bcnp.decode_packet(SCHEMA, p)]
    assert rig.shared.drain() == expected
    status = rig.tcp.status()
    errors = rig.tcp_parser().error_counts
    assert status.parse_errors == sum(errors.values()) > 0
    assert errors[PacketError.CHECKSUM_MISMATCH] > 0  # sprinkled frames waited for their bytes, then failed
    assert errors[PacketError.TRUNCATED] > 0  # the last one was given up when valid packets followed it
    assert status.bytes_in == len(garbage) + sum(map(len, valid))
    assert status.handshaken and status.disconnects == 0 and status.internal_errors == 0
    assert rig.tcp_parser().callback_errors == 0 and rig.tcp.buffered == 0

    # Garbage without end: close() still ends the receive thread (within its 1 s on a quiet
    # machine; the flood and a busy machine share the cores, as in test_transport_tcp's flood).
    def flood() -> None:
        try:
            while True:
                sock.sendall(garbage)
        except OSError:  # the robot closed the connection
            pass

    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    mark = rig.tcp.counters.bytes_in
    wait_until(lambda: rig.tcp.counters.bytes_in > mark + 4 * 1024 * 1024, timeout=30, what="the flood")
    t0 = time.monotonic()
    rig.tcp.close(timeout=15.0)
    elapsed = time.monotonic() - t0
    assert not rig.tcp.running, f"still running {elapsed:.2f} s after close()"
    flooder.join(10)
    assert not flooder.is_alive()
    sock.close()


# -- A5: a thousand connect/disconnect cycles ------------------------------------------------------------


PARTIAL = drive_packet(0, 2)[:15]


def connect_and_vanish(rig: Rig, i: int) -> None:
    """Cycle ``i`` of four kinds: handshake then FIN; FIN before the handshake (every other
    time after 3 handshake bytes); handshake and half a packet then RST; RST before the
    handshake. Returns once the robot has closed its side."""
    kind = i % 4
    sock = rig.tcp_peer()
    if kind in (0, 2):
        handshaken = rig.tcp.counters.controllers + 1
        sock.sendall(HANDSHAKE + (PARTIAL if kind == 2 else b""))
        buffered = len(PARTIAL) if kind == 2 else 0
        wait_until(lambda: rig.tcp.counters.controllers == handshaken and rig.tcp.buffered == buffered)
        if kind == 2:
            close_with_reset(sock)
        else:
            sock.close()
        wait_until(lambda: rig.tcp.counters.disconnects == handshaken)
    elif kind == 1:
        if i % 8 == 1:
            sock.sendall(HANDSHAKE[:3])
        sock.shutdown(socket.SHUT_WR)
        assert peer_closed(sock)  # the robot closed its end too
        sock.close()
    else:
        wait_until(lambda: len(rig.tcp._pending) == 1)
        close_with_reset(sock)
        wait_until(lambda: not rig.tcp._pending)


def test_a_thousand_connect_disconnect_cycles_leak_nothing() -> None:
    """1,000 connections of four kinds (see ``connect_and_vanish``): nothing is refused, every
    count is exact, no thread, descriptor or unclosed socket is left, and the server still serves."""
    gc.collect()
    threads_before, fds_before = set(threading.enumerate()), open_fds()
    rig = make_rig()
    try:
        threads_running, fds_running = set(threading.enumerate()), open_fds()
        # A socket the robot forgets to close is closed by the garbage collector, which hides it
        # from a descriptor count but not from ResourceWarning (recorded here from every thread).
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            for i in range(1000):
                connect_and_vanish(rig, i)
            gc.collect()
        port = f"'127.0.0.1', {rig.tcp.port})"  # the sockets of this server and its peers
        unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        assert [m for m in unclosed if port in m] == []

        status = rig.tcp.status()
        assert status.controllers == status.disconnects == 500
        assert status.discarded_bytes == 250 * len(PARTIAL)
        assert (status.refused, status.handshake_rejects, status.handshake_timeouts) == (0, 0, 0)
        assert (status.idle_drops, status.internal_errors, status.parse_errors) == (0, 0, 0)
        assert not status.handshaken and rig.slot.owner is None and not rig.tcp._pending
        assert set(threading.enumerate()) <= threads_running  # no thread started, none left behind
        assert open_fds() == fds_running

        with rig.tcp_controller() as sock:
            sock.sendall(drive_packet(0, 3))
            wait_until(lambda: len(rig.packets) == 1)
        assert rig.packets == [drive_packet(0, 3)]
    finally:
        rig.close()
    assert set(threading.enumerate()) <= threads_before
    assert open_fds() == fds_before


# -- A6: UDP datagrams from other sources ----------------------------------------------------------------


def test_udp_datagrams_from_other_sources_never_reach_the_queue(rigs: Callable[..., Rig]) -> None:
    """Once a controller is paired, datagrams from any other address or port (handshakes,
    CLEAR_QUEUE packets, keepalives, garbage, empty ones) are counted and dropped, are never
    answered and never keep the lock alive; the controller's interleaved packets all arrive."""
    rig = rigs(idle_timeout=2.0)
    owner = rig.udp_controller()
    owner_port = owner.getsockname()[1]
    intruders = [rig.udp_socket()]  # same address, another port
    for port in (owner_port, 0):  # another address: the same port, and another port
        # A loopback without 127.0.0.2 (not every OS routes all of 127/8): the first case still runs.
        with contextlib.suppress(OSError):
            intruders.append(rig.udp_socket("127.0.0.2", port))
    if sys.platform.startswith("linux"):
        assert len(intruders) == 3  # Linux routes all of 127/8 to loopback
    payloads = [
        HANDSHAKE,
        drive_packet(9000, 3, flags=CLEAR_QUEUE),
        drive_packet(9100, 1),
        KEEPALIVE,
        bytes(range(40)),
        b"",
    ]
    sent: list[bytes] = []
    rounds = 120
    for r in range(rounds):
        packet = drive_packet(2 * r, 2)
        owner.send(packet)
        sent.append(packet)
        for j, intruder in enumerate(intruders):
            intruder.send(payloads[(r + j) % len(payloads)])
        if r % 10 == 9:  # let the robot keep up: a UDP buffer that overflows drops datagrams
            wait_until(
                lambda n=r + 1: (
                    len(rig.packets) == n and rig.udp.counters.foreign_datagrams == n * len(intruders)
                )
            )

    assert rig.packets == sent
    assert [ident(m) for m in rig.shared.drain()] == list(range(2 * rounds))
    status = rig.udp.status()
    assert status.foreign_datagrams == rounds * len(intruders)
    assert status.peer == f"127.0.0.1:{owner_port}" and status.controllers == 1
    assert status.bytes_out == 8  # one handshake answer, to the owner; none to an intruder
    assert status.bytes_in == sum(map(len, sent)) and status.parse_errors == 0
    assert (status.unpaired_datagrams, status.handshake_rejects, status.refused) == (0, 0, 0)

    # Foreign datagrams are no sign of life: the owner's last packet is what counts.
    last = rig.clock()
    rig.clock.advance(0.15)
    for intruder in intruders:
        intruder.send(drive_packet(9200, 1))
    wait_until(lambda: rig.udp.counters.foreign_datagrams == (rounds + 1) * len(intruders))
    assert rig.dispatcher.last_receive_time == last and rig.queue.last_receive_time == last
    rig.clock.advance(0.1)  # 0.25 s after the owner's last packet: past the link timeout
    wait_until(lambda: rig.udp.counters.link_losses == 1, what="the unlock")
    for sock in (owner, *intruders):
        sock.setblocking(False)
        if sock is not owner:
            with pytest.raises(BlockingIOError):
                sock.recv(100)
        sock.close()


# -- A7: a peer that never reads its telemetry -------------------------------------------------------------


def test_peer_that_never_reads_telemetry_cannot_grow_the_send_buffer(rigs: Callable[..., Rig]) -> None:
    """Minutes of robot ticks (fake clock) of telemetry to a controller that never reads, with
    the smallest receive window: what waits in the robot never exceeds send_buffer_limit, the
    refusals are counted on both sides, the controller's commands all arrive, and what was
    accepted reaches the peer whole and in order once it reads."""
    limit = 16 * 1024
    rig = rigs(send_buffer_limit=limit)
    sock = rig.tcp_controller(rcvbuf=1)  # the kernel rounds it up to its minimum
    accepted: list[bytes] = []
    peak = 0
    taken_before_refusal = 0  # bytes accepted (robot buffer + kernel) before the first refusal

    def send(packet: bytes) -> bool:
        nonlocal peak, taken_before_refusal
        ok = rig.tcp.send(packet)
        if ok:
            accepted.append(packet)
        elif not taken_before_refusal:
            taken_before_refusal = sum(map(len, accepted))
        peak = max(peak, rig.tcp.send_buffered)
        return ok

    telemetry = TelemetryAccumulator(TELEMETRY, send, flush_interval_ticks=2, max_buffered=64)
    sent_commands = 0
    tick = 0
    # At least 2 min of robot time, and on until the kernel's buffers are full and the robot has
    # refused 1,000 packets.
    while tick < 6000 or rig.tcp.counters.send_refused < 1000:
        assert tick < 60_000, "the kernel never stopped taking telemetry"
        rig.clock.advance(0.02)
        for k in range(32):
            telemetry.record(TELEMETRY.message_from_raw((tick, -tick, k, -k, 32 * tick + k)))
        telemetry.tick()
        if tick % 8 == 0:  # a command every 0.16 s (within the link timeout), through the stuck telemetry
            sock.sendall(drive_packet(sent_commands, 1))
            sent_commands += 1
            wait_until(lambda n=sent_commands: len(rig.packets) == n)
        tick += 1

    metrics = telemetry.metrics
    status = rig.tcp.status()
    assert len(accepted[0]) < limit and peak <= limit
    # The kernel's share is bounded too (SO_SNDBUF 64 KiB, which Linux doubles; without it
    # Linux let about 1.6 MB of telemetry into the socket before the robot's buffer filled).
    sndbuf = rig.tcp.config.socket_send_buffer
    assert sndbuf == 64 * 1024 and limit < taken_before_refusal <= limit + 3 * sndbuf
    assert status.send_refused > 0 and status.send_refused == metrics.send_failures
    assert status.packets_out == metrics.packets == len(accepted)
    assert metrics.packets + metrics.send_failures == tick // 2
    assert status.send_failures == 0 and status.internal_errors == 0
    assert status.handshaken and status.idle_drops == 0 and status.disconnects == 0
    assert [ident(m) for m in rig.shared.drain()] == list(range(sent_commands))

    expected = b"".join(accepted)
    # A window this small leaves the robot probing it with backed-off timers: open it up to read.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    assert recv_exactly(sock, len(expected), timeout=60) == expected
    wait_until(lambda: rig.tcp.send_buffered == 0)
    assert open_and_quiet(sock)
    sock.close()


# -- A8: link loss: nothing sent before it may start --------------------------------------------------------


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_a_burst_after_a_link_loss_never_reaches_the_queue(rigs: Callable[..., Rig], transport: str) -> None:
    """A controller goes silent (a proxy holds the link); the robot drops it (TCP) or unlocks
    it (UDP) just past the link timeout after its last packet, exactly when the queue stops,
    its commands cleared at once. The burst the network then delivers reaches neither the
    parser nor the queue: over TCP the connection is gone, over UDP each datagram is dropped
    and counted until the peer handshakes again, which pairs it with an empty queue."""
    rig = rigs()
    server = rig.tcp if transport == "tcp" else rig.udp
    reader = rig.tcp_clock if transport == "tcp" else rig.udp_clock
    sock, send = rig.controller(transport)
    send(drive_packet(0, 3, duration_ms=500))
    wait_until(lambda: len(rig.packets) == 1)
    assert ident(rig.shared.update(rig.clock())) == 0

    rig.clock.advance(0.2)  # exactly the link timeout: neither stops yet
    reader.settle()
    assert server.status().handshaken and rig.queue.link_alive(rig.clock())
    rig.clock.advance(0.000001)
    wait_until(lambda: server.counters.link_losses == 1, what="the link loss")
    assert not rig.queue.link_alive(rig.clock())
    status = server.status()
    assert not status.handshaken and rig.slot.owner is None
    assert rig.queue.active() is None and rig.queue.size() == 0  # cleared at the drop, not by a tick
    assert status.idle_drops == status.disconnects == 0
    assert status.last_drop.endswith(": link lost: no packet for 0.200 s (link timeout 0.2 s)")

    received, bytes_in = rig.dispatcher.packets_received, status.bytes_in
    burst = [drive_packet(10 + 5 * k, 5) for k in range(4)]
    if transport == "tcp":
        with contextlib.suppress(OSError):  # the robot's close may already have reset it
            for packet in burst:
                sock.sendall(packet)
        assert peer_closed(sock)
    else:
        for packet in burst:
            sock.send(packet)
        wait_until(lambda: rig.udp.counters.unpaired_datagrams == len(burst))
        sock.send(HANDSHAKE)  # the host handshakes again: a new link
        assert sock.recv(100) == HANDSHAKE
        assert rig.udp.status().controllers == 2 and rig.queue.size() == 0
        sock.send(drive_packet(40, 2))
        wait_until(lambda: rig.dispatcher.packets_received == received + 1)
        assert [ident(m) for m in rig.shared.drain()] == [40, 41]
        received += 1
    assert rig.dispatcher.packets_received == received and server.counters.parse_errors == 0
    assert server.counters.bytes_in == bytes_in + (len(drive_packet(40, 2)) if transport == "udp" else 0)
    assert server.counters.link_losses == 1
    sock.close()


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_the_robot_can_end_a_link_its_server_still_thinks_alive(
    rigs: Callable[..., Rig], transport: str
) -> None:
    """The queue may find the loss first (a packet read just inside the timeout is queued
    after the tick that stopped the robot): ``end_lost_link`` has the receive thread end that
    controller; asked for a connection that has gone already, it does nothing."""
    rig = rigs()
    server = rig.tcp if transport == "tcp" else rig.udp
    sock, send = rig.controller(transport)
    send(drive_packet(0, 2))
    wait_until(lambda: len(rig.packets) == 1)
    connection = server.connection
    assert connection is not None
    server.end_lost_link(connection, 0.21)
    wait_until(lambda: server.counters.link_losses == 1, what="the requested drop")
    status = server.status()
    assert not status.handshaken and rig.slot.owner is None and rig.queue.size() == 0
    assert status.last_drop == (
        f"127.0.0.1:{sock.getsockname()[1]}: link lost: no packet for 0.210 s (link timeout 0.2 s)"
    )
    assert rig.slot.last_drop == status.last_drop
    if transport == "tcp":
        assert peer_closed(sock)
    sock.close()

    nxt, send_next = rig.controller(transport)
    server.end_lost_link(connection, 0.3)  # the old connection: nothing happens to the new controller
    send_next(drive_packet(10, 1))
    wait_until(lambda: len(rig.packets) == 2)
    (rig.tcp_clock if transport == "tcp" else rig.udp_clock).settle()
    assert server.status().handshaken and server.counters.link_losses == 1
    assert [ident(m) for m in rig.shared.drain()] == [10]
    nxt.close()


def test_once_the_queue_declared_the_link_lost_it_refuses_packets_until_the_controller_changes() -> None:
    """The receive thread stamps bytes when it reads them, then yields to the tick before it
    queues their packets: a packet read just inside the link timeout can reach the queue after
    the tick that stopped the robot. With end_on_link_loss it is refused there, under the lock
    the tick takes, and the robot is told once, to end the controller."""
    told: list[float] = []
    shared = SharedQueue(MessageQueue(), end_on_link_loss=True, on_link_lost=told.append)
    shared.handle_packet(bcnp.decode_packet(SCHEMA, drive_packet(0, 1, duration_ms=1000)), 10.0)
    assert ident(shared.update(10.2)) == 0  # exactly the link timeout: still running
    assert shared.update(10.21) is None and shared.link_lost
    assert told == [pytest.approx(0.21)]
    late = bcnp.decode_packet(SCHEMA, drive_packet(1, 1, duration_ms=1000))
    assert not shared.handle_packet(late, 10.199)  # read before the tick, queued after it
    assert shared.refused_after_loss == 1 and shared.queue.size() == 0
    assert shared.update(10.22) is None and shared.update(10.3) is None and len(told) == 1
    shared.clear()  # the controller went (or another came): its loss goes with it
    assert shared.handle_packet(late, 10.4) and ident(shared.update(10.4)) == 1
    assert not shared.link_lost and told == [pytest.approx(0.21)]

    # Only a controller's packets make a link: a local source keeping the queue alive does not.
    local = SharedQueue(MessageQueue(), end_on_link_loss=True, on_link_lost=told.append)
    local.queue.notify_received(10.0)
    local.push_batch(commands(0, 1, duration_ms=1000))
    assert ident(local.update(10.1)) == 0
    assert local.update(10.5) is None and not local.link_lost and len(told) == 1
    # Without end_on_link_loss (the reference): nothing is refused.
    reference = SharedQueue(MessageQueue())
    reference.handle_packet(late, 10.0)
    assert reference.update(10.5) is None and reference.handle_packet(late, 10.6)
    assert ident(reference.update(10.6)) == 1


# -- B: limits not covered end to end elsewhere ----------------------------------------------------------


def test_frame_larger_than_the_parser_buffer_is_counted_and_nothing_else_lost(
    rigs: Callable[..., Rig],
) -> None:
    rig = rigs(max_buffer=1000)
    before = drive_packet(0, 3)
    too_big = drive_packet(100, 200)
    after = [drive_packet(10, 2), drive_packet(20, 5)]
    assert len(too_big) > 1000
    with rig.tcp_controller() as sock:
        sock.sendall(before + too_big + b"".join(after))
        wait_until(lambda: len(rig.packets) == 3)
        assert rig.packets == [before, *after]
        parser = rig.tcp_parser()
        assert parser.error_counts[PacketError.TOO_MANY_MESSAGES] == 1
        status = rig.tcp.status()
        assert status.parse_errors == parser.errors >= 1
        assert parser.buffered == 0 and parser.packets == 3
        assert status.handshaken and status.discarded_bytes == 0 and status.disconnects == 0
        assert [ident(m) for m in rig.shared.drain()] == [0, 1, 2, 10, 11, 20, 21, 22, 23, 24]


def test_queue_capacity_refuses_the_excess_and_runs_the_200_in_order(rigs: Callable[..., Rig]) -> None:
    """250 commands at a queue of the default capacity: 50 refused and counted; the 200 kept
    run one after the other at their exact 20 ms slots, none skipped, none of the 50 ever."""
    rig = rigs(capacity=MessageQueueConfig().capacity)
    assert rig.queue.config.capacity == 200
    with rig.tcp_controller() as sock:
        sock.sendall(drive_packet(0, 150) + drive_packet(150, 100))
        wait_until(lambda: len(rig.packets) == 2)
        assert rig.queue.metrics == bcnp.QueueMetrics(received=250, overflows=50, skipped=0)
        assert rig.queue.size() == 200

        t0 = rig.clock()
        executed = []
        for k in range(201):
            rig.clock.advance(t0 + 0.02 * k - rig.clock())
            if k % 5 == 4:  # the controller's keepalives keep the 200 ms link timeout away
                seen = len(rig.packets)
                sock.sendall(KEEPALIVE)
                wait_until(lambda seen=seen: len(rig.packets) == seen + 1)
            active = rig.shared.update(rig.clock())
            if k < 200:
                assert rig.queue.active_started_at == pytest.approx(t0 + 0.02 * k, abs=1e-6)
            executed.append(ident(active))
    assert executed == [*range(200), None]
    assert rig.queue.metrics == bcnp.QueueMetrics(received=250, overflows=50, skipped=0)
    assert rig.queue.size() == 0


def test_client_receive_buffer_drops_the_oldest_telemetry_and_counts_it(rigs: Callable[..., Rig]) -> None:
    rig = rigs()
    batches = [encode_packet(TELEMETRY, [TELEMETRY.message_from_raw((i, 0, 0, 0, i))]) for i in range(10)]
    with Client(SCHEMA, "127.0.0.1", rig.tcp.port, keepalive_interval=None, max_queued_packets=4) as client:
        wait_until(lambda: rig.tcp.status().handshaken)
        for packet in batches:
            assert rig.tcp.send(packet)
        wait_until(lambda: client.link.telemetry_packets == 10)
        assert client.telemetry_dropped == 6
        kept = [client.receive(timeout=5) for _ in range(4)]
        assert [p.to_bytes() for p in kept if p is not None] == batches[6:]
        assert client.receive(timeout=0.05) is None and client.link.parse_errors == 0
