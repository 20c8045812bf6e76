"""LoopPriority: receive threads wait between packets while the robot loop runs a tick."""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest
from support import recv_exactly, wait_until

import bcnp
from bcnp import Dispatcher
from bcnp.parser import SEARCH_STEP
from bcnp.transport import LoopPriority, TcpServer, TransportConfig
from bcnp.wire import encode_handshake


def test_pause_returns_at_once_while_the_loop_is_idle() -> None:
    priority = LoopPriority(max_pause=60)
    priority.pause()
    assert priority.pauses == 0


def test_pause_waits_until_the_loop_is_idle() -> None:
    priority = LoopPriority(max_pause=60)
    priority.busy()
    done = threading.Event()
    thread = threading.Thread(target=lambda: (priority.pause(), done.set()), daemon=True)
    thread.start()
    thread.join(0.1)
    assert not done.is_set() and priority.pauses == 1  # still waiting for the loop
    priority.idle()
    thread.join(10)
    assert done.is_set()


def test_pause_gives_up_after_max_pause() -> None:
    priority = LoopPriority(max_pause=0.01)
    priority.busy()  # a loop that never says idle must not stall ingest for good
    priority.pause()
    priority.pause()
    assert priority.pauses == 2
    with pytest.raises(ValueError):
        LoopPriority(max_pause=0)


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _pause_in_thread(priority: LoopPriority) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()
    thread = threading.Thread(target=lambda: (priority.pause(), done.set()), daemon=True)
    thread.start()
    return thread, done


def test_pause_steps_aside_from_lead_before_the_next_tick_until_it_has_run() -> None:
    clock = FakeClock()
    priority = LoopPriority(max_pause=60, period=0.02, lead=0.0005, clock=clock)
    priority.busy()  # a tick at 100.000: the next is due at 100.020
    priority.idle()
    clock.t = 100.0194  # 0.6 ms before it: ingest goes on
    priority.pause()
    assert priority.pauses == 0
    clock.t = 100.0196  # 0.4 ms before it: wait for that tick
    thread, done = _pause_in_thread(priority)
    thread.join(0.1)
    assert not done.is_set() and priority.pauses == 1 and priority.anticipated == 1
    clock.t = 100.0201
    priority.busy()  # the tick starts: still waiting
    thread.join(0.05)
    assert not done.is_set()
    priority.idle()  # and ends
    thread.join(10)
    assert done.is_set()
    priority.pause()  # the next tick is 20 ms away again
    assert priority.pauses == 1


def test_a_late_or_stopped_loop_costs_ingest_at_most_max_pause_per_tick() -> None:
    clock = FakeClock()
    priority = LoopPriority(max_pause=0.05, period=0.02, lead=0.0005, clock=clock)
    priority.busy()
    priority.idle()
    clock.t = 100.0199  # the tick is due, but never comes
    priority.pause()  # gives up after about 50 ms (real time)
    assert priority.pauses == 1 and priority.anticipated == 1
    clock.t = 100.02 + 0.05  # max_pause past the due time: no more waiting for it
    priority.pause()
    priority.pause()
    assert priority.pauses == 1


def test_without_a_period_nothing_is_anticipated_and_bad_leads_are_refused() -> None:
    clock = FakeClock()
    priority = LoopPriority(max_pause=60, clock=clock)
    priority.busy()
    priority.idle()
    for t in (100.0196, 100.02, 100.03):
        clock.t = t
        priority.pause()
    assert priority.pauses == 0
    for lead in (-0.001, 0.02, 0.5):
        with pytest.raises(ValueError):
            LoopPriority(period=0.02, lead=lead)


def test_the_robot_link_anticipates_ticks_of_the_robot_period() -> None:
    import constants
    from subsystems.link.bcnp_link import build_link

    link = build_link(port=0)
    try:
        assert link.priority.period == constants.LOOP_PERIOD_S
        assert 0 < link.priority.lead <= 0.001
    finally:
        link.close()


def _paused_server(schema: bcnp.Schema, calls: list[str]) -> TcpServer:
    dispatcher = Dispatcher(schema)
    dispatcher.register("DriveCmd", lambda packet, now: calls.append(f"packet {packet.count}"))
    server = TcpServer(
        dispatcher, TransportConfig(host="127.0.0.1", port=0), pause=lambda: calls.append("pause")
    )
    server.start()
    return server


