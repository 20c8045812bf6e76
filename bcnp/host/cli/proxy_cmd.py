"""``proxy``: the fault proxy (:mod:`bcnp.host.proxy`) from the command line, and its value parsers."""

from __future__ import annotations

import argparse
import math
import random
import re
import sys
import threading
import time
from dataclasses import fields
from typing import TYPE_CHECKING

from ...defaults import PORT
from ...transport.netio import format_address
from ..proxy.core.faults import Event, Faults, Partition, Reset
from ..proxy.fault_proxy import Proxy

if TYPE_CHECKING:
    from .common import Subparsers

EPILOG_PROXY = f"""examples:
  python -m bcnp proxy --to 10.12.34.2:{PORT} --latency 20ms --jitter 5ms
  python -m bcnp proxy --listen 5900 --bandwidth 7M --loss 1% --reorder 1% --udp-only
  python -m bcnp proxy --drop-at 10s:1s --drop-at 30s:3s --reset-at 20s --seed 1
  python -m bcnp send --port 5900 1.0 0 2000       then drive through it, from a second terminal

Listens on 127.0.0.1:5900 (TCP and UDP) and forwards to --to (default the
simulator, 127.0.0.1:{PORT}). --latency, --jitter and --bandwidth apply to each
direction: 20ms adds 40 ms to a round trip. --drop-at AT:FOR cuts the link at AT
for FOR: TCP bytes are held and delivered at the end, as retransmission does
after a radio fade; UDP datagrams are lost (--udp-hold: held too). --reset-at
aborts every connection. Times count from the start. Units: 5ms, 0.005 (s), 300us;
rates in bits/s: 7M, 7Mbit, 500k; probabilities: 1% or 0.01. Ctrl-C prints the
counters.
"""


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


_DURATION_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}


_RATE_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


def parse_duration(text: str) -> float:
    """Seconds from ``"5ms"``, ``"0.005"``, ``"2s"``, ``"300us"``; never negative."""
    match = re.fullmatch(rf"\s*({_NUMBER})\s*(\S*)\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 5ms, 0.005, 2s)")
    if match[2] not in _DURATION_UNITS:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown unit {match[2]!r} (use s, ms or us)")
    value = float(match[1]) * _DURATION_UNITS[match[2]]
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: too long")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration cannot be negative")
    return value


def parse_rate(text: str) -> float:
    """Bits per second from ``"7M"``, ``"7Mbit"``, ``"7Mbit/s"``, ``"500k"``, ``"7000000"``; > 0."""
    match = re.fullmatch(rf"\s*({_NUMBER})\s*([kKMG]?)(bit/s|bits|bit|bps|b)?\s*", text)
    if match is None:
        hint = " (bytes? give bits per second)" if "B" in text else ""
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate in bits/s (e.g. 7M, 7Mbit, 500k){hint}")
    value = float(match[1]) * _RATE_PREFIXES[match[2]]
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: the bandwidth must be more than 0")
    return value


def parse_probability(text: str) -> float:
    """0..1 from ``"1%"`` or ``"0.01"``."""
    raw = text.strip()
    percent = raw.endswith("%")
    try:
        value = float(raw[:-1] if percent else raw) / (100 if percent else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a probability (e.g. 1% or 0.01)") from None
    if not 0 <= value <= 1:
        hint = f" (for percent write {raw}%)" if not percent and 1 < value <= 100 else ""
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1 (0% and 100%){hint}")
    return value


def _parse_address(text: str, default_host: str | None, lowest_port: int) -> tuple[str, int]:
    host, colon, port = text.strip().rpartition(":")
    if not colon and default_host is not None:
        host, port = default_host, text.strip()
    host = host.strip("[]")
    example = "5900 or 127.0.0.1:5900" if default_host else f"10.12.34.2:{PORT}"
    if not host or not port.isdigit() or not lowest_port <= int(port) <= 0xFFFF:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {'[HOST:]' if default_host else 'HOST:'}PORT "
            f"(e.g. {example}; port {lowest_port} to 65535)"
        )
    return host, int(port)


def _target(text: str) -> tuple[str, int]:
    return _parse_address(text, None, 1)


def _listen(text: str) -> tuple[str, int]:
    return _parse_address(text, "127.0.0.1", 0)


def _drop(text: str) -> tuple[float, float]:
    at, colon, length = text.partition(":")
    if not colon:
        raise argparse.ArgumentTypeError(f"{text!r} is not AT:FOR (e.g. 10s:1s: at 10 s, for 1 s)")
    seconds = parse_duration(length)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a link drop must last more than 0 s")
    return parse_duration(at), seconds


