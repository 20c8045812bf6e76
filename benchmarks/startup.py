"""Start-up time and resident memory of the robot, against an empty TimedRobot started the same way.

    python -m benchmarks.startup [--repeat N] [--idle-seconds S] [--live-minutes M]
                                 [--rss-every S] [--wiring kitbot|sparkmax|talonfx] [--json PATH]
    python -m benchmarks.startup --importtime robot|empty [--top N]   # what its imports cost

Each robot is started by the benchmarks' launcher (:class:`benchmarks.harness.sim.SimRobot`)
as ``python run.py sim --nogui`` starts it: ``python -m robotpy --main DIR/robot.py sim
--nogui`` in ``DIR/.sim``, ``BCNP_SIM_AUTONOMOUS=1`` (BCNP and NetworkTables on free ports
of its own, its data log in a temporary folder). The empty robot is a ``TimedRobot``
subclass with an empty ``robotPeriodic`` in a ``robot.py`` of its own in a temporary
folder (no ``physics.py``: its NetworkTables server stays on 5810). One difference from
``python -m robotpy``: the command is ``python -c BOOT`` (``SimRobot(first_tick=True)``),
where BOOT registers a HAL simulation callback that runs at the end of every loop
(``registerSimPeriodicAfterCallback``, importing ``hal`` a little earlier than the robot
would) and writes the monotonic clock to a pipe the first time, then runs ``robotpy`` as
``-m`` would, every installed robotpy command loaded (``robotpy_command=None``). The first
tick is over when that line arrives; the start is taken just before the process is
spawned, on the same clock.

In one run:

1. start-up: after one start of each that is not timed (it fills the bytecode cache,
   a folder of the run's own: ``PYTHONPYCACHEPREFIX``, ``PYTHONDONTWRITEBYTECODE``
   unset), the robot and the empty robot, alternating, ``--repeat`` times each
   (default 5), each stopped after its first tick: time to the first tick, median
   and range, and the ratio of the medians;
2. memory: the robot again, its ``VmRSS`` (``/proc/PID/status``) every ``--rss-every``
   seconds: after ``--idle-seconds`` (default 60) with no host, then a host (a
   ``bcnp.host.link.client.Client`` over TCP and the harness's periodic sender: every 20 ms a
   CLEAR_QUEUE packet of the next ten 20 ms DriveCmds, keepalives on, telemetry back) for ``--live-minutes``
   (default 10): what the first minute of it added (the host connects, the link's
   windows and buffers fill: the second minute's mean less the first sample), then the
   growth after it (the last minute's mean less the second minute's), the slope
   fitted to the samples after the first minute and their scatter around it (the
   noise);
3. the empty robot's ``VmRSS`` after the same ``--idle-seconds``.

One simulator at a time, each on ports of its own; the run says so when another process
holds NetworkTables' port 5810 (the empty robot then runs without an NT server). Timing on
a shared machine varies: the fastest start of each and their CPU time (all threads,
``/proc/PID/task/*/schedstat``, read at the first tick) are printed beside the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT
from benchmarks.harness.sim import SimRobot, wirings
from benchmarks.report import add_json_argument, write_json

#: Where ``robotpy sim`` serves NetworkTables when nothing moves it (the empty robot).
NT_PORT = 5810

EMPTY_ROBOT = '''\
"""An empty TimedRobot: what any RobotPy robot pays to start and to run."""

import wpilib


class EmptyRobot(wpilib.TimedRobot):
    def robotPeriodic(self) -> None:
        pass
'''


def _nt_taken() -> bool:
    """Another process holds NetworkTables' port: the empty robot then runs without an NT
    server (it logs the error and goes on). Said, not refused."""
    with socket.socket() as s:
        s.settimeout(0.5)
        taken = s.connect_ex(("127.0.0.1", NT_PORT)) == 0
    if taken:
        print(f"  note: port {NT_PORT} is taken by another process (another simulator?)", flush=True)
    return taken


class Runs:
    """The robots of one run: each in a log folder of its own under ``tmp``, their output kept
    in start order (``--keep-log``)."""

    def __init__(self, tmp: Path, wiring: str) -> None:
        self.tmp, self.wiring = tmp, wiring
        self.outputs: list[Path] = []

    @contextlib.contextmanager
    def robot(self, program: Path, flags: tuple[str, ...] = ()) -> Iterator[SimRobot]:
        """``program`` started (not waited for), stopped at the end (and waited for)."""
        robot = SimRobot(
            Path(tempfile.mkdtemp(prefix="logs-", dir=self.tmp)),
            drivetrain=self.wiring,
            program=program,
            python_flags=flags,
            first_tick=True,
            robotpy_command=None,  # every installed robotpy command loaded, as `robotpy sim` does
            # Bytecode cached, as on a second start anywhere (robotpy deploy compiles the code
            # on the roboRIO): in a folder of the run's own, so neither the checkout nor
            # site-packages is written to. A warm-up start of each robot fills it first.
            env={"PYTHONDONTWRITEBYTECODE": None, "PYTHONPYCACHEPREFIX": str(self.tmp / "pycache")},
        )
        try:
            robot.start(ready=False)
            path = robot.output_path()
            if path is not None:
                self.outputs.append(path)
            yield robot
        finally:
            robot.close()

    def log(self) -> bytes:
        """Every robot's output, in start order."""
        return b"".join(path.read_bytes() for path in self.outputs if path.exists())


