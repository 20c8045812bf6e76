"""The coprocessor example (examples/coprocessor_square.py) run as a team runs it: from a
virtual environment that holds only this project's wheel, against the real robot program in
a headless simulator (the benchmarks' harness, benchmarks/harness/), judged by what the robot's
data log says.

* The wheel (``pip wheel --no-deps``, as docs/coprocessor.md builds it) holds ``bcnp/``
  and ``messages.py`` and no robot code; the environment it goes into has nothing else
  (no RobotPy, no ntcore) and cannot import them.
* A clean run: exit 0, the eight commands of the square started on plan, and the
  simulated chassis (``/SmartDashboard/Field/Robot``, the physics model's pose) back
  where it began. A machine that holds the host or the robot for the link timeout drops
  the link of a clean run too: that run is judged as it ran, by a drop's rules, never run
  again.
* A 1 s link drop (the fault proxy, ``python -m bcnp proxy --drop-at``) in the second
  side: exit 0, one loss and one reconnect printed, no command started late (the
  robot's log against the plan), the robot stopped within its link timeout and stood
  still until the link was back.
* Ctrl-C mid-side: exit 130 after a zero-message CLEAR_QUEUE; the robot stops.
* ``--team N`` is 10.TE.AM.2.

One robot serves every run (each run is a new controller: an empty queue). Bounds come
from the robot's rules (the 200 ms link timeout, 20 ms ticks, its acceleration limits),
never from tight wall-clock sleeps; each child process has a timeout. The rules are judged
on the robot's own loop, as its log shows it (test_field.py's :class:`~test_field.LoopLog`):
a machine that holds the robot's process back (two cores, the suite's other workers) delays
its ticks, and what a late tick delays is the machine's doing, not a broken rule.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import math
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support import build_wheel, child_env, wheel_only_venv

pytest.importorskip("wpilib", reason="the simulated robot needs RobotPy (python run.py test installs it)")

from test_field import LOOP_ENTRIES, LoopLog, late_by_the_robot, wait_ticking

from bcnp.defaults import MAX_COMMAND_LAG_S
from benchmarks.harness import ROOT
from benchmarks.harness.judge import Judged, Plan, early, judge
from benchmarks.harness.ports import free_port
from benchmarks.harness.rig import host_tool
from benchmarks.harness.robotlog import CommandStart, log_clock, records
from benchmarks.harness.sim import SimRobot
from messages import SCHEMA

EXAMPLE = ROOT / "examples" / "coprocessor_square.py"
LOCAL = "127.0.0.1"
#: The robot's rules: a link silent this long is lost (and the robot stops) ...
LINK_TIMEOUT_S = 0.2
#: ... and its loop period.
TICK_S = 0.02
#: What a tick's start, as Network/Pose stamps it (whole milliseconds), may read early.
STAMP_S = 0.001
#: The square as the example plans it: (vx m/s, omega rad/s, ms) per step, then a zero to rest.
SIDE = (0.5, 0.0, 2000)
TURN = (0.0, 1.5708, 1000)
PLAN = [SIDE, TURN] * 4 + [(0.0, 0.0, 300)]
PLAN_STARTS = [0.0]
for _, _, _ms in PLAN:
    PLAN_STARTS.append(PLAN_STARTS[-1] + _ms / 1000)
#: A run's bound: the plan is 12.3 s.
RUN_TIMEOUT_S = 60.0
#: Bounds on waiting for the robot (its loop running, its log written): generous, since only a
#: robot that is gone or stuck reaches them, and a busy machine's robot only takes longer.
WAIT_S = 60.0
#: The fault proxy cuts the link this long after it listens, for 1 s; its link coming back
#: later than STALL_S after that means the machine stalled the proxy.
DROP_AT_S = 4.0
STALL_S = 0.1
#: See :func:`on_time`: five ticks.
EARLY_S = 0.1
#: Where the clean square may end, from where it began. The robot changes commands at its
#: ticks, so each step runs a tick long or short: a turn 1.8 degrees, which moves the end of
#: the next 1 m side 3 cm. A tick that comes late (a busy machine) runs the step longer still.
#: Measured: 0 to 9 cm and within 4 degrees (6 cm by a new user); 13 cm and 10 degrees with
#: the machine at load 6 on its 2 cores. Without the closing zero command the square would
#: end 12 degrees short (the last turn stopped dead: omega^2 / 2 alpha = 0.2 rad). A tick
#: that comes late while the robot turns costs more: see :func:`turn_setbacks`.
CLOSE_M = 0.25
CLOSE_DEG = 20.0
#: The drivetrain's speed decays with kA/kV = 0.08 s once its motors are off: after this
#: long (6 time constants) a chassis stopped from 0.5 m/s has less than 1 mm left to roll.
COAST_S = 0.5
#: The stop packet reaches a robot on loopback within this of Ctrl-C (a busy machine); the robot
#: acts on it at its next tick, whenever the machine runs that.
STOP_WITHIN_S = 2.0

#: Modules a coprocessor does not have: the wheel must not need them.
ROBOT_ONLY = ("robotpy", "wpilib", "ntcore", "wpimath", "wpiutil", "hal", "pyfrc", "commands2")


# -- the wheel and the environment it goes into ------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built as docs/coprocessor.md says (support.build_wheel)."""
    return build_wheel(ROOT, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def coprocessor(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with the wheel and nothing else; returns its python."""
    return wheel_only_venv(wheel, tmp_path_factory.mktemp("coprocessor"))


def test_the_wheel_holds_the_library_and_this_robots_schema_and_no_robot_code(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names}
    metadata = {name for name in top if name.endswith(".dist-info")}
    # Nothing of the robot (robot.py, physics.py, constants.py, subsystems/, autonomous/, ...).
    assert top - metadata == {"bcnp", "messages.py"} and len(metadata) == 1, sorted(top)
    assert "bcnp/host/link/client.py" in names and "bcnp/py.typed" in names


def test_the_coprocessor_has_only_the_wheel(coprocessor: Path) -> None:
    probe = (
        "import importlib.metadata, importlib.util, bcnp, messages; "
        f"print([m for m in {ROBOT_ONLY!r} if importlib.util.find_spec(m)]); "
        "print(sorted(d.metadata['Name'] for d in importlib.metadata.distributions())); "
        "print(bcnp.__file__); print(messages.SCHEMA.hash)"
    )
    result = subprocess.run(
        [str(coprocessor), "-c", probe],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=coprocessor.parent,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    found, distributions, where, schema_hash = result.stdout.splitlines()
    assert found == "[]", f"the coprocessor can import robot modules: {found}"
    assert distributions == "['bcnp-robot']"
    assert where.startswith(str(coprocessor.parent.parent)), where
    assert int(schema_hash) == SCHEMA.hash  # this robot's schema, from the installed messages.py


def test_a_team_number_names_the_robots_address(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("coprocessor_square", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, example)  # its dataclass looks itself up there
    spec.loader.exec_module(example)
    for team, address in ((1234, "10.12.34.2"), (254, "10.2.54.2"), (12345, "10.123.45.2"), (1, "10.0.1.2")):
        assert example.address(argparse.Namespace(team=team, robot=LOCAL)) == address
    assert example.address(argparse.Namespace(team=None, robot="10.99.1.2")) == "10.99.1.2"


# -- the robot and what its log says ---------------------------------------------------------------


@pytest.fixture(scope="module")
def robot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimRobot]:
    with SimRobot(tmp_path_factory.mktemp("robot")) as robot:
        robot.start()
        wait_ticking(robot, WAIT_S)
        yield robot


@dataclass
class Log:
    """Entries of the robot's data log, each a list of (wall time, value), in time order."""

    entries: dict[str, list[tuple[float, Any]]]
    #: When each tick began (:attr:`~test_field.LoopLog.began`), in order.
    began: list[float] = field(default_factory=list)

    def __getitem__(self, name: str) -> list[tuple[float, Any]]:
        return self.entries.get(name, [])

    def between(self, name: str, since: float, until: float) -> list[tuple[float, Any]]:
        return [(t, v) for t, v in self[name] if since <= t <= until]

    def at(self, name: str, when: float) -> Any:
        """The entry's value at ``when``: its last record before (entries logged on change)."""
        before = [v for t, v in self[name] if t <= when]
        assert before, f"{name}: nothing logged before {when}"
        return before[-1]

    def pose(self, when: float) -> tuple[float, float, float]:
        """The simulated chassis (x m, y m, heading degrees) at ``when``."""
        x, y, degrees = self.at("NT:/SmartDashboard/Field/Robot", when)
        return x, y, degrees

    def commands(self, since: float, until: float) -> list[CommandStart]:
        """Each command made active (after clamping), as benchmarks/harness/robotlog.py reads them."""
        vx = self.between("BCNP/Command/Vx", since, until)
        omega = self.between("BCNP/Command/Omega", since, until)
        ms = self.between("BCNP/Command/DurationMs", since, until)
        return [CommandStart(t, v, w, d) for (t, v), (_, w), (_, d) in zip(vx, omega, ms, strict=False)]

    def packets(self, since: float, until: float) -> list[tuple[float, int, bool]]:
        """(wall time, message count, CLEAR_QUEUE) of each packet the robot received. The
        receive thread records a packet once it has handed it to the queue, and the robot's loop
        may run in between (the thread yields to the tick): a tick that acted on a packet can be
        logged before the packet is."""
        count = self.between("BCNP/Packet/Count", since, until)
        clear = self.between("BCNP/Packet/ClearQueue", since, until)
        return [(t, n, c) for (t, n), (_, c) in zip(count, clear, strict=False)]

    def loop(self) -> LoopLog:
        """The robot's loop: when it ran (each record it writes in a tick), what it applied."""
        entries = self.entries.items()
        ticks = sorted(t for name, values in entries if name.startswith(LOOP_ENTRIES) for t, _ in values)
        vx, omega = self["BCNP/Applied/Vx"], self["BCNP/Applied/Omega"]
        applied = [(t, v, w) for (t, v), (_, w) in zip(vx, omega, strict=False)]
        return LoopLog(ticks, applied, began=self.began)


#: The record each tick writes that carries the tick's own time: ``[x, y, heading, timestampMs]``.
POSE_ENTRY = "NT:/SmartDashboard/Network/Pose"


def read_log(log_dir: Path) -> Log:
    entries: dict[str, list[tuple[float, Any]]] = {}
    began: list[float] = []
    for path in sorted(log_dir.glob("*.wpilog")):
        clock = log_clock(path)
        if clock is None:
            continue
        for name, _, stamp, value in records(path):
            entries.setdefault(name, []).append((clock.wall(stamp), value))
            if name == POSE_ENTRY:  # the log's stamps are FPGA microseconds, as the tick's time
                began.append(clock.wall(round(value[3] * 1000)))
    return Log(entries, sorted(began))


def settled_log(robot: SimRobot, until: float) -> Log:
    """The log once it holds everything up to ``until`` (wall time, waited for): a new
    controller connects then, which the log records, and the log is read until that record
    is there (the log is written every 0.25 s)."""
    time.sleep(max(0.0, until - time.time()))
    mark = time.time()
    wait_ticking(robot, WAIT_S)  # also: the robot still runs and takes a controller
    deadline = time.monotonic() + WAIT_S
    while True:
        log = read_log(robot.log_dir)
        if any(t >= mark for t, _ in log["BCNP/Controller"]):
            return log
        assert time.monotonic() < deadline, f"the robot's log did not catch up within {WAIT_S:g} s"
        time.sleep(0.1)


# -- running the example -----------------------------------------------------------------------------


@dataclass
class Run:
    code: int
    output: str
    began: float  # time.time() when the example was started ...
    ended: float  # ... and when it had exited

    def lines(self, fragment: str) -> list[str]:
        return [line for line in self.output.splitlines() if fragment in line]


def run_example(python: Path, *args: str) -> Run:
    """The example as a team runs it, away from the project (its folder is not on the path)."""
    began = time.time()
    result = subprocess.run(
        [str(python), str(EXAMPLE), *args],
        cwd=python.parent,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    return Run(result.returncode, result.stdout + result.stderr, began, time.time())


def plan_index(first_start: float) -> Any:
    """Which step of PLAN a logged start is: of its kind (side, turn, rest), the one whose due
    time is nearest (a full step is due at its start, a remainder at its end minus its length).
    Steps of a kind are 3 s apart: a start 1.5 s late would pass for the next one, 1.5 s early,
    which is off plan too."""

    def index_of(start: CommandStart) -> int:
        at = start.wall_time - first_start
        best, best_gap = -1, math.inf
        for i, (vx, omega, ms) in enumerate(PLAN):
            if abs(start.vx - vx) > 1e-3 or abs(start.omega - omega) > 1e-3 or start.duration_ms > ms:
                continue  # another kind of step, or longer than this one
            due = PLAN_STARTS[i] if start.duration_ms == ms else PLAN_STARTS[i + 1] - start.duration_ms / 1000
            if abs(at - due) < best_gap:
                best, best_gap = i, abs(at - due)
        assert best >= 0, f"{start} is no step of the square"
        return best

    return index_of


def lateness(log: Log, run: Run) -> tuple[list[Judged], Plan]:
    """Every command the robot started during the run, its step and how long after plan. The
    plan's clock is the host's, which the log does not have: it starts with the first packet
    of commands (sent right after the host read its clock), as the robot received it: by the
    packet's record, or by the first command's start when that is earlier (the packet's record
    may trail the tick that started its command, see :meth:`Log.packets`)."""
    starts = log.commands(run.began, run.ended)
    received = next(t for t, count, _ in log.packets(run.began, run.ended) if count)
    first = min(received, starts[0].wall_time) if starts else received
    plan = Plan(first, PLAN_STARTS, plan_index(first))
    return judge(starts, [plan]), plan


def on_time(behind: list[Judged], plan: Plan, loop: LoopLog) -> bool:
    """The rule: no command starts more than the link timeout after its plan while the robot's
    loop runs (:func:`test_field.late_by_the_robot`). Nor more than EARLY_S before it (the robot
    starts a command at the tick after it arrives, never sooner; only the plan's start, taken
    from the robot's log, may trail the host's)."""
    return (
        all(j.index >= 0 for j in behind)
        and not late_by_the_robot(behind, plan, loop)
        and not early(behind, EARLY_S)
    )


def closure(log: Log, began: float, ended: float) -> tuple[float, float]:
    """(metres, degrees) between the pose before the first command and after the last."""
    first = log.commands(began, ended)[0].wall_time
    x0, y0, h0 = log.pose(first - TICK_S)
    x1, y1, h1 = log.pose(ended + COAST_S)  # the robot has stopped before the example ends
    return math.hypot(x1 - x0, y1 - y0), (h1 - h0 + 180.0) % 360.0 - 180.0


def turn_setbacks(log: Log, began: float, ended: float) -> tuple[float, float]:
    """What the robot's late ticks while it turned may cost the square: (metres, degrees).

    The drivetrain's turn-rate loop (subsystems/drivetrain/turn_loop.py) moves the heading it holds the
    gyro to by the commanded rate times the loop period, 20 ms, each tick; the chassis turns for
    as long as the tick really took. A tick that comes late by ``e`` while the robot turns at
    ``omega`` leaves the chassis ``omega * e`` ahead of that heading, and the loop takes it back:
    the square's heading ends that much short, and what is driven after turns about where it
    happened (the square's end moves by that angle times its distance from there)."""
    loop = log.loop()
    first = log.commands(began, ended)[0].wall_time
    x1, y1, _ = log.pose(ended + COAST_S)
    metres = radians = 0.0
    for before, tick in itertools.pairwise(t for t in loop.ticks if first <= t <= ended):
        late_by = tick - before - TICK_S
        if late_by > 0:
            setback = abs(log.at("BCNP/Applied/Omega", before)) * late_by
            x, y, _ = log.pose(before)
            radians += setback
            metres += setback * math.hypot(x1 - x, y1 - y)
    return metres, math.degrees(radians)


def timeline(log: Log, since: float, until: float, origin: float) -> str:
    """The robot's BCNP entries between two wall times, one line each, in seconds from ``origin``
    (what a failure message shows of the log)."""
    rows = [
        (t, name, value)
        for name, values in log.entries.items()
        if name.startswith("BCNP/") and name != "BCNP/Packet/Type"
        for t, value in values
        if since <= t <= until
    ]
    return "\n".join(f"  {t - origin:8.3f} s  {name} = {value}" for t, name, value in sorted(rows))


# -- the runs -------------------------------------------------------------------------------------------


def controllers(log: Log, run: Run) -> str:
    """The robot's view of the run's links: each controller that came and went, and why."""
    return "\n".join(
        f"  {t - run.began:7.3f} s  {text}"
        for t, text in log.between("BCNP/Controller", run.began, run.ended)
    )


def test_a_clean_run_drives_a_square_that_closes(coprocessor: Path, robot: SimRobot) -> None:
    """A clean run needs a clean link. A machine too busy to run the host or the robot for
    the link timeout (0.2 s) drops it (the robot logs "link lost: no packet for ..."), and the
    square is cut where the link went: such a run is judged as it is, by the rules of a run
    through a drop (:func:`judge_the_losses`), and the square's closure, which the lost steps
    moved, is not."""
    run = run_example(coprocessor, "--port", str(robot.port))
    log = settled_log(robot, run.ended + COAST_S)
    print(f"\n{run.output}robot:\n{controllers(log, run)}")
    assert run.code == 0, run.output
    if run.lines("link lost at"):
        print("the machine held the host or the robot for the link timeout: judged as a run through a drop")
        judge_the_losses(run, log)
        return
    assert run.lines("done after") and "0 lost link(s)" in run.output, run.output
    starts = log.commands(run.began, run.ended)
    assert [(s.vx, s.omega, s.duration_ms) for s in starts] == PLAN, starts
    behind, plan = lateness(log, run)
    assert [j.index for j in behind] == list(range(len(PLAN)))
    assert on_time(behind, plan, log.loop()), behind
    # The stop at the end: a CLEAR_QUEUE with no commands, once the plan has run (recorded after
    # the example's exit at the latest as long as the robot's receive thread was held). Or, when
    # the machine held the example past the link timeout as it ended, the robot's own stop: it
    # ended the link for the silence once the plan had run.
    plan_end = plan.start_wall + PLAN_STARTS[-1]
    timed_out = [
        t for t, text in log.between("BCNP/Controller", plan_end, run.ended + COAST_S) if "link lost" in text
    ]
    assert log.packets(run.began, run.ended + COAST_S)[-1][1:] == (0, True) or timed_out
    metres, degrees = closure(log, run.began, run.ended)
    held_m, held_deg = turn_setbacks(log, run.began, run.ended)
    print(
        f"clean square: ends {metres * 100:.1f} cm and {degrees:+.1f} degrees from where it began "
        f"(late ticks while turning allow {held_m * 100:.1f} cm and {held_deg:.1f} degrees more)"
    )
    assert metres <= CLOSE_M + held_m and abs(degrees) <= CLOSE_DEG + held_deg


def run_through_a_drop(coprocessor: Path, robot: SimRobot) -> tuple[Run, str]:
    """The example through the fault proxy, which cuts the link 4 s after it listens, for 1 s.
    The example connects a fraction of a second after that: the drop falls in the second side
    (plan 3 to 5 s), whatever the start-up took. Returns the run and the proxy's output."""
    port = free_port()
    address = ["--listen", f"{LOCAL}:{port}", "--to", f"{LOCAL}:{robot.port}", "--tcp-only"]
    faults = ["--drop-at", f"{DROP_AT_S:g}s:1s", "--duration", f"{RUN_TIMEOUT_S + 10:g}s"]
    proxy = host_tool("proxy", *address, *faults)
    try:
        assert proxy.stdout is not None
        listening = proxy.stdout.readline()
        assert listening.startswith("listening on"), listening + proxy.stdout.read()
        run = run_example(coprocessor, "--port", str(port))
    finally:
        proxy.terminate()
        proxy_output = proxy.communicate(timeout=10)[0]
    return run, proxy_output


def proxy_event(output: str, what: str) -> float:
    """When (s from its start) the proxy printed an event: ``   4.001 s  link drop for 1 s: ...``."""
    line = next(line for line in output.splitlines() if what in line)
    return float(line.split()[0])


@dataclass
class Losses:
    """A run the link went out of, as :func:`judge_the_losses` found it."""

    links_lost: int
    #: The robot's longest silence: seconds without a packet, from its last packet before ...
    gap: float
    last: float
    #: ... to the link back (wall times), and when it was told to stand still in between.
    back: float
    stopped_at: float


def judge_the_losses(run: Run, log: Log) -> Losses:
    """The rules of a run the link went out of, however it went (a drop, or a machine that held
    the host or the robot for the link timeout): each loss printed and followed by the link
    back; no command started late while the robot's loop ran; the square carried on to its end;
    across the longest silence the robot stopped within the link timeout and stood still until
    the link was back."""
    assert run.code == 0, run.output
    lost, back_lines = run.lines("link lost at"), run.lines("link back at")
    assert len(lost) == len(back_lines) >= 1, run.output
    assert all(run.output.index(a) < run.output.index(b) for a, b in zip(lost, back_lines, strict=True))
    assert f"{len(lost)} lost link(s)" in run.lines("done after")[0], run.output
    starts = log.commands(run.began, run.ended)
    behind, plan = lateness(log, run)
    steps = [(j.index, j.lateness) for j in behind]
    print(f"latest start {max(t for _, t in steps) * 1e3:.0f} ms after plan; steps started: {steps}")
    loop = log.loop()
    assert on_time(behind, plan, loop), steps
    # The square carried on to its end after the loss: its last step, the rest, started, or ran
    # out inside one late tick (no tick of the robot's loop began while it was due: from the end
    # of the step before, on the robot's timeline up to the queue's lag behind that step's start,
    # to the rest's end: no tick, no start). By when each tick began, not when it wrote its
    # records: a tick begun before the rest was due, which the machine held past that, did not
    # start it.
    # Or the machine held the example past the link timeout in its last steps: the robot ended the
    # link for the silence (its queue emptied, it stopped) after its last start.
    final = behind[-1]
    ran_out = timed_out = False
    if final.index == len(PLAN) - 2:
        due = final.start.wall_time + final.start.duration_ms / 1000
        ran_out = not loop.began_between(due, due + PLAN[-1][2] / 1000 - MAX_COMMAND_LAG_S)
    if final.index < len(PLAN) - 1:
        ends = log.between("BCNP/Controller", final.start.wall_time, run.ended + COAST_S)
        timed_out = any("link lost" in text for _, text in ends)
        print(f"the last step never started: ran out in a late tick {ran_out}, link lost {timed_out}")
    assert final.index == len(PLAN) - 1 or ran_out or timed_out, (
        "the square did not carry on to its end after the loss"
    )
    # The loss, as the robot saw it: the longest silence between two packets, at least its link
    # timeout (less a tick: the records of a tick are written up to a tick after it began).
    times = [t for t, _, _ in log.packets(run.began, run.ended)]
    gap, last, resumed = max((b - a, a, b) for a, b in itertools.pairwise(times))
    assert gap >= LINK_TIMEOUT_S - TICK_S, f"the robot never went without packets: longest gap {gap:.3f} s"
    # The link was back with the first packet after the silence, or with the command it started,
    # which the robot's log may show first (see Log.packets). A command queued before the silence
    # may start within the link timeout after the last packet, as planned: that is not the link
    # back (the robot stops at the timeout, its queue cleared, and starts nothing until then).
    back = min([resumed, *(s.wall_time for s in starts if s.wall_time > last + LINK_TIMEOUT_S)])
    # The robot stops at the tick that finds the link timed out (a stop skips the acceleration
    # limits), or had stopped already (a loss of the machine's own just before, whose resume the
    # robot never started), and drives nothing until the link is back: it stood still then, told
    # so no later than its loop's first tick past the timeout (a tick's records are written up to
    # a tick after it began).
    stopped_at, vx, omega = [applied for applied in loop.applied if applied[0] < back][-1]
    assert vx == omega == 0.0, f"the robot was driving when the link came back: {vx} m/s, {omega} rad/s"
    # Judged by when each tick began, the moment it decided: a machine that held the loop mid-tick
    # writes the records of a tick that began before the timeout well after it.
    assert not loop.began_between(last + LINK_TIMEOUT_S + STAMP_S, loop.began_before(stopped_at)), (
        f"stopped {stopped_at - last:.3f} s after its last packet, a tick of its loop beginning meanwhile"
    )
    if back > stopped_at + COAST_S:  # long enough down to see the robot stand still
        x0, y0, h0 = log.pose(stopped_at + COAST_S)
        x1, y1, h1 = log.pose(back - TICK_S / 2)
        assert math.hypot(x1 - x0, y1 - y0) < 0.01 and abs(h1 - h0) < 0.5, (
            "the robot moved while the link was down"
        )
    return Losses(len(lost), gap, last, back, stopped_at)


def test_a_run_through_a_1s_link_drop_runs_nothing_late(coprocessor: Path, robot: SimRobot) -> None:
    """Judged as it ran: a machine that stalls the proxy itself (its link comes back late by its
    own clock) stalled the host and the robot with it, and makes the drop that much longer."""
    run, proxy_output = run_through_a_drop(coprocessor, robot)
    print(f"\n{run.output}proxy:\n{proxy_output}")
    late_heal = proxy_event(proxy_output, "link back") - (DROP_AT_S + 1.0)
    if late_heal > STALL_S:
        print(f"the proxy healed the link {late_heal:.3f} s late: the machine stalled it")
    log = settled_log(robot, run.ended + COAST_S)
    print(f"robot:\n{controllers(log, run)}")
    losses = judge_the_losses(run, log)
    behind, _ = lateness(log, run)
    assert any(j.start.duration_ms < PLAN[j.index][2] for j in behind), (
        "no step was resumed with what was left of it"
    )
    assert losses.gap >= 0.5, f"the robot never went without packets for the drop: {losses.gap:.3f} s"
    assert losses.back > losses.stopped_at + COAST_S  # a 1 s drop: time to see the robot stand still
    metres, degrees = closure(log, run.began, run.ended)
    print(
        f"drop: robot silent {losses.gap:.2f} s, stopped {losses.stopped_at - losses.last:.3f} s after its "
        f"last packet; the square ends {metres * 100:.0f} cm and {degrees:+.0f} degrees from where it began"
    )


def test_ctrl_c_stops_the_robot_and_exits_130(coprocessor: Path, robot: SimRobot) -> None:
    began = time.time()
    proc = subprocess.Popen(
        [str(coprocessor), str(EXAMPLE), "--port", str(robot.port)],
        cwd=coprocessor.parent,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # Mid-side: once the robot's log shows the first command running.
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not read_log(robot.log_dir).commands(began, math.inf):
            assert proc.poll() is None and time.monotonic() < deadline, "the square never started"
            time.sleep(0.1)
        interrupted = time.time()
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=RUN_TIMEOUT_S)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ended = time.time()
    print(f"\n{output}")
    assert proc.returncode == 130, output
    assert "interrupted" in output.splitlines()[-1], output
    log = settled_log(robot, ended + COAST_S)
    seen = (
        f"Ctrl-C at 0, the example ended at {ended - interrupted:.3f} s; the robot's log:\n"
        f"{timeline(log, interrupted - 1.0, ended + COAST_S, interrupted)}"
    )
    print(seen)
    # The stop went before the example exited; the robot records it when its receive thread has
    # handed it on, which a busy machine can hold past that exit.
    stops = [t for t, n, clear in log.packets(interrupted, ended + COAST_S) if n == 0 and clear]
    assert stops, f"no CLEAR_QUEUE stop reached the robot after Ctrl-C\n{seen}"
    stop = stops[0]
    assert stop - interrupted < STOP_WITHIN_S, seen
    # Stopped at the next tick (a stop skips the acceleration limits), and nothing started after.
    # That tick may be logged before the stop is (see Log.packets): then the robot applied nothing
    # already when the stop was recorded. And a machine may hold the robot's loop past the
    # example's end: the log is read to its end (settled_log: it holds a tick after that).
    if log.at("BCNP/Applied/Vx", stop) == 0.0:
        stopped_at = stop
    else:
        stopped = [t for t, v in log.between("BCNP/Applied/Vx", stop, math.inf) if v == 0.0]
        assert stopped, f"the robot never stopped after the stop\n{seen}"
        stopped_at = stopped[0]
    # No tick began after the stop without stopping (judged by when each began: a machine that held
    # the loop mid-tick writes its records late), nor did the robot drive again after.
    loop = log.loop()
    assert not loop.began_between(stop + STAMP_S, loop.began_before(stopped_at)), seen
    assert all(v == 0.0 for _, v in log.between("BCNP/Applied/Vx", stopped_at, math.inf)), seen
    assert log.commands(stop, math.inf) == [], seen
    x0, y0, _ = log.pose(stopped_at + COAST_S)
    x1, y1, _ = log.pose(math.inf)
    assert math.hypot(x1 - x0, y1 - y0) < 0.01, seen
