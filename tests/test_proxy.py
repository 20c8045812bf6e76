"""The fault proxy on real loopback sockets: forwarding, each fault, robustness, the command line.

Every timing rule runs on an injected FakeClock: the test moves the clock and
waits (``ClockReader.settle``) until the proxy's thread has looked at it, so a
slow machine only makes a test slower, never wrong. Wall-clock waits only bound
how long the thread may take to react.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

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

from bcnp.host.cli.proxy_cmd import add_parser as add_proxy_parser
from bcnp.host.cli.proxy_cmd import parse_duration, parse_probability, parse_rate
from bcnp.host.cli.proxy_cmd import run as run_proxy
from bcnp.host.proxy.core.faults import Faults, Partition, Reset, SetFaults
from bcnp.host.proxy.fault_proxy import Proxy
from benchmarks.harness import ROOT
from benchmarks.harness.ports import free_port

LOCAL = "127.0.0.1"


@contextlib.contextmanager
def proxied(port: int, **options: Any) -> Iterator[Proxy]:
    """A running proxy to ``LOCAL:port``; no exception may have reached its thread."""
    with Proxy((LOCAL, port), **options) as proxy:
        yield proxy
        assert proxy.counters().internal_errors == 0


@pytest.fixture
def server() -> Iterator[socket.socket]:
    """The target: a listening TCP socket whose connections the test accepts itself."""
    with socket.create_server((LOCAL, 0)) as s:
        s.settimeout(5)
        yield s


@pytest.fixture
def target() -> Iterator[socket.socket]:
    """The target: a UDP socket the test reads itself."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((LOCAL, 0))
        s.settimeout(5)
        yield s


class Clock:
    """A FakeClock for a proxy (``reader``), and a wait until the proxy has seen it move."""

    def __init__(self) -> None:
        self.fake = FakeClock()
        self.reader: ClockReader = self.fake.reader()

    def advance(self, seconds: float) -> None:
        self.fake.advance(seconds)

    def settle(self) -> None:
        """Return once a whole wake-up of the proxy's thread ran at the present time."""
        self.reader.settle()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


def connect(proxy: Proxy, server: socket.socket) -> tuple[socket.socket, socket.socket]:
    """A client connected through ``proxy``, and the target's side of it."""
    client = socket.create_connection((LOCAL, proxy.tcp_port), timeout=5)
    upstream, _ = server.accept()
    upstream.settimeout(5)
    return client, upstream


def available(sock: socket.socket) -> bytes:
    """Whatever ``sock`` has received so far, without waiting."""
    sock.setblocking(False)
    data = b""
    try:
        while chunk := sock.recv(1 << 20):
            data += chunk
    except BlockingIOError:
        pass
    finally:
        sock.settimeout(5)
    return data


def datagrams(sock: socket.socket) -> list[bytes]:
    """The datagrams ``sock`` has received so far, without waiting."""
    sock.setblocking(False)
    out = []
    try:
        while True:
            out.append(sock.recv(65535))
    except BlockingIOError:
        pass
    finally:
        sock.settimeout(5)
    return out


def udp_client(proxy: Proxy) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.connect((LOCAL, proxy.udp_port))
    return s


def received(proxy: Proxy, field: str, value: int) -> None:
    wait_until(lambda: getattr(proxy.counters(), field) >= value, what=f"{field} >= {value}")


# -- plain forwarding ---------------------------------------------------------------


def test_tcp_forwards_both_ways_then_passes_each_close_on(server: socket.socket) -> None:
    with proxied(port_of(server), udp=False) as proxy:
        client, upstream = connect(proxy, server)
        with client, upstream:
            client.sendall(b"to the robot")
            assert recv_exactly(upstream, 12) == b"to the robot"
            upstream.sendall(b"telemetry")
            assert recv_exactly(client, 9) == b"telemetry"
            client.shutdown(socket.SHUT_WR)
            assert peer_closed(upstream)
            upstream.sendall(b"after half close")  # the other direction still works
            assert recv_exactly(client, 16) == b"after half close"
            upstream.close()
            assert peer_closed(client)
        wait_until(lambda: proxy.counters().tcp_open == 0)
        c = proxy.counters()
        assert (c.tcp_accepted, c.bytes_from_clients, c.bytes_to_target) == (1, 12, 12)
        assert (c.bytes_from_target, c.bytes_to_clients, c.peer_errors) == (25, 25, 0)


