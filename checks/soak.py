"""Random link faults for N minutes against the headless sim, with a host replaying all along.

    python -m checks.soak --minutes N [--seed S] [--path FILE] [--transport both|tcp|udp]
                          [--loss P] [--rss-every S] [--log-dir DIR] [--json PATH]

The real robot program runs headless (``benchmarks.harness.sim.SimRobot``) behind a
:class:`bcnp.host.proxy.fault_proxy.Proxy` with the harness's field profile
(``benchmarks.harness.rig.FIELD``:
5 ms ± 3 ms, 7 Mbit/s, 1 % UDP loss; ``--loss`` changes the loss). A host
thread replays a path (default ``paths/figure8.csv``) through the proxy in a
loop: each loop a new
:class:`~bcnp.host.link.client.Client` and :class:`~bcnp.host.sessions.replay.Replay`, over
TCP and UDP in turn (``--transport both``), which ride through every lost link
on their own (``ReconnectPolicy(give_up_after=60)``); only when a path ends
does the host start the next one. Meanwhile the main thread injects one fault
at a time, seeded, after a quiet spell of 2 to 8 s with the link up:

* drop: a partition of 0.1 to 5 s;
* reset: every connection aborted, the UDP clients forgotten;
* restart: the robot SIGKILLed and started again (same port, a new ``.wpilog``;
  only a robot that has run 10 s, so that its log can be placed in time);
* spike: 20 to 120 ms of latency (± 10 %) for 2 to 6 s, then the profile again
  (:data:`SPIKE_LATENCY_S` says why no more).

Checks (exit status 1 when one fails):

* late: no command the robot started (every ``.wpilog`` of every robot
  process) more than the 200 ms link timeout after the host's plan, no start
  that matches no plan, and none more than 200 ms before its plan (commands
  carry tags: ``benchmarks.harness.judge.tag_paths``; even and odd loops use different
  tags). Over UDP a lost datagram of commands makes the robot run the
  commands after it early: it chains the next command it receives to the end
  of the last one it ran (or starts it on arrival), so the rest of the path
  moves earlier by what was lost, by no more than the replay's lead (0.15 s
  over UDP: ``bcnp.host.sessions.replay.UDP_LEAD_S``);
* no crash: the robot process only dies when the soak kills it; the host's
  replay raises nothing but the expected (a path that ends while the link is
  down), never gives up, and no client callback fails;
* every outage (the host's link going from up to down, as its
  ``on_link_change`` reports it) ends with a reconnect (the link up again, in
  that client or in the next loop's), and every fault that must cut the link
  (a reset, a restart, a drop of 0.3 s or more: beyond the robot's 200 ms link
  timeout) did cut it, or found the host between connections or ending its path,
  and was followed by the link up again within 15 s of its end (a restart: of the
  robot answering);
* robot memory: ``VmRSS`` sampled every ``--rss-every`` s; the slope over the
  longest process life after its first minute must stay under
  :data:`RSS_SLOPE_LIMIT_MIB_PER_MIN`.

Reported: counts of each fault and of those that cut the link, outages and
reconnects, total outage time (host's view: the robot last heard to the link
up again), commands dropped by the replays and left unsent by paths that ended
with the link down, RSS per life (first, last, max) and the slopes. Outages that
no fault explains are reported, not failed. Every event is written to
``soak-events.txt`` in the log folder (kept; default a new folder under /tmp),
with the robot's logs and output, for a failure to be looked into.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from bcnp.defaults import LINK_TIMEOUT_S
from bcnp.host.link.client import Client, LinkClosedError, LinkError, LinkStatus, ReconnectPolicy
from bcnp.host.proxy.core.faults import Faults
from bcnp.host.proxy.fault_proxy import Proxy
from bcnp.host.sessions.core.session import LinkWatch
from bcnp.host.sessions.replay import Replay
from bcnp.paths import PathCommand, load_path
from benchmarks.harness import ROOT
from benchmarks.harness.judge import Plan, early, judge, late, spread, tag_paths, unknown
from benchmarks.harness.rig import FIELD, Rig
from benchmarks.harness.robotlog import LOG_WRITE_S, read_command_starts
from benchmarks.harness.sim import SimRobot
from benchmarks.report import add_json_argument, write_json

PATH = ROOT / "paths" / "figure8.csv"

#: The host keeps reconnecting for this long before it gives up (a failure).
GIVE_UP_S = 60.0
POLICY = ReconnectPolicy(give_up_after=GIVE_UP_S)
#: How often each fault is picked.
FAULT_WEIGHTS = {"drop": 0.4, "reset": 0.22, "spike": 0.28, "restart": 0.1}
DROP_S = (0.1, 5.0)
#: Latency spikes stay below the link timeout with a tick (20 ms) and a margin to spare: under a
#: one-way latency L, a batch sent after a reconnect starts L after the host's plan (the robot
#: starts a batch when it arrives and knows nothing of the host's clock), so a spike beyond the
#: link timeout would make commands late by definition, whatever the robot does.
SPIKE_LATENCY_S = (0.02, 0.12)
SPIKE_S = (2.0, 6.0)
#: Link up and no fault for this long (uniform) before the next fault.
QUIET_S = (2.0, 8.0)
#: A robot is restarted only once it has run this long (its log's first clock anchor comes at 5 s).
MIN_LIFE_S = 10.0
#: Drops at least this long must cut the link (the robot's link timeout, with a keepalive's margin).
CUTTING_DROP_S = LINK_TIMEOUT_S + 0.1
#: After a fault ends, the host's link must be up again within this.
RECONNECT_WITHIN_S = 15.0
#: A link loss the host notices up to this long after a fault ended is the fault's
#: (its silence timeout is 0.5 s; a TCP close held by a drop arrives when it ends).
ATTRIBUTE_S = 2.0
#: RSS samples of a life's first minute are left out of its slope (imports, caches, warm-up).
RSS_WARMUP_S = 60.0
#: The longest life's RSS slope after warm-up must stay under this.
RSS_SLOPE_LIMIT_MIB_PER_MIN = 0.5
MIB = 1 << 20


@dataclass
class FaultRecord:
    kind: str
    start: float  # wall seconds
    end: float  # wall: the drop healed, the spike over, the restarted robot answering
    detail: str
    seconds: float = 0.0  # drop or spike length
    host_linked: bool = True  # whether the host had a link when the fault began
    path_ended: bool = False  # the host's path ended (its client closed) before it could notice
    cut: bool = False  # a link loss the host noticed during the fault or just after
    back_after_s: float | None = None  # end to the host's link up again

    @property
    def must_cut(self) -> bool:
        return self.kind in ("reset", "restart") or (self.kind == "drop" and self.seconds >= CUTTING_DROP_S)


@dataclass
class LinkEvent:
    wall: float
    kind: str  # "down" (a loss the host noticed) or "up" (a reconnect, or a loop's first connect)
    loop: int
    transport: str
    last_heard: float  # down: when the robot was last heard (wall); up: = wall
    reason: str = ""


@dataclass
class Life:
    """One robot process."""

    started: float
    ended: float | None = None
    killed: bool = False  # by the soak
    crashed: bool = False  # died on its own
    rss: list[tuple[float, int]] = field(default_factory=list)

    def length(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started


@dataclass
class LoopRun:
    index: int
    transport: str
    variant: int
    start_wall: float = 0.0  # the replay's first send
    end_wall: float = 0.0
    connect_wait_s: float = 0.0  # before the first connect succeeded
    outcome: str = ""  # "completed", "ended down" (expected), "gave up", "error"
    error: str = ""
    outages: int = 0
    dropped: int = 0
    unsent: int = 0  # left when the path ended with the link down
    reconnects: int = 0
    callback_errors: int = 0


class Soak:
    """Everything the threads share; ``lock`` guards the lists."""

    def __init__(self, log_dir: Path, events: TextIO) -> None:
        self.log_dir = log_dir
        self.lock = threading.Lock()
        self.events_file = events
        self.t0 = time.time()
        self.faults: list[FaultRecord] = []
        self.links: list[LinkEvent] = []
        self.lives: list[Life] = []
        self.loops: list[LoopRun] = []
        self.plans: list[Plan] = []
        self.failures: list[str] = []
        self.stopping = threading.Event()
        self.crashed = threading.Event()
        self.restarting = False
        self.client: Client | None = None

    def note(self, message: str, echo: bool = False) -> None:
        line = f"{time.time() - self.t0:9.3f} s  {message}"
        with self.lock:
            self.events_file.write(line + "\n")
            self.events_file.flush()
        if echo:
            print(line, file=sys.stderr, flush=True)

    def fail(self, message: str) -> None:
        with self.lock:
            self.failures.append(message)
        self.note(f"FAIL: {message}", echo=True)

    def host_linked(self) -> bool:
        client = self.client
        return client is not None and client.connected


# -- the host ---------------------------------------------------------------------------------------


class _LinkEvents:
    """A client's ``on_link_change``: records each loss (dated when the robot was last heard,
    by the sessions' own :class:`~bcnp.host.sessions.core.session.LinkWatch`) and each reconnect."""

    def __init__(self, soak: Soak, loop: int, transport: str) -> None:
        self.soak, self.loop, self.transport = soak, loop, transport
        self.watch = LinkWatch(generation=1)  # the first connect is not an outage
        self.closing = False

    def __call__(self, status: LinkStatus) -> None:
        now, mono = time.time(), time.monotonic()
        soak = self.soak
        if self.closing:
            return
        went, back = self.watch.observe(status, mono, now)
        if went is not None:
            with soak.lock:
                soak.links.append(
                    LinkEvent(now, "down", self.loop, self.transport, went.lost_at, went.reason)
                )
            soak.note(f"host: link lost ({self.transport}, loop {self.loop}): {went.reason}")
        if back is not None:
            with soak.lock:
                soak.links.append(LinkEvent(now, "up", self.loop, self.transport, now))
            soak.note(f"host: link back ({self.transport}, loop {self.loop})")


