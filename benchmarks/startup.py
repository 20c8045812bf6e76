"""Start-up time and resident memory of the robot, against an empty TimedRobot started the same way.

    python -m benchmarks.startup [--repeat N] [--idle-seconds S] [--live-minutes M]
                                 [--rss-every S] [--wiring kitbot|sparkmax] [--json]
    python -m benchmarks.startup --importtime robot|empty [--top N]   # what its imports cost

Each robot is started as ``python run.py sim --nogui`` starts it: ``python -m robotpy
--main DIR/robot.py sim --nogui`` in ``DIR/.sim``, ``BCNP_SIM_AUTONOMOUS=1`` (BCNP on a
free port, its data log in a temporary folder). The empty robot is a ``TimedRobot``
subclass with an empty ``robotPeriodic`` in a ``robot.py`` of its own in a temporary
folder (no ``physics.py``). One difference from ``python -m robotpy``: the command is
``python -c BOOT``, where BOOT registers a HAL simulation callback that runs at the end
of every loop (``registerSimPeriodicAfterCallback``, importing ``hal`` a little earlier
than the robot would) and writes the monotonic clock to a pipe the first time, then
runs ``robotpy`` as ``-m`` would. The first tick is over when that line arrives; the
start is taken just before the process is spawned, on the same clock.

In one run:

1. start-up: after one start of each that is not timed (it fills the bytecode cache,
   a folder of the run's own: ``PYTHONPYCACHEPREFIX``, ``PYTHONDONTWRITEBYTECODE``
   unset), the robot and the empty robot, alternating, ``--repeat`` times each
   (default 5), each stopped after its first tick: time to the first tick, median
   and range, and the ratio of the medians;
2. memory: the robot again, its ``VmRSS`` (``/proc/PID/status``) every ``--rss-every``
   seconds: after ``--idle-seconds`` (default 60) with no host, then a host (a
   ``bcnp.host.client.Client`` over TCP, every 20 ms a CLEAR_QUEUE packet of the
   next ten 20 ms DriveCmds, keepalives on, telemetry back) for ``--live-minutes``
   (default 10): what the first minute of it added (the host connects, the link's
   windows and buffers fill: the second minute's mean less the first sample), then the
   growth after it (the last minute's mean less the second minute's), the slope
   fitted to the samples after the first minute and their scatter around it (the
   noise);
3. the empty robot's ``VmRSS`` after the same ``--idle-seconds``.

One simulator at a time: the run holds ``/tmp/bcnp-sim.lock`` (as
``benchmarks.loop_timing`` under ``flock``) and says so when another process holds
NetworkTables' port 5810 (its robots then run without an NT server, both alike).
Timing on a shared machine varies: the fastest start of each and their CPU time
(all threads, ``/proc/PID/task/*/schedstat``, read at the first tick) are printed
beside the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import math
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
LOCK = Path("/tmp/bcnp-sim.lock")
NT_PORT = 5810
FIRST_TICK_FD_ENV = "BCNP_STARTUP_FD"

#: Runs robotpy as ``python -m robotpy`` does, after registering the first-tick callback.
BOOT = """\
import os, sys, time
import hal.simulation
_fd = int(os.environ.pop("BCNP_STARTUP_FD"))
_ticks = []
def _first_tick():
    if not _ticks:
        _ticks.append(time.monotonic_ns())
        os.write(_fd, b"%d\\n" % _ticks[0])