def _controller(schema: bcnp.Schema, server: TcpServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    recv_exactly(sock, 8)
    sock.sendall(encode_handshake(schema.hash))
    wait_until(lambda: server.status().handshaken, what="the handshake")
    return sock


def test_the_receive_thread_pauses_before_every_packet_and_every_parse_error(schema: bcnp.Schema) -> None:
    calls: list[str] = []
    server = _paused_server(schema, calls)
    try:
        with _controller(schema, server) as sock:
            drive = schema["DriveCmd"]
            good = bcnp.encode_packet(drive, [drive(vx=1.0, omega=0.0, durationMs=20)] * 3)
            calls.clear()
            sock.sendall(good + b"\x03\x02\x00\xff\xff\x00\x01" + good)  # a bad type id between
            wait_until(lambda: calls.count("packet 3") == 2, what="both packets")
            errors = server.status().parse_errors
            assert errors > 0
            # one before each read, each packet and each error
            assert calls.count("pause") >= 2 + errors + 1
            assert all(calls[i - 1] == "pause" for i, c in enumerate(calls) if c.startswith("packet"))
    finally:
        server.close()


def test_the_receive_thread_pauses_every_search_step_behind_a_waiting_frame(schema: bcnp.Schema) -> None:
    """A header claiming 65,535 messages, then 600 KiB without a packet in it: the parser
    searches the bytes behind that header as they come, a step at a time, with a pause
    between steps, so the robot loop never waits for more than one step's search."""
    calls: list[str] = []
    server = _paused_server(schema, calls)
    try:
        with _controller(schema, server) as sock:
            drive = schema["DriveCmd"]
            header = bytes([3, 2, 0, 0, drive.id, 0xFF, 0xFF])
            filler = bytes(600 * 1024)
            calls.clear()
            sock.sendall(header + filler)
            wait_until(lambda: server.status().bytes_in == len(header) + len(filler), what="every byte")
            assert server.buffered == len(header) + len(filler)  # still waiting for its frame
            assert calls.count("pause") >= len(filler) // SEARCH_STEP
    finally:
        server.close()


def test_a_long_search_after_a_failed_frame_goes_on_a_step_at_a_time(schema: bcnp.Schema) -> None:
    """A 100 KB frame completes with a bad CRC and a fake header inside it sends the parser
    searching the 100 KB behind that one: the link's budget cuts that search into steps
    and the receive thread pauses between them."""
    calls: list[str] = []
    server = _paused_server(schema, calls)
    try:
        with _controller(schema, server) as sock:
            drive = schema["DriveCmd"]
            count = 10_000
            inner = bytearray(count * drive.wire_size)
            inner[3:10] = bytes([3, 2, 0, 0, drive.id, 0xFF, 0xFF])
            waiting = bytes([3, 2, 0, 0, drive.id]) + count.to_bytes(2, "big") + bytes(inner) + bytes(4)
            good = bcnp.encode_packet(drive, [drive(vx=1.0, omega=0.0, durationMs=20)] * 2)
            sock.sendall(waiting[:-4])
            wait_until(lambda: server.status().bytes_in == len(waiting) - 4, what="the waiting frame")
            connection = server.connection
            assert connection is not None and connection.parser.search_budget == SEARCH_STEP
            calls.clear()
            searched = connection.parser.bytes_searched
            sock.sendall(waiting[-4:] + good)  # bad CRC; the packet behind the fake header is found
            wait_until(lambda: "packet 2" in calls, what="the packet behind the fake header")
            searched = connection.parser.bytes_searched - searched
            assert searched > 5 * SEARCH_STEP  # the long search did happen
            assert calls.count("pause") >= searched // SEARCH_STEP
            assert not connection.search_pending
    finally:
        server.close()


def test_a_real_receive_thread_holds_packets_while_the_loop_is_busy(schema: bcnp.Schema) -> None:
    priority = LoopPriority(max_pause=60)
    dispatcher = Dispatcher(schema)
    got: list[int] = []
    dispatcher.register("DriveCmd", lambda packet, now: got.append(packet.count))
    server = TcpServer(dispatcher, TransportConfig(host="127.0.0.1", port=0), pause=priority.pause)
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            recv_exactly(sock, 8)
            sock.sendall(encode_handshake(schema.hash))
            wait_until(lambda: server.status().handshaken, what="the handshake")
            priority.busy()  # a tick starts
            drive = schema["DriveCmd"]
            sock.sendall(bcnp.encode_packet(drive, [drive(vx=1.0, omega=0.0, durationMs=20)] * 2))
            wait_until(lambda: priority.pauses == 1, what="the receive thread to reach the packet")
            assert got == []  # parsed, waiting: not handed over during the tick
            priority.idle()  # the tick ends
            wait_until(lambda: got == [2], what="the packet after the tick")
    finally:
        priority.idle()
        server.close()


def _nice(tid: int) -> int:
    stat = Path(f"/proc/self/task/{tid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])  # field 19: nice


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
@pytest.mark.parametrize("nice", [5, 0])
def test_the_receive_thread_lowers_only_its_own_priority(schema: bcnp.Schema, nice: int) -> None:
    base = _nice(threading.get_native_id())
    server = TcpServer(Dispatcher(schema), TransportConfig(host="127.0.0.1", port=0, receive_nice=nice))
    server.start()
    try:
        thread = server._thread
        assert thread is not None and thread.native_id is not None
        wait_until(
            lambda: server.receive_nice == nice and _nice(thread.native_id) == base + nice, what="nice"
        )
        assert _nice(threading.get_native_id()) == base  # the robot thread keeps its priority
    finally:
        server.close()
