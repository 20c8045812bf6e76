"""Ingest and encode throughput of the BCNP core, in messages per second.

    python -m benchmarks.throughput [--json PATH] [--repeat N] [--only NAMES]
                                    [--reference PATH [--rounds R]]

(a)  one 65,535-DriveCmd packet pushed in 4,096-byte chunks through
     StreamParser -> Dispatcher -> MessageQueue (capacity 65,535);
(a2) 655 packets of 100 DriveCmds in 4,096-byte chunks, same path;
(a3) 10,000 packets of 1 DriveCmd in one stream, 4,096-byte chunks, same path
     (what a host sends every 20 ms, back to back; no C++ counterpart);
(b)  encode_packet of one 65,535-DriveCmd packet (messages already built);
(c)  2,000,000 DriveCmds in 1,000-message packets sent by a client process
     (benchmarks.tcp_sender) over loopback TCP into the real TcpServer thread
     (one Connection per peer) -> Dispatcher -> MessageQueue, timed from the
     first packet handed to the queue to the last message queued (JSON key
     ``tcp_ingest``).

Each figure is the median of ``--repeat`` runs. After timing, every run's
queue is drained and the count and the sum of durationMs are checked against
what was sent, so a figure is only printed for work that was really done.

``--reference PATH`` runs the C++ reference benchmark (the ``bench`` program
built from the reference library, see docs/performance.md) in the same
invocation: ``--rounds`` rounds, each one Python pass and one C++ pass of the
same workloads (``--repeat`` runs each, medians), the order swapped every
round, so that both see the same machine. The figures printed are the medians
over the rounds, the ratio is Python's median over C++'s. Without it, ratios
are taken against the C++ figures recorded in :data:`REFERENCE`, measured on
another day: on a shared machine only ratios from one run mean much.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from operator import attrgetter

from bcnp import (
    Dispatcher,
    Message,
    MessageQueue,
    MessageQueueConfig,
    PacketView,
    Schema,
    encode_packet,
    load_schema,
)
from bcnp.transport import TcpServer, TransportConfig
from benchmarks.harness import ROOT
from benchmarks.harness.workloads import SCHEMA_PATH, chunks, random_commands
from benchmarks.report import add_json_argument, write_json

#: Workloads in the order they run and print; JSON keys.
WORKLOADS = (
    "parse_65535_chunked",
    "parse_100x655_chunked",
    "parse_1x10000_chunked",
    "encode_65535",
    "tcp_ingest",
)

#: The reference benchmark's name for each workload it also runs (``bench --only``).
REFERENCE_TAGS = {
    "parse_65535_chunked": "a1",
    "parse_100x655_chunked": "a2",
    "encode_65535": "b",
    "tcp_ingest": "c",
}

#: The C++ reference (-O2) on the 2-core build machine, msgs/s: the medians of
#: ``--reference PATH --rounds 5 --repeat 15`` on :data:`REFERENCE_DATE` (its first
#: run in docs/performance.md). Only used without ``--reference``.
REFERENCE = {
    "parse_65535_chunked": 24.3e6,
    "parse_100x655_chunked": 41.2e6,
    "encode_65535": 44.1e6,
    "tcp_ingest": 27.1e6,
}
REFERENCE_DATE = "2026-11-25"

#: A C++ run is 15 runs of at most a few seconds each; a hung one is an error.
REFERENCE_TIMEOUT_S = 600

#: Every workload checks the sum of durationMs of what was queued against what was sent.
_duration: Callable[[Message], int] = attrgetter("durationMs")

TCP_MESSAGES = 2_000_000
TCP_PER_PACKET = 1000


def _duration_sum(messages: list[Message]) -> int:
    return sum(map(_duration, messages))


def _ingest(
    schema: Schema, chunks: list[bytes], expected_count: int, expected_sum: int, repeat: int
) -> float:
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
        total = _duration_sum(drained)
        if len(drained) != expected_count or total != expected_sum or dispatcher.parse_errors:
            raise SystemExit(
                f"verification failed: {len(drained)} messages (want {expected_count}), "
                f"durationMs sum {total} (want {expected_sum}), {dispatcher.parse_errors} parse errors"
            )
    return expected_count / statistics.median(times)


def _tcp_ingest_once(schema: Schema, seed: int) -> float:
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
        cwd=ROOT,
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
        server.close()
    drained = queue.drain()
    total = _duration_sum(drained)
    parse_errors = server.counters.parse_errors
    if len(drained) != TCP_MESSAGES or str(total) != line.strip() or parse_errors:
        raise SystemExit(
            f"verification failed: {len(drained)} messages (want {TCP_MESSAGES}), durationMs sum {total} "
            f"(sender: {line.strip()}), {parse_errors} parse errors"
        )
    return TCP_MESSAGES / (finished[0] - first[0])


def run(repeat: int, only: tuple[str, ...] = WORKLOADS) -> dict[str, float]:
    """Python's figure (msgs/s, median of ``repeat`` runs) for each workload in ``only``."""
    schema = load_schema(SCHEMA_PATH)
    drive = schema["DriveCmd"]
    rng = random.Random(3)

    big = random_commands(drive, 65535, rng)
    big_packet = encode_packet(drive, big)
    assert len(big_packet) == 655_361
    big_sum = _duration_sum(big)

    small_batches = [random_commands(drive, 100, rng) for _ in range(655)]
    small_stream = b"".join(encode_packet(drive, b) for b in small_batches)
    small_sum = sum(map(_duration_sum, small_batches))

    single = random_commands(drive, 10000, rng)
    single_stream = b"".join(encode_packet(drive, [m]) for m in single)
    single_sum = _duration_sum(single)

    results: dict[str, float] = {}
    if "parse_65535_chunked" in only:
        results["parse_65535_chunked"] = _ingest(schema, chunks(big_packet), 65535, big_sum, repeat)
    if "parse_100x655_chunked" in only:
        results["parse_100x655_chunked"] = _ingest(schema, chunks(small_stream), 65500, small_sum, repeat)
    if "parse_1x10000_chunked" in only:
        results["parse_1x10000_chunked"] = _ingest(schema, chunks(single_stream), 10000, single_sum, repeat)
    if "encode_65535" in only:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            encoded = encode_packet(drive, big)
            times.append(time.perf_counter() - start)
            if encoded != big_packet:
                raise SystemExit("verification failed: encode produced different bytes")
        results["encode_65535"] = 65535 / statistics.median(times)
    if "tcp_ingest" in only:
        results["tcp_ingest"] = statistics.median(_tcp_ingest_once(schema, seed) for seed in range(repeat))
    return results