def test_megabytes_both_ways_arrive_intact(server: socket.socket) -> None:
    """More than the proxy buffers per direction: the source is paused, nothing is lost."""
    up, down = bytes(range(256)) * 16384, bytes(range(255, -1, -1)) * 16384  # 4 MiB each
    with proxied(port_of(server), udp=False) as proxy:
        client, upstream = connect(proxy, server)
        with client, upstream:
            senders = [
                threading.Thread(target=client.sendall, args=(up,)),
                threading.Thread(target=upstream.sendall, args=(down,)),
            ]
            for t in senders:
                t.start()
            got: dict[str, bytes] = {}
            reader = threading.Thread(target=lambda: got.update(down=recv_exactly(client, len(down), 30)))
            reader.start()
            assert recv_exactly(upstream, len(up), 30) == up
            reader.join()
            for t in senders:
                t.join()
            assert got["down"] == down


def test_udp_gives_each_client_its_own_upstream_and_routes_replies_back(target: socket.socket) -> None:
    with proxied(port_of(target), tcp=False) as proxy:
        a, b = udp_client(proxy), udp_client(proxy)
        with a, b:
            a.send(b"from a")
            data, from_a = target.recvfrom(100)
            assert data == b"from a"
            b.send(b"from b")
            data, from_b = target.recvfrom(100)
            assert data == b"from b" and from_a != from_b  # the robot sees two peers
            target.sendto(b"to b", from_b)
            target.sendto(b"to a", from_a)
            assert b.recv(100) == b"to b" and a.recv(100) == b"to a"
        c = proxy.counters()
        assert (c.udp_clients, c.udp_received, c.udp_forwarded, c.udp_dropped) == (2, 4, 4, 0)


def test_port_zero_binds_tcp_and_udp_to_ports_it_reports(server: socket.socket) -> None:
    with proxied(port_of(server)) as proxy:
        assert proxy.tcp_port > 0 and proxy.udp_port > 0
        client, upstream = connect(proxy, server)
        client.close()
        upstream.close()


# -- timing on the injected clock -------------------------------------------------


def test_latency_delays_tcp_by_exactly_its_value(server: socket.socket, clock: Clock) -> None:
    with proxied(port_of(server), udp=False, clock=clock.reader, faults=Faults(latency=0.1)) as proxy:
        client, upstream = connect(proxy, server)
        with client, upstream:
            client.sendall(b"late")
            received(proxy, "bytes_from_clients", 4)
            clock.advance(0.099)
            clock.settle()
            assert open_and_quiet(upstream)
            clock.advance(0.002)
            assert recv_exactly(upstream, 4) == b"late"
            upstream.sendall(b"back")  # the other direction too
            received(proxy, "bytes_from_target", 4)
            clock.settle()
            assert open_and_quiet(client)
            clock.advance(0.101)
            assert recv_exactly(client, 4) == b"back"


def test_tcp_keeps_byte_order_under_jitter(server: socket.socket, clock: Clock) -> None:
    faults = Faults(latency=0.05, jitter=0.04)
    with proxied(port_of(server), udp=False, clock=clock.reader, faults=faults, seed=3) as proxy:
        client, upstream = connect(proxy, server)
        with client, upstream:
            sent = b""
            for i in range(40):  # each chunk read on its own, 1 ms apart, each with its own jitter
                chunk = f"<{i}>".encode()
                client.sendall(chunk)
                sent += chunk
                received(proxy, "bytes_from_clients", len(sent))
                clock.advance(0.001)
            clock.settle()
            early = available(upstream)
            assert sent.startswith(early)
            clock.advance(0.1)
            assert early + recv_exactly(upstream, len(sent) - len(early)) == sent


