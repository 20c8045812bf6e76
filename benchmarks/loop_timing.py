"""The robot loop under load: ``robotpy sim`` driven over TCP, its keys read through NetworkTables.

    python -m benchmarks.loop_timing [--flood-seconds 60] [--big-seconds 60]
        [--soak-seconds 600] [--settle-seconds 10] [--rss-every 5]

Starts the robot headless with the benchmarks' one launcher
(:class:`benchmarks.harness.sim.SimRobot`: autonomous, enabled; BCNP on a free port,
``--bcnp-port`` to choose; NetworkTables on a free port of its own,
``BCNP_SIM_NT_PORT``) and an NT4 client on it, connects one TCP controller,
then runs:

0. idle     the link up, keepalives only (``--settle-seconds``);
1. flood    one packet per 20 ms DriveCmd, as fast as TCP takes them;
2. big      65,535-DriveCmd packets (655,361 bytes each), as fast as TCP takes them;
3. soak     a re-planning host: every 20 ms a CLEAR_QUEUE packet holding the next
            10 x 20 ms of commands (``--soak-seconds``, 0 skips it).

Each phase's host is the harness's periodic sender (:mod:`benchmarks.harness.sender`).

Between phases the host sends a stop and idles for ``--settle-seconds`` (the
10 s the loop windows span), so a phase starts with idle ticks in the windows,
not the previous phase's. Per phase it prints what the host sent, what the
robot received, the increase of ``Network/Overruns``, the worst
``Network/LoopP99Ms``, ``LoopMaxMs`` and ``LoopPeriodMaxMs`` published during
the phase or at its end (each over a 500-tick, 10 s rolling window, so the
first readings of a phase still hold settle ticks), ``Network/CmdLatencyP99Ms``
at the end of the phase (the last 500 packets the queue reached), and the
sim's resident memory (``VmRSS``) at start and end; the soak also prints RSS
samples and their trend. With 200 queued commands of 20 ms, the flood and big
phases keep the queue full, so their command latency is mostly the 4 s
backlog, by definition.

Virtual machines stand still now and then, sometimes one CPU at a time: a
process that only sleeps 2 ms at a time wakes up to 150 ms late, without
having waited for a CPU. Such a stall delays the robot's tick like anything
else, so a probe process per CPU (:data:`PROBE`, pinned there) records every
wake-up of its own more than 3 ms late, and each overrun is reported as "at a
stall" (it arrived during a probe stall or within 250 ms after it: an idle
process was late at the same moment) or "elsewhere", with the nearest probe
stall. The probes also read how much of each lateness they spent waiting for
a CPU (``/proc/thread-self/schedstat``), so CPU contention (the sender and
the sim busy on 2 cores) can be told from the machine standing still.

The sim's NetworkTables server is on a port of its own, so another sim beside
it (a user's, a test's) is never the one read. It never leaves the sim running.
Exit status 1 when the sim died or could not be started or driven.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ntcore

from bcnp import encode_packet
from bcnp.host.link.client import Client, LinkError
from benchmarks.harness.ports import free_port
from benchmarks.harness.sender import PERIOD_S, Burst, NextPacket, Sender, Sent, replanning
from benchmarks.harness.sim import SimRobot, spawn
from messages import SCHEMA, DriveCmd

NETWORK = "/SmartDashboard/Network/"
#: Rolling loop figures: the worst value published during a phase is reported.
WORST_KEYS = ("LoopP99Ms", "LoopMaxMs", "LoopPeriodMaxMs")
OTHER_KEYS = ("CmdLatencyP99Ms", "Overruns", "MessagesRx", "QueueOverflows", "MessagesSkipped")
FLOOD_BLOCK = 1000  # small packets per write
#: An overrun is the machine's when it arrives (through NT, up to ~60 ms after the
#: late tick) during a stall seen by the probe, up to 250 ms after it ended or 20 ms
#: before it began.
STALL_MATCH_US = (250_000, 20_000)
MAX_MESSAGES = 65535


class SimDied(RuntimeError):
    pass


# -- the simulator process ---------------------------------------------------------------------------------


def check(sim: SimRobot) -> None:
    """Raise :class:`SimDied` when the robot process has exited."""
    if not sim.alive():
        raise SimDied(f"the sim exited with status {sim.returncode}")


def rss_mib(sim: SimRobot) -> float:
    """Resident memory of the sim process, MiB."""
    try:
        return sim.rss_bytes() / 2**20
    except OSError:
        check(sim)
        raise


# -- machine stalls, seen by a process that does nothing else -------------------------------------------

#: A 500 Hz sleeper, pinned to the CPU given as its argument (one wake-up every
#: 2 ms, so any stall long enough to make a tick late covers one). It prints each
#: wake-up more than 3 ms late, with the part of it spent runnable but waiting
#: for a CPU (from schedstat; the rest is time the machine itself, e.g. a
#: virtual one, stood still): "<monotonic us> <late us> <cpu wait us>".
PROBE = r"""
import os, sys, time
if len(sys.argv) > 1 and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(sys.argv[1])})
def waited():
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except OSError:
        return 0.0
