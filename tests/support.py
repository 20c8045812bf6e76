"""Helpers for tests on real sockets: an injected clock, a bounded wait, the robot side served
in this process; this project's wheel, built and installed alone in a virtual environment."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

import bcnp
from bcnp import Dispatcher, MessageQueue, MessageQueueConfig
from bcnp.transport import TcpServer, TransportConfig, UdpServer

#: Set by conftest.py when ``robotpy test`` runs the deploy tier (what ``robotpy deploy`` runs
#: before every upload).
TIER_ENV = "BCNP_TEST_TIER"


def examples(n: int) -> int:
    """How many examples a property test draws: ``n`` in the full suite (``python run.py
    test``, CI); a 25th of it, at least 5, in the deploy tier, which runs before every
    upload to a robot and must take seconds."""
    return max(5, n // 25) if os.environ.get(TIER_ENV) == "deploy" else n


class FakeClock:
    """A clock the test moves by hand; handed to servers and clients as ``clock``."""

    def __init__(self, start: float = 100.0) -> None:
        self._t = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> float:
        with self._lock:
            self._t += seconds
            return self._t

    def reader(self) -> ClockReader:
        """The same time, through a reader that counts its reads (one per server)."""
        return ClockReader(self)


class ClockReader:
    """A :class:`FakeClock` as one server sees it, counting how often it was read.

    A receive thread reads its clock once per wake-up to check its timeouts
    (more when data arrives), so :meth:`settle` can tell when a full check has
    run with the time as it is now, without guessing a sleep.
    """

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1  # counted before reading: a read counted later sees the current time
        return self._clock()

    def settle(self, reads: int = 2, timeout: float = 5.0) -> None:
        """Wait until the clock was read ``reads`` more times. While its peers are
        silent a receive thread reads it exactly once per wake-up, at its timeout
        check (UDP: only while paired), so two reads mean that one complete check
        saw the present time."""
        target = self.reads + reads
        wait_until(lambda: self.reads >= target, timeout, what=f"{reads} more clock reads")


#: Seconds between two reads of the data log while a test waits for its writer thread: a read
#: of a log that holds every earlier test's robot takes milliseconds of CPU.
LOG_POLL_S = 0.02


def wait_until(
    predicate: Callable[[], object],
    timeout: float = 5.0,
    what: str = "condition",
    *,
    first_poll: float = 0.002,
) -> None:
    """Poll until ``predicate()`` is true; fail after ``timeout`` wall seconds.

    The timeout is a generous bound for a receive thread to react, never a
    timing assertion: the rules themselves are checked on the injected clock.
    The pause between polls starts at ``first_poll`` and doubles up to 2 ms: a
    shorter first one ends a wait for a packet on loopback (a tenth of a
    millisecond) sooner, but polls while the other thread is still at it, so
    ``predicate`` must not be true before that thread is done. A longer one stays
    that long: a predicate that costs milliseconds (reading a data log) is asked less often.
    """
    deadline = time.monotonic() + timeout
    pause = first_poll
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(pause)
        pause = min(2 * pause, max(first_poll, 0.002))


def stepping_sleep(
    client: Any, received: Callable[[], int], step: Callable[[float], object]
) -> Callable[[float], None]:
    """A host's sleep (``Replay``'s, ``Follower``'s) that steps a robot on a clock the test
    moves: a keepalive every other step (the client's own keepalives run on wall time), wait
    until the robot has received (``received()``: its packet count) what the client sent,
    then ``step(seconds)``: the robot's tick."""
    ticks = 0

    def sleep(seconds: float) -> None:
        nonlocal ticks
        ticks += 1
        if ticks % 2 == 0:
            client.keepalive()
        wait_until(lambda: received() >= client.link.packets_sent, what="sends to arrive")
        step(seconds)

    return sleep


def recv_exactly(sock: socket.socket, size: int, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def peer_closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the other end closed ``sock`` (EOF or reset) within ``timeout``."""
    sock.settimeout(timeout)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def open_and_quiet(sock: socket.socket) -> bool:
    """True when the other end has neither closed ``sock`` nor sent anything unread."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
    return False  # end of stream, or bytes nobody expected


def close_with_reset(sock: socket.socket) -> None:
    """Close a TCP socket abortively: SO_LINGER 0 sends RST instead of FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rule_start(cursor: int | None, duration: int, arrival: int | None, t: int, lag_us: int) -> int | None:
    """Where a waiting message starts when the queue reaches it at ``t`` (reference-behavior §4
    plus the README's arrival gap), all in microseconds; ``None``: it is stale and is skipped.

    It follows the previous message (``cursor``), but never from further back than the lag
    allows; with nothing to follow, or after a gap of more than the lag in the stream, it
    starts now."""
    if cursor is None or (arrival is not None and arrival - cursor > lag_us):
        return t
    if cursor + duration < t - lag_us:
        return None
    return max(cursor, t - lag_us)


@dataclass
class ServedRobot:
    """The robot side in this process: a real TCP or UDP server on loopback, on an injected
    clock, feeding every DriveCmd packet to a queue (and to ``packets``)."""

    schema: bcnp.Schema
    clock: FakeClock
    dispatcher: Dispatcher
    queue: MessageQueue
    server: TcpServer | UdpServer
    packets: list[bcnp.PacketView] = field(default_factory=list)

    @property
    def addr(self) -> tuple[str, int]:
        return (self.server.config.host, self.server.port)

    @property
    def udp(self) -> bool:
        return isinstance(self.server, UdpServer)


Served = TypeVar("Served", bound=ServedRobot)


def serve_robot(
    schema: bcnp.Schema,
    kind: type[TcpServer | UdpServer],
    robot_class: type[Served] = ServedRobot,  # type: ignore[assignment]
    *,
    capacity: int = 70_000,
    host: str = "127.0.0.1",
    **config: Any,
) -> Served:
    """A started :class:`ServedRobot` (or ``robot_class``) on a free port; ``config``: the
    server's :class:`~bcnp.transport.TransportConfig`. Close it with ``robot.server.close()``."""
    clock = FakeClock()
    dispatcher = Dispatcher(schema)
    queue = MessageQueue(MessageQueueConfig(capacity=capacity))
    server = kind(dispatcher, TransportConfig(host=host, port=0, **config), clock=clock)
    robot = robot_class(schema, clock, dispatcher, queue, server)

    def handle(packet: bcnp.PacketView, now: float) -> None:
        queue.handle_packet(packet, now)
        robot.packets.append(packet)  # after: a test that saw it arrive finds it queued

    dispatcher.register("DriveCmd", handle)
    server.start()
    return robot


def drive_packet(schema: bcnp.Schema, n: int = 3, flags: int = 0, vx: float = 0.5) -> bytes:
    """A packet of ``n`` DriveCmds (vx, 0.25 rad/s, 20 ms, 21 ms, ...)."""
    drive = schema["DriveCmd"]
    return bcnp.encode_packet(drive, [drive(vx=vx, omega=0.25, durationMs=20 + i) for i in range(n)], flags)


# -- the wheel and the environment it goes into (test_examples.py, test_wheel_errors.py) ----------


def setuptools_here() -> bool:
    """Whether this environment has the build backend pyproject.toml names (setuptools>=77)."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    return int(version.split(".")[0]) >= 77


def build_wheel(root: Path, tmp: Path) -> Path:
    """The wheel of the project at ``root``, built in ``tmp`` as docs/coprocessor.md says, from a
    copy of the project (a build in place would leave build/ behind, whose stale files a later
    build packs)."""
    source = tmp / "project"
    junk = (".git", ".venv*", "venv", ".sim", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(root, source, ignore=shutil.ignore_patterns(*junk, ".hypothesis"))
    # setuptools>=77 is in the test extra: then no index is needed; otherwise pip fetches it.
    isolation = ["--no-build-isolation"] if setuptools_here() else []
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-w", str(tmp / "dist"), "."]
    result = subprocess.run(command, cwd=source, capture_output=True, text=True, timeout=600)
    wheels = sorted((tmp / "dist").glob("bcnp_robot-*.whl"))
    if result.returncode != 0 or len(wheels) != 1:
        pytest.fail(
            f"could not build the wheel ({' '.join(command)} exited {result.returncode}; "
            f"without setuptools>=77 here pip needs a package index to fetch it):\n"
            f"{result.stdout[-3000:]}{result.stderr[-3000:]}",
            pytrace=False,
        )
    return wheels[0]


def wheel_only_venv(wheel: Path, folder: Path) -> Path:
    """A virtual environment in ``folder``/venv with ``wheel`` and nothing else (not even pip),
    installed without an index; returns its python."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install"]
    result = subprocess.run(
        [*install, "--no-deps", "--no-index", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return python


def child_env() -> dict[str, str]:
    """This environment minus anything that would put the project on the child's path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    return {**env, "PYTHONUNBUFFERED": "1", "PYTHONNOUSERSITE": "1"}