def test_bandwidth_takes_size_times_8_over_rate(server: socket.socket, clock: Clock) -> None:
    size, rate = 10_000, 80_000.0  # one second on the link
    with proxied(port_of(server), udp=False, clock=clock.reader, faults=Faults(bandwidth=rate)) as proxy:
        client, upstream = connect(proxy, server)
        with client, upstream:
            client.sendall(b"x" * size)
            received(proxy, "bytes_from_clients", size)
            clock.advance(0.99)
            clock.settle()
            early = available(upstream)
            assert len(early) < size
            clock.advance(0.02)
            assert len(early) + len(recv_exactly(upstream, size - len(early))) == size


def test_bandwidth_spaces_udp_datagrams(target: socket.socket, clock: Clock) -> None:
    """Ten 1000-byte datagrams at 80 kbit/s: one leaves every 0.1 s."""
    with (
        proxied(port_of(target), tcp=False, clock=clock.reader, faults=Faults(bandwidth=80_000)) as proxy,
        udp_client(proxy) as client,
    ):
        for i in range(10):
            client.send(bytes([i]) * 1000)
        received(proxy, "udp_received", 10)
        clock.advance(0.35)
        wait_until(lambda: proxy.counters().udp_forwarded >= 3)
        clock.settle()
        assert [d[0] for d in datagrams(target)] == [0, 1, 2]
        clock.advance(0.7)
        wait_until(lambda: proxy.counters().udp_forwarded == 10)
        assert [d[0] for d in datagrams(target)] == list(range(3, 10))


def test_udp_latency_and_jitter_bound_every_datagram(target: socket.socket, clock: Clock) -> None:
    faults = Faults(latency=0.05, jitter=0.02)
    with (
        proxied(port_of(target), tcp=False, clock=clock.reader, faults=faults, seed=7) as proxy,
        udp_client(proxy) as client,
    ):
        for i in range(20):
            client.send(bytes([i]))
        received(proxy, "udp_received", 20)
        clock.advance(0.029)
        clock.settle()
        assert datagrams(target) == []
        clock.advance(0.042)
        wait_until(lambda: proxy.counters().udp_forwarded == 20)
        got = datagrams(target)
        assert sorted(got) == [bytes([i]) for i in range(20)]
        assert got != sorted(got)  # with this seed, jitter reorders some


def test_reorder_holds_a_datagram_back_so_the_next_overtakes(target: socket.socket, clock: Clock) -> None:
    faults = Faults(reorder=0.3, reorder_delay=0.005)
    with (
        proxied(port_of(target), tcp=False, clock=clock.reader, faults=faults, seed=1) as proxy,
        udp_client(proxy) as client,
    ):
        for i in range(30):
            client.send(bytes([i]))
        received(proxy, "udp_received", 30)
        late = proxy.counters().udp_reordered
        assert 0 < late < 30
        wait_until(lambda: proxy.counters().udp_forwarded == 30 - late)
        first = datagrams(target)
        assert first == sorted(first)
        clock.advance(0.006)
        wait_until(lambda: proxy.counters().udp_forwarded == 30)
        rest = datagrams(target)
        assert rest == sorted(rest) and sorted(first + rest) == [bytes([i]) for i in range(30)]


# -- partitions ----------------------------------------------------------------------


def test_a_scripted_partition_holds_tcp_both_ways_until_it_ends(server: socket.socket, clock: Clock) -> None:
    script = [(1.0, Partition(2.0))]
    with proxied(port_of(server), udp=False, clock=clock.reader, script=script) as proxy:
        client, upstream = connect(proxy, server)
        with client, upstream:
            clock.advance(1.0)
            wait_until(lambda: proxy.partitioned)
            client.sendall(b"held up")
            upstream.sendall(b"held down")
            received(proxy, "bytes_held", 16)
            clock.advance(1.9)
            clock.settle()
            assert open_and_quiet(client) and open_and_quiet(upstream)
            clock.advance(0.2)
            assert recv_exactly(upstream, 7) == b"held up"
            assert recv_exactly(client, 9) == b"held down"
            c = proxy.counters()
            assert (c.partitions, c.bytes_held, proxy.partitioned) == (1, 0, False)