def add_parser(sub: Subparsers) -> argparse.ArgumentParser:
    """Add the ``proxy`` subcommand to ``sub``; :func:`run` runs it."""
    p = sub.add_parser(
        "proxy",
        help="forward to the robot through a bad network: latency, loss, link drops, resets",
        epilog=EPILOG_PROXY,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--listen",
        type=_listen,
        default=("127.0.0.1", 5900),
        metavar="[HOST:]PORT",
        help="where hosts connect (default 127.0.0.1:5900; 0.0.0.0:PORT for other machines)",
    )
    p.add_argument(
        "--to",
        type=_target,
        default=("127.0.0.1", PORT),
        metavar="HOST:PORT",
        help=f"the robot (default 127.0.0.1:{PORT}, the simulator)",
    )
    only = p.add_mutually_exclusive_group()
    only.add_argument("--tcp-only", action="store_true", help="forward TCP only")
    only.add_argument("--udp-only", action="store_true", help="forward UDP only")
    p.add_argument("--latency", type=parse_duration, default=0.0, metavar="T", help="delay, each direction")
    p.add_argument("--jitter", type=parse_duration, default=0.0, metavar="T", help="± this, uniform")
    p.add_argument("--bandwidth", type=parse_rate, metavar="RATE", help="bits/s each direction (field: 7M)")
    for name, what in (("loss", "lost"), ("duplicate", "delivered twice"), ("reorder", "overtaken")):
        p.add_argument(
            f"--{name}",
            type=parse_probability,
            default=0.0,
            metavar="P",
            help=f"UDP: share of datagrams {what}",
        )
    p.add_argument(
        "--drop-at",
        type=_drop,
        action="append",
        default=[],
        metavar="AT:FOR",
        help="cut the link at AT for FOR (repeatable)",
    )
    p.add_argument(
        "--reset-at",
        type=parse_duration,
        action="append",
        default=[],
        metavar="AT",
        help="abort every connection at AT (repeatable)",
    )
    p.add_argument("--udp-hold", action="store_true", help="hold UDP during a link drop instead of dropping")
    p.add_argument(
        "--udp-hold-reorder",
        action="store_true",
        help="hold UDP during a link drop, then release each held datagram with the latency and jitter "
        "again (they may come out in another order)",
    )
    p.add_argument("--seed", type=int, help="seed of the random faults, to repeat a run (default: random)")
    p.add_argument("--duration", type=parse_duration, metavar="T", help="stop after T (default: at Ctrl-C)")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``proxy`` until Ctrl-C (or ``--duration``), printing each event, then its counters."""
    try:
        faults = Faults(
            latency=args.latency,
            jitter=args.jitter,
            bandwidth=args.bandwidth,
            loss=args.loss,
            duplicate=args.duplicate,
            reorder=args.reorder,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    script: list[tuple[float, Event]] = [(at, Partition(length)) for at, length in args.drop_at]
    script += [(at, Reset()) for at in args.reset_at]
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)

    printing = threading.Lock()  # the listening line comes first, whatever happens at once

    def show(t: float, message: str) -> None:
        with printing:
            print(f"{t:9.3f} s  {message}", flush=True)

    tcp, udp = not args.udp_only, not args.tcp_only
    proxy = Proxy(
        args.to,
        args.listen,
        tcp=tcp,
        udp=udp,
        faults=faults,
        udp_hold=args.udp_hold,
        reorder_held=args.udp_hold_reorder,
        seed=seed,
        script=script,
        on_event=show,
    )
    with printing:
        try:
            proxy.start()
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        ports = {p for p in (proxy.tcp_port, proxy.udp_port) if p}
        kinds = " and ".join(k for k, on in (("tcp", tcp), ("udp", udp)) if on)
        where = ", ".join(format_address((args.listen[0], p)) for p in sorted(ports))
        print(
            f"listening on {where} ({kinds}), forwarding to {format_address(args.to)}; "
            f"faults: {faults.describe()}; seed {seed}",
            flush=True,
        )
    deadline = None if args.duration is None else time.monotonic() + args.duration
    try:
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.1 if deadline is None else min(0.1, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:
        pass
    finally:
        proxy.close()
    counters = proxy.counters()
    print("counters:")
    for f in fields(counters):
        if f.name not in ("tcp_open", "udp_clients", "bytes_held"):
            print(f"  {f.name:<20} {getattr(counters, f.name)}")
    return 0
