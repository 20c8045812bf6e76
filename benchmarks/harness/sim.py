"""The launcher: the real robot program (or another robot program) in a headless simulator process.

:class:`SimRobot` runs ``robot.py`` as ``python run.py sim --nogui`` does
(``python -m robotpy --main robot.py sim --nogui`` in the project's ``.sim/``,
``BCNP_SIM_AUTONOMOUS=1``: autonomous, enabled), in its own process, with BCNP
on a port of its own and its ``.wpilog`` in a folder of its own. One difference:
robotpy loads its ``sim`` command alone (:data:`BOOT`; ``robotpy_command=None`` loads
every installed command, as ``robotpy`` itself does), which halves the CPU a start takes::

    with SimRobot(tmp / "logs") as robot:
        robot.start()                   # returns once BCNP answers on robot.port
        robot.wait_ticking()            # ... and once its loop runs
        ...                             # drive it: Client("127.0.0.1", robot.port)
        robot.kill()                    # a crash (SIGKILL) ...
        robot.start()                   # ... and a restart, same port, a new .wpilog
    starts = read_command_starts(tmp / "logs")   # .robotlog

Ports. BCNP uses one number for TCP and UDP; ``port=0`` picks one that is free
for both (bound on all interfaces, as the robot binds it) and keeps it across
restarts. NetworkTables: each SimRobot serves it on a free port of its own (``nt_port``,
through ``BCNP_SIM_NT_PORT``: physics.py starts the server there before the robot is built,
so 5810 is never bound, even for a moment; NT3 closed), so several run side by side, beside
a user's sim too, and a reader of one robot's keys (:class:`~.truth.FieldPose`, ``bcnp
monitor --port``, ``send --nt-port``) never reaches another. Without ``--nogui`` no HAL sim
extension (websockets, DS socket) is loaded, so nothing else is bound.

Readiness. :meth:`SimRobot.start` returns when a TCP connect to
``127.0.0.1:port`` succeeds and the robot's BCNP handshake (which it sends to
every accepted connection before reading anything) arrives with this robot's
schema hash. The probe then closes without sending a handshake of its own, so
it never becomes the controller and a host connecting at the same moment is
not refused.

Other programs. ``program`` runs another ``robot.py`` (an empty TimedRobot, say) the
same way; ``start(ready=False)`` returns once the process is spawned, for a program that
does not speak BCNP. ``first_tick=True`` has :data:`BOOT` report the end of the robot's
first loop (:meth:`SimRobot.wait_first_tick`, on the
clock :attr:`SimRobot.spawned_ns` is read on, just before the spawn). ``python_flags``
go before the command (``-X importtime``). A program without this project's physics.py
serves NetworkTables where ``robotpy sim`` puts it (5810).
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from benchmarks.harness import ROOT
from benchmarks.harness.ports import free_port

#: How often start() looks for the robot's port while it starts.
POLL_S = 0.01
#: The variable that hands :data:`BOOT` the pipe it writes the first tick to.
FIRST_TICK_FD_ENV = "BCNP_STARTUP_FD"

#: The variable that names the one robotpy command :data:`BOOT` loads (``SimRobot.robotpy_command``).
ONE_COMMAND_ENV = "BCNP_ROBOTPY_COMMAND"

#: Runs robotpy as ``python -m robotpy`` does, with two differences, each asked for through
#: the environment. With :data:`FIRST_TICK_FD_ENV`: a HAL simulation callback that runs at the
#: end of every loop writes the monotonic clock (ns) to that pipe the first time (``hal`` is
#: imported a little earlier than the robot would). With :data:`ONE_COMMAND_ENV`: robotpy loads
#: that one of its commands. robotpy itself imports every installed command's module before it
#: reads its arguments (to list them in its help): pyfrc's ``test`` and ``coverage`` import
#: pytest, robotpy-installer's commands its packaging libraries, half a second of CPU that a
#: ``sim`` never uses (0.94 s to the end of the first tick with all of them, 0.49 s with ``sim``
#: alone, measured here 2026-11-27).
BOOT = f"""\
import os, sys
_fd = os.environ.pop({FIRST_TICK_FD_ENV!r}, None)
if _fd is not None:
    import time
    import hal.simulation
    _ticks = []
    def _first_tick():
        if not _ticks:
            _ticks.append(time.monotonic_ns())
            os.write(int(_fd), b"%d\\n" % _ticks[0])
    _callback = hal.simulation.registerSimPeriodicAfterCallback(_first_tick)