def host_loop(soak: Soak, rig: Rig, variants: list[list[PathCommand]], transports: Sequence[str]) -> None:
    """Replays the path until the soak stops, a new client each loop; never raises."""
    k = 0
    while not soak.stopping.is_set():
        transport = transports[k % len(transports)]
        variant = k % len(variants)
        run = LoopRun(k, transport, variant)
        watch = _LinkEvents(soak, k, transport)
        client: Client | None = None
        waited = time.time()
        try:
            client = rig.connect(
                transport == "udp", within=GIVE_UP_S, pause=0.2, reconnect=POLICY, on_link_change=watch
            )
            now = time.time()
            run.connect_wait_s = now - waited
            with soak.lock:
                soak.links.append(LinkEvent(now, "up", k, transport, now, "loop start"))
            soak.client = client
            soak.note(f"host: loop {k} over {transport}, connected after {run.connect_wait_s:.2f} s")
            replay = Replay(client, variants[variant], clock=time.time)
            try:
                replay.run()
                run.outcome = "completed"
            except LinkClosedError as exc:
                if client.closed_reason is None:  # the path ended with the link down: expected
                    run.outcome = "ended down"
                    open_outage = next((o for o in reversed(replay.outages) if o.back_at is None), None)
                    if open_outage is not None:
                        went = max(replay.schedule.index_at(open_outage.lost_at), 0)
                        run.unsent = max(0, len(replay.schedule) - went)
                else:
                    run.outcome = "gave up"
                    run.error = str(exc)
            finally:
                watch.closing = True
                soak.client = None
                if replay.start is not None:
                    run.start_wall = replay.start
                    with soak.lock:
                        soak.plans.append(Plan.tagged(replay.start, variants[variant]))
            run.outages = len(replay.outages)
            run.dropped = replay.dropped
            run.reconnects = client.status().generation - 1
        except Exception as exc:  # a host crash: recorded, and the soak goes on
            run.outcome = "gave up" if isinstance(exc, LinkError) else "error"
            run.error = f"{type(exc).__name__}: {exc}"
            if run.outcome == "error":
                soak.note(traceback.format_exc())
        finally:
            watch.closing = True
            soak.client = None
            if client is not None:
                client.close()
                run.callback_errors = client.link.callback_errors
        run.end_wall = time.time()
        with soak.lock:
            soak.loops.append(run)
        if run.outcome not in ("completed", "ended down"):
            soak.fail(f"host loop {k} ({transport}): {run.outcome}: {run.error}")
        if run.callback_errors:
            last = None if client is None else client.link.last_callback_error
            soak.fail(f"host loop {k}: {run.callback_errors} callback error(s): {last!r}")
        soak.note(
            f"host: loop {k} {run.outcome}: {run.outages} outage(s), {run.dropped} dropped, "
            f"{run.unsent} unsent"
        )
        k += 1


