"""Ports for a run's own robots, proxies and hosts: free for TCP and UDP alike, as BCNP uses one
number for both, so whatever the caller binds there (either, or both) finds it free."""

from __future__ import annotations

import socket


def free_port(attempts: int = 50) -> int:
    """A port number free for both TCP and UDP on every interface (bound, then released)."""
    for _ in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("", port))
                except OSError:
                    continue
                return port
    raise OSError(f"no port free for both TCP and UDP after {attempts} attempts")
