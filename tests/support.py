"""Helpers for tests on real sockets: an injected clock and a bounded wait."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable


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


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll until ``predicate()`` is true; fail after ``timeout`` wall seconds.

    The timeout is a generous bound for a receive thread to react, never a
    timing assertion: the rules themselves are checked on the injected clock.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.002)


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


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port nothing listens on (bound then released)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