# -- the robot's memory and life --------------------------------------------------------------------


def sampler(soak: Soak, robot: SimRobot, every: float) -> None:
    """Samples the robot's RSS; a robot that died while the soak did not kill it is a crash."""
    while not soak.stopping.wait(every):
        with soak.lock:
            if soak.restarting or not soak.lives:
                continue
            life = soak.lives[-1]
        if robot.alive():
            try:
                rss = robot.rss_bytes()
            except (OSError, RuntimeError):
                continue
            with soak.lock:
                life.rss.append((time.time(), rss))
        elif not soak.restarting and not life.crashed and life.ended is None:
            life.crashed = True
            life.ended = time.time()
            soak.fail(f"the robot died on its own (status {robot.returncode()}):\n{robot.output()}")
            soak.crashed.set()


def restart(soak: Soak, robot: SimRobot, kill: bool) -> float:
    """Kill (``kill``) and start the robot again; returns when it answers (wall)."""
    with soak.lock:
        soak.restarting = True
        if soak.lives and soak.lives[-1].ended is None:
            soak.lives[-1].ended = time.time()
            soak.lives[-1].killed = kill
    try:
        robot.kill()
        robot.start(timeout=120.0)
    finally:
        with soak.lock:
            soak.lives.append(Life(time.time()))
            soak.restarting = False
    return time.time()


