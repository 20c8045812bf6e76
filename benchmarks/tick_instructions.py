"""Instructions per robot tick, counted exactly by Valgrind: robotPeriodic, its parts, the loop.

    python -m benchmarks.tick_instructions [--ticks N] [--repeats B] [--warmup N] [--runs R]
                                           [--wiring kitbot|sparkmax|talonfx] [--keep DIR] [--json PATH]

The robot of ``benchmarks/tick_cost.py`` (robot.py with physics.py attached, the
simulated HAL, WPILib's own loop function, simulated time stepped 20 ms a tick),
run under ``valgrind --tool=callgrind``, which counts the instructions the CPU
executes (x86-64, user space) whatever else the machine does. Wall time on a
shared virtual machine varies by tens of percent; the count does not.

How it counts. The program runs with collection off (``--collect-atstart=no``;
start-up is not even instrumented, ``--instr-atstart=no``). Around what is
measured it turns collection on and off itself, with Valgrind's client requests
(the magic instruction sequence of ``valgrind/callgrind.h``, put in an
executable page and called through ``ctypes``: no compiler, no extension).
Collection is per thread, so only the robot thread's instructions count: the
receive threads' parsing is not part of robotPeriodic (it runs between ticks,
and on a roboRIO on the other core). Every block of ``--ticks`` ticks measures
one thing (a probe: the whole loop, robotPeriodic, one part of it) and ends with
a dump whose total is that probe's instructions over the block. Each probe has
``--repeats`` blocks (default 7 of 50 ticks), one per round of all the probes, so
that its blocks are spread over the scenario; its figure is their median (a
garbage collection or a GIL hand-off that falls into one block, timed by other
threads, moves one block, not the figure). Each bracket costs a few thousand
instructions of its own (the ``ctypes`` calls); blocks that bracket an empty
function measure that, and it is taken off every bracketed call. Parts are
measured in blocks of their own (a part's bracket costs nothing outside its
block). "The rest" is measured too: robotPeriodic bracketed with every part
paused (collection off around the part's call; a pause's own cost is
calibrated on an empty function like the bracket's and taken off).

Things timed by other threads or by wall time would otherwise move parts
between runs. The parts (and the rest, and robotPeriodic once more) are
measured with the cyclic garbage collector paused: a collection runs where an
allocation count, the receive thread's allocations included, crosses its
threshold, so it fell into one part or another; "garbage collection" is
robotPeriodic less that figure. ``LoopTiming``'s wall clock is a seeded draw of
tick durations (0.2 to 3 ms), the same in every run.
In the live scenario, a flush that wakes the receive thread waits, uncounted,
until the telemetry has reached the host, and the receive threads' periodic
wake-ups (``poll_interval``, 50 ms of wall time) are stretched to an hour: a
receive thread then never asks for the interpreter lock in the middle of a
tick, where the hand-off would land at a point set by wall time.

Scenarios (``--warmup`` ticks first, then one block per probe):

* ``floor``: an empty ``TimedRobot`` subclass, its whole loop (the C++ loop,
  the mode's calls, an empty robotPeriodic): what any RobotPy robot pays;
* ``idle``: autonomous, enabled, no host;
* ``live``: autonomous with a host on loopback TCP, as in tick_cost: one packet
  of 1 to 10 DriveCmds (a seeded random draw) per tick, telemetry flowing back.
  The host lives in this process and is driven by the ticks, not by a clock:
  before each tick it sends that tick's packet and waits until the robot's
  receive thread has queued it, then reads the telemetry sent so far. Every
  tick sees the same packets in every run;
* ``teleop``: teleop, enabled, the Xbox controller's sticks moving, link idle.

Probes: ``loop`` (``_loopFunc``: everything of the tick, the simulation's
physics included), ``simulation`` (what a roboRIO does not run: pyfrc's physics step,
and the HAL's sim-periodic callbacks registered from Python, a vendor library's simulation
glue: Phoenix 6 registers one per device, which copies its state into WPILib's sim devices
before every loop; :class:`SimHooks`. "loop on a roboRIO" is ``loop`` less it),
``robotPeriodic``, and its parts: queue update (``link.update``), mode (the autonomous mode's periodic),
sticks (teleop's controller reads), intent (``drivetrain.drive``/``stop``),
drivetrain (``drivetrain.periodic``: kinematics, motors, encoders, odometry),
telemetry, field (the Odometry field), recorder, keys, flush (handing the
telemetry to the receive thread), loop timing (``LoopTiming.begin``/``end``),
loop priority (``LoopPriority.busy``/``idle``).

Two runs (``--runs 2``, the default) give the spread between them. Run it on an
otherwise idle machine: WPILib's own threads wake on wall-clock timers and meet the
robot thread on shared locks, so a run slowed by other programs counts a few hundred
instructions more in some small parts. The figures and the conversion to a roboRIO's
time are in docs/performance.md.
Needs Valgrind on x86-64 Linux. ``--inner`` is what runs under Valgrind.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import gc
import math
import os
import random
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT
from benchmarks.harness.callgrind import Callgrind
from benchmarks.harness.sim import wirings
from benchmarks.report import add_json_argument, write_json

SCENARIOS = ("floor", "idle", "live", "teleop")
#: The probe of robotPeriodic measured with the cyclic garbage collector paused.
NO_COLLECTOR = "robotPeriodic, collector paused"
#: robotPeriodic with every part paused (and the collector): the glue in ``_tick``.
REST = "rest of robotPeriodic"
#: robotPeriodic less NO_COLLECTOR: a difference of two figures, near zero.
GARBAGE = "garbage collection"
#: Parts of robotPeriodic: name -> (object path from the robot, attribute names).
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "queue update": ("link", ("update",)),
    "mode": ("automodes", ("periodic",)),
    "sticks": ("", ("_teleop_speeds",)),
    "intent": ("drivetrain", ("drive", "stop")),
    "drivetrain": ("drivetrain", ("periodic",)),
    "telemetry": ("link", ("record_telemetry",)),
    "field": ("field_view", ("periodic",)),
    "recorder": ("recorder", ("tick",)),
    "keys": ("keys", ("publish",)),
    "flush": ("link", ("flush_sends",)),
    "loop timing": ("loop_timing", ("begin", "end")),
    "loop priority": ("link.priority", ("busy", "idle")),
}


class Probes:
    """Brackets: a wrapper turns collection on around one call; ``calls`` counts them."""

    def __init__(self, callgrind: Callgrind) -> None:
        self.toggle = callgrind.toggle
        self.calls = 0
        self.pauses = 0
        self.collecting = False

    def bracket(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def bracketed(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return self._switched(True, func, *args, **kwargs)

        return bracketed

    def pause(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """A wrapper that turns collection off around one call made inside a bracket;
        ``pauses`` counts them (each costs a few thousand instructions, calibrated)."""
        return functools.partial(self.uncounted, func)

    def uncounted(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call ``func`` with collection off; inside a bracket, a pause (counted, so that
        its own cost is taken off)."""
        if not self.collecting:
            return func(*args, **kwargs)
        self.pauses += 1
        return self._switched(False, func, *args, **kwargs)

    def _switched(self, collecting: bool, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``func`` with collection switched to ``collecting`` around it, then back."""
        self.toggle()
        self.collecting = collecting
        try:
            return func(*args, **kwargs)
        finally:
            self.collecting = not collecting
            self.toggle()


def _nothing() -> None:
    return None


def _call(callback: Callable[[], None]) -> None:
    callback()


class SimHooks:
    """The HAL's sim-periodic callbacks (before and after each loop) registered from Python, each
    called through :attr:`call`, which the ``simulation`` probe brackets: they run inside the
    loop in a simulator only (Phoenix 6 registers one per device, which copies the device's
    state into WPILib's sim devices for the sim GUI; a roboRIO has no sim devices). Installed
    before the robot is made; :attr:`registered` counts them (none for the kitbot)."""

    def __init__(self, simulation: Any) -> None:
        self.call: Callable[[Callable[[], None]], None] = _call
        self.registered = 0
        for name in ("registerSimPeriodicBeforeCallback", "registerSimPeriodicAfterCallback"):
            setattr(simulation, name, self._hooked(getattr(simulation, name)))

    def _hooked(self, register: Callable[[Callable[[], None]], Any]) -> Callable[[Callable[[], None]], Any]:
        def registering(callback: Callable[[], None]) -> Any:
            self.registered += 1
            return register(lambda: self.call(callback))

        return registering

    @contextlib.contextmanager
    def bracketed(self, probes: Probes) -> Iterator[None]:
        self.call = probes.bracket(_call)
        try:
            yield
        finally:
            self.call = _call


class LockstepHost:
    """The live scenario's host, in the robot's thread and driven by its ticks.

    A TCP controller on loopback (TCP_NODELAY, as the client): the handshake, then
    before each tick one packet of 1 to 10 DriveCmds (seeded), after which it waits
    until the robot's receive thread has queued the packet's commands. It reads
    what telemetry arrived without ever waiting for it."""

    def __init__(self, link: Any, seed: int = 1, timeout: float = 60.0) -> None:
        from bcnp.wire import encode_handshake
        from messages import SCHEMA

        self.link = link
        self.timeout = timeout
        self.rng = random.Random(seed)
        self.telemetry_bytes = 0
        self.packets = 0
        self.sock = socket.create_connection(("127.0.0.1", link.tcp.port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(encode_handshake(SCHEMA.hash))
        handshake = b""
        while len(handshake) < 8:
            chunk = self.sock.recv(8 - len(handshake))
            if not chunk:
                raise RuntimeError("the robot closed the connection during the handshake")
            handshake += chunk
        self._wait(lambda: link.owner is link.tcp, "the robot to take the controller")
        self.sock.setblocking(False)

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"lockstep host: waited {self.timeout:g} s for {what}")
            time.sleep(0.0002)

    def drain(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except BlockingIOError:
                return
            if not data:
                raise RuntimeError("the robot closed the live connection")
            self.telemetry_bytes += len(data)

    def before_tick(self, i: int) -> None:
        from bcnp.wire import encode_packet
        from messages import DRIVE_CMD_SPEC, DriveCmd

        self.drain()
        count = self.rng.randint(1, 10)
        omega = float(f"{0.3 * math.sin(i / 40):.4f}")  # as tick_cost's host gets it
        packet = encode_packet(
            DRIVE_CMD_SPEC, [DriveCmd(vx=0.8, omega=omega, durationMs=20) for _ in range(count)]
        )
        queue = self.link.queue
        offered = queue.received + count
        self.sock.sendall(packet)
        self.packets += 1
        self._wait(lambda: queue.received >= offered, "the robot to queue a packet")
        time.sleep(0.001)  # the receive thread records the packet and goes back to its select

    def await_telemetry(self) -> None:
        """Wait (the robot thread idle) until the receive thread has written the telemetry
        a flush woke it for and has gone back to its select."""
        ready, _, _ = select.select([self.sock], [], [], self.timeout)
        if not ready:
            raise RuntimeError(f"lockstep host: no telemetry {self.timeout:g} s after a flush")
        time.sleep(0.002)
        self.drain()

    def settle_flushes(self, server: Any, probes: Probes) -> None:
        """Let each flush that wakes ``server``'s receive thread finish its send before the
        tick goes on, uncounted: the receive thread then never waits for the interpreter
        lock during the rest of the tick, where its hand-off would land at a point set by
        wall time (under Valgrind, by the machine) and move small parts between runs."""
        flush = server.flush_sends

        def settled() -> None:
            if not server._sends_queued:
                flush()
                return
            probes.uncounted(self.drain)
            flush()
            probes.uncounted(self.await_telemetry)

        server.flush_sends = settled

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def _wrapped(
    targets: list[tuple[Any, str]], wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Iterator[None]:
    """Each ``(owner, name)`` method replaced on its instance by ``wrapper(method)``, then
    the instance attribute removed again (the class's method shows through)."""
    for owner, name in targets:
        setattr(owner, name, wrapper(getattr(owner, name)))
    try:
        yield
    finally:
        for owner, name in targets:
            delattr(owner, name)


def _resolve(robot: Any, path: str) -> Any:
    target = robot
    for name in filter(None, path.split(".")):
        target = getattr(target, name)
    return target


def _inner(ticks: int, warmup: int, repeats: int, wiring: str) -> int:
    """Under Valgrind: the scenarios, one dump per (scenario, probe) block."""
    os.environ["BCNP_DRIVETRAIN"] = wiring
    os.environ.setdefault("BCNP_PORT", "0")
    if "BCNP_LOG_DIR" not in os.environ:  # run alone; under run_once, in its folder
        os.environ["BCNP_LOG_DIR"] = tempfile.mkdtemp(prefix="bcnp-tick-instr-")
    sys.path.insert(0, str(ROOT))
    import hal
    import hal.simulation
    import ntcore
    from wpilib.simulation import XboxControllerSim, pauseTiming, restartTiming

    from benchmarks.harness.inprocess import robot_classes, step

    callgrind = Callgrind()
    probes = Probes(callgrind)
    hooks = SimHooks(hal.simulation)
    hal.initialize(500, 0)
    ntcore.NetworkTableInstance.getDefault().startLocal()
    pauseTiming()
    restartTiming()
    robot_class, empty_class = robot_classes()
    calibration = probes.bracket(_nothing)
    paused_nothing = probes.pause(_nothing)
    pause_calibration = probes.bracket(lambda: paused_nothing())
    callgrind.start_instrumentation()

    def block(
        scenario: str,
        probe: str,
        repeat: int,
        robot: Any,
        mode: dict[str, bool],
        each: Callable[[int], None],
        start: int,
        loop: Callable[[], None] | None = None,
    ) -> int:
        """``ticks`` ticks from tick ``start`` with ``probe`` bracketed; one dump."""
        probes.calls = probes.pauses = 0
        original = robot._loopFunc
        if loop is not None:
            robot._loopFunc = loop
        try:
            for i in range(start, start + ticks):
                each(i)
                if probe == "bracket":
                    calibration()
                elif probe == "pause":
                    pause_calibration()
                step(robot, **mode)
        finally:
            if loop is not None:
                robot._loopFunc = original
        callgrind.dump(f"{scenario}|{probe}|{repeat}|{ticks}|{probes.calls}|{probes.pauses}")
        return start + ticks

    def measure(scenario: str, robot: Any, mode: dict[str, bool], each: Callable[[int], None]) -> None:
        for i in range(warmup):
            each(i)
            step(robot, **mode)
        i = warmup
        for repeat in range(repeats):  # each probe once per round: its blocks spread over the run
            i = block(scenario, "bracket", repeat, robot, mode, each, i)
            i = block(scenario, "loop", repeat, robot, mode, each, i, loop=probes.bracket(robot._loopFunc))
            for probe in ("robotPeriodic", "simulation"):
                attribute = "robotPeriodic" if probe == "robotPeriodic" else "_simulationPeriodic"
                if scenario == "floor" and probe == "simulation":
                    continue
                hooked = hooks.bracketed(probes) if probe == "simulation" else contextlib.nullcontext()
                with _wrapped([(robot, attribute)], probes.bracket), hooked:
                    i = block(scenario, probe, repeat, robot, mode, each, i)
            if scenario == "floor":
                continue
            # The parts, and robotPeriodic once more, with the cyclic collector paused: a
            # collection runs where an allocation count (the receive thread's allocations
            # included) happens to cross its threshold, so it would fall into one part or
            # another from run to run. Its cost is robotPeriodic less this figure.
            gc.disable()
            try:
                periodic = [(robot, "robotPeriodic")]
                with _wrapped(periodic, probes.bracket):
                    i = block(scenario, NO_COLLECTOR, repeat, robot, mode, each, i)
                parts = {
                    part: [(_resolve(robot, path), name) for name in names]
                    for part, (path, names) in PARTS.items()
                }
                for part, targets in parts.items():
                    with _wrapped(targets, probes.bracket):
                        i = block(scenario, part, repeat, robot, mode, each, i)
                # The rest, measured: robotPeriodic with every part paused.
                i = block(scenario, "pause", repeat, robot, mode, each, i)
                every_part = [target for targets in parts.values() for target in targets]
                with _wrapped(every_part, probes.pause), _wrapped(periodic, probes.bracket):
                    i = block(scenario, REST, repeat, robot, mode, each, i)
            finally:
                gc.collect(0)  # what the young generation would have had collected meanwhile
                gc.enable()

    def nothing(i: int) -> None:
        pass

    autonomous = {"autonomous": True, "enabled": True}
    empty = empty_class()
    empty.robotInit()
    measure("floor", empty, autonomous, nothing)
    del empty

    robot = robot_class()
    robot.robotInit()
    robot._simulationInit()
    print(f"sim-periodic callbacks registered from Python (simulation probe): {hooks.registered}", flush=True)
    # LoopTiming keeps statistics of wall-clock tick durations, and under Valgrind those
    # (so the branches of its bookkeeping) differ from run to run: measured, its wall
    # clock is a seeded draw of durations as a roboRIO's ticks take (0.2 to 3 ms).
    durations = random.Random(7)
    wall_ns = [0]

    def seeded_wall() -> int:
        wall_ns[0] += durations.randint(200_000, 3_000_000)
        return wall_ns[0]

    robot.loop_timing.wall = seeded_wall
    # The receive threads also wake every poll_interval (50 ms of wall time) to check
    # their timeouts; under Valgrind such a wake-up lands anywhere in a tick and asks for
    # the interpreter lock there. Measured, they wake for traffic only.
    for server in (robot.link.tcp, robot.link.udp):
        server.config = dataclasses.replace(server.config, poll_interval=3600.0)
    measure("idle", robot, autonomous, nothing)

    host = LockstepHost(robot.link)
    host.settle_flushes(robot.link.tcp, probes)
    measure("live", robot, autonomous, host.before_tick)
    del robot.link.tcp.flush_sends
    host.drain()
    print(
        f"live: {host.packets} packets sent, {robot.link.queue.received} commands offered, "
        f"{host.telemetry_bytes} telemetry bytes back",
        flush=True,
    )
    host.close()
    stick = XboxControllerSim(0)

    def moving_sticks(i: int) -> None:
        stick.setLeftY(-0.8 * math.sin(i / 50))
        stick.setRightX(0.5 * math.cos(i / 70))
        stick.notifyNewData()

    for _ in range(20):  # the link sees the host go
        step(robot, **autonomous)
    measure("teleop", robot, {"autonomous": False, "enabled": True}, moving_sticks)
    robot.link.close()
    return 0


_TRIGGER = "desc: Trigger: Client Request: "


Blocks = dict[str, dict[str, list[tuple[int, int, int, int]]]]


def _parse_dumps(directory: Path) -> Blocks:
    """scenario -> probe -> [(instructions, ticks, bracketed calls, paused calls) per block],
    from callgrind's files."""
    found: Blocks = {}
    for path in sorted(directory.glob("callgrind.out*")):
        trigger, total = "", None
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith(_TRIGGER):
                    trigger = line[len(_TRIGGER) :].strip()
                elif line.startswith("totals:") or (line.startswith("summary:") and total is None):
                    total = int(line.split()[1])
        if trigger.count("|") != 5 or total is None:
            continue
        scenario, probe, _repeat, ticks, calls, pauses = trigger.split("|")
        block = (total, int(ticks), int(calls), int(pauses))
        found.setdefault(scenario, {}).setdefault(probe, []).append(block)
    return found


def _per_tick(dumps: Blocks) -> dict[str, dict[str, float]]:
    """Instructions per tick of each probe: the median of its blocks, each block's brackets
    and pauses (the median calibration's cost each) taken off."""
    out: dict[str, dict[str, float]] = {}
    for scenario, probes in dumps.items():
        bracket = statistics.median(total / calls for total, _, calls, _ in probes["bracket"])
        figures = {"bracket (each, taken off)": bracket}
        pause = 0.0
        if "pause" in probes:
            pause = statistics.median(
                (total - calls * bracket) / pauses for total, _, calls, pauses in probes["pause"]
            )
            figures["pause (each, taken off)"] = pause
        for probe, blocks in probes.items():
            if probe not in ("bracket", "pause"):
                figures[probe] = statistics.median(
                    (total - calls * bracket - pauses * pause) / ticks
                    for total, ticks, calls, pauses in blocks
                )
        if "simulation" in figures:
            figures["loop on a roboRIO"] = figures["loop"] - figures["simulation"]
        if NO_COLLECTOR in figures:
            figures[GARBAGE] = figures["robotPeriodic"] - figures.pop(NO_COLLECTOR)
        out[scenario] = figures
    return out


def run_once(
    ticks: int, warmup: int, repeats: int, wiring: str, valgrind: str, keep: Path | None = None
) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="bcnp-callgrind-") as tmp:
        command = [
            valgrind,
            "--tool=callgrind",
            "--instr-atstart=no",
            "--collect-atstart=no",
            "--dump-line=no",
            f"--callgrind-out-file={tmp}/callgrind.out",
            sys.executable,
            "-m",
            "benchmarks.tick_instructions",
            "--inner",
            "--ticks",
            str(ticks),
            "--warmup",
            str(warmup),
            "--repeats",
            str(repeats),
            "--wiring",
            wiring,
        ]
        env = dict(os.environ, PYTHONHASHSEED="0", BCNP_LOG_DIR=f"{tmp}/logs")  # gone with tmp
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-5000:] + done.stderr[-5000:])
            raise SystemExit(f"tick_instructions: the run under Valgrind failed ({done.returncode})")
        sys.stderr.write(done.stdout)  # what the run said: the callbacks hooked, the live host's traffic
        if keep is not None:  # callgrind's files, for callgrind_annotate (per C function)
            keep.mkdir(parents=True, exist_ok=True)
            for path in Path(tmp).glob("callgrind.out*"):
                shutil.copy(path, keep / path.name)
        return _per_tick(_parse_dumps(Path(tmp)))


