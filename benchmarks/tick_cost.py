"""What one robot tick costs: the real robot program, in-process, on the simulated HAL.

    python -m benchmarks.tick_cost [--ticks N] [--wiring kitbot|sparkmax|talonfx] [--paced] [--json PATH]

The robot (robot.py with physics.py attached, as pyfrc attaches it) runs in
this thread: each tick steps simulated time by 20 ms and runs WPILib's own
loop function (mode transitions, robotPeriodic, the simulation step). No GUI.
By default ticks follow each other as fast as they run: the tick's own cost,
caches warm. ``--paced`` waits the loop period between ticks, as a robot
does: every tick then starts with cold caches, which on a shared virtual
machine costs several times the warm figure (the empty robot's floor shows
how much of that is the machine). The TalonFX wiring's simulator holds each stepped tick to
the wall clock (its devices run CTRE's firmware on it: ``sim/talonfx.py``), so its ticks are
paced whatever ``--paced`` says, beside the firmware's own threads. Scenarios, N ticks each
(default 3,000):

* ``idle``: autonomous, enabled, no host;
* ``live``: autonomous with a host on loopback TCP, in a process of its own
  as a real host is, sending 50 packets per second of simulated time (one
  per tick) of 1 to 10 DriveCmds, the client's keepalives on, telemetry
  flowing back to it; each tick starts once its packet is queued (lock-step:
  simulated time never runs ahead of the host; so a live tick starts after a
  wait, with caches colder than the back-to-back idle and teleop ticks);
* ``teleop``: teleop, enabled, the Xbox controller's sticks moving, link idle.

For each: robotPeriodic's wall time (p50, p99, max, microseconds), the
scenario's wall and thread CPU time, and the same split by part of the tick
(queue update, mode, drivetrain, telemetry, field, recorder, keys, flush, loop timing).
``benchmarks/tick_instructions.py`` counts the same tick in instructions, under
Valgrind, with an in-process host driven by the ticks: figures that do not
depend on the machine.
An empty ``TimedRobot`` subclass's robotPeriodic and whole loop are measured in
the same run as the floor, and so are the WPILib calls any tick makes (time,
mode, watchdog, encoders, gyro, odometry) alone, back to back and paced at
20 ms whatever ``--paced`` says: the share of a paced tick that is the machine.
A human table; ``--json PATH`` also writes the figures as JSON to PATH.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from benchmarks.harness import ROOT
from benchmarks.harness.inprocess import TICK_S, robot_classes, step
from benchmarks.harness.sim import wirings
from benchmarks.report import add_json_argument, write_json

Samples = dict[str, list[int]]  # part -> nanoseconds per tick


def _percentile(values: list[int], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(0, math.ceil(pct / 100 * len(ordered)) - 1)
    return ordered[rank] / 1000


def _timed(samples: Samples, part: str, func: Callable[..., Any]) -> Callable[..., Any]:
    clock = time.perf_counter_ns

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return func(*args, **kwargs)
        finally:
            samples[part].append(clock() - start)

    return wrapper


def _essential_floor(samples: int) -> dict[str, float]:
    """What the WPILib calls every tick needs cost alone (the time, the mode, a watchdog
    feed, four encoder reads, the gyro, odometry: no robot code around them), back to
    back and then with the loop period's wait before each: how much of a paced tick is
    the machine's cold start rather than the robot's code. Spare channels, not the robot's."""
    import wpilib
    from wpimath.geometry import Rotation2d
    from wpimath.kinematics import DifferentialDriveOdometry

    from subsystems.drivetrain.io import MotorWatchdog

    left, right = wpilib.Encoder(4, 5), wpilib.Encoder(6, 7)
    gyro = wpilib.AnalogGyro(1)  # an accumulator channel (0 and 1); the robot has 0
    motors = (wpilib.PWMSparkMax(8), wpilib.PWMSparkMax(9))
    watchdog = MotorWatchdog(motors, "tick_cost floor", 0.1)
    odometry = DifferentialDriveOdometry(Rotation2d(), 0.0, 0.0)
    fpga, autonomous = wpilib.Timer.getFPGATimestamp, wpilib.DriverStation.isAutonomousEnabled
    clock = time.perf_counter_ns

    def measure(pace: float) -> list[int]:
        out = []
        for _ in range(samples):
            if pace:
                time.sleep(pace)
            start = clock()
            fpga()
            autonomous()
            watchdog.feed()
            a, b = left.getDistance(), right.getDistance()
            left.getRate()
            right.getRate()
            odometry.update(gyro.getRotation2d(), a, b)
            fpga()
            out.append(clock() - start)
        return out

    warm, paced = measure(0.0), measure(TICK_S)
    watchdog.setSafetyEnabled(False)  # unfed from here on: no motor-safety message
    return {
        "calls_p50_us": _percentile(warm, 50),
        "calls_p99_us": _percentile(warm, 99),
        "calls_paced_p50_us": _percentile(paced, 50),
        "calls_paced_p99_us": _percentile(paced, 99),
    }