def test_bytes_and_a_close_during_a_partition_arrive_in_order_after_it(server: socket.socket) -> None:
    with proxied(port_of(server), udp=False) as proxy:
        client, upstream = connect(proxy, server)
        with client, upstream:
            proxy.partition()
            client.sendall(b"one ")
            client.sendall(b"two")
            client.shutdown(socket.SHUT_WR)
            received(proxy, "bytes_held", 7)
            assert open_and_quiet(upstream)
            proxy.heal()
            assert recv_exactly(upstream, 7) == b"one two"
            assert peer_closed(upstream)


def test_a_connection_opened_during_a_partition_reaches_the_target_after_it(server: socket.socket) -> None:
    with proxied(port_of(server), udp=False) as proxy:
        proxy.partition()
        with socket.create_connection((LOCAL, proxy.tcp_port), timeout=5) as client:
            client.sendall(b"hello")
            received(proxy, "bytes_held", 5)
            server.settimeout(0)
            with pytest.raises(BlockingIOError):
                server.accept()  # no upstream connection yet
            server.settimeout(5)
            proxy.heal()
            upstream, _ = server.accept()
            with upstream:
                assert recv_exactly(upstream, 5) == b"hello"


@pytest.mark.parametrize("hold", [False, True])
def test_udp_during_a_partition_is_dropped_or_held(target: socket.socket, hold: bool) -> None:
    with proxied(port_of(target), tcp=False, udp_hold=hold) as proxy, udp_client(proxy) as client:
        client.send(b"before")
        assert target.recv(100) == b"before"
        proxy.partition()
        for i in range(3):
            client.send(bytes([i]))
        received(proxy, "udp_received", 4)
        assert datagrams(target) == []
        proxy.heal()
        client.send(b"after")
        expected = [bytes([0]), bytes([1]), bytes([2]), b"after"] if hold else [b"after"]
        assert [target.recv(100) for _ in expected] == expected
        assert proxy.counters().udp_dropped == (0 if hold else 3)


# -- resets and vanishing peers -------------------------------------------------------


def test_reset_aborts_every_connection_on_both_sides_and_drops_held_bytes(server: socket.socket) -> None:
    with proxied(port_of(server), udp=False) as proxy:
        first, second = connect(proxy, server), connect(proxy, server)
        proxy.partition()
        first[0].sendall(b"lost")
        received(proxy, "bytes_held", 4)
        proxy.reset()
        for sock in (*first, *second):
            assert peer_closed(sock)
            sock.close()
        c = proxy.counters()
        assert (c.resets, c.tcp_open, c.bytes_held) == (1, 0, 0)
        proxy.heal()
        client, upstream = connect(proxy, server)  # the proxy goes on
        with client, upstream:
            client.sendall(b"new")
            assert recv_exactly(upstream, 3) == b"new"


def test_reset_makes_a_udp_client_use_a_new_upstream_socket(target: socket.socket) -> None:
    with proxied(port_of(target), tcp=False) as proxy, udp_client(proxy) as client:
        client.send(b"a")
        _, before = target.recvfrom(10)
        proxy.reset()
        assert proxy.counters().udp_clients == 0
        client.send(b"b")
        data, after = target.recvfrom(10)
        assert data == b"b" and after != before


def test_a_refused_upstream_resets_the_client_at_once() -> None:
    with socket.socket() as closed:  # bound, never listening: its port refuses, and stays taken
        closed.bind((LOCAL, 0))
        with proxied(port_of(closed), udp=False) as proxy:
            # The reset may come during the connect already, or at the first read.
            with (
                pytest.raises(ConnectionResetError),
                socket.create_connection((LOCAL, proxy.tcp_port)) as client,
            ):
                client.settimeout(5)
                client.recv(1)
            wait_until(lambda: proxy.counters().tcp_open == 0)
            assert proxy.counters().upstream_refused == 1


