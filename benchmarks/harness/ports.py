"""Ports for a run's own robots, proxies and hosts: free for TCP and UDP alike, as BCNP uses one
number for both, so whatever the caller binds there (either, or both) finds it free.

A port is picked below the kernel's ephemeral range, where it hands out the local ports of
outgoing connections (and of binds to port 0): a port taken from that range and released is
anyone's again at once, and a connection made anywhere on the machine before the caller binds
it (a busy suite makes hundreds) leaves the caller's server "address already in use"."""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: Ports are picked from here up to the ephemeral range's start (Linux: 32768 unless
#: configured; Windows and macOS: 49152).
LOWEST = 20000
#: The ephemeral range on Linux, and what is assumed where it cannot be read.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
EPHEMERAL_START = 32768

_pick = random.Random()  # seeded by the system: workers started together pick apart


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return EPHEMERAL_START


def free_port(attempts: int = 200) -> int:
    """A port number free for both TCP and UDP on every interface (bound, then released), below
    the kernel's ephemeral range."""
    highest = max(ephemeral_start() - 1, LOWEST + 1000)
    for _ in range(attempts):
        port = _pick.randint(LOWEST, highest)
        with (
            socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp,
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
        ):
            try:
                tcp.bind(("", port))
                udp.bind(("", port))
            except OSError:
                continue
            return port
    raise OSError(f"no port free for both TCP and UDP after {attempts} attempts")
