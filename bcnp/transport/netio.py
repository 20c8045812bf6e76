"""Small socket helpers shared by the servers, the host client and the fault proxy: one
address format, one way to wake a thread blocked in ``select``."""

from __future__ import annotations

import contextlib
import socket

__all__ = ["Waker", "format_address"]


def format_address(address: tuple[object, ...] | None) -> str:
    """``"ip:port"`` (IPv6 in brackets), ``""`` for none."""
    if not address:
        return ""
    host, port = str(address[0]), address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Waker:
    """A socket pair that wakes a thread blocked in ``select`` from another thread."""

    def __init__(self) -> None:
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        self.writer.setblocking(False)

    def wake(self) -> None:
        # Full: a wake-up is already pending. Closed: the thread is gone.
        with contextlib.suppress(OSError):
            self.writer.send(b"\0")

    def drain(self) -> None:
        try:
            while self.reader.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        self.reader.close()
        self.writer.close()
