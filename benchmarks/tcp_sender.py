"""Client process of benchmark (c): connects, handshakes, then streams pre-encoded packets.

    python -m benchmarks.tcp_sender PORT COUNT PER_PACKET SEED

Prints the sum of durationMs it sent (one line) once everything is written.
The packets are encoded before the first data byte is sent, so the server's
timing covers transport and ingest only; the harness's sender
(:func:`benchmarks.harness.sender.send_loop`) writes them, all at once.
"""

from __future__ import annotations

import random
import sys
import threading

from bcnp import encode_packet, load_schema
from bcnp.host.link.client import Client
from benchmarks.harness.sender import Burst, Sent, send_loop
from benchmarks.harness.workloads import SCHEMA_PATH, random_commands

DISTINCT_PACKETS = 16


def main(argv: list[str]) -> int:
    port, count, per_packet, seed = (int(a) for a in argv)
    schema = load_schema(SCHEMA_PATH)
    drive = schema["DriveCmd"]
    rng = random.Random(seed)
    variants = []
    for _ in range(DISTINCT_PACKETS):
        batch = random_commands(drive, per_packet, rng)
        variants.append((encode_packet(drive, batch), sum(m.durationMs for m in batch)))
    packets = [variants[i % DISTINCT_PACKETS] for i in range(count // per_packet)]
    stream = b"".join(p for p, _ in packets)
    total = sum(s for _, s in packets)
    with Client(schema, "127.0.0.1", port, keepalive_interval=None) as client:
        bursts = iter([Burst(stream, len(packets), len(packets) * per_packet)])
        sent = Sent()
        send_loop(client, lambda t: next(bursts, None), threading.Event(), sent)
        if sent.error is not None:
            raise sent.error
        print(total, flush=True)
        sys.stdin.readline()  # hold the link open until the server has counted everything
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
