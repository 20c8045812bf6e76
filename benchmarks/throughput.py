"""Ingest and encode throughput of the BCNP core, in messages per second.

    python -m benchmarks.throughput [--json] [--repeat N]

(a)  one 65,535-DriveCmd packet pushed in 4,096-byte chunks through
     StreamParser -> Dispatcher -> MessageQueue (capacity 65,535);
(a2) 655 packets of 100 DriveCmds in 4,096-byte chunks, same path;
(b)  encode_packet of one 65,535-DriveCmd packet (messages already built);
(c)  2,000,000 DriveCmds in 1,000-message packets sent by a client process
     (benchmarks.tcp_sender) over loopback TCP into the real TcpServer thread
     (one Connection per peer) -> Dispatcher -> MessageQueue, timed from the
     first packet handed to the queue to the last message queued (JSON key
     ``tcp_ingest``).

Each figure is the median of ``--repeat`` runs. After timing, every run's
queue is drained and the count and the sum of durationMs are checked against
what was sent, so a figure is only printed for work that was really done.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from bcnp import Dispatcher, MessageQueue, MessageQueueConfig, PacketView, encode_packet, load_schema
from bcnp.transport import TcpServer, TransportConfig

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "messages.json"
CHUNK = 4096

#: The C++ reference built -O2 on the same kind of machine (msgs/s).
REFERENCE = {
    "parse_65535_chunked": 7.1e6,
    "parse_100x655_chunked": 17.8e6,
    "encode_65535": 26.5e6,
    "tcp_ingest": 14.4e6,
}

TCP_MESSAGES = 2_000_000
TCP_PER_PACKET = 1000


def _chunks(stream: bytes, size: int = CHUNK) -> list[bytes]:
    return [stream[i : i + size] for i in range(0, len(stream), size)]


def _commands(spec, count: int, rng: random.Random) -> list:
    return [
        spec(vx=rng.uniform(-1.5, 1.5), omega=rng.uniform(-2.5, 2.5), durationMs=rng.randint(1, 100))
        for _ in range(count)
    ]


def _ingest(schema, chunks: list[bytes], expected_count: int, expected_sum: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        queue = MessageQueue(MessageQueueConfig(capacity=65535))
        dispatcher = Dispatcher(schema)
        dispatcher.register("DriveCmd", queue.handle_packet)
        push = dispatcher.push
        start = time.perf_counter()
        for chunk in chunks:
            push(chunk, 0.0)
        times.append(time.perf_counter() - start)
        drained = queue.drain()
        total = sum(m.durationMs for m in drained)
        if len(drained) != expected_count or total != expected_sum or dispatcher.parse_errors:
            raise SystemExit(
                f"verification failed: {len(drained)} messages (want {expected_count}), "
                f"durationMs sum {total} (want {expected_sum}), {dispatcher.parse_errors} parse errors"
            )
    return expected_count / statistics.median(times)


def _tcp_ingest_once(schema, seed: int) -> float:
    queue = MessageQueue(MessageQueueConfig(capacity=TCP_MESSAGES))
    dispatcher = Dispatcher(schema)
    done = threading.Event()
    first: list[float] = []
    finished = [0.0]

    def handle(packet: PacketView, now: float) -> None:
        if not first:
            first.append(time.perf_counter())
        queue.handle_packet(packet, now)
        if queue.size() >= TCP_MESSAGES:
            finished[0] = time.perf_counter()
            done.set()

    dispatcher.register("DriveCmd", handle)
    server = TcpServer(dispatcher, TransportConfig(host="127.0.0.1", port=0))
    server.start()
    sender = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.tcp_sender",
            str(server.port),
            str(TCP_MESSAGES),
            str(TCP_PER_PACKET),
            str(seed),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert sender.stdout is not None and sender.stdin is not None
        line = sender.stdout.readline()
        if not done.wait(60):
            raise SystemExit(f"verification failed: only {queue.size()} of {TCP_MESSAGES} messages queued")
        sender.stdin.write("\n")
        sender.stdin.flush()
        sender.wait(10)
    finally:
        if sender.poll() is None:
            sender.kill()
        server.stop()
    drained = queue.drain()
    total = sum(m.durationMs for m in drained)
    parse_errors = server.counters.parse_errors
    if len(drained) != TCP_MESSAGES or str(total) != line.strip() or parse_errors:
        raise SystemExit(
            f"verification failed: {len(drained)} messages (want {TCP_MESSAGES}), durationMs sum {total} "
            f"(sender: {line.strip()}), {parse_errors} parse errors"
        )
    return TCP_MESSAGES / (finished[0] - first[0])


def run(repeat: int) -> dict[str, float]:
    schema = load_schema(SCHEMA_PATH)
    drive = schema["DriveCmd"]
    rng = random.Random(3)

    big = _commands(drive, 65535, rng)
    big_packet = encode_packet(drive, big)
    assert len(big_packet) == 655_361
    big_sum = sum(m.durationMs for m in big)

    small_batches = [_commands(drive, 100, rng) for _ in range(655)]
    small_stream = b"".join(encode_packet(drive, b) for b in small_batches)
    small_sum = sum(m.durationMs for b in small_batches for m in b)

    results = {
        "parse_65535_chunked": _ingest(schema, _chunks(big_packet), 65535, big_sum, repeat),
        "parse_100x655_chunked": _ingest(schema, _chunks(small_stream), 65500, small_sum, repeat),
    }
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        encoded = encode_packet(drive, big)
        times.append(time.perf_counter() - start)
        if encoded != big_packet:
            raise SystemExit("verification failed: encode produced different bytes")
    results["encode_65535"] = 65535 / statistics.median(times)
    results["tcp_ingest"] = statistics.median(_tcp_ingest_once(schema, seed) for seed in range(repeat))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (msgs/s)")
    parser.add_argument("--repeat", type=int, default=15, help="runs per figure (median taken)")
    args = parser.parse_args(argv)
    results = run(max(1, args.repeat))
    if args.json:
        print(json.dumps({k: round(v) for k, v in results.items()}))
        return 0
    print(f"Python {sys.version.split()[0]}, median of {args.repeat} runs")
    for key, value in results.items():
        ref = REFERENCE[key]
        ratio = f"{value / ref:5.2f}x the C++ reference {ref / 1e6:.1f} M"
        print(f"  {key:24s} {value / 1e6:8.2f} M msgs/s   ({ratio})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