# -- the faults -------------------------------------------------------------------------------------


def inject(
    soak: Soak, robot: SimRobot, proxy: Proxy, rng: random.Random, deadline: float, baseline: Faults
) -> None:
    """One fault at a time until ``deadline``, each after a quiet spell with the link up."""
    kinds, weights = zip(*FAULT_WEIGHTS.items(), strict=True)

    def wait(seconds: float) -> bool:
        """Sleeps; False when the soak must stop. Restarts a robot that crashed."""
        end = time.time() + seconds
        while time.time() < end:
            if soak.crashed.is_set():
                soak.crashed.clear()
                soak.note("robot: starting again after its crash", echo=True)
                restart(soak, robot, kill=False)
            if time.time() >= deadline:
                return False
            time.sleep(min(0.1, max(0.0, end - time.time())))
        return True

    def wait_linked(limit: float) -> None:
        end = time.time() + limit
        while not soak.host_linked() and time.time() < min(end, deadline):
            wait(0.05)

    while time.time() < deadline:
        wait_linked(GIVE_UP_S)
        if not wait(rng.uniform(*QUIET_S)):
            break
        kind = rng.choices(kinds, weights)[0]
        if kind == "restart":
            with soak.lock:
                age = time.time() - soak.lives[-1].started
            if age < MIN_LIFE_S and not wait(MIN_LIFE_S - age):
                break
        start = time.time()
        linked = soak.host_linked()
        if kind == "drop":
            seconds = rng.uniform(*DROP_S)
            proxy.partition(seconds)
            wait(seconds)
            record = FaultRecord(kind, start, start + seconds, f"{seconds:.2f} s", seconds, linked)
        elif kind == "reset":
            proxy.reset()
            record = FaultRecord(kind, start, start, "", 0.0, linked)
        elif kind == "spike":
            latency, seconds = rng.uniform(*SPIKE_LATENCY_S), rng.uniform(*SPIKE_S)
            proxy.set_faults(
                Faults(
                    latency=latency,
                    jitter=latency / 10,
                    bandwidth=baseline.bandwidth,
                    loss=baseline.loss,
                )
            )
            wait(seconds)
            proxy.set_faults(baseline)
            seconds = time.time() - start  # cut short at the deadline
            detail = f"{latency * 1000:.0f} ms for {seconds:.2f} s"
            record = FaultRecord(kind, start, time.time(), detail, seconds, linked)
        else:
            end = restart(soak, robot, kill=True)
            record = FaultRecord(
                kind, start, end, f"answering after {end - start:.2f} s", end - start, linked
            )
        with soak.lock:
            soak.faults.append(record)
        soak.note(f"fault: {kind} {record.detail}", echo=True)
        wait(ATTRIBUTE_S)


# -- the verdict ------------------------------------------------------------------------------------


def _slope_mib_per_min(samples: Sequence[tuple[float, int]]) -> float | None:
    if len(samples) < 3:
        return None
    ts = [t for t, _ in samples]
    ys = [b / MIB for _, b in samples]
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    den = sum((t - mt) ** 2 for t in ts)
    if den == 0:
        return None
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / den * 60


