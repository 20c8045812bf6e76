"""run.py: the quick start's sim command and the shipped sim GUI layout; how a task stops
(real ``run.py sim --nogui`` processes, real signals, a real terminal); what a task's first
command installs (real interpreters, pip kept off the network)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import wait_until

import run
from benchmarks.harness import ROOT
from benchmarks.harness.ports import free_port

POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and terminals")
#: Generous bounds for a busy machine: never timing assertions.
START_TIMEOUT_S, STOP_TIMEOUT_S = 180.0, 60.0


def test_the_shipped_layout_opens_the_field_and_the_network_keys() -> None:
    layout = ROOT / ".sim-layout"
    gui = json.loads((layout / "simgui.json").read_text())
    field = gui["NTProvider"]["windows"]["/SmartDashboard/Field"]
    assert gui["NTProvider"]["types"]["/SmartDashboard/Field"] == "Field2d" and field["window"]["visible"]
    assert field["Trail"]["style"] == "Line"
    assert gui["NetworkTables"]["transitory"]["SmartDashboard"]["Network"]["open"] is True
    ds = json.loads((layout / "simgui-ds.json").read_text())
    assert ds["robotJoysticks"] == [{"guid": "Keyboard0"}]
    windows = json.loads((layout / "simgui-window.json").read_text())["Window"]
    assert {"###/SmartDashboard/Field", "###NetworkTables"} <= set(windows)


def test_sim_runs_in_a_dot_folder_seeded_with_the_layout_without_overwriting(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / ".sim-layout", project / ".sim-layout")
    workdir, command = run.sim_command(project, sys.executable, ["--nogui"])
    assert workdir == project / ".sim"
    assert command == [sys.executable, "-m", "robotpy", "--main", str(project / "robot.py"), "sim", "--nogui"]
    seeded = sorted(p.name for p in workdir.iterdir())
    assert seeded == ["simgui-ds.json", "simgui-window.json", "simgui.json"]
    (workdir / "simgui.json").write_text("{}")  # the user's own window changes
    run.sim_command(project, sys.executable, [])
    assert (workdir / "simgui.json").read_text() == "{}"


def test_a_headless_sim_starts_in_autonomous_unless_told_otherwise() -> None:
    assert run.sim_environment(["--nogui"], {"PATH": "/bin"}) == {"PATH": "/bin", "BCNP_SIM_AUTONOMOUS": "1"}
    assert run.sim_environment(["--nogui"], {"BCNP_SIM_AUTONOMOUS": "0"}) == {"BCNP_SIM_AUTONOMOUS": "0"}
    assert run.sim_environment([], {}) == {}  # the GUI sim starts disabled: it has the buttons


def test_the_suite_writes_bytecode_whatever_the_environment_says() -> None:
    assert run.test_environment({"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/bin"}) == {"PATH": "/bin"}
    assert run.test_environment({}) == {}


def test_the_sim_autonomous_switch_enables_the_simulated_robot(control, robot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """What physics.py does with BCNP_SIM_AUTONOMOUS=1: the simulated driver station is
    attached, in autonomous, enabled, with no test stepping it there."""
    from wpilib.simulation import DriverStationSim, stepTiming

    monkeypatch.setenv("BCNP_SIM_AUTONOMOUS", "1")
    with control.run_robot():
        stepTiming(0.1)  # the physics engine is made as the simulated robot starts
        assert DriverStationSim.getDsAttached()
        assert DriverStationSim.getAutonomous() and DriverStationSim.getEnabled()


def test_a_terminated_run_py_stops_its_child_too(tmp_path: Path) -> None:
    """`kill PID` of `run.py sim` (a SIGTERM to it alone, not its process group) must not
    leave the simulated robot running: run.py passes the signal on and exits with it."""
    started, stopped = tmp_path / "started", tmp_path / "stopped"
    child = (
        "import os, pathlib, signal, sys, time\n"
        f"def bye(*_): pathlib.Path({str(stopped)!r}).write_text('x'); sys.exit(3)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        # Written whole, then renamed: once `started` exists it holds the pid (a file that
        # existed before its pid was written let the test signal a child still writing it).
        f"pathlib.Path({str(started)!r} + '.part').write_text(str(os.getpid()))\n"
        f"os.replace({str(started)!r} + '.part', {str(started)!r})\n"
        "while True: time.sleep(0.05)\n"
    )
    parent = (
        "import sys; sys.path.insert(0, sys.argv[1]); import run\n"
        "raise SystemExit(run.run_child([sys.executable, '-c', sys.argv[2]], run.ROOT, {}))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent, str(ROOT), child])
    try:
        wait_until(started.exists, timeout=20, what="the child running")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 3  # the child's own exit status
        assert stopped.exists()
    finally:
        proc.kill()
        if started.exists():  # never leave the child behind, even when this test fails
            with contextlib.suppress(OSError):
                os.kill(int(started.read_text()), signal.SIGKILL)


def test_a_child_killed_by_a_signal_gives_the_shell_status() -> None:
    """A child that dies of the SIGTERM passed on: run.py exits 128 + 15, as a shell reports it."""
    parent = (
        "import sys; sys.path.insert(0, sys.argv[1]); import os, run, signal, threading\n"
        "threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()\n"
        "raise SystemExit(run.run_child([sys.executable, '-c', sys.argv[2]], run.ROOT, {}))\n"
    )
    sleeper = "import time; time.sleep(60)"  # no handler: SIGTERM's default, death
    proc = subprocess.run([sys.executable, "-c", parent, str(ROOT), sleeper], timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM


# -- stopping a task --------------------------------------------------------------------------


def ignore_sigint() -> None:  # runs in the child before exec
    """As a shell starts a background job ('&', nohup, a script): SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2.0).close()
    except OSError:
        return False
    return True