#: The conversion to a roboRIO (see docs/performance.md, "Instructions per tick").
ARM_PER_X86 = 1.2  # ARMv7 (Thumb-2) instructions per x86-64 instruction, CPython and C++ code
A9_IPC = 0.6  # instructions per cycle of a Cortex-A9 on such code
ROBORIO_HZ = {"roboRIO 1": 667e6, "roboRIO 2": 866e6}
BUDGET_S = 0.020


def roborio_ms(instructions: float, hz: float) -> float:
    return instructions * ARM_PER_X86 / A9_IPC / hz * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ticks", type=int, default=50, help="ticks per block (default 50)")
    parser.add_argument("--repeats", type=int, default=7, help="blocks per probe, median taken (default 7)")
    parser.add_argument(
        "--warmup", type=int, default=100, help="ticks before each scenario's blocks (default 100)"
    )
    parser.add_argument("--runs", type=int, default=2, help="runs, for the spread between them (default 2)")
    parser.add_argument("--wiring", choices=wirings(), default="kitbot")
    parser.add_argument(
        "--valgrind", default="valgrind", help="the valgrind command (default: valgrind on PATH)"
    )
    add_json_argument(parser)
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep the last run's callgrind files here (callgrind_annotate)",
    )
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        return _inner(args.ticks, args.warmup, args.repeats, args.wiring)
    valgrind = shutil.which(args.valgrind)
    if valgrind is None:
        raise SystemExit("tick_instructions: needs Valgrind (apt-get install valgrind)")
    runs = []
    for n in range(args.runs):
        start = time.monotonic()
        runs.append(run_once(args.ticks, args.warmup, args.repeats, args.wiring, valgrind, args.keep))
        print(f"run {n + 1}: {time.monotonic() - start:.0f} s under Valgrind", file=sys.stderr, flush=True)
    version = sys.version.split()[0]
    print(
        f"Python {version}, {args.wiring} wiring: x86-64 instructions per tick (callgrind), "
        f"median of {args.repeats} blocks of {args.ticks} ticks after {args.warmup}, {args.runs} run(s)"
    )
    first = runs[0]
    header = "".join(f"{name:>12s}" for name in SCENARIOS)
    print(f"  {'':26s}{header}{'spread':>9s}{'(instr)':>9s}")
    names: list[str] = []
    for scenario in SCENARIOS:
        for name in first.get(scenario, {}):
            if name not in names:
                names.append(name)
    order = [
        "loop",
        "simulation",
        "loop on a roboRIO",
        "robotPeriodic",
        *PARTS,
        REST,
        GARBAGE,
    ]
    names.sort(key=lambda n: order.index(n) if n in order else len(order))
    spreads: dict[str, float] = {}
    for name in names:
        cells = []
        worst, worst_abs = 0.0, 0.0
        for scenario in SCENARIOS:
            values = [v for v in (run.get(scenario, {}).get(name) for run in runs) if v is not None]
            if not values:
                cells.append(f"{'':>12s}")
                continue
            mean = statistics.fmean(values)
            cells.append(f"{mean:12,.0f}")
            if len(values) > 1:
                spread = max(values) - min(values)
                worst_abs = max(worst_abs, spread)
                # GARBAGE's spread is its two figures', in instructions, never a
                # percentage of itself.
                if abs(mean) >= 1000 and name != GARBAGE:
                    spreads[f"{scenario}/{name}"] = spread / abs(mean)
                    worst = max(worst, spread / abs(mean))
        percent = f"{'-':>9s}" if name == GARBAGE else f"{worst * 100:8.2f}%"
        print(f"  {name:26s}{''.join(cells)}{percent}{worst_abs:9,.0f}")
    print(f"  roboRIO time (x86-64 instructions x {ARM_PER_X86:.1f} / IPC {A9_IPC:.1f} at the clock):")
    for scenario in SCENARIOS:
        figures = first[scenario]
        loop = figures.get("loop on a roboRIO", figures["loop"])
        periodic = figures.get("robotPeriodic", 0.0)
        cells = ", ".join(
            f"{rio} loop {roborio_ms(loop, hz):.2f} ms (robotPeriodic {roborio_ms(periodic, hz):.2f} ms,"
            f" {roborio_ms(periodic, hz) / (BUDGET_S * 1000) * 100:.0f} % of 20 ms)"
            for rio, hz in ROBORIO_HZ.items()
        )
        print(f"    {scenario:7s} {cells}")
    write_json(
        {
            "python": version,
            "wiring": args.wiring,
            "ticks": args.ticks,
            "warmup": args.warmup,
            "runs": runs,
            "spreads": spreads,
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
