"""run.py: the quick start's sim command and the shipped sim GUI layout."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from support import wait_until

import run

ROOT = Path(__file__).resolve().parent.parent


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
