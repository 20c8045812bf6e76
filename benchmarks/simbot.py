"""The real robot program in a headless simulator process, and what its data log says it did.

:class:`SimRobot` runs ``robot.py`` as ``python run.py sim --nogui`` does
(``python -m robotpy --main robot.py sim --nogui`` in the project's ``.sim/``,
``BCNP_SIM_AUTONOMOUS=1``: autonomous, enabled), in its own process, with BCNP
on a port of its own and its ``.wpilog`` in a folder of its own::

    with SimRobot(tmp / "logs") as robot:
        robot.start()                   # returns once BCNP answers on robot.port
        robot.wait_ticking()            # ... and once its loop runs
        ...                             # drive it: Client("127.0.0.1", robot.port)
        robot.kill()                    # a crash (SIGKILL) ...
        robot.start()                   # ... and a restart, same port, a new .wpilog
    starts = read_command_starts(tmp / "logs")

Ports. BCNP uses one number for TCP and UDP; ``port=0`` picks one that is free
for both (bound on all interfaces, as the robot binds it) and keeps it across
restarts. NetworkTables: ``robotpy sim`` starts its server on 1735 and 5810; each
SimRobot moves it to a free port of its own (``nt_port``, through ``BCNP_SIM_NT_PORT``:
physics.py restarts the server there, NT3 closed), so several run side by side, beside
a user's sim too, and a reader of one robot's keys (:class:`FieldPose`, ``bcnp monitor
--port``, ``send --nt-port``) never reaches another. Without ``--nogui`` no HAL sim
extension (websockets, DS socket) is loaded, so nothing else is bound.

Readiness. :meth:`SimRobot.start` returns when a TCP connect to
``127.0.0.1:port`` succeeds and the robot's BCNP handshake (which it sends to
every accepted connection before reading anything) arrives with this robot's
schema hash. The probe then closes without sending a handshake of its own, so
it never becomes the controller and a host connecting at the same moment is
not refused.

Clocks. A data log's timestamps are the robot's FPGA time in microseconds; in
the simulator that is time since the HAL started, so a restarted robot counts
from about 0 again, in a new file. WPILib's ``DataLogManager`` writes a
``systemTime`` entry every 5 s once the system time is valid (always, in the
simulator): its value is the wall clock (``gettimeofday``, µs since the
epoch, the scale of ``time.time()``) and its record's timestamp the FPGA time,
read one right after the other by the log thread. Each file's offset
(wall - FPGA) is the median over its anchors (:class:`LogClock`), so one
anchor read across a preemption does not move it. Error bound, per file: the
anchors' spread (``LogClock.spread_us``: 0 to 1 µs in the simulator, where both
clocks advance together, the FPGA clock being the monotonic clock since the
HAL started). A system clock stepped or slewed during the run (NTP slews at
most 500 ppm: 0.5 ms per second) moves records away from the median anchor by
as much, and shows in the spread, for records between the first and last anchor. Checked
end to end: single commands sent to an idle robot at known ``time.time()``
moments start, by the mapped log, 1.1 to 20.9 ms later, the spread of one
20 ms tick with nothing below it, so the mapping is right to about a millisecond.
The first anchor is written 5 s after the robot starts, so a robot that ran
less than that (or was killed sooner) leaves a log without one: its commands
cannot be placed on the wall clock, and :func:`read_command_starts` says so.

The log thread writes the file every 0.25 s: a killed or stopped robot (SIGTERM
does not flush it either) loses what it recorded in its last quarter second;
poll :func:`read_command_starts` until the expected entries are there while the
robot still runs.
"""

from __future__ import annotations

import ctypes
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent

__all__ = [
    "CommandStart",
    "LogClock",
    "SimRobot",
    "free_port",
    "late_commands",
    "log_clock",
    "read_command_starts",
]

#: The data log entries of each command made active (subsystems/recording.py).
VX_ENTRY, OMEGA_ENTRY, DURATION_ENTRY = "BCNP/Command/Vx", "BCNP/Command/Omega", "BCNP/Command/DurationMs"
#: DataLogManager's wall-clock anchor: value µs since the epoch, timestamp FPGA µs.
SYSTEM_TIME_ENTRY = "systemTime"
#: How often start() looks for the robot's port while it starts.
POLL_S = 0.01