_callback = hal.simulation.registerSimPeriodicAfterCallback(_first_tick)
import runpy
sys.argv[0] = "robotpy"
runpy.run_module("robotpy", run_name="__main__", alter_sys=True)
"""

EMPTY_ROBOT = '''\
"""An empty TimedRobot: what any RobotPy robot pays to start and to run."""

import wpilib


class EmptyRobot(wpilib.TimedRobot):
    def robotPeriodic(self) -> None:
        pass
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _child_setup() -> None:
    """In the child before exec: SIGINT stops it, and it gets SIGTERM if we die (Linux)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Robot:
    """One simulator process: started, its first tick awaited, its memory read, stopped."""

    def __init__(
        self,
        project: Path,
        log: IO[bytes],
        *,
        bcnp_port: int,
        log_dir: Path,
        wiring: str,
        python_flags: tuple[str, ...] = (),
    ) -> None:
        workdir = project / ".sim"
        workdir.mkdir(exist_ok=True)
        read, write = os.pipe()
        env = dict(
            os.environ,
            BCNP_SIM_AUTONOMOUS="1",
            BCNP_PORT=str(bcnp_port),
            BCNP_LOG_DIR=str(log_dir),
            BCNP_DRIVETRAIN=wiring,
        )
        env[FIRST_TICK_FD_ENV] = str(write)
        # Bytecode cached, as on a second start anywhere (robotpy deploy compiles the code on
        # the roboRIO): in a folder of the run's own, so neither the checkout nor site-packages
        # is written to. A warm-up start of each robot fills it before anything is timed.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(log_dir.parent / "pycache")
        self.bcnp_port = bcnp_port
        self._read = read
        self.started_ns = time.monotonic_ns()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *python_flags,
                "-c",
                BOOT,
                "--main",
                str(project / "robot.py"),
                "sim",
                "--nogui",
            ],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(write,),
            preexec_fn=_child_setup if sys.platform.startswith("linux") else None,
        )
        os.close(write)
        self.first_tick_s: float | None = None
        self.first_tick_cpu_s: float | None = None

    def wait_first_tick(self, timeout: float = 180.0) -> float:
        """Seconds from just before the spawn to the end of the first tick."""
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no first tick within {timeout:g} s")
            ready, _, _ = select.select([self._read], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self._read, 64)
                if not chunk:
                    raise RuntimeError(f"the robot exited before its first tick ({self.proc.poll()})")
                line += chunk
            elif self.proc.poll() is not None:
                raise RuntimeError(f"the robot exited before its first tick ({self.proc.returncode})")
        self.first_tick_s = (int(line) - self.started_ns) / 1e9
        self.first_tick_cpu_s = self.cpu_s()
        return self.first_tick_s

    def cpu_s(self) -> float:
        """CPU time of all the process's threads so far (``/proc/PID/task/*/schedstat``, ns)."""
        total = 0
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(OSError):
                total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._read)
        proc = self.proc
        for sig, wait in ((signal.SIGINT, 15.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if proc.poll() is not None:
                return
            proc.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(wait)


@contextlib.contextmanager
def _sim_lock() -> Iterator[None]:
    """Held while this run's simulators run (``benchmarks.loop_timing`` takes it too)."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _nt_taken() -> bool:
    """Another simulator holds NetworkTables' port: ours then run without an NT server
    (they log the error and go on; both robots alike). Said, not refused."""
    if _listening(NT_PORT):
        print(f"  note: port {NT_PORT} is taken by another process (another simulator?)", flush=True)
        return True
    return False


@contextlib.contextmanager
def _robot(
    project: Path, log: IO[bytes], tmp: Path, wiring: str, flags: tuple[str, ...] = ()
) -> Iterator[Robot]:
    log_dir = Path(tempfile.mkdtemp(prefix="logs-", dir=tmp))
    robot = Robot(project, log, bcnp_port=_free_port(), log_dir=log_dir, wiring=wiring, python_flags=flags)
    try:
        yield robot
    finally:
        robot.stop()  # and waits for it to exit: the next one gets port 5810


class Host:
    """A live host: a Client over TCP, every 20 ms the next 10 x 20 ms of DriveCmds with CLEAR_QUEUE."""

    PERIOD = 0.02
    HORIZON = 10

    def __init__(self, port: int) -> None:
        sys.path.insert(0, str(ROOT))
        from bcnp.host.client import Client, ReconnectPolicy
        from messages import SCHEMA

        self.telemetry = 0
        self.packets = 0
        self.error: BaseException | None = None
        self.client = Client(
            SCHEMA,
            "127.0.0.1",
            port,
            keepalive_interval=0.05,
            on_telemetry=self._on_telemetry,
            reconnect=ReconnectPolicy(give_up_after=60),
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="startup-host", daemon=True)

    def _on_telemetry(self, packet: Any) -> None:
        self.telemetry += 1

    def start(self) -> None:
        self.client.connect()
        self._thread.start()

    def _run(self) -> None:
        from bcnp.host.client import LinkError
        from bcnp.wire import CLEAR_QUEUE, encode_packet
        from messages import DriveCmd

        start = next_send = time.monotonic()
        try:
            while not self._stop.is_set():
                t = next_send - start
                plan = [
                    DriveCmd(vx=1.0, omega=0.8 * math.sin(2 * math.pi * (t + i * 0.02) / 20), durationMs=20)
                    for i in range(self.HORIZON)
                ]
                with contextlib.suppress(LinkError):
                    self.client.send_packets([encode_packet(DriveCmd.spec, plan, CLEAR_QUEUE)])
                    self.packets += 1
                next_send += self.PERIOD
                late = time.monotonic() - next_send
                if late > self.PERIOD:  # behind: skip the missed slots, never burst
                    next_send += self.PERIOD * math.ceil(late / self.PERIOD)
                self._stop.wait(max(0.0, next_send - time.monotonic()))
        except BaseException as exc:  # reported, not raised in a thread
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.close()


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
    robot: Robot, until: float, every: float, into: list[tuple[float, float]], t0: float
) -> None:
    """VmRSS every ``every`` seconds (monotonic ``t0`` is time 0) until ``until``."""
    next_sample = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= until:
            return
        if not robot.alive():
            raise RuntimeError(f"the robot exited ({robot.proc.returncode})")
        if now >= next_sample:
            into.append((now - t0, robot.rss_mib()))
            next_sample += every
        time.sleep(max(0.0, min(until, next_sample) - time.monotonic()))


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"python": sys.version.split()[0], "wiring": args.wiring}
    with tempfile.TemporaryDirectory(prefix="bcnp-startup-") as tmpname, _sim_lock():
        tmp = Path(tmpname)
        empty = tmp / "empty"
        empty.mkdir()
        (empty / "robot.py").write_text(EMPTY_ROBOT)
        log = (tmp / "sim.log").open("ab")
        projects = {"robot": ROOT, "empty": empty}
        firsts: dict[str, list[float]] = {"robot": [], "empty": []}
        cpus: dict[str, list[float]] = {"robot": [], "empty": []}
        results["nt_port_taken_at_start"] = _nt_taken()
        try:
            for name in ("robot", "empty"):  # warm-up: the bytecode cache filled, not timed
                with _robot(projects[name], log, tmp, args.wiring) as robot:
                    robot.wait_first_tick()
            for n in range(args.repeat):
                for name in ("robot", "empty") if n % 2 == 0 else ("empty", "robot"):
                    with _robot(projects[name], log, tmp, args.wiring) as robot:
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
                with _robot(projects[name], log, tmp, args.wiring) as robot:
                    first = robot.wait_first_tick()
                    t0 = time.monotonic()
                    idle: list[tuple[float, float]] = []
                    _sample_until(robot, t0 + args.idle_seconds, args.rss_every, idle, t0)
                    entry: dict[str, Any] = {
                        "first_tick_s": first,
                        "rss_first_tick_mib": idle[0][1],
                        "rss_idle_mib": robot.rss_mib(),
                        "idle_seconds": args.idle_seconds,
                    }
                    print(
                        f"  {name}: VmRSS {entry['rss_idle_mib']:.1f} MiB after {args.idle_seconds:g} s idle",
                        flush=True,
                    )
                    if name == "robot" and args.live_minutes > 0:
                        host = Host(robot.bcnp_port)
                        host.start()
                        live: list[tuple[float, float]] = []
                        start = time.monotonic()
                        _sample_until(robot, start + args.live_minutes * 60, args.rss_every, live, start)
                        live.append((time.monotonic() - start, robot.rss_mib()))
                        host.stop()
                        if host.error is not None:
                            raise RuntimeError(f"the host failed: {host.error!r}")
                        settled = [(t, r) for t, r in live if t >= WARMUP_S]
                        slope, scatter = _fit(settled)
                        entry.update(
                            live_minutes=args.live_minutes,
                            host_packets=host.packets,
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
                            f"  robot: {args.live_minutes:g} min live ({host.packets} packets, "
                            f"{host.telemetry} telemetry back): VmRSS {entry['rss_live_start_mib']:.1f} -> "
                            f"{entry['rss_live_end_mib']:.1f} MiB, after the first minute "
                            f"{entry['growth_mib']:+.2f} MiB",
                            flush=True,
                        )
                    results[name] = entry
        finally:
            log.close()
            if args.keep_log:
                args.keep_log.write_bytes((tmp / "sim.log").read_bytes())
    return results


def importtime(args: argparse.Namespace) -> int:
    """One start under ``-X importtime``, up to its first tick: the costliest imports."""
    with tempfile.TemporaryDirectory(prefix="bcnp-startup-") as tmpname, _sim_lock():
        tmp = Path(tmpname)
        project = ROOT
        if args.importtime == "empty":
            project = tmp / "empty"
            project.mkdir()
            (project / "robot.py").write_text(EMPTY_ROBOT)
        with (tmp / "warm-up.log").open("ab") as log, _robot(project, log, tmp, args.wiring) as robot:
            robot.wait_first_tick()  # the bytecode cache filled, as for the timed starts
        flags = ("-X", "importtime")
        with (tmp / "sim.log").open("ab") as log, _robot(project, log, tmp, args.wiring, flags) as robot:
            first = robot.wait_first_tick()
        rows = []
        for line in (tmp / "sim.log").read_text(errors="replace").splitlines():
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
    parser.add_argument("--wiring", choices=("kitbot", "sparkmax"), default="kitbot")
    parser.add_argument("--keep-log", type=Path, metavar="FILE", help="keep the simulators' output here")
    parser.add_argument(
        "--importtime",
        choices=("robot", "empty"),
        help="instead: one start of that robot under -X importtime, its costliest imports",
    )
    parser.add_argument("--top", type=int, default=40, help="imports listed by --importtime (default 40)")
    parser.add_argument("--json", action="store_true", help="also print one JSON object on the last line")
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
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
