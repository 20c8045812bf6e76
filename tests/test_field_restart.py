"""Acceptance on a simulated field, continued (tests/test_field.py): the robot program
killed mid-path and started again. ``python -m bcnp replay`` reconnects within a second
of the robot listening, carries on, reports the outage and exits 0.

Each case starts a robot of its own. Under xdist it runs beside test_field.py's robot:
SimRobots run side by side (benchmarks/harness/sim.py, "Ports"); these tests talk BCNP only,
on each robot's own port, and read each robot's own data log.

The path must outlast the restart, and a robot program takes as long to start as the machine
lets it: about a second here when quiet, 2 to 7 s with the suite's other workers and two busy
loops beside it, and the second start may take several times what the first did. So the path
runs on past the kill for several times what the first start took, and never less than 8 s.
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

from bcnp.host.link.core.state import ReconnectPolicy
from benchmarks.harness.rig import host_tool
from benchmarks.harness.sim import SimRobot

#: The robot is killed this far into the path (the replay under way) ...
KILL_AT_S = 2.5
#: ... and the path runs on after that for this many times what the robot's first start took, at
#: least RESTART_MIN_S, and AFTER_S more (the replay drives on after the reconnect).
RESTART_ROOM = 3
RESTART_MIN_S = 8.0
AFTER_S = 2.0
#: The replay tries again at most this long after a failed attempt (its default policy) ...
MAX_BACKOFF_S = ReconnectPolicy().max_backoff
#: ... and its next attempt's connect and handshake, and the line it then prints on its way to
#: this test, take this much more at most on a busy machine (a few ms when quiet).
HANDSHAKE_S = 1.0


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

    def wait_for(self, fragment: str, timeout: float = 60.0) -> Line:
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
    with SimRobot(tmp_path / "logs") as robot:
        spawned = time.monotonic()
        robot.start()
        startup = time.monotonic() - spawned
        commands = path(KILL_AT_S + max(RESTART_ROOM * startup, RESTART_MIN_S) + AFTER_S)
        path_file = tmp_path / "path.csv"
        path_file.write_text("".join(f"{c.vx},{c.omega},{c.duration_ms}\n" for c in commands))
        args = ["replay", str(path_file), "--port", str(robot.port)]
        proc = host_tool(*args, *(["--udp"] if transport == "udp" else []))
        try:
            output = Output(proc)
            output.wait_for("replaying")
            time.sleep(KILL_AT_S)
            robot.kill()
            killed = time.monotonic()
            robot.start()
            restart = time.monotonic() - killed
            listening_at = robot.listening_at
            status = proc.wait(len(commands) * 0.04 + 30.0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        output.join()
    text = output.text()
    print(f"\n{transport}: the robot started in {startup:.2f} s, again in {restart:.2f} s")
    print(text)
    assert status == 0, text
    # Each outage prints a line when the link is back. The restart's is the first after the kill;
    # any other is one of the machine's own (a robot or host it held for the link timeout: the
    # robot ends the link, the replay reconnects and carries on, as for the restart).
    backs = [line for line in output.lines if "back at" in line.text]
    back = next((line for line in backs if line.at > killed), None)
    assert back is not None, text
    # The line is printed the replay step (20 ms) after the client's new connection is up: the
    # reconnect took at most this long after the robot listened.
    assert listening_at is not None
    reconnect = back.at - listening_at
    print(f"{transport}: reconnected {reconnect * 1e3:.0f} ms after the robot listened (an upper bound)")
    assert reconnect <= MAX_BACKOFF_S + HANDSHAKE_S, text
    assert "link lost at" in back.text and "dropped" in back.text, text
    done = output.wait_for("done:", timeout=0)
    assert done.text.startswith(f"done: {len(commands)} commands"), text
    assert f" {len(backs)} outage(s)" in done.text, text