def test_a_peer_that_resets_is_passed_on_and_counted(server: socket.socket) -> None:
    with proxied(port_of(server), udp=False) as proxy:
        client, upstream = connect(proxy, server)
        upstream.sendall(b"!")
        assert recv_exactly(client, 1) == b"!"  # established on both sides
        close_with_reset(upstream)
        assert peer_closed(client)
        client.close()
        wait_until(lambda: proxy.counters().tcp_open == 0)
        assert proxy.counters().peer_errors >= 1
        client, upstream = connect(proxy, server)
        with client, upstream:
            client.close()  # and a client that vanishes
            assert peer_closed(upstream)


def test_a_script_changes_faults_then_resets(server: socket.socket, clock: Clock) -> None:
    script = [(2.0, Reset()), (1.0, SetFaults(latency=0.5, direction="up"))]
    with proxied(port_of(server), udp=False, clock=clock.reader, script=script) as proxy:
        client, upstream = connect(proxy, server)
        with client, upstream:
            clock.advance(1.0)
            wait_until(lambda: proxy.faults("up").latency == 0.5)
            assert proxy.faults("down").latency == 0
            client.sendall(b"slow")
            received(proxy, "bytes_from_clients", 4)
            clock.settle()
            assert open_and_quiet(upstream)
            clock.advance(0.6)
            assert recv_exactly(upstream, 4) == b"slow"
            clock.advance(0.5)
            assert peer_closed(client) and peer_closed(upstream)
            assert proxy.counters().resets == 1


def test_set_faults_replaces_one_direction(server: socket.socket) -> None:
    with proxied(port_of(server), udp=False, faults=Faults(latency=0.01)) as proxy:
        proxy.set_faults(Faults(loss=0.5), "down")
        assert proxy.faults("down") == Faults(loss=0.5) and proxy.faults("up") == Faults(latency=0.01)
        proxy.set_faults(Faults())
        assert proxy.faults("up") == proxy.faults("down") == Faults()


def test_an_idle_udp_client_is_forgotten_when_a_new_one_comes(target: socket.socket, clock: Clock) -> None:
    with proxied(port_of(target), tcp=False, clock=clock.reader, udp_idle_timeout=60) as proxy:
        first, second = udp_client(proxy), udp_client(proxy)
        with first, second:
            first.send(b"1")
            assert target.recv(10) == b"1"
            clock.advance(61)
            second.send(b"2")
            assert target.recv(10) == b"2"
            assert proxy.counters().udp_clients == 1


# -- random faults, seeded -------------------------------------------------------------


def send_numbered(proxy: Proxy, target: socket.socket, count: int) -> list[int]:
    """Send ``count`` numbered datagrams, in batches the socket buffers hold; the numbers the target got."""
    got: list[int] = []

    def all_arrived() -> bool:
        got.extend(int.from_bytes(d, "big") for d in datagrams(target))
        return len(got) == proxy.counters().udp_forwarded

    with udp_client(proxy) as client:
        for start in range(0, count, 50):
            stop = min(start + 50, count)
            for i in range(start, stop):
                client.send(i.to_bytes(2, "big"))
            received(proxy, "udp_received", stop)
            wait_until(all_arrived, what="the forwarded datagrams")
    return got


def test_udp_loss_with_a_seed_drops_its_share_the_same_way_each_run(target: socket.socket) -> None:
    runs = []
    for _ in range(2):
        with proxied(port_of(target), tcp=False, faults=Faults(loss=0.1), seed=42) as proxy:
            got = send_numbered(proxy, target, 2000)
            c = proxy.counters()
        assert 140 <= c.udp_dropped <= 260 and c.udp_dropped + c.udp_forwarded == 2000
        assert got == sorted(set(got)) and len(got) == c.udp_forwarded
        runs.append(got)
    assert runs[0] == runs[1]