def port_free(port: int) -> bool:
    """Nothing holds ``port``: a new sim could listen on it over TCP and bind it over UDP
    (TCP as servers bind, SO_REUSEADDR: connections closing in TIME_WAIT do not count)."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as probe:
            if kind == socket.SOCK_STREAM:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("", port))
                if kind == socket.SOCK_STREAM:
                    probe.listen()
            except OSError:
                return False
    return True


class Sim:
    """``python run.py sim --nogui`` in a session of its own, on ports of its own, its output
    in files; killed whole (its process group) on the way out, whatever happened."""

    def __init__(self, tmp_path: Path, preexec_fn: Callable[[], None] | None = None, **popen: object) -> None:
        self.port, self.nt_port = free_port(), free_port()
        self.out, self.err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
        env = dict(os.environ, BCNP_PORT=str(self.port), BCNP_SIM_NT_PORT=str(self.nt_port))
        env["BCNP_LOG_DIR"] = str(tmp_path / "logs")
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "run.py"), "sim", "--nogui"],
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=True,
                preexec_fn=preexec_fn,
                **popen,  # type: ignore[call-overload]
            )

    def wait_serving(self) -> None:
        """Until the robot serves BCNP and NetworkTables on its ports (both held, then)."""

        def serving() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"run.py exited {self.proc.returncode}:\n{self.stderr()[-3000:]}")
            return accepts(self.port) and accepts(self.nt_port)

        wait_until(serving, timeout=START_TIMEOUT_S, what="the simulated robot serving its ports")

    def wait_stopped(self) -> int:
        status = self.proc.wait(timeout=STOP_TIMEOUT_S)
        wait_until(lambda: port_free(self.port) and port_free(self.nt_port), STOP_TIMEOUT_S, "ports freed")
        return status

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # run.py and the robot: one process group
        self.proc.wait()


@contextlib.contextmanager
def sim(tmp_path: Path, preexec_fn: Callable[[], None] | None = None, **popen: object) -> Iterator[Sim]:
    robot = Sim(tmp_path, preexec_fn, **popen)
    try:
        yield robot
    finally:
        robot.kill()


def assert_quiet_stop(robot: Sim) -> None:
    err = robot.stderr()
    assert "Traceback" not in err and "THIS IS NOT AN ERROR" not in err, err[-3000:]


@POSIX_ONLY
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_signal_to_run_py_alone_stops_the_sim_and_frees_its_ports(name: str, tmp_path: Path) -> None:
    """``kill -INT $!`` from a script, ``kill PID``, an IDE's stop button, a hangup: a signal
    to run.py's PID alone, run.py started as a background job (SIGINT ignored, which it must
    not keep). The robot goes too, quietly; its ports are free; run.py exits 128 + N."""
    signum = getattr(signal, name)
    with sim(tmp_path, ignore_sigint) as robot:
        robot.wait_serving()
        robot.proc.send_signal(signum)
        assert robot.wait_stopped() == 128 + signum
        assert_quiet_stop(robot)


@contextlib.contextmanager
def terminal() -> Iterator[tuple[int, int, Callable[[], None]]]:
    """A pseudo-terminal: (its master end, its slave end, a ``preexec_fn`` that makes it the
    controlling terminal of a child started with ``start_new_session=True`` and the slave as
    ``stdin``: the child's process group is then the terminal's foreground group)."""
    import fcntl
    import termios

    master, slave = os.openpty()

    def take_it() -> None:  # in the child, after setsid
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        yield master, slave, take_it
    finally:
        os.close(master)
        os.close(slave)


@POSIX_ONLY
def test_ctrl_c_in_a_terminal_stops_the_sim_quietly(tmp_path: Path) -> None:
    """Ctrl-C typed in run.py's terminal: SIGINT to the whole foreground process group, the
    robot included. It ignores it (RobotPy would print its traceback); run.py stops it once."""
    with terminal() as (master, slave, take_it), sim(tmp_path, take_it, stdin=slave) as robot:
        robot.wait_serving()
        os.write(master, b"\x03")  # the terminal's interrupt character
        assert robot.wait_stopped() == 128 + signal.SIGINT
        assert_quiet_stop(robot)


#: A command that handles Ctrl-C itself (Python's KeyboardInterrupt, as the host tools do):
#: ready once argv[1] exists; on the first KeyboardInterrupt it waits a second for another
#: (which a correct run.py never sends: only a missed double would pass unseen, never a
#: correct run fail) and exits 10 + the number it got.
CTRL_C_CHILD = """\
import os, pathlib, sys, time
ready = pathlib.Path(sys.argv[1])
got = 0
try:
    pathlib.Path(str(ready) + ".part").write_text(str(os.getpid()))
    os.replace(str(ready) + ".part", ready)
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    got = 1
    try:
        time.sleep(1.0)
    except KeyboardInterrupt:
        got = 2