def analyse(soak: Soak, starts_error: str, starts: Sequence[Any], minutes: float) -> dict[str, Any]:
    """Every figure and check; appends failures to ``soak.failures``."""
    now = time.time()
    faults, links, lives, loops, plans = soak.faults, soak.links, soak.lives, soak.loops, soak.plans
    links.sort(key=lambda e: e.wall)

    # outages: each down and the first up after it
    outages = []
    for i, event in enumerate(links):
        if event.kind != "down":
            continue
        up = next((e for e in links[i + 1 :] if e.kind == "up"), None)
        outages.append((event, up))
    reconnects = sum(1 for _, up in outages if up is not None)
    unended = [d for d, up in outages if up is None]
    for d in unended:
        soak.failures.append(f"an outage from {d.wall - soak.t0:.1f} s never ended with a reconnect")
    outage_time = sum((up.wall if up is not None else now) - d.last_heard for d, up in outages)

    # faults: which cut the link, and when the link was up again
    explained: set[int] = set()
    for f in faults:
        for i, (d, _) in enumerate(outages):
            if f.start - 0.2 <= d.wall <= f.end + ATTRIBUTE_S:
                f.cut = True
                explained.add(i)
        if not f.cut:
            f.path_ended = any(f.start <= r.end_wall <= f.end + ATTRIBUTE_S for r in loops)
        up = next((e for e in links if e.kind == "up" and e.wall >= f.start), None)
        if f.cut or not f.host_linked or f.path_ended:
            f.back_after_s = None if up is None else max(0.0, up.wall - f.end)
        else:
            f.back_after_s = 0.0  # the link held
        at = f"{f.kind} at {f.start - soak.t0:.1f} s ({f.detail})"
        if f.must_cut and f.host_linked and not f.path_ended and not f.cut:
            soak.failures.append(f"{at} did not cut the link")
        if f.back_after_s is None or f.back_after_s > RECONNECT_WITHIN_S:
            soak.failures.append(f"{at}: the link was not up again within {RECONNECT_WITHIN_S:g} s")
    unexplained = [d for i, (d, _) in enumerate(outages) if i not in explained]

    # late commands
    judged = judge(starts, plans)
    late_found = late(judged)
    unknown_found = unknown(judged)
    early_found = early(judged)
    known = spread(judged)
    if starts_error:
        soak.failures.append(f"the robot's logs cannot be read: {starts_error}")
    if late_found:
        worst = max(late_found, key=lambda j: j.lateness)
        soak.failures.append(
            f"{len(late_found)} command(s) started late (worst: command {worst.index} of loop "
            f"{worst.plan}, {worst.lateness * 1000:.0f} ms after its plan)"
        )
    if unknown_found:
        soak.failures.append(f"{len(unknown_found)} started command(s) match no plan")
    if early_found:
        soak.failures.append(
            f"{len(early_found)} command(s) started more than {LINK_TIMEOUT_S:g} s before their plan"
        )
    if not starts and not starts_error:
        soak.failures.append("the robot logged no command start")

    # memory
    life_rows: list[dict[str, Any]] = []
    for n, life in enumerate(lives):
        mib = [b / MIB for _, b in life.rss]
        warm = [(t, b) for t, b in life.rss if t - life.started >= RSS_WARMUP_S]
        life_rows.append(
            {
                "life": n,
                "seconds": round(life.length(now), 1),
                "killed": life.killed,
                "crashed": life.crashed,
                "samples": len(mib),
                "rss_first_mib": round(mib[0], 1) if mib else None,
                "rss_last_mib": round(mib[-1], 1) if mib else None,
                "rss_max_mib": round(max(mib), 1) if mib else None,
                "slope_mib_per_min": _round(_slope_mib_per_min(life.rss), 3),
                "slope_after_warmup_mib_per_min": _round(_slope_mib_per_min(warm), 3),
                "rss_mib": [[round(t - life.started, 1), round(b / MIB, 2)] for t, b in life.rss],
            }
        )
    longest = max(life_rows, key=lambda r: r["seconds"]) if life_rows else None
    if longest is not None:
        slope = longest["slope_after_warmup_mib_per_min"]
        if slope is not None and slope > RSS_SLOPE_LIMIT_MIB_PER_MIN:
            soak.failures.append(
                f"robot RSS grows {slope:.2f} MiB/min over its longest life after warm-up "
                f"(limit {RSS_SLOPE_LIMIT_MIB_PER_MIN:g})"
            )

    counts = {k: sum(1 for f in faults if f.kind == k) for k in FAULT_WEIGHTS}
    cut = {k: sum(1 for f in faults if f.kind == k and f.cut) for k in FAULT_WEIGHTS}
    backs = [f.back_after_s for f in faults if f.cut and f.back_after_s is not None]
    by_outcome = {
        o: sum(1 for r in loops if r.outcome == o) for o in ("completed", "ended down", "gave up", "error")
    }
    return {
        "minutes": minutes,
        "faults": counts,
        "faults_total": len(faults),
        "faults_that_cut_the_link": cut,
        "faults_between_connections": sum(1 for f in faults if not f.host_linked or f.path_ended),
        "outage_list": [
            {
                "lost_s": round(d.wall - soak.t0, 3),
                "last_heard_s": round(d.last_heard - soak.t0, 3),
                "back_s": None if up is None else round(up.wall - soak.t0, 3),
                "transport": d.transport,
                "loop": d.loop,
                "reason": d.reason,
                "explained": i in explained,
            }
            for i, (d, up) in enumerate(outages)
        ],
        "outages": len(outages),
        "reconnects": reconnects,
        "outages_unexplained": len(unexplained),
        "outage_time_s": round(outage_time, 2),
        "link_back_after_fault_s": _spread(backs),
        "loops": len(loops),
        "loops_by_outcome": by_outcome,
        "loops_tcp": sum(1 for r in loops if r.transport == "tcp"),
        "loops_udp": sum(1 for r in loops if r.transport == "udp"),
        "replay_outages": sum(r.outages for r in loops),
        "replay_reconnects": sum(r.reconnects for r in loops),
        "commands_dropped": sum(r.dropped for r in loops),
        "commands_unsent_at_path_end": sum(r.unsent for r in loops),
        "command_starts": len(judged),
        "late": len(late_found),
        "unknown": len(unknown_found),
        "early": len(early_found),
        "worst_start_after_plan_ms": _round(known[1] * 1000 if known else None, 1),
        "earliest_start_after_plan_ms": _round(known[0] * 1000 if known else None, 1),
        "robot_lives": life_rows,
        "robot_crashes": sum(1 for life in lives if life.crashed),
        "longest_life": longest,
        "host_errors": sum(1 for r in loops if r.outcome in ("gave up", "error")),
        "callback_errors": sum(r.callback_errors for r in loops),
        "t0": soak.t0,
        "loop_list": [asdict(r) for r in loops],
        "late_list": [
            {
                "loop": j.plan,
                "command": j.index,
                "late_ms": round(j.lateness * 1000, 1),
                "at_s": round(plans[j.plan].due(j.index, 0) - soak.t0, 2),
            }
            for j in late_found[:200]
        ],
        "fault_list": [
            asdict(f) | {"start": round(f.start - soak.t0, 3), "end": round(f.end - soak.t0, 3)}
            for f in faults
        ],
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 3),
        "p90": round(ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)], 3),
        "max": round(ordered[-1], 3),
    }