def free_port(attempts: int = 50) -> int:
    """A port number free for both TCP and UDP on every interface (bound, then released)."""
    for _ in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("", port))
                except OSError:
                    continue
                return port
    raise OSError(f"no port free for both TCP and UDP after {attempts} attempts")


def _libc() -> Any:
    """The C library, loaded in this process (never between fork and exec); ``None`` if not there."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _libc() if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _child_setup() -> None:  # pragma: no cover - runs in the child before exec
    """SIGINT as usual even if the parent ignores it; SIGKILL when the parent dies (Linux).

    PR_SET_PDEATHSIG fires when the *thread* that started the child ends: start a
    SimRobot from a thread that outlives it (the main thread, in a test)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class SimRobot:
    """``robot.py`` in a headless simulator process; see the module docs.

    ``log_dir`` gets the robot's ``.wpilog`` files (one per start) and its console
    output (``robot-output-N.txt``, N counting starts); give each SimRobot its own.
    ``env`` is added to this process's environment for the robot, last (it may
    override ``BCNP_*``; a value of ``None`` removes the variable). ``python`` and
    ``project`` run another interpreter or a copy of the project (an upload set).
    """

    def __init__(
        self,
        log_dir: Path,
        port: int = 0,
        *,
        drivetrain: str = "kitbot",
        env: dict[str, str | None] | None = None,
        python: str | None = None,
        project: Path | None = None,
        nt_port: int = 0,
    ) -> None:
        self.log_dir = Path(log_dir)
        #: Its NetworkTables server's port: one of its own (``BCNP_SIM_NT_PORT``), never 5810
        #: unless asked, so a reader of this robot's keys never reaches another simulator.
        self.nt_port = nt_port or free_port()
        #: The interpreter that runs the robot (default: this one) and the project folder it runs.
        self.python = python or sys.executable
        self.project = Path(project) if project is not None else ROOT
        self.port = port or free_port()
        self.drivetrain = drivetrain
        self.extra_env = dict(env or {})
        #: time.monotonic() when start() first saw the robot listening (the last start).
        self.listening_at: float | None = None
        #: How many times start() has spawned the robot.
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None
        self._output_path: Path | None = None

    # -- the process ---------------------------------------------------------------------

    def command(self) -> tuple[Path, list[str], dict[str, str]]:
        """(working directory, command line, environment) of the robot process."""
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        import run  # the project's run.py: how `python run.py sim` starts the sim

        args = ["--nogui"]
        cwd, command = run.sim_command(self.project, self.python, args)
        env = run.sim_environment(args, dict(os.environ))
        env.update(
            {
                "BCNP_PORT": str(self.port),
                "BCNP_LOG_DIR": str(self.log_dir.resolve()),
                "BCNP_DRIVETRAIN": self.drivetrain,
                "BCNP_SIM_AUTONOMOUS": "1",
                "BCNP_SIM_NT_PORT": str(self.nt_port),
                "PYTHONUNBUFFERED": "1",
            }
        )
        for name, value in self.extra_env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return cwd, command, env

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self, timeout: float = 60.0) -> None:
        """Start the robot; return once it answers on ``port`` with a BCNP handshake.

        Raises ``RuntimeError`` (with the process's last output) if it exits or
        does not answer within ``timeout`` s; the process is stopped then."""
        if self.alive():
            raise RuntimeError(f"the robot is already running (pid {self.pid})")
        self._close_output()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.listening_at = None
        cwd, command, env = self.command()
        self._output_path = self.log_dir / f"robot-output-{self.starts}.txt"
        self._output = open(self._output_path, "wb")  # noqa: SIM115 - closed by stop()/kill()
        self._proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            preexec_fn=_child_setup if _LIBC is not None else None,
        )
        deadline = time.monotonic() + timeout
        try:
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, deadline: float) -> None:
        from bcnp.connection import HandshakeAccepted, check_handshake
        from bcnp.wire import HANDSHAKE_SIZE
        from messages import SCHEMA

        proc = self._proc
        assert proc is not None
        why = "nothing listening"
        while True:
            code = proc.poll()
            if code is not None:
                raise RuntimeError(f"the robot exited with status {code} while starting:\n{self.output()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"the robot did not answer on port {self.port} ({why}):\n{self.output()}")
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=min(left, 1.0))
            except OSError as exc:
                why = f"connect: {exc.strerror or exc}"
                time.sleep(POLL_S)
                continue
            with sock:
                if self.listening_at is None:
                    self.listening_at = time.monotonic()
                data = b""
                try:
                    sock.settimeout(max(0.05, min(deadline - time.monotonic(), 5.0)))
                    while len(data) < HANDSHAKE_SIZE:
                        chunk = sock.recv(HANDSHAKE_SIZE - len(data))
                        if not chunk:
                            break
                        data += chunk
                except OSError as exc:
                    why = f"handshake: {exc.strerror or exc}"
                    time.sleep(POLL_S)
                    continue
            outcome = check_handshake(data, SCHEMA.hash)
            if isinstance(outcome, HandshakeAccepted):
                return
            why = f"handshake: {outcome.reason}"
            time.sleep(POLL_S)

    def wait_ticking(self, timeout: float = 10.0, packets: int = 5) -> None:
        """Wait until the robot loop runs: as a controller, until ``packets`` telemetry
        packets (one per two 20 ms ticks) have arrived, then disconnect.

        The robot listens from ``robotInit``, before its loop starts: a command sent
        as :meth:`start` returns starts when the first tick runs, tens of ms later
        (20 to 95 ms measured), and everything queued behind it as late. Call this
        first when start times matter. Raises ``bcnp.host.client.LinkError`` if
        another controller owns the link, ``RuntimeError`` after ``timeout`` s."""
        from bcnp.host.client import Client
        from messages import SCHEMA

        deadline = time.monotonic() + timeout
        with Client(SCHEMA, "127.0.0.1", self.port, reconnect=False, timeout=min(timeout, 2.0)) as client:
            got = 0
            while got < packets:
                left = deadline - time.monotonic()
                if left <= 0 or client.receive(left) is None:
                    raise RuntimeError(
                        f"the robot sent {got} telemetry packet(s) in {timeout:g} s:\n{self.output()}"
                    )
                got += 1

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash or a power cut; waits until the process is gone."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self._close_output()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; waits until the process is gone. Idempotent."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._close_output()

    def _close_output(self) -> None:
        if self._output is not None:
            self._output.close()
            self._output = None

    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def rss_bytes(self) -> int:
        """Resident memory of the robot's process (``VmRSS``), bytes."""
        if self._proc is None:
            raise RuntimeError("the robot was never started")
        text = Path(f"/proc/{self._proc.pid}/status").read_text()
        for line in text.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS in /proc/<pid>/status")

    def output(self, lines: int = 40) -> str:
        """The last ``lines`` lines the robot printed (this start)."""
        if self._output is not None:
            self._output.flush()
        if self._output_path is None:
            return ""
        try:
            text = self._output_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> SimRobot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- the data log ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandStart:
    """A command as the robot made it active (after clamping), from its data log."""

    #: Seconds since the epoch (the ``time.time()`` scale) when the robot made it active.
    wall_time: float
    vx: float
    omega: float
    duration_ms: int