sys.exit(10 + got)
"""
#: run.py's run_child on CTRL_C_CHILD (argv: ROOT, the child's code, its ready file).
PARENT = (
    "import sys; sys.path.insert(0, sys.argv[1]); import run\n"
    "raise SystemExit(run.run_child([sys.executable, '-c', sys.argv[2], sys.argv[3]], run.ROOT, {}))\n"
)


@POSIX_ONLY
def test_ctrl_c_in_a_terminal_reaches_a_task_once(tmp_path: Path) -> None:
    """Ctrl-C in the terminal of ``run.py bcnp replay ...``: the host tool gets the terminal's
    SIGINT itself, and run.py does not pass on a second one (which would cut its stop short)."""
    ready = tmp_path / "ready"
    with terminal() as (master, slave, take_it):
        proc = subprocess.Popen(
            [sys.executable, "-c", PARENT, str(ROOT), CTRL_C_CHILD, str(ready)],
            stdin=slave,
            start_new_session=True,
            preexec_fn=take_it,
        )
        try:
            wait_until(ready.exists, timeout=START_TIMEOUT_S, what="the command running")
            os.write(master, b"\x03")
            assert proc.wait(timeout=STOP_TIMEOUT_S) == 11  # one KeyboardInterrupt; its own status
        finally:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@POSIX_ONLY
def test_sigint_to_a_background_run_py_reaches_its_task(tmp_path: Path) -> None:
    """``run.py ... &`` then ``kill -INT $!``: run.py and its command start with SIGINT ignored;
    run.py handles it all the same, and its command gets Python's KeyboardInterrupt back."""
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(ROOT), CTRL_C_CHILD, str(ready)],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=ignore_sigint,
    )
    try:
        wait_until(ready.exists, timeout=START_TIMEOUT_S, what="the command running")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=STOP_TIMEOUT_S) == 11
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# -- what a task's first command installs -------------------------------------------------------

#: Logs every process this interpreter starts (its argv, a JSON line) to $RUN_SPAWN_LOG.
SPAWN_LOGGER = """\
import json, os, sys

def _log(event, args):
    if event == "subprocess.Popen" and os.environ.get("RUN_SPAWN_LOG"):
        argv = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
        with open(os.environ["RUN_SPAWN_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps([os.fsdecode(a) for a in argv]) + "\\n")

sys.addaudithook(_log)
"""