def summary(report: dict[str, Any]) -> str:
    f, cut = report["faults"], report["faults_that_cut_the_link"]
    faults = ", ".join(f"{k} {f[k]} ({cut[k]} cut the link)" for k in f)
    loops = report["loops_by_outcome"]
    back = report["link_back_after_fault_s"]
    longest = report["longest_life"] or {}
    lines = [
        f"soak: {report['minutes']:g} min, {report['faults_total']} faults: {faults}",
        f"  outages {report['outages']}, reconnects {report['reconnects']}, unexplained outages "
        f"{report['outages_unexplained']}, outage time {report['outage_time_s']:.1f} s"
        + (
            f"; link up again after a cutting fault's end: median {back['median']:.2f} s, "
            f"max {back['max']:.2f} s"
            if back
            else ""
        ),
        f"  loops {report['loops']} (tcp {report['loops_tcp']}, udp {report['loops_udp']}): "
        f"{loops['completed']} completed, {loops['ended down']} ended with the link down, "
        f"{loops['gave up']} gave up, {loops['error']} errors; replay outages {report['replay_outages']}",
        f"  commands started {report['command_starts']}, late {report['late']}, unknown "
        f"{report['unknown']}, early {report['early']}; starts from "
        f"{report['earliest_start_after_plan_ms']} to {report['worst_start_after_plan_ms']} ms after "
        f"their plan; dropped {report['commands_dropped']}, "
        f"unsent at a path's end {report['commands_unsent_at_path_end']}",
        f"  robot: {len(report['robot_lives'])} lives, {report['robot_crashes']} crashes; longest life "
        f"{longest.get('seconds')} s: RSS first {longest.get('rss_first_mib')} MiB, last "
        f"{longest.get('rss_last_mib')} MiB, max {longest.get('rss_max_mib')} MiB, slope "
        f"{longest.get('slope_mib_per_min')} MiB/min ({longest.get('slope_after_warmup_mib_per_min')} after "
        f"the first {RSS_WARMUP_S:g} s)",
        f"  host errors {report['host_errors']}, callback errors {report['callback_errors']}",
    ]
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Random link faults against the headless sim while a host replays a path.",
    )
    parser.add_argument("--minutes", type=float, default=2.0, help="how long to inject faults (default 2)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the faults and the proxy (default 1)")
    parser.add_argument(
        "--path", type=Path, default=PATH, help="the path to replay (default paths/figure8.csv)"
    )
    parser.add_argument("--transport", choices=("both", "tcp", "udp"), default="both")
    parser.add_argument(
        "--loss",
        type=float,
        default=FIELD.loss,
        metavar="P",
        help=f"share of UDP datagrams the proxy loses, each way (default {FIELD.loss:g}: the field profile)",
    )
    parser.add_argument("--rss-every", type=float, default=5.0, metavar="S", help="RSS sample period (5 s)")
    parser.add_argument("--log-dir", type=Path, help="where the logs go (default: a new folder under /tmp)")
    add_json_argument(parser, "report")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be > 0")
    if not 0 <= args.loss <= 1:
        parser.error("--loss must be from 0 to 1")
    baseline = replace(FIELD, loss=args.loss)

    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="bcnp-soak-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    variants = tag_paths(load_path(args.path), variants=2)
    transports = ("tcp", "udp") if args.transport == "both" else (args.transport,)
    rng = random.Random(args.seed)
    with open(log_dir / "soak-events.txt", "w", encoding="utf-8") as events:
        soak = Soak(log_dir, events)
        soak.note(f"logs in {log_dir}; seed {args.seed}; {args.minutes:g} min", echo=True)
        robot = SimRobot(log_dir)
        threads: list[threading.Thread] = []
        rig = Rig(robot.port, faults=baseline, seed=args.seed, on_event=lambda t, m: soak.note(f"proxy: {m}"))
        proxy = rig.proxy
        assert proxy is not None
        starts: list[Any] = []
        starts_error = ""
        try:
            robot.start(timeout=120.0)
            soak.lives.append(Life(time.time()))
            rig.__enter__()
            threads = [
                threading.Thread(target=sampler, args=(soak, robot, args.rss_every), daemon=True),
                threading.Thread(target=host_loop, args=(soak, rig, variants, transports), daemon=True),
            ]
            for thread in threads:
                thread.start()
            deadline = soak.t0 + args.minutes * 60
            inject(soak, robot, proxy, rng, deadline, baseline)
            soak.note("faults over; the host finishes its path", echo=True)
            proxy.heal()
            proxy.set_faults(baseline)
            soak.stopping.set()
            threads[1].join(GIVE_UP_S * 2 + 30)
            if threads[1].is_alive():
                soak.fail("the host did not finish its last path")
            time.sleep(LOG_WRITE_S)  # the robot writes its log every 0.25 s
            try:
                starts = read_command_starts(log_dir)
            except (OSError, ValueError) as exc:
                starts_error = str(exc)
            if not robot.alive():
                soak.fail("the robot was not running at the end")
        finally:
            soak.stopping.set()
            with soak.lock:
                if soak.lives and soak.lives[-1].ended is None:
                    soak.lives[-1].ended = time.time()
            robot.close()
            rig.close()
        report = analyse(soak, starts_error, starts, args.minutes)
        report["seed"] = args.seed
        report["baseline"] = baseline.describe()
        report["path"] = str(args.path)
        report["log_dir"] = str(log_dir)
        report["failures"] = list(soak.failures)
    print(summary(report))
    print(f"logs: {log_dir}")
    write_json(report, args.json)
    for failure in report["failures"]:
        print(f"FAIL: {failure}")
    print("OK" if not report["failures"] else f"{len(report['failures'])} check(s) failed")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