period, nxt = 0.002, time.monotonic()
while True:
    nxt += period
    before = waited()
    delay = nxt - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    now = time.monotonic()
    late = now - nxt
    if late > 0.003:
        print(int(now * 1e6), int(late * 1e6), int((waited() - before) * 1e6), flush=True)
    if late > period:
        nxt = now
"""


@dataclass
class Stall:
    end_us: int  # time.monotonic() of the late wake-up, microseconds
    late_ms: float
    cpu_wait_ms: float  # of late_ms: runnable, waiting for a CPU


class StallProbe:
    """Runs :data:`PROBE` in one process per CPU (a virtual machine may stop one of its
    CPUs while the other runs on); :attr:`stalls` lists what they saw."""

    def __init__(self) -> None:
        self.stalls: list[Stall] = []
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [None]
        self.procs = [
            spawn(
                [sys.executable, "-c", PROBE, *([] if cpu is None else [str(cpu)])],
                stdout=subprocess.PIPE,
                text=True,
            )
            for cpu in cpus
        ]
        for proc in self.procs:
            threading.Thread(target=self._read, args=(proc,), name="stall-probe", daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with contextlib.suppress(ValueError):
                end, late, cpu_wait = (int(x) for x in line.split())
                self.stalls.append(Stall(end, late / 1000, cpu_wait / 1000))

    def between(self, t0_us: int, t1_us: int) -> list[Stall]:
        return [s for s in list(self.stalls) if t0_us <= s.end_us < t1_us]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)


# -- the robot's keys, through a real NT4 client -----------------------------------------------------------


class Keys:
    def __init__(self, nt_port: int) -> None:
        self.inst = ntcore.NetworkTableInstance.create()
        self.inst.startClient4("bcnp-loop-timing")
        self.inst.setServer("127.0.0.1", nt_port)
        options = ntcore.PubSubOptions(periodic=0.02, sendAll=True, pollStorage=4096)
        self.subs = {
            key: self.inst.getDoubleTopic(NETWORK + key).subscribe(math.nan, options)
            for key in WORST_KEYS + OTHER_KEYS
        }
        self.hash = self.inst.getStringTopic(NETWORK + "SchemaHash").subscribe("")
        self.overruns_at: list[int] = []  # time.monotonic() us when each new overrun arrived
        self._overruns_seen = 0.0
        self._nt_offset_us = ntcore._now() - _mono_us()

    def close(self) -> None:
        for sub in self.subs.values():
            sub.close()
        self.hash.close()
        self.inst.stopClient()
        ntcore.NetworkTableInstance.destroy(self.inst)

    def get(self, key: str) -> float:
        return float(self.subs[key].get())

    def snapshot(self) -> dict[str, float]:
        return {key: self.get(key) for key in self.subs}

    def drain(self) -> dict[str, list[float]]:
        """Every value published since the last drain, per key; new ``Overruns``
        values are also kept in :attr:`overruns_at` with their arrival time."""
        out: dict[str, list[float]] = {}
        for key, sub in self.subs.items():
            values = sub.readQueue()
            out[key] = [v.value for v in values]
            if key == "Overruns":
                for v in values:
                    if math.isfinite(v.value) and v.value > self._overruns_seen:
                        self._overruns_seen = v.value
                        # NT timestamps are ntcore's local clock; store time.monotonic() us.
                        self.overruns_at.append(v.time - self._nt_offset_us)
        return out


# -- phases ------------------------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    seconds: float = 0.0
    sent: Sent = field(default_factory=Sent)
    start: dict[str, float] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    worst: dict[str, float] = field(default_factory=dict)
    rss: list[tuple[float, float]] = field(default_factory=list)  # (seconds into the phase, MiB)
    t0_us: int = 0  # phase start, monotonic us
    overruns_at: list[int] = field(default_factory=list)  # arrival of each new overrun, monotonic us
    stalls: list[Stall] = field(default_factory=list)  # machine stalls during the phase

    def at_stall(self, at: int) -> bool:
        """An overrun that arrived at ``at`` came during a probe stall or up to STALL_MATCH_US
        after one (the probe's late wake-up ends a stall that began ``late_ms`` before)."""
        return any(
            s.end_us - s.late_ms * 1000 - STALL_MATCH_US[1] <= at <= s.end_us + STALL_MATCH_US[0]
            for s in self.stalls
        )

    def note(self, values: dict[str, list[float]] | dict[str, float]) -> None:
        for key in WORST_KEYS:
            value = values[key]
            finite = [v for v in (value if isinstance(value, list) else [value]) if math.isfinite(v)]
            if finite:
                self.worst[key] = max(self.worst.get(key, -math.inf), *finite)

    def delta(self, key: str) -> float:
        return self.end[key] - self.start[key]


def flood_packets() -> NextPacket:
    """The flood: blocks of 1,000 one-DriveCmd packets, back to back."""
    block = b"".join(
        encode_packet(DriveCmd.spec, [DriveCmd(vx=0.5, omega=0.2 * ((i % 5) - 2), durationMs=20)])
        for i in range(FLOOD_BLOCK)
    )
    burst = Burst(block, FLOOD_BLOCK, FLOOD_BLOCK)
    return lambda t: burst


def big_packets() -> NextPacket:
    """The big phase: two 65,535-DriveCmd packets, in turn."""
    bursts = [
        Burst(
            encode_packet(
                DriveCmd.spec,
                [DriveCmd(vx=0.4 + 0.1 * k, omega=0.3, durationMs=20) for _ in range(MAX_MESSAGES)],
            ),
            1,
            MAX_MESSAGES,
        )
        for k in range(2)
    ]
    sent = [0]

    def packet(t: float) -> Burst:
        sent[0] += 1
        return bursts[(sent[0] - 1) % 2]

    return packet


def _mono_us() -> int:
    return time.monotonic_ns() // 1000


class Bench:
    def __init__(
        self, sim: SimRobot, keys: Keys, client: Client, rss_every: float, probe: StallProbe
    ) -> None:
        self.sim = sim
        self.keys = keys
        self.probe = probe
        self.client = client
        self.rss_every = rss_every

    def _watch(self, phase: Phase, until: float, t0: float, done: Callable[[], bool] | None = None) -> None:
        next_rss = time.monotonic()
        while time.monotonic() < until and not (done is not None and done()):
            check(self.sim)
            phase.note(self.keys.drain())
            now = time.monotonic()
            if now >= next_rss:
                phase.rss.append((now - t0, rss_mib(self.sim)))
                next_rss += self.rss_every
            time.sleep(0.1)

    def _settle_rx(self, phase: Phase) -> None:
        """Wait (at most 15 s) until the robot has taken in everything sent: MessagesRx steady for 0.5 s."""
        deadline = time.monotonic() + 15
        last, steady_since = self.keys.get("MessagesRx"), time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - steady_since < 0.5:
            check(self.sim)
            phase.note(self.keys.drain())
            time.sleep(0.1)
            value = self.keys.get("MessagesRx")
            if value != last:
                last, steady_since = value, time.monotonic()

    def run(
        self, name: str, seconds: float, packets: NextPacket | None, period: float | None = None
    ) -> Phase:
        phase = Phase(name)
        time.sleep(0.1)
        self.keys.drain()  # values from before the phase
        phase.start = self.keys.snapshot()
        t0 = time.monotonic()
        t0_us = _mono_us()
        phase.rss.append((0.0, rss_mib(self.sim)))
        sender = None
        if packets is not None:
            sender = Sender(self.client, packets, period=period, name=name).start()
            phase.sent = sender.sent
        self._watch(phase, t0 + seconds, t0, done=(lambda: not sender.alive()) if sender else None)
        if sender is not None and not sender.close(30):
            check(self.sim)
            raise RuntimeError(f"{name}: the sender is stuck (the robot stopped reading)")
        phase.seconds = time.monotonic() - t0
        if phase.sent.error is not None:
            check(self.sim)
            raise RuntimeError(f"{name}: sending failed: {phase.sent.error}")
        self._settle_rx(phase)
        phase.note(self.keys.drain())
        phase.end = self.keys.snapshot()
        phase.note(phase.end)  # NT sends changes only: a window maximum may have held all phase
        t1_us = _mono_us()
        phase.t0_us = t0_us
        phase.overruns_at = [t for t in self.keys.overruns_at if t0_us <= t < t1_us]
        phase.stalls = self.probe.between(t0_us - STALL_MATCH_US[0], t1_us)
        phase.rss.append((time.monotonic() - t0, rss_mib(self.sim)))
        return phase

    def settle(self, seconds: float) -> None:
        """A stop, then idle (keepalives only)."""
        self.client.stop()
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            check(self.sim)
            self.keys.drain()
            time.sleep(0.1)


# -- report ------------------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:,.{digits}f}"


def report(phase: Phase, soak: bool = False) -> None:
    secs = max(phase.seconds, 1e-9)
    sent = phase.sent
    rss0, rss1 = phase.rss[0][1], phase.rss[-1][1]
    print(f"[{phase.name}] {phase.seconds:.1f} s")
    print(
        f"  host sent        {sent.packets:,} packets, {sent.messages:,} messages "
        f"({sent.packets / secs:,.0f} packets/s, {sent.messages / secs:,.0f} messages/s)"
    )
    print(
        f"  robot received   {phase.delta('MessagesRx'):,.0f} messages; queue overflows "
        f"+{phase.delta('QueueOverflows'):,.0f}, skipped +{phase.delta('MessagesSkipped'):,.0f}"
    )
    print(f"  overruns         +{phase.delta('Overruns'):,.0f} (total {phase.end['Overruns']:,.0f})")
    stalls = [st for st in phase.stalls if st.late_ms > 5]  # enough to make a tick late
    still = sum(st.late_ms - st.cpu_wait_ms > st.late_ms / 2 for st in stalls)
    longest = max((st.late_ms for st in stalls), default=0.0)
    elsewhere = [at for at in phase.overruns_at if not phase.at_stall(at)]
    print(
        f"  machine stalls   {len(stalls)} over 5 ms ({still} mostly not waiting for a CPU), "
        f"longest {longest:.1f} ms; overruns at a stall {len(phase.overruns_at) - len(elsewhere)}, "
        f"elsewhere {len(elsewhere)}"
    )
    for at in elsewhere:
        near = min(phase.stalls, key=lambda st: abs(at - st.end_us), default=None)
        what = (
            "no probe stall"
            if near is None
            else (
                f"the nearest probe stall ({near.late_ms:.1f} ms late) ended "
                f"{abs(at - near.end_us) / 1000:,.0f} ms "
                f"{'before' if at >= near.end_us else 'after'} it arrived"
            )
        )
        print(f"    overrun elsewhere at +{(at - phase.t0_us) / 1e6:.1f} s: {what}")
    print(
        f"  robotPeriodic    p99 {_fmt(phase.worst.get('LoopP99Ms'), 3)} ms, "
        f"max {_fmt(phase.worst.get('LoopMaxMs'), 3)} ms (worst 10 s window); "
        f"p99 at end {_fmt(phase.end['LoopP99Ms'], 3)} ms"
    )
    print(f"  loop period      max {_fmt(phase.worst.get('LoopPeriodMaxMs'), 3)} ms")
    short = " - a short phase: may include the previous one's" if phase.seconds < 10 else ""
    latency = _fmt(phase.end["CmdLatencyP99Ms"], 1)
    print(f"  command latency  p99 {latency} ms at the end (last 500 packets reached){short}")
    print(f"  sim RSS          {rss0:.1f} -> {rss1:.1f} MiB ({rss1 - rss0:+.1f} MiB)")
    if soak and len(phase.rss) >= 3:
        xs = [t for t, _ in phase.rss]
        ys = [m for _, m in phase.rss]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
        print(
            f"  RSS samples      {len(ys)}, min {min(ys):.1f}, max {max(ys):.1f} MiB, "
            f"trend {slope * 60:+.3f} MiB/min (least squares)"
        )
        marks, minute = [], 0.0
        for t, mib in phase.rss:
            if t >= minute:  # the first sample of each minute
                marks.append(f"{t:.0f}s {mib:.1f}")
                minute = (t // 60 + 1) * 60
        print(f"  RSS by minute    {', '.join(marks)}, end {ys[-1]:.1f}")
    sys.stdout.flush()


def _load() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "n/a"


# -- main --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flood-seconds", type=float, default=60.0)
    parser.add_argument("--big-seconds", type=float, default=60.0)
    parser.add_argument("--soak-seconds", type=float, default=600.0, help="0 skips the soak")
    parser.add_argument("--settle-seconds", type=float, default=10.0, help="idle before each phase")
    parser.add_argument("--rss-every", type=float, default=5.0, help="seconds between RSS samples")
    parser.add_argument("--bcnp-port", type=int, default=0, help="the sim's BCNP port (0: a free one)")
    args = parser.parse_args(argv)

    port = args.bcnp_port or free_port()
    print(
        f"bcnp loop timing: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {_load()} (a shared machine: other work may run concurrently)"
    )
    print(
        f"phases: idle {args.settle_seconds:g} s, flood {args.flood_seconds:g} s, "
        f"big {args.big_seconds:g} s, soak {args.soak_seconds:g} s; settle {args.settle_seconds:g} s "
        f"between; BCNP TCP port {port}"
    )
    sys.stdout.flush()

    with tempfile.TemporaryDirectory(prefix="bcnp-loop-timing-") as folder:
        probe = StallProbe()
        sim = SimRobot(Path(folder), port)
        keys: Keys | None = None
        client: Client | None = None
        status = 0
        try:
            sim.start()
            keys = Keys(sim.nt_port)
            deadline = time.monotonic() + 60
            while keys.hash.get() == "":
                check(sim)
                if time.monotonic() > deadline:
                    raise RuntimeError("the sim published no Network/SchemaHash within 60 s")
                time.sleep(0.1)
            print(f"sim pid {sim.pid} up; schema {keys.hash.get()}")
            while True:
                check(sim)
                try:
                    client = Client(SCHEMA, "127.0.0.1", port, timeout=5.0).connect()
                    break
                except LinkError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            bench = Bench(sim, keys, client, args.rss_every, probe)
            report(bench.run("idle", args.settle_seconds, None))
            plan: list[tuple[str, float, NextPacket, float | None]] = [
                (
                    "flood: 1 x 20 ms DriveCmd per packet, full rate",
                    args.flood_seconds,
                    flood_packets(),
                    None,
                ),
                ("big: 65,535 DriveCmds per packet, full rate", args.big_seconds, big_packets(), None),
            ]
            if args.soak_seconds > 0:
                plan.append(
                    (
                        "soak: 50 packets/s of 10 x 20 ms, CLEAR_QUEUE",
                        args.soak_seconds,
                        replanning(),
                        PERIOD_S,
                    )
                )
            for name, seconds, packets, period in plan:
                bench.settle(args.settle_seconds)
                report(bench.run(name, seconds, packets, period), soak=period is not None)
            check(sim)
            print(f"sim alive at the end; load average {_load()}")
        except SimDied as exc:
            print(f"error: {exc}; its output ends:\n{sim.output(30)}", file=sys.stderr)
            status = 1
        except (RuntimeError, LinkError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
        finally:
            if client is not None:
                with contextlib.suppress(LinkError, OSError):
                    client.stop()
                client.close()
            if keys is not None:
                keys.close()
            sim.close()
            probe.close()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