@dataclass(frozen=True)
class LogClock:
    """One data log's robot time on the wall clock: wall µs = FPGA µs + ``offset_us``."""

    offset_us: float
    #: Largest minus smallest anchor offset (µs): how far the file's anchors disagree.
    spread_us: float
    anchors: int

    def wall(self, fpga_us: int) -> float:
        """``time.time()`` seconds of a record stamped ``fpga_us``."""
        return (fpga_us + self.offset_us) / 1e6


def _records(path: Path) -> Iterator[tuple[str, int, Any]]:
    """(entry name, timestamp µs, record) for each data record of a ``.wpilog``."""
    from wpiutil.log import DataLogReader

    reader = DataLogReader(str(path))
    if not reader.isValid():
        return
    names: dict[int, str] = {}
    for record in reader:
        if record.isStart():
            start = record.getStartData()
            names[start.entry] = start.name
        elif not record.isControl():
            name = names.get(record.getEntry())
            if name is not None:
                yield name, record.getTimestamp(), record


def log_clock(path: Path) -> LogClock | None:
    """The file's FPGA → wall-clock mapping from its ``systemTime`` anchors; ``None`` without one."""
    offsets = [
        record.getInteger() - stamp for name, stamp, record in _records(path) if name == SYSTEM_TIME_ENTRY
    ]
    if not offsets:
        return None
    return LogClock(float(statistics.median(offsets)), float(max(offsets) - min(offsets)), len(offsets))