def _rss_mib(robot: SimRobot) -> float:
    return robot.rss_bytes() / 2**20


class Host:
    """A live host: a Client over TCP (keepalives on, telemetry counted) and the harness's
    periodic sender, every 20 ms the next 10 x 20 ms of DriveCmds with CLEAR_QUEUE."""

    def __init__(self, port: int) -> None:
        from bcnp.host.link.client import ReconnectPolicy
        from benchmarks.harness.rig import Rig
        from benchmarks.harness.sender import PERIOD_S, Sender, replanning

        self.telemetry = 0
        self.rig = Rig(port, proxied=False)
        client = self.rig.connect(
            keepalive_interval=0.05,
            on_telemetry=self._on_telemetry,
            reconnect=ReconnectPolicy(give_up_after=60),
        )
        self.sender = Sender(client, replanning(), period=PERIOD_S, keep_going=True, name="startup-host")

    def _on_telemetry(self, packet: Any) -> None:
        self.telemetry += 1

    def __enter__(self) -> Host:
        self.sender.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sender.close(5)
        self.rig.close()
        if self.sender.sent.error is not None and exc[0] is None:
            raise RuntimeError(f"the host failed: {self.sender.sent.error!r}")


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _fit(samples: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope (per minute) and the residuals' standard deviation."""
    if len(samples) < 3:
        return math.nan, math.nan
    xs = [t / 60 for t, _ in samples]
    ys = [r for _, r in samples]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    residuals = [y - (my + slope * (x - mx)) for x, y in zip(xs, ys, strict=True)]
    return slope, statistics.pstdev(residuals)


#: The live phase's first minute: the host connects, the link's windows and buffers fill.
#: Growth and slope are taken after it.
WARMUP_S = 60.0


def _minute_mean(samples: list[tuple[float, float]], end: float) -> float:
    """Mean RSS of the samples in the minute that ends at ``end`` (seconds)."""
    return statistics.fmean(r for t, r in samples if end - 60.0 <= t <= end)


def _sample_until(
    robot: SimRobot, until: float, every: float, into: list[tuple[float, float]], t0: float
) -> None:
    """VmRSS every ``every`` seconds (monotonic ``t0`` is time 0) until ``until``."""
    next_sample = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= until:
            return
        if not robot.alive():
            raise RuntimeError(f"the robot exited ({robot.returncode()})")
        if now >= next_sample:
            into.append((now - t0, _rss_mib(robot)))
            next_sample += every
        time.sleep(max(0.0, min(until, next_sample) - time.monotonic()))


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"python": sys.version.split()[0], "wiring": args.wiring}
    with tempfile.TemporaryDirectory(prefix="bcnp-startup-") as tmpname:
        tmp = Path(tmpname)
        empty = tmp / "empty"
        empty.mkdir()
        (empty / "robot.py").write_text(EMPTY_ROBOT)
        runs = Runs(tmp, args.wiring)
        projects = {"robot": ROOT / "robot.py", "empty": empty / "robot.py"}
        firsts: dict[str, list[float]] = {"robot": [], "empty": []}
        cpus: dict[str, list[float]] = {"robot": [], "empty": []}
        results["nt_port_taken_at_start"] = _nt_taken()
        try:
            for name in ("robot", "empty"):  # warm-up: the bytecode cache filled, not timed
                with runs.robot(projects[name]) as robot:
                    robot.wait_first_tick()
            for n in range(args.repeat):
                for name in ("robot", "empty") if n % 2 == 0 else ("empty", "robot"):
                    with runs.robot(projects[name]) as robot:
                        firsts[name].append(robot.wait_first_tick())
                        cpus[name].append(robot.first_tick_cpu_s or math.nan)
                    print(
                        f"  start {n + 1} {name}: first tick after {firsts[name][-1]:.3f} s "
                        f"({cpus[name][-1]:.3f} s CPU)",
                        flush=True,
                    )
            results["first_tick_s"] = {name: _spread(v) for name, v in firsts.items()}
            results["first_tick_cpu_s"] = {name: _spread(v) for name, v in cpus.items()}
            for key in ("median", "min"):
                results[f"first_tick_ratio_{key}"] = (
                    results["first_tick_s"]["robot"][key] / results["first_tick_s"]["empty"][key]
                )
            results["first_tick_cpu_ratio_median"] = (
                results["first_tick_cpu_s"]["robot"]["median"]
                / results["first_tick_cpu_s"]["empty"]["median"]
            )

            for name in ("robot", "empty"):
                with runs.robot(projects[name]) as robot:
                    first = robot.wait_first_tick()
                    t0 = time.monotonic()
                    idle: list[tuple[float, float]] = []
                    _sample_until(robot, t0 + args.idle_seconds, args.rss_every, idle, t0)
                    entry: dict[str, Any] = {
                        "first_tick_s": first,
                        "rss_first_tick_mib": idle[0][1],
                        "rss_idle_mib": _rss_mib(robot),
                        "idle_seconds": args.idle_seconds,
                    }
                    print(
                        f"  {name}: VmRSS {entry['rss_idle_mib']:.1f} MiB after {args.idle_seconds:g} s idle",
                        flush=True,
                    )
                    if name == "robot" and args.live_minutes > 0:
                        live: list[tuple[float, float]] = []
                        with Host(robot.port) as host:
                            start = time.monotonic()
                            _sample_until(robot, start + args.live_minutes * 60, args.rss_every, live, start)
                            live.append((time.monotonic() - start, _rss_mib(robot)))
                        settled = [(t, r) for t, r in live if t >= WARMUP_S]
                        slope, scatter = _fit(settled)
                        entry.update(
                            live_minutes=args.live_minutes,
                            host_packets=host.sender.sent.packets,
                            host_telemetry_packets=host.telemetry,
                            rss_live_start_mib=live[0][1],
                            rss_live_end_mib=live[-1][1],
                            rss_live_max_mib=max(r for _, r in live),
                            warmup_growth_mib=_minute_mean(live, WARMUP_S + 60) - live[0][1],
                            growth_mib=_minute_mean(live, live[-1][0]) - _minute_mean(live, WARMUP_S + 60),
                            slope_mib_per_min=slope,
                            scatter_mib=scatter,
                            samples=[(round(t, 1), round(r, 2)) for t, r in live],
                        )
                        print(
                            f"  robot: {args.live_minutes:g} min live ({host.sender.sent.packets} packets, "
                            f"{host.telemetry} telemetry back): VmRSS {entry['rss_live_start_mib']:.1f} -> "
                            f"{entry['rss_live_end_mib']:.1f} MiB, after the first minute "
                            f"{entry['growth_mib']:+.2f} MiB",
                            flush=True,
                        )
                    results[name] = entry
        finally:
            if args.keep_log:
                args.keep_log.write_bytes(runs.log())
    return results