#: Seconds to wait before each tick (--paced: the loop period).
_PACE = [0.0]


def _instrument(robot: Any, samples: Samples) -> None:
    """Per-part timers around what robotPeriodic calls, after robotInit made the parts."""
    link, drivetrain = robot.link, robot.drivetrain
    link.update = _timed(samples, "queue update", link.update)
    robot.automodes.periodic = _timed(samples, "mode", robot.automodes.periodic)
    drivetrain.periodic = _timed(samples, "drivetrain", drivetrain.periodic)
    link.record_telemetry = _timed(samples, "telemetry", link.record_telemetry)
    robot.field_view.periodic = _timed(samples, "field", robot.field_view.periodic)
    robot.recorder.tick = _timed(samples, "recorder", robot.recorder.tick)
    robot.keys.publish = _timed(samples, "keys", robot.keys.publish)
    link.flush_sends = _timed(samples, "flush", link.flush_sends)
    timing = robot.loop_timing
    timing.begin = _timed(samples, "loop timing", timing.begin)
    timing.end = _timed(samples, "loop timing", timing.end)


def _scenario(
    robot: Any, ticks: int, samples: Samples, *, autonomous: bool, enabled: bool, each: Callable[[int], None]
) -> dict[str, float]:
    loops: list[int] = []
    wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
    for i in range(ticks):
        loops.append(
            step(robot, autonomous=autonomous, enabled=enabled, before=lambda i=i: each(i), pace=_PACE[0])
        )
    wall, cpu = time.perf_counter_ns() - wall, time.thread_time_ns() - cpu
    return {"wall_s": wall / 1e9, "thread_cpu_s": cpu / 1e9, "loop_p50_us": _percentile(loops, 50)}


def run(ticks: int, wiring: str) -> dict[str, Any]:
    os.environ["BCNP_DRIVETRAIN"] = wiring
    os.environ.setdefault("BCNP_PORT", "0")
    os.environ.setdefault("BCNP_LOG_DIR", tempfile.mkdtemp(prefix="bcnp-tick-cost-"))
    sys.path.insert(0, str(ROOT))
    import hal
    import ntcore
    from wpilib.simulation import XboxControllerSim, pauseTiming, restartTiming

    hal.initialize(500, 0)
    ntcore.NetworkTableInstance.getDefault().startLocal()  # no server, no networktables.json
    pauseTiming()
    restartTiming()
    robot_class, empty_class = robot_classes()
    results: dict[str, Any] = {"ticks": ticks, "wiring": wiring, "python": sys.version.split()[0]}

    # The floor: an empty TimedRobot, its robotPeriodic and its whole loop.
    empty = empty_class()
    floor: Samples = defaultdict(list)
    empty.robotPeriodic = _timed(floor, "robotPeriodic", empty.robotPeriodic)
    empty.robotInit()
    loops = [step(empty, autonomous=True, enabled=True, pace=_PACE[0]) for _ in range(ticks)]
    results["floor"] = {
        "robotPeriodic_p50_us": _percentile(floor["robotPeriodic"], 50),
        "robotPeriodic_p99_us": _percentile(floor["robotPeriodic"], 99),
        "loop_p50_us": _percentile(loops, 50),
        "loop_p99_us": _percentile(loops, 99),
    }
    del empty
    results["floor"].update(_essential_floor(min(ticks, 500)))

    robot = robot_class()
    periodic: Samples = defaultdict(list)
    robot.robotInit()
    robot._simulationInit()
    parts: Samples = defaultdict(list)
    robot.robotPeriodic = _timed(periodic, "robotPeriodic", robot.robotPeriodic)
    _instrument(robot, parts)
    for _ in range(50):  # settle: modes entered, the first allocations done
        step(robot, autonomous=True, enabled=True, pace=_PACE[0])
    gc.collect()

    rng = random.Random(1)
    stick = XboxControllerSim(0)

    def nothing(i: int) -> None:
        pass

    def moving_sticks(i: int) -> None:
        stick.setLeftY(-0.8 * math.sin(i / 50))
        stick.setRightX(0.5 * math.cos(i / 70))
        stick.notifyNewData()

    host: subprocess.Popen[str] | None = None

    def plan(i: int) -> None:
        """Tick ``i``'s packet: the host sends it, and the tick waits until the robot's
        receive thread has queued it. Simulated time does not run ahead of the host (ticks
        back to back outrun a process that sends when told: the robot dropped it for
        silence, 200 ms of robot time, within a few dozen ticks)."""
        assert host is not None and host.stdin is not None
        count = rng.randint(1, 10)
        queue = robot.link.queue
        offered = queue.received + count
        host.stdin.write(f"{count} {0.3 * math.sin(i / 40):.4f}\n")
        host.stdin.flush()
        deadline = time.monotonic() + 10.0
        while queue.received < offered:
            if time.monotonic() > deadline:
                raise RuntimeError("tick_cost: the host's packet did not reach the queue within 10 s")
            time.sleep(0.0001)

    scenarios: list[tuple[str, dict[str, bool], Callable[[int], None]]] = [
        ("idle", {"autonomous": True, "enabled": True}, nothing),
        ("live", {"autonomous": True, "enabled": True}, plan),
        ("teleop", {"autonomous": False, "enabled": True}, moving_sticks),
    ]
    for name, mode, each in scenarios:
        if name == "live":
            host = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.tick_cost", "--host", str(robot.link.tcp.port)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            assert host.stdout is not None
            host.stdout.readline()  # connected
        for samples in (periodic, parts):
            samples.clear()
        summary = _scenario(robot, ticks, parts, each=each, **mode)
        if name == "live" and host is not None:
            out, _ = host.communicate(timeout=30)
            summary["telemetry_packets_received"] = int(out.split()[-1])
            summary["packets_queued"] = robot.link.dispatcher.packets_received
        durations = periodic["robotPeriodic"]
        summary.update(
            robotPeriodic_p50_us=_percentile(durations, 50),
            robotPeriodic_p99_us=_percentile(durations, 99),
            robotPeriodic_max_us=max(durations) / 1000,
            parts={
                part: {
                    "p50_us": _percentile(v, 50),
                    "p99_us": _percentile(v, 99),
                    "mean_us": statistics.fmean(v) / 1000,
                }
                for part, v in sorted(parts.items())
            },
        )
        results[name] = summary
    robot.link.close()
    return results


