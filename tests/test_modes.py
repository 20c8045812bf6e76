"""A host learns whether the robot it drives will drive: the robot's mode, seen from the host.

The robot in a headless simulator process (benchmarks/harness/sim.py) as a user starts
it, a real ``python -m bcnp send`` against it, the robot's NetworkTables read by
the host tool's own NT4 client. Each robot serves NetworkTables on a port of its
own (``SimRobot.nt_port``, ``--nt-port``), so another simulator running beside
it is never the one asked.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bcnp.host.nt.mode import mode_line
from benchmarks.harness import ROOT
from sim import settings as sim_settings


def bcnp(command: str, port: int, nt_port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bcnp", command, "--port", str(port), "--nt-port", str(nt_port), *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )


def test_the_line_says_why_commands_do_not_drive_and_when_they_do_again() -> None:
    assert mode_line("10.12.34.2", "autonomous", None) is None  # driving from the start: nothing to say
    assert mode_line("10.12.34.2", None, None) is None  # a robot without the key: nothing known
    disabled = mode_line("10.12.34.2", "disabled", None)
    assert disabled == (
        "robot at 10.12.34.2 is disabled, not driving BCNP commands: "
        "commands are queued and time out unrun; enable it in autonomous"
    )
    assert "the driver's controller drives" in str(mode_line("r", "teleop", True))
    assert (
        mode_line("r", "autonomous", False)
        == "robot at r is now in autonomous, enabled: BCNP commands drive it"
    )


@pytest.mark.parametrize(
    ("env", "argv", "starts"),
    [
        ({}, ["robotpy", "sim", "--nogui"], True),  # headless: no button to press
        ({}, ["robotpy", "sim"], False),  # the GUI has them
        ({"BCNP_SIM_AUTONOMOUS": "0"}, ["robotpy", "sim", "--nogui"], False),
        ({"BCNP_SIM_AUTONOMOUS": "1"}, ["robotpy", "sim"], True),
        ({"BCNP_SIM_AUTONOMOUS": ""}, ["robotpy", "sim", "--nogui"], True),
    ],
)
def test_which_simulators_start_ready_to_be_driven(
    env: dict[str, str], argv: list[str], starts: bool
) -> None:
    assert sim_settings.read(env).starts_autonomous(argv) is starts


def test_send_says_the_robot_is_disabled_and_goes_on(tmp_path: Path) -> None:
    from benchmarks.harness.sim import SimRobot

    with SimRobot(tmp_path / "logs", env={"BCNP_SIM_AUTONOMOUS": "0"}) as robot:
        robot.start()
        robot.wait_ticking()
        nt_port = robot.nt_port
        waited = bcnp("send", robot.port, nt_port, "0.5", "0", "300")
        at_once = bcnp("send", robot.port, nt_port, "--no-wait", "0.5", "0", "300")
        path = tmp_path / "short.csv"
        path.write_text("vx,omega,durationMs\n0.5,0,600\n0.5,0.5,600\n")
        replayed = bcnp("replay", robot.port, nt_port, str(path))
    line = (
        "robot at 127.0.0.1 is disabled, not driving BCNP commands: "
        "commands are queued and time out unrun; enable it in autonomous"
    )
    for result in (waited, at_once, replayed):
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines.count(line) == 1, result.stdout
        assert lines[0].startswith("connected to 127.0.0.1:")  # and it went on:
        assert any(out.startswith(("sent: 1 DriveCmd", "done: 2 commands")) for out in lines), result.stdout


def test_the_headless_simulator_starts_ready_to_be_driven(tmp_path: Path) -> None:
    """``python -m robotpy sim --nogui`` with no BCNP_SIM_AUTONOMOUS at all, as a user
    starts it: in autonomous, enabled; send has nothing to say."""
    from bcnp.host.nt.monitor import Monitor
    from benchmarks.harness.sim import SimRobot

    # Every installed robotpy command loaded, as `robotpy sim` loads them.
    with SimRobot(tmp_path / "logs", env={"BCNP_SIM_AUTONOMOUS": ""}, robotpy_command=None) as robot:
        robot.start()
        robot.wait_ticking()
        nt_port = robot.nt_port
        result = bcnp("send", robot.port, nt_port, "--no-wait", "0.5", "0", "300")
        with Monitor(port=nt_port) as monitor:
            monitor.wait_for_keys(10.0)
            values = monitor.snapshot().values
    assert result.returncode == 0, result.stderr
    assert "not driving" not in result.stdout, result.stdout
    assert values["Network/Mode"] == "autonomous" and values["Network/Enabled"] is True


def test_the_launchers_robot_loads_robotpys_sim_command_alone_unless_asked_for_every_one(
    tmp_path: Path,
) -> None:
    """SimRobot's robot process loads robotpy's ``sim`` command alone (half the CPU of a
    start); with ``robotpy_command=None`` every installed command, as ``robotpy`` does."""
    from benchmarks.harness.sim import BOOT, ONE_COMMAND_ENV, SimRobot

    def commands(robot: SimRobot) -> set[str]:
        _, command, env = robot.command()
        at = command.index("--main")
        result = subprocess.run(
            [*command[:at], "--help"], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
        )
        listed = re.search(r"\{([^}]*)\}", result.stdout)  # robotpy's help: {command,...}
        assert listed, result.stdout + result.stderr
        return set(listed.group(1).split(","))

    one = SimRobot(tmp_path / "one")
    assert one.command()[1][1:3] == ["-c", BOOT] and one.command()[2][ONE_COMMAND_ENV] == "sim"
    assert commands(one) == {"sim"}
    every = commands(SimRobot(tmp_path / "every", robotpy_command=None))
    assert {"sim", "test", "deploy"} <= every, every