def importtime(args: argparse.Namespace) -> int:
    """One start under ``-X importtime``, up to its first tick: the costliest imports."""
    with tempfile.TemporaryDirectory(prefix="bcnp-startup-") as tmpname:
        tmp = Path(tmpname)
        program = ROOT / "robot.py"
        if args.importtime == "empty":
            program = tmp / "empty" / "robot.py"
            program.parent.mkdir()
            program.write_text(EMPTY_ROBOT)
        runs = Runs(tmp, args.wiring)
        with runs.robot(program) as robot:
            robot.wait_first_tick()  # the bytecode cache filled, as for the timed starts
        with runs.robot(program, ("-X", "importtime")) as robot:
            first = robot.wait_first_tick()
        rows = []
        for line in runs.outputs[-1].read_text(errors="replace").splitlines():
            if line.startswith("import time:") and "|" in line and "self [us]" not in line:
                self_us, cumulative_us, name = (
                    part.strip() for part in line[len("import time:") :].split("|")
                )
                rows.append((int(cumulative_us), int(self_us), name))
    print(f"first tick after {first:.3f} s (under -X importtime); imports by cumulative time:")
    total = sum(s for _, s, _ in rows)
    print(f"  all imports, self time summed: {total / 1e6:.3f} s")
    for cumulative, self_us, name in sorted(rows, reverse=True)[: args.top]:
        print(f"  {cumulative / 1e3:9.1f} ms  (self {self_us / 1e3:7.1f})  {name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="starts of each robot (default 5)")
    parser.add_argument(
        "--idle-seconds", type=float, default=60.0, help="idle before the RSS reading (default 60)"
    )
    parser.add_argument(
        "--live-minutes", type=float, default=10.0, help="minutes with a live host (default 10)"
    )
    parser.add_argument(
        "--rss-every", type=float, default=5.0, help="seconds between RSS samples (default 5)"
    )
    parser.add_argument("--wiring", choices=wirings(), default="kitbot")
    parser.add_argument("--keep-log", type=Path, metavar="FILE", help="keep the simulators' output here")
    parser.add_argument(
        "--importtime",
        choices=("robot", "empty"),
        help="instead: one start of that robot under -X importtime, its costliest imports",
    )
    parser.add_argument("--top", type=int, default=40, help="imports listed by --importtime (default 40)")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.importtime:
        return importtime(args)
    results = run(args)
    first, cpu = results["first_tick_s"], results["first_tick_cpu_s"]
    print(f"Python {results['python']}, {args.wiring} wiring")
    for name in ("robot", "empty"):
        f, c = first[name], cpu[name]
        print(
            f"  {name:6s} first tick after {f['median']:.3f} s (median of {args.repeat}; "
            f"{f['min']:.3f}-{f['max']:.3f}; CPU {c['median']:.3f} s); VmRSS "
            f"{results[name]['rss_idle_mib']:.1f} MiB after {args.idle_seconds:g} s idle"
        )
    print(
        f"  start-up ratio robot / empty: {results['first_tick_ratio_median']:.2f} (medians), "
        f"{results['first_tick_ratio_min']:.2f} (fastest), CPU {results['first_tick_cpu_ratio_median']:.2f}"
    )
    robot = results["robot"]
    if "growth_mib" in robot:
        print(
            f"  live {robot['live_minutes']:g} min: VmRSS {robot['rss_live_start_mib']:.1f} -> "
            f"{robot['rss_live_end_mib']:.1f} MiB (max {robot['rss_live_max_mib']:.1f}); first minute "
            f"{robot['warmup_growth_mib']:+.2f} MiB, then {robot['growth_mib']:+.2f} MiB (last minute's mean "
            f"less the second's); slope after the first minute {robot['slope_mib_per_min']:+.3f} MiB/min, "
            f"scatter {robot['scatter_mib']:.2f} MiB"
        )
    write_json(results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