def test_udp_duplication_delivers_some_datagrams_twice(target: socket.socket) -> None:
    with proxied(port_of(target), tcp=False, faults=Faults(duplicate=0.2), seed=5) as proxy:
        got = send_numbered(proxy, target, 1000)
        c = proxy.counters()
    assert 140 <= c.udp_duplicated <= 260 and len(got) == 1000 + c.udp_duplicated
    assert set(got) == set(range(1000)) and max(got.count(i) for i in range(1000)) == 2


# -- lifecycle ---------------------------------------------------------------------------


class EchoServer:
    """Echoes each connection until it closes; one at a time is all these tests need."""

    def __init__(self) -> None:
        self.sock = socket.create_server((LOCAL, 0))
        self.sock.settimeout(0.05)
        self.port = port_of(self.sock)
        self.open = 0
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.open += 1
            with conn, contextlib.suppress(OSError):
                conn.settimeout(5)
                while data := conn.recv(65536):
                    conn.sendall(data)
            self.open -= 1

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()


def test_no_fd_or_thread_leak_over_200_connections() -> None:
    echo = EchoServer()
    try:
        threads, fds = threading.active_count(), open_fds()
        with proxied(echo.port, udp=False) as proxy:
            running = open_fds()
            for i in range(200):
                with socket.create_connection((LOCAL, proxy.tcp_port), timeout=5) as client:
                    client.sendall(b"ping %d" % i)
                    assert recv_exactly(client, len(b"ping %d" % i)) == b"ping %d" % i
            wait_until(lambda: proxy.counters().tcp_open == 0 and echo.open == 0)
            wait_until(lambda: open_fds() == running, what="the proxy's fds back to before")
            assert proxy.counters().tcp_accepted == 200
        assert (threading.active_count(), open_fds()) == (threads, fds)
    finally:
        echo.close()


def test_close_closes_everything_resets_open_links_and_is_idempotent(server: socket.socket) -> None:
    threads, fds = threading.active_count(), open_fds()
    proxy = Proxy((LOCAL, port_of(server)), udp=True)
    proxy.start()
    proxy.close()  # what a start opens, a close closes
    assert (threading.active_count(), open_fds()) == (threads, fds)
    with Proxy((LOCAL, port_of(server))) as proxy:
        client, upstream = connect(proxy, server)
        proxy.partition()
        client.sendall(b"held")
        received(proxy, "bytes_held", 4)
    proxy.close()
    assert peer_closed(client) and peer_closed(upstream)
    client.close()
    upstream.close()
    with pytest.raises(RuntimeError):
        proxy.start()
    Proxy((LOCAL, 1)).close()  # never started
    assert (threading.active_count(), open_fds()) == (threads, fds)


def test_a_port_in_use_is_an_oserror_that_names_it(server: socket.socket) -> None:
    taken = port_of(server)
    proxy = Proxy((LOCAL, 1), (LOCAL, taken), udp=False)
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{taken} \\(tcp\\)"):
        proxy.start()
    proxy.close()


def test_a_proxy_that_would_forward_to_itself_refuses_to_start() -> None:
    port = free_port()
    proxy = Proxy((LOCAL, port), (LOCAL, port))
    with pytest.raises(OSError, match="is this proxy"):
        proxy.start()
    proxy.close()


def test_bad_faults_are_refused() -> None:
    for bad in ({"latency": -1.0}, {"loss": 1.5}, {"bandwidth": 0.0}, {"jitter": float("nan")}):
        with pytest.raises(ValueError):
            Faults(**bad)
    with pytest.raises(ValueError):
        Proxy((LOCAL, 1), tcp=False, udp=False)


# -- the command line ---------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bcnp")
    add_proxy_parser(p.add_subparsers(dest="command", required=True))
    return p


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5ms", 0.005), ("0.005", 0.005), ("2s", 2.0), ("300us", 0.0003), (" 1.5 s ", 1.5), ("0", 0.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "rate"),
    [("7M", 7e6), ("7Mbit", 7e6), ("7Mbit/s", 7e6), ("7Mbps", 7e6), ("500k", 5e5), ("1e6", 1e6), ("2G", 2e9)],
)
def test_rates(text: str, rate: float) -> None:
    assert parse_rate(text) == pytest.approx(rate)