def mirrored_environment(tmp_path: Path, hide: Callable[[str], bool] = lambda name: False) -> Path:
    """A virtual environment whose site-packages is this one's, entry by entry (symlinks),
    less those ``hide`` names, plus :data:`SPAWN_LOGGER` (a module a ``.pth`` imports); its
    python. pip in it installs into it, never into this environment."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(
        subprocess.run([python, "-c", where], capture_output=True, text=True, check=True).stdout.strip()
    )
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if not hide(entry.name) and entry.name not in ("sitecustomize.py", "__pycache__"):
            (site / entry.name).symlink_to(entry)
    # Loaded by a .pth line, not as sitecustomize: a distribution's own sitecustomize (Debian's
    # python3.14 has one in the standard library) comes first on sys.path and hides ours.
    (site / "_run_spawn_logger.py").write_text(SPAWN_LOGGER)
    (site / "_run_spawn_logger.pth").write_text("import _run_spawn_logger\n")
    return python


def run_py(
    python: Path, tmp_path: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """``python run.py ARGS`` (offline: pip may not reach an index); what it printed and every
    process it (or anything under it) started."""
    log = tmp_path / "spawned.jsonl"
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(RUN_SPAWN_LOG=str(log), PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull)
    result = subprocess.run(
        [str(python), str(ROOT / "run.py"), *args], capture_output=True, text=True, env=env, timeout=300
    )
    spawned = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, spawned


def test_a_task_needs_its_extras_requirements_with_the_projects_own_extras_expanded() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    optional = pyproject["project"]["optional-dependencies"]
    wanted = run.requirements(pyproject, "test")
    assert len(wanted) == len(set(wanted)) and not any(r.startswith("bcnp-robot") for r in wanted)
    assert set(wanted) == {
        r for extra in ("sim", "deploy-tests", "host", "test") for r in optional[extra]
    } - {
        "bcnp-robot[sim]",
        "bcnp-robot[deploy-tests,host]",
    }
    assert run.requirements(pyproject, "sim") == optional["sim"]


@POSIX_ONLY
def test_a_complete_environment_installs_nothing_stamp_or_not(tmp_path: Path) -> None:
    """Everything installed: the first start (no stamp) checks and runs the task alone, as
    does the second (the stamp remembers the check) and one whose stamp was deleted."""
    python = mirrored_environment(tmp_path)
    stamp = python.parent.parent / run.STAMP
    for start in ("first", "second", "stamp deleted"):
        if start == "stamp deleted":
            stamp.unlink()
        result, spawned = run_py(python, tmp_path, "bcnp", "--help")
        assert result.returncode == 0, result.stderr
        assert spawned == [[str(python), "-m", "bcnp", "--help"]], start  # no pip
        assert "run.py" not in result.stdout + result.stderr, start
        assert stamp.exists(), start


@POSIX_ONLY
def test_a_missing_requirement_is_installed_alone_and_said_why(tmp_path: Path) -> None:
    python = mirrored_environment(tmp_path, hide=lambda name: name == "rich" or name.startswith("rich-"))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted, facts = run.requirements(pyproject, "host"), run.project_facts(pyproject, ROOT)
    # Asked from this interpreter: the check runs in the other one.
    assert run.what_is_missing(python, wanted, facts)["missing"] == [["rich>=13", "not installed"]]
    result, spawned = run_py(python, tmp_path, "bcnp", "--help")
    env = python.parent.parent
    assert result.stdout == f"run.py: installing rich>=13 into {env}: rich>=13: not installed\n"
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    assert spawned[0] == [*pip, "rich>=13"]  # only what is missing; the task does not start
    assert result.returncode == 1 and "run.py: pip install failed (exit 1)" in result.stderr


@POSIX_ONLY
def test_an_environment_without_the_project_gets_it_with_the_tasks_extras(tmp_path: Path) -> None:
    python = mirrored_environment(
        tmp_path, hide=lambda name: name.startswith(("bcnp_robot", "__editable__.bcnp_robot"))
    )
    result, spawned = run_py(python, tmp_path, "bcnp", "--help")
    env = python.parent.parent
    assert result.stdout == f"run.py: installing bcnp-robot[host] into {env}: bcnp-robot: not installed\n"
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    assert spawned[0] == [*pip, "-e", ".[host]"]
    assert result.returncode == 1 and "run.py: pip install failed" in result.stderr