def read_command_starts(log_dir: Path) -> list[CommandStart]:
    """Every command made active in every ``.wpilog`` in ``log_dir`` (a restarted
    robot writes a new file), on the wall clock, in time order.

    Raises ``ValueError`` for a file with commands but no ``systemTime`` anchor (a
    robot that ran less than 5 s): its commands cannot be placed in time."""
    starts: list[CommandStart] = []
    for path in sorted(Path(log_dir).glob("*.wpilog")):
        vx: list[tuple[int, float]] = []
        omega: list[float] = []
        duration: list[int] = []
        offsets: list[int] = []
        for name, stamp, record in _records(path):
            if name == VX_ENTRY:
                vx.append((stamp, record.getDouble()))
            elif name == OMEGA_ENTRY:
                omega.append(record.getDouble())
            elif name == DURATION_ENTRY:
                duration.append(record.getInteger())
            elif name == SYSTEM_TIME_ENTRY:
                offsets.append(record.getInteger() - stamp)
        if not vx:
            continue
        if not offsets:
            raise ValueError(
                f"{path}: {len(vx)} command(s) but no systemTime entry to place them on the wall "
                "clock (DataLogManager writes the first 5 s after the robot starts)"
            )
        offset = statistics.median(offsets)
        # The three entries are written together, in this order; a log cut by a kill
        # may end inside a triple: the incomplete one is left out.
        for (stamp, v), w, ms in zip(vx, omega, duration, strict=False):
            starts.append(CommandStart((stamp + offset) / 1e6, v, w, ms))
    starts.sort(key=lambda s: s.wall_time)
    return starts


def late_commands(
    starts: Sequence[CommandStart],
    plan_starts: Sequence[float],
    host_start_wall: float,
    *,
    index_of: Callable[[CommandStart], int],
    tolerance: float = 0.2,
) -> list[tuple[int, float]]:
    """``(index, seconds late)`` of each start later than the host's plan for it plus ``tolerance``.

    ``plan_starts`` is ``Schedule.starts`` (seconds from the first send, one more
    than the commands: the last is the path's end); ``host_start_wall`` the first
    send on the wall clock (``Replay.start`` with ``clock=time.time``). ``index_of``
    names the plan's command a start is (a negative index: not this plan's, ignored).
    A start shorter than planned is a resumed remainder: it was due at its
    command's planned end minus its duration."""
    commands = len(plan_starts) - 1
    late: list[tuple[int, float]] = []
    for start in starts:
        i = index_of(start)
        if i < 0:
            continue
        if i >= commands:
            raise ValueError(f"index {i} is outside the plan ({commands} commands)")
        planned_ms = round((plan_starts[i + 1] - plan_starts[i]) * 1000)
        if start.duration_ms < planned_ms:
            due = plan_starts[i + 1] - start.duration_ms / 1000
        else:
            due = plan_starts[i]
        lateness = start.wall_time - (host_start_wall + due)
        if lateness > tolerance:
            late.append((i, lateness))
    return late