_only = os.environ.pop({ONE_COMMAND_ENV!r}, None)
if _only:
    import importlib.metadata
    _entry_points = importlib.metadata.entry_points
    def _one_command(**params):
        found = _entry_points(**params)
        if str(params.get("group", "")).startswith("robotpy_cli"):
            return [point for point in found if point.name == _only]
        return found
    importlib.metadata.entry_points = _one_command
import runpy
sys.argv[0] = "robotpy"
runpy.run_module("robotpy", run_name="__main__", alter_sys=True)
"""


def wirings() -> tuple[str, ...]:
    """The drivetrain wirings the robot builds (``BCNP_DRIVETRAIN``; ``SimRobot``'s ``drivetrain``),
    in its own order: the keys of ``subsystems.drivetrain.io.WIRINGS``, read from its source, so a
    benchmark that checks its arguments against them loads no WPILib to do it."""
    source = ROOT / "subsystems" / "drivetrain" / "io.py"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "WIRINGS" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise RuntimeError(f"no WIRINGS in {source}")


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


def spawn(command: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` for a helper process of a benchmark or test (a simulator, a probe):
    stdin closed, SIGINT as usual, killed when this process dies (Linux)."""
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        preexec_fn=_child_setup if _LIBC is not None else None,
        **kwargs,
    )


