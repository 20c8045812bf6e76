"""Acceptance on a simulated field, continued (tests/test_field.py): the robot program
killed mid-path and started again. ``python -m bcnp replay`` reconnects within a second
of the robot listening, carries on, reports the outage and exits 0.

Each case starts a robot of its own. Under xdist it runs beside test_field.py's robot:
SimRobots run side by side (benchmarks/harness/sim.py, "Ports"); these tests talk BCNP only,
on each robot's own port, and read each robot's own data log.
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("wpilib", reason="robotpy is not installed")
pytest.importorskip("pyfrc", reason="robotpy is not installed")

from test_field import path

from benchmarks.harness.rig import host_tool
from benchmarks.harness.sim import SimRobot


@dataclass
class Line:
    at: float  # time.monotonic() when it was read
    text: str


class Output:
    """A child's output lines as they arrive, each stamped with when it was read."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[Line] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for text in proc.stdout:
            with self._cond:
                self.lines.append(Line(time.monotonic(), text.rstrip("\n")))
                self._cond.notify_all()

    def wait_for(self, fragment: str, timeout: float = 20.0) -> Line:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if fragment in line.text:
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {fragment!r} within {timeout} s in:\n{self.text()}")
                self._cond.wait(left)

    def text(self) -> str:
        with self._cond:
            return "\n".join(line.text for line in self.lines)

    def join(self) -> None:
        self._thread.join(5.0)


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_replay_rides_through_a_robot_restart(tmp_path: Path, transport: str) -> None:
    commands = path(8.0)
    path_file = tmp_path / "path.csv"
    path_file.write_text("".join(f"{c.vx},{c.omega},{c.duration_ms}\n" for c in commands))
    with SimRobot(tmp_path / "logs") as robot:
        robot.start()
        args = ["replay", str(path_file), "--port", str(robot.port)]
        proc = host_tool(*args, *(["--udp"] if transport == "udp" else []))
        try:
            output = Output(proc)
            output.wait_for("replaying")
            time.sleep(2.5)
            robot.kill()
            robot.start()
            listening_at = robot.listening_at
            status = proc.wait(30.0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        output.join()
    text = output.text()
    print(f"\n{transport}:\n{text}")
    assert status == 0, text
    # The outage line is printed the replay step (20 ms) after the client's new
    # connection is up: the reconnect took at most this long after the robot listened.
    back = output.wait_for("back at", timeout=0)
    assert listening_at is not None
    reconnect = back.at - listening_at
    print(f"{transport}: reconnected {reconnect * 1e3:.0f} ms after the robot listened (an upper bound)")
    assert reconnect <= 1.0, text
    assert "link lost at" in back.text and "dropped" in back.text, text
    done = output.wait_for("done:", timeout=0)
    assert done.text.startswith(f"done: {len(commands)} commands") and "1 outage(s)" in done.text, text