def _host(port: int) -> int:
    """The live scenario's host, in its own process: a packet per line read, until EOF;
    prints the telemetry packets it received."""
    sys.path.insert(0, str(ROOT))
    from bcnp.host.link.client import Client
    from messages import SCHEMA, DriveCmd

    with Client(SCHEMA, "127.0.0.1", port, keepalive_interval=0.05, on_telemetry=lambda p: None) as host:
        print("connected", flush=True)
        for line in sys.stdin:
            count, omega = line.split()
            host.send([DriveCmd(vx=0.8, omega=float(omega), durationMs=20) for _ in range(int(count))])
        time.sleep(0.1)  # the last telemetry
        print(host.link.telemetry_packets, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ticks", type=int, default=3000, help="ticks per scenario (default 3000)")
    parser.add_argument("--wiring", choices=wirings(), default="kitbot")
    parser.add_argument("--paced", action="store_true", help="wait the loop period before each tick")
    parser.add_argument("--host", type=int, metavar="PORT", help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.host is not None:
        return _host(args.host)
    _PACE[0] = TICK_S if args.paced else 0.0
    results = run(max(100, args.ticks), args.wiring)
    results["paced"] = args.paced
    floor = results["floor"]
    pacing = "paced at 20 ms" if args.paced else "back to back"
    print(
        f"Python {results['python']}, {args.wiring} wiring, {results['ticks']} ticks per scenario, {pacing}"
    )
    print(
        f"  floor (empty TimedRobot): robotPeriodic p50 {floor['robotPeriodic_p50_us']:.1f} us, "
        f"whole loop p50 {floor['loop_p50_us']:.1f} p99 {floor['loop_p99_us']:.1f} us"
    )
    print(
        f"  floor (the tick's 11 essential WPILib calls alone): p50 {floor['calls_p50_us']:.1f}"
        f" p99 {floor['calls_p99_us']:.1f} us back to back; paced at 20 ms p50"
        f" {floor['calls_paced_p50_us']:.1f} p99 {floor['calls_paced_p99_us']:.1f} us"
    )
    for name in ("idle", "live", "teleop"):
        s = results[name]
        print(
            f"  {name:7s} robotPeriodic p50 {s['robotPeriodic_p50_us']:7.1f}"
            f"  p99 {s['robotPeriodic_p99_us']:7.1f}  max {s['robotPeriodic_max_us']:8.1f} us"
            f"   wall {s['wall_s']:.2f} s  thread CPU {s['thread_cpu_s']:.2f} s"
        )
        for part, p in s["parts"].items():
            print(
                f"      {part:13s} p50 {p['p50_us']:7.1f}  p99 {p['p99_us']:7.1f}"
                f"  mean {p['mean_us']:7.1f} us"
            )
    write_json(results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