#: One result line of the reference benchmark: its tag, then ``: median 34.50 Mmsg/s``.
_REFERENCE_LINE = re.compile(r"^(\w+)\s.*: median ([0-9.]+) Mmsg/s")


def run_reference(path: str, repeat: int, only: tuple[str, ...]) -> dict[str, float]:
    """The C++ reference's figure (msgs/s, its median of ``repeat`` runs) for each
    workload in ``only`` that it has; it checks its own counts and bytes."""
    workloads = {REFERENCE_TAGS[name]: name for name in only if name in REFERENCE_TAGS}
    if not workloads:
        return {}
    command = [path, "--runs", str(repeat), "--only", ",".join(workloads)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=REFERENCE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SystemExit(f"reference benchmark {path}: {exc}") from None
    if done.returncode != 0:
        raise SystemExit(f"reference benchmark failed ({done.returncode}): {done.stderr.strip()}")
    results: dict[str, float] = {}
    for line in done.stdout.splitlines():
        match = _REFERENCE_LINE.match(line)
        if match and match.group(1) in workloads:
            results[workloads[match.group(1)]] = float(match.group(2)) * 1e6
    missing = sorted(set(workloads.values()) - set(results))
    if missing:
        raise SystemExit(f"reference benchmark printed no figure for {', '.join(missing)}:\n{done.stdout}")
    return results


def run_alternating(
    reference: str, rounds: int, repeat: int, only: tuple[str, ...]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per workload, Python's and C++'s figure of each round; Python goes first in
    even rounds, C++ in odd ones, so a drift of the machine's speed hits both alike."""
    python: dict[str, list[float]] = {name: [] for name in only}
    cpp: dict[str, list[float]] = {name: [] for name in only if name in REFERENCE_TAGS}
    passes: list[tuple[dict[str, list[float]], Callable[[], dict[str, float]]]] = [
        (python, lambda: run(repeat, only)),
        (cpp, lambda: run_reference(reference, repeat, only)),
    ]
    for number in range(rounds):
        for figures, measure in passes if number % 2 == 0 else reversed(passes):
            for name, value in measure().items():
                figures[name].append(value)
    return python, cpp


def _workloads(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"workloads are {', '.join(WORKLOADS)}; got {text!r}")
    return tuple(name for name in WORKLOADS if name in names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_json_argument(parser, "figures (msgs/s)")
    parser.add_argument("--repeat", type=int, default=15, help="runs per figure (median taken)")
    parser.add_argument(
        "--only", type=_workloads, default=WORKLOADS, help="comma-separated workloads (default: all)"
    )
    parser.add_argument(
        "--reference", metavar="PATH", help="the C++ reference's bench program, run alongside"
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="with --reference: Python/C++ passes, alternating (default 5)"
    )
    args = parser.parse_args(argv)
    repeat = max(1, args.repeat)
    if args.reference is None:
        figures = run(repeat, args.only)
        print(f"Python {sys.version.split()[0]}, median of {repeat} runs")
        print(f"ratios against the C++ reference as recorded on {REFERENCE_DATE} (not this run)")
        for key, value in figures.items():
            ref = REFERENCE.get(key)
            versus = (
                f"{value / ref:5.2f}x the C++ reference {ref / 1e6:.1f} M" if ref else "no C++ counterpart"
            )
            print(f"  {key:24s} {value / 1e6:8.2f} M msgs/s   ({versus})")
        write_json({k: round(v) for k, v in figures.items()}, args.json)
        return 0

    rounds = max(1, args.rounds)
    python, cpp = run_alternating(args.reference, rounds, repeat, args.only)
    py_median = {name: statistics.median(values) for name, values in python.items()}
    cpp_median = {name: statistics.median(values) for name, values in cpp.items()}
    ratio = {name: py_median[name] / cpp_median[name] for name in cpp_median}
    print(f"Python {sys.version.split()[0]} and {args.reference}, {rounds} rounds alternating,")
    print(f"each figure the median of {repeat} runs; medians over the rounds (M msgs/s)")
    print(f"  {'workload':24s} {'Python':>8s} {'C++':>8s}  ratio  (per round)")
    for name, value in py_median.items():
        if name not in cpp_median:
            print(f"  {name:24s} {value / 1e6:8.2f} {'-':>8s}      -")
            continue
        per_round = [p / c for p, c in zip(python[name], cpp[name], strict=True)]
        spread = f"{min(per_round):.2f}-{max(per_round):.2f}"
        print(
            f"  {name:24s} {value / 1e6:8.2f} {cpp_median[name] / 1e6:8.2f}  {ratio[name]:5.2f}x ({spread})"
        )
    write_json(
        {
            "python": {name: round(value) for name, value in py_median.items()},
            "reference": {name: round(value) for name, value in cpp_median.items()},
            "ratio": {name: round(value, 3) for name, value in ratio.items()},
            "rounds": rounds,
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
