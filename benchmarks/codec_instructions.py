"""Instructions and memory references per message of the codec workloads, Python and the reference.

    python -m benchmarks.codec_instructions [--reference PATH] [--runs N] [--json PATH]

Counts, with Valgrind's callgrind and its cache simulator, what the timed part
of two ``benchmarks/throughput.py`` workloads executes per message:

* ``encode_65535``: ``encode_packet`` of 65,535 DriveCmds already built (the
  reference: ``EncodeTypedPacket`` into a ``std::vector``);
* ``parse_100x655_chunked``: 655 packets of 100 DriveCmds pushed in 4,096-byte
  chunks through the parser, the dispatcher and the queue (the reference: its
  ``PacketDispatcher::PushBytes`` calls).

For each: x86-64 instructions (``Ir``), data reads and writes (``Dr + Dw``) and
the simulated last-level cache's data misses (``DLmr + DLmw``; Valgrind sizes its
caches after the machine's own, ``--ll BYTES`` sets another size), per message.
None of these moves with the machine, so they say what a timing ratio is made
of: a workload that executes more instructions than the reference's matches its
speed only on a core that runs them faster, and a ratio that moves between
machines moves with how fast each core runs each kind of code and how much of
the data its caches hold (docs/performance.md, "Why encode varied between
machines").

Python: the same data as ``throughput.py`` (seed 3), one warm-up, then
``--runs`` runs of each workload, collection switched on around the timed part
only (client requests, as in ``tick_instructions.py``); the median run.
Reference: the ``bench`` program of docs/performance.md with
``--toggle-collect`` on the timed function, run twice (``--runs 1`` and
``--runs 1+N``): the difference over N is one run, its warm-up and set-up
taken off. Needs Valgrind on x86-64 Linux; ``--inner`` is what runs under it.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import ROOT
from benchmarks.report import add_json_argument, write_json

WORKLOADS = ("encode_65535", "parse_100x655_chunked")
MESSAGES = {"encode_65535": 65535, "parse_100x655_chunked": 65500}
#: What the reference's bench runs for each workload, and the function whose calls are timed there.
REFERENCE = {
    "encode_65535": (
        "b",
        # the std::vector overload only (the pointer overload it calls would toggle collection off)
        "bool bcnp::EncodeTypedPacket<*>(*, std::vector<unsigned char, std::allocator<unsigned char> >&)",
    ),
    "parse_100x655_chunked": ("a2", "bcnp::PacketDispatcher::PushBytes*"),
}
EVENTS = ("Ir", "Dr", "Dw", "DLmr", "DLmw")
_TRIGGER = "desc: Trigger: Client Request: "


#: The simulated last-level cache (``--ll``): bytes, or None for Valgrind's own choice (the machine's).
LL_BYTES: int | None = None


def _callgrind(valgrind: str, out: str, *extra: str) -> list[str]:
    caches = [] if LL_BYTES is None else [f"--LL={LL_BYTES},16,64"]
    return [
        valgrind,
        "--tool=callgrind",
        "--cache-sim=yes",
        *caches,
        "--dump-line=no",
        f"--callgrind-out-file={out}",
        *extra,
    ]


def _totals(path: Path) -> tuple[str, dict[str, int]]:
    """The trigger (dump name) and event totals of one callgrind file."""
    trigger, events, totals = "", list(EVENTS), None
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.startswith(_TRIGGER):
                trigger = line[len(_TRIGGER) :].strip()
            elif line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("totals:") or (line.startswith("summary:") and totals is None):
                totals = [int(v) for v in line.split()[1:]]
    counts = dict(zip(events, totals or [], strict=False))
    return trigger, {e: counts.get(e, 0) for e in EVENTS}


def _per_message(counts: dict[str, float], messages: int) -> dict[str, float]:
    return {
        "instructions": counts["Ir"] / messages,
        "data refs": (counts["Dr"] + counts["Dw"]) / messages,
        "LL data misses": (counts["DLmr"] + counts["DLmw"]) / messages,
    }


def _inner(runs: int) -> int:
    """Under Valgrind: each workload ``runs`` times, one dump per run."""
    sys.path.insert(0, str(ROOT))
    from bcnp.dispatcher import Dispatcher
    from bcnp.queue import MessageQueue, MessageQueueConfig
    from bcnp.schema import load_schema
    from bcnp.wire import encode_packet
    from benchmarks.harness.callgrind import Callgrind
    from benchmarks.harness.workloads import SCHEMA_PATH, chunks, random_commands

    callgrind = Callgrind()
    toggle = callgrind.toggle
    schema = load_schema(SCHEMA_PATH)
    drive = schema["DriveCmd"]
    rng = random.Random(3)
    big = random_commands(drive, 65535, rng)
    expected = encode_packet(drive, big)
    batches = [random_commands(drive, 100, rng) for _ in range(655)]
    pieces = chunks(b"".join(encode_packet(drive, b) for b in batches))
    callgrind.start_instrumentation()

    def encode() -> None:
        toggle()
        encoded = encode_packet(drive, big)
        toggle()
        if encoded != expected:
            raise SystemExit("codec_instructions: encode produced different bytes")

    def parse() -> None:
        queue = MessageQueue(MessageQueueConfig(capacity=65535))
        dispatcher = Dispatcher(schema)
        dispatcher.register("DriveCmd", queue.handle_packet)
        push = dispatcher.push
        toggle()
        for chunk in pieces:
            push(chunk, 0.0)
        toggle()
        if queue.size() != 65500 or dispatcher.parse_errors:
            raise SystemExit("codec_instructions: parse lost messages")

    for name, work in (("encode_65535", encode), ("parse_100x655_chunked", parse)):
        work()  # warm-up, not collected
        callgrind.dump(f"warm|{name}")
        for n in range(runs):
            work()
            callgrind.dump(f"{name}|{n}")
    return 0


def python_counts(valgrind: str, runs: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="bcnp-codec-") as tmp:
        command = [
            *_callgrind(valgrind, f"{tmp}/callgrind.out", "--collect-atstart=no"),
            sys.executable,
            "-m",
            "benchmarks.codec_instructions",
            "--inner",
            "--runs",
            str(runs),
        ]
        done = subprocess.run(
            command, cwd=ROOT, env=dict(os.environ, PYTHONHASHSEED="0"), capture_output=True, text=True
        )
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
            raise SystemExit(f"codec_instructions: the Python run under Valgrind failed ({done.returncode})")
        found: dict[str, list[dict[str, int]]] = {}
        for path in Path(tmp).glob("callgrind.out*"):
            trigger, counts = _totals(path)
            name = trigger.split("|")[0]
            if name in MESSAGES:
                found.setdefault(name, []).append(counts)
    out = {}
    for name in WORKLOADS:
        blocks = found.get(name, [])
        if len(blocks) != runs:
            raise SystemExit(f"codec_instructions: {len(blocks)} dumps of {name}, want {runs}")
        median = {e: statistics.median(b[e] for b in blocks) for e in EVENTS}
        out[name] = _per_message(median, MESSAGES[name])
    return out


def reference_counts(valgrind: str, bench: str, runs: int) -> dict[str, dict[str, float]]:
    out = {}
    with tempfile.TemporaryDirectory(prefix="bcnp-codec-ref-") as tmp:
        for name in WORKLOADS:
            tag, function = REFERENCE[name]
            totals = []
            for n in (1, 1 + runs):
                path = f"{tmp}/{tag}.{n}"
                command = [
                    *_callgrind(valgrind, path, "--collect-atstart=no", f"--toggle-collect={function}"),
                    bench,
                    "--runs",
                    str(n),
                    "--only",
                    tag,
                ]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
                    raise SystemExit(f"codec_instructions: the reference's {tag} under Valgrind failed")
                totals.append(_totals(Path(path))[1])
            if not totals[1]["Ir"] > totals[0]["Ir"] > 0:
                raise SystemExit(f"codec_instructions: nothing collected in {function!r} (a renamed symbol?)")
            one = {e: (totals[1][e] - totals[0][e]) / runs for e in EVENTS}
            out[name] = _per_message(one, MESSAGES[name])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference", metavar="PATH", help="the reference's bench program")
    parser.add_argument("--runs", type=int, default=5, help="runs of each workload (default 5)")
    parser.add_argument("--valgrind", default="valgrind", help="the valgrind command (default: on PATH)")
    parser.add_argument(
        "--ll",
        type=int,
        metavar="BYTES",
        help="size of the simulated last-level cache (16-way, 64-byte lines; default: the machine's)",
    )
    add_json_argument(parser)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.inner:
        return _inner(args.runs)
    valgrind = shutil.which(args.valgrind)
    if valgrind is None:
        raise SystemExit("codec_instructions: needs Valgrind (apt-get install valgrind)")
    global LL_BYTES
    LL_BYTES = args.ll
    figures = {"python": python_counts(valgrind, args.runs)}
    if args.reference:
        figures["reference"] = reference_counts(valgrind, args.reference, args.runs)
    cache = "the machine's last-level cache" if args.ll is None else f"a {args.ll:,}-byte last-level cache"
    print(f"Python {sys.version.split()[0]}: per message, callgrind simulating {cache}")
    columns = ("instructions", "data refs", "LL data misses")
    print(f"  {'workload':24s}{'side':>11s}" + "".join(f"{c:>16s}" for c in columns))
    for name in WORKLOADS:
        for side, values in figures.items():
            print(f"  {name:24s}{side:>11s}" + "".join(f"{values[name][c]:16.2f}" for c in columns))
        if "reference" in figures:
            ratio = figures["python"][name]["instructions"] / figures["reference"][name]["instructions"]
            print(f"  {'':24s}{'py / ref':>11s}{ratio:15.2f}x")
    write_json(figures, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