@pytest.mark.parametrize(
    ("text", "p"), [("1%", 0.01), ("0.01", 0.01), ("0.5%", 0.005), ("100%", 1.0), ("0", 0.0)]
)
def test_probabilities(text: str, p: float) -> None:
    assert parse_probability(text) == pytest.approx(p)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--latency=-5ms"], "cannot be negative"),
        (["--latency", "5 parsecs"], "unknown unit 'parsecs'"),
        (["--jitter", "fast"], "not a duration"),
        (["--loss", "150%"], "not between 0 and 1"),
        (["--loss", "5"], "for percent write 5%"),
        (["--bandwidth", "7MB"], "give bits per second"),
        (["--bandwidth", "0"], "more than 0"),
        (["--to", "10.12.34.2"], "is not HOST:PORT"),
        (["--to", "robot:99999"], "is not HOST:PORT"),
        (["--listen", "x:y"], "is not [HOST:]PORT"),
        (["--drop-at", "10s"], "is not AT:FOR"),
        (["--drop-at", "10s:0s"], "must last more than 0 s"),
        (["--tcp-only", "--udp-only"], "not allowed with argument"),
    ],
)
def test_bad_arguments_exit_2_with_one_clear_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        parser().parse_args(["proxy", *args])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.splitlines()[-1].startswith("python -m bcnp proxy: error: ")


def test_help_ends_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["proxy", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "--drop-at 10s:1s" in out and "--bandwidth RATE" in out


def test_run_proxy_forwards_prints_its_events_and_its_counters(
    server: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parser().parse_args(
        [
            *("proxy", "--listen", "0", "--to", f"{LOCAL}:{port_of(server)}", "--tcp-only"),
            *("--latency", "1ms", "--loss", "1%", "--drop-at", "0s:10ms", "--reset-at", "0.02"),
            *("--seed", "4", "--duration", "1"),
        ]
    )
    assert run_proxy(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("listening on 127.0.0.1:") and "(tcp), forwarding to 127.0.0.1:" in out[0]
    assert out[0].endswith("faults: latency 1 ms, loss 1%; seed 4")
    assert any("link drop for 0.01 s" in line for line in out) and any("link back" in line for line in out)
    assert any("reset: 0 tcp connection(s) aborted" in line for line in out)
    assert "counters:" in out and any(line.split() == ["partitions", "1"] for line in out)


def test_run_proxy_on_a_port_in_use_is_one_error_line(
    server: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parser().parse_args(["proxy", "--listen", str(port_of(server)), "--tcp-only"])
    assert run_proxy(args) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith(f"error: cannot listen on 127.0.0.1:{port_of(server)} (tcp): ")
        and err.count("\n") == 1
    )


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_ctrl_c_prints_the_counters_and_exits_0(server: socket.socket) -> None:
    port = free_port()
    # A test run started in the background ignores SIGINT and a child inherits that:
    # put Python's own Ctrl-C handler back, as a terminal has it.
    code = (
        "import argparse, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from bcnp.host.cli import proxy_cmd as proxy\n"
        "p = argparse.ArgumentParser(); proxy.add_parser(p.add_subparsers())\n"
        "sys.exit(proxy.run(p.parse_args(sys.argv[1:])))"
    )
    args = ["proxy", "--listen", str(port), "--to", f"{LOCAL}:{port_of(server)}", "--tcp-only"]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    lines: list[str] = []
    assert proc.stdout is not None and proc.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: lines, timeout=30, what="the listening line")
        assert lines[0].startswith(f"listening on 127.0.0.1:{port} (tcp)")
        with socket.create_connection((LOCAL, port), timeout=5) as client:
            upstream, _ = server.accept()
            with upstream:
                wait_until(lambda: any("connected (1 open)" in line for line in lines), what="the event line")
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=30)
            assert peer_closed(client)
        reader.join(timeout=5)
        err = proc.stderr.read()
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "counters:\n" in lines
    assert any(line.split() == ["tcp_accepted", "1"] for line in lines)