class FieldPose:
    """A simulated robot's true pose (x, y, radians: the physics model's, published as
    ``/SmartDashboard/Field/Robot``) over NetworkTables on ``nt_port``, sampled in a thread."""

    def __init__(self, nt_port: int) -> None:
        import ntcore

        self.inst = ntcore.NetworkTableInstance.create()
        self.inst.startClient4("bcnp-field-pose")
        self.inst.setServer("127.0.0.1", nt_port)
        self.sub = self.inst.getDoubleArrayTopic("/SmartDashboard/Field/Robot").subscribe([])
        self.samples: list[tuple[float, float, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pose(self, timeout: float = 10.0) -> tuple[float, float, float]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.sub.get()
            if len(value) >= 3:
                return value[0], value[1], math.radians(value[2])
            time.sleep(0.02)
        raise RuntimeError("no pose from the simulator on NetworkTables")

    def record(self) -> None:
        with self._lock:
            self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            pose = self.pose()
            with self._lock:
                self.samples.append(pose)
            time.sleep(0.02)

    def stop(self) -> list[tuple[float, float, float]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            return list(self.samples)

    def close(self) -> None:
        import ntcore

        self.inst.stopClient()
        ntcore.NetworkTableInstance.destroy(self.inst)


# -- judging a path: the benchmarks' shared geometry --------------------------------------------

#: A path as its x and y coordinates (metres).
Path2D = tuple[list[float], list[float]]
#: Between cases: the last controller has gone (link timeout) and the robot stands still.
PAUSE_S = 1.5
#: Truth still sampled after a case's host returns.
TAIL_S = 0.5


def relative(poses: Sequence[tuple[float, float, float]], origin: tuple[float, float, float]) -> Path2D:
    ox, oy, oh = origin
    c, s = math.cos(-oh), math.sin(-oh)
    xs = [c * (x - ox) - s * (y - oy) for x, y, _ in poses]
    ys = [s * (x - ox) + c * (y - oy) for x, y, _ in poses]
    return xs, ys


def deviation(driven: Path2D, commanded: Path2D) -> float:
    """The largest distance from a driven pose to the nearest point of the commanded polyline."""
    import numpy as np

    px, py = np.asarray(driven[0])[:, None], np.asarray(driven[1])[:, None]
    ax, ay = np.asarray(commanded[0][:-1])[None, :], np.asarray(commanded[1][:-1])[None, :]
    bx, by = np.asarray(commanded[0][1:])[None, :], np.asarray(commanded[1][1:])[None, :]
    dx, dy = bx - ax, by - ay
    norm = dx * dx + dy * dy
    safe = np.where(norm > 0, norm, 1.0)
    u = np.clip(((px - ax) * dx + (py - ay) * dy) / safe, 0.0, 1.0)
    u = np.where(norm > 0, u, 0.0)
    dist = np.hypot(ax + u * dx - px, ay + u * dy - py).min(axis=1)
    return float(dist.max())


@dataclass
class Watched:
    """One drive watched through the simulator's true pose (:func:`watch_drive`)."""

    #: Every pose sampled (x, y, heading), the first where the robot stood at the start.
    poses: list[tuple[float, float, float]]
    seconds: float
    #: Why the drive ended early (``"LinkClosedError: ..."``), or ``""``.
    error: str

    @property
    def driven(self) -> Path2D:
        """The path driven, relative to the start pose (as a planned path is)."""
        return relative(self.poses, self.poses[0])

    def end_m(self, reference: Any) -> float:
        """Distance from where the robot ended to the end of ``reference`` (a Trajectory)."""
        xs, ys = self.driven
        return math.hypot(xs[-1] - reference.end.x, ys[-1] - reference.end.y)

    def end_rad(self, reference: Any) -> float:
        """Heading error at the end, against ``reference``'s end heading."""
        return abs(math.remainder(self.poses[-1][2] - self.poses[0][2] - reference.end.heading, math.tau))

    def deviation_m(self, reference: Any) -> float:
        """Largest distance from the driven path to ``reference``'s."""
        return deviation(self.driven, ([s.x for s in reference.states], [s.y for s in reference.states]))


def watch_drive(truth: FieldPose, drive: Callable[[], object]) -> Watched:
    """Runs ``drive()`` while ``truth`` samples the pose, then :data:`TAIL_S` more. A lost link
    (``LinkError``) ends the drive and is its ``error``."""
    from bcnp.host.client import LinkError

    origin = truth.pose()
    truth.record()
    start = time.monotonic()
    error = ""
    try:
        drive()
    except LinkError as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        seconds = time.monotonic() - start
        time.sleep(TAIL_S)
        poses = truth.stop()
    return Watched([origin, *poses], seconds, error)