class SimRobot:
    """``robot.py`` in a headless simulator process; see the module docs.

    ``log_dir`` gets the robot's ``.wpilog`` files (one per start) and its console
    output (``robot-output-N.txt``, N counting starts); give each SimRobot its own.
    ``env`` is added to this process's environment for the robot, last (it may
    override ``BCNP_*``; a value of ``None`` removes the variable). ``python`` and
    ``project`` run another interpreter or a copy of the project (an upload set);
    ``program`` another robot program (default: the project's ``robot.py``).
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
        program: Path | None = None,
        python_flags: Sequence[str] = (),
        first_tick: bool = False,
        robotpy_command: str | None = "sim",
    ) -> None:
        self.log_dir = Path(log_dir)
        #: Its NetworkTables server's port: one of its own (``BCNP_SIM_NT_PORT``), never 5810
        #: unless asked, so a reader of this robot's keys never reaches another simulator.
        self.nt_port = nt_port or free_port()
        #: The interpreter that runs the robot (default: this one) and the project folder it runs.
        self.python = python or sys.executable
        self.project = Path(project) if project is not None else ROOT
        self.program = Path(program) if program is not None else None
        self.python_flags = tuple(python_flags)
        self.first_tick = first_tick
        #: The one robotpy command the process loads (:data:`BOOT`); ``None``: every installed one.
        self.robotpy_command = robotpy_command
        self.port = port or free_port()
        self.drivetrain = drivetrain
        self.extra_env = dict(env or {})
        #: time.monotonic() when start() first saw the robot listening (the last start).
        self.listening_at: float | None = None
        #: time.monotonic_ns() just before the last start spawned the process.
        self.spawned_ns = 0
        #: Seconds from :attr:`spawned_ns` to the end of the first tick, and the process's CPU
        #: time then (:meth:`wait_first_tick`, the last start).
        self.first_tick_s: float | None = None
        self.first_tick_cpu_s: float | None = None
        #: How many times start() has spawned the robot.
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None
        self._output_path: Path | None = None
        self._tick_pipe: int | None = None

    # -- the process ---------------------------------------------------------------------

    def command(self) -> tuple[Path, list[str], dict[str, str]]:
        """(working directory, command line, environment) of the robot process."""
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        import run  # the project's run.py: how `python run.py sim` starts the sim

        args = ["--nogui"]
        cwd, command = run.sim_command(self.project, self.python, args)
        if self.program is not None:
            command[command.index("--main") + 1] = str(self.program)
            cwd = self.program.parent / run.SIM_DIR
            cwd.mkdir(exist_ok=True)
        command[1:3] = ["-c", BOOT]  # `-m robotpy`, by way of BOOT
        command[1:1] = self.python_flags
        env = run.sim_environment(args, dict(os.environ))
        if self.robotpy_command:
            env[ONE_COMMAND_ENV] = self.robotpy_command
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

    def start(self, timeout: float = 60.0, *, ready: bool = True) -> None:
        """Start the robot; return once it answers on ``port`` with a BCNP handshake
        (``ready=False``: once it is spawned).

        Raises ``RuntimeError`` (with the process's last output) if it exits or
        does not answer within ``timeout`` s; the process is stopped then."""
        if self.alive():
            raise RuntimeError(f"the robot is already running (pid {self.pid})")
        self._close_output()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.listening_at = None
        self.first_tick_s = self.first_tick_cpu_s = None
        cwd, command, env = self.command()
        pass_fds: tuple[int, ...] = ()
        if self.first_tick:
            self._tick_pipe, write = os.pipe()
            env[FIRST_TICK_FD_ENV] = str(write)
            pass_fds = (write,)
        self._output_path = self.log_dir / f"robot-output-{self.starts}.txt"
        self._output = open(self._output_path, "wb")  # noqa: SIM115 - closed by close()/kill()
        self.spawned_ns = time.monotonic_ns()
        try:
            self._proc = spawn(
                command, cwd=cwd, env=env, stdout=self._output, stderr=subprocess.STDOUT, pass_fds=pass_fds
            )
        finally:
            for fd in pass_fds:
                os.close(fd)
        if not ready:
            return
        deadline = time.monotonic() + timeout
        try:
            self._wait_ready(deadline)
        except BaseException:
            self.close()
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

    def wait_first_tick(self, timeout: float = 180.0) -> float:
        """Seconds from just before the spawn to the end of the first tick (``first_tick=True``);
        also reads the process's CPU time then (:attr:`first_tick_cpu_s`)."""
        if self._tick_pipe is None:
            raise RuntimeError("started without first_tick=True (or already waited for)")
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no first tick within {timeout:g} s")
            readable, _, _ = select.select([self._tick_pipe], [], [], min(left, 1.0))
            if readable:
                chunk = os.read(self._tick_pipe, 64)
                if not chunk:
                    raise RuntimeError(f"the robot exited before its first tick ({proc.poll()})")
                line += chunk
            elif proc.poll() is not None:
                raise RuntimeError(f"the robot exited before its first tick ({proc.returncode})")
        self.first_tick_s = (int(line) - self.spawned_ns) / 1e9
        self.first_tick_cpu_s = self.cpu_seconds()
        return self.first_tick_s

    def wait_ticking(self, timeout: float = 30.0, packets: int = 5) -> None:
        """Wait until the robot loop runs: as a controller, until ``packets`` telemetry
        packets (one per two 20 ms ticks) have arrived, then disconnect.

        The robot listens from ``robotInit``, before its loop starts: a command sent
        as :meth:`start` returns starts when the first tick runs, tens of ms later
        (20 to 95 ms measured), and everything queued behind it as late. Call this
        first when start times matter. Raises ``bcnp.host.link.client.LinkError`` if
        another controller owns the link, ``RuntimeError`` after ``timeout`` s."""
        from bcnp.host.link.client import Client
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

    def close(self) -> None:
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
        if self._tick_pipe is not None:
            with contextlib.suppress(OSError):
                os.close(self._tick_pipe)
            self._tick_pipe = None

    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def _proc_file(self, name: str) -> Path:
        if self._proc is None:
            raise RuntimeError("the robot was never started")
        return Path(f"/proc/{self._proc.pid}/{name}")

    def rss_bytes(self) -> int:
        """Resident memory of the robot's process (``VmRSS``), bytes."""
        for line in self._proc_file("status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS in /proc/<pid>/status")

    def cpu_seconds(self) -> float:
        """CPU time of all the process's threads so far (``/proc/PID/task/*/schedstat``)."""
        total = 0
        for task in self._proc_file("task").iterdir():
            with contextlib.suppress(OSError):
                total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9

    def output_path(self) -> Path | None:
        """The file the robot's console output goes to (this start)."""
        if self._output is not None:
            self._output.flush()
        return self._output_path

    def output(self, lines: int = 40) -> str:
        """The last ``lines`` lines the robot printed (this start)."""
        path = self.output_path()
        if path is None:
            return ""
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> SimRobot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
