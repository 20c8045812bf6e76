"""``python -m bcnp replay``, ``plot`` and ``monitor`` end to end.

* replay drives the real robot program (pyfrc, WPILib simulation) over
  loopback TCP while this thread steps the simulation one 20 ms tick at a time,
  keeping its clock with the wall clock (the CLI paces itself by wall time; see
  :func:`step_while`); the telemetry CSV it records then goes through ``plot``.
* monitor reads a real NT4 server on free ports.

Assertions are about what arrived and what was drawn, never about how fast.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

import ntcore
import pytest
from support import wait_until
from wpilib.simulation import DriverStationSim, stepTiming

from bcnp.host.cli import main
from bcnp.host.cli.plotting import DEFAULT_TRACK_WIDTH_M, load_run, odometry
from benchmarks.harness import ROOT
from benchmarks.harness.ports import free_port


def test_plot_track_width_default_is_the_robots() -> None:
    import constants

    assert DEFAULT_TRACK_WIDTH_M == constants.TRACK_WIDTH_M


# -- replay + plot against the simulated robot -----------------------------------------------------


@pytest.fixture
def running_robot(control, robot):  # type: ignore[no-untyped-def]
    with control.run_robot():
        DriverStationSim.setDsAttached(True)
        DriverStationSim.setAutonomous(True)
        DriverStationSim.setEnabled(True)
        DriverStationSim.notifyNewData()
        stepTiming(0.1)
        yield robot


TICK_S = 0.02
#: Ticks stepped at once to catch up with the wall clock: the host's packets that arrived
#: meanwhile are all stamped with the robot's time before them, and a burst as long as the
#: robot's 200 ms link timeout would lose the link.
CATCH_UP_TICKS = 3


def step_while(thread: threading.Thread, limit_s: float = 60.0) -> int:
    """Steps the simulation a tick each 20 ms of wall time until ``thread`` ends: the robot's clock
    keeps with the host's. A tick the machine delays is made up soon after (a few at a time),
    so the host's plan, on the wall clock, and the robot's queue, on its own, stay together
    instead of the robot falling further behind with each late tick (a tick a step plus a
    20 ms sleep, on a busy machine: the path's end was never driven before the host was done)."""
    ticks = 0
    started = time.monotonic()
    deadline = started + limit_s
    while thread.is_alive() and time.monotonic() < deadline:
        due = int((time.monotonic() - started) / TICK_S) + 1 - ticks
        for _ in range(min(due, CATCH_UP_TICKS)):
            DriverStationSim.notifyNewData()
            stepTiming(TICK_S)
            ticks += 1
        time.sleep(max(0.0, started + ticks * TICK_S - time.monotonic()))
    assert not thread.is_alive(), "replay did not finish"
    return ticks


def test_replay_records_telemetry_and_plot_draws_the_driven_path(
    running_robot, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    # 1.5 s: straight, then a turn left; then a rest, so that a robot the machine steps more
    # slowly than the wall clock (step_while) drives the turn before the host is done and goes.
    path = tmp_path / "arc.csv"
    path.write_text("vx,omega,durationMs\n" + "0.8,0,50\n" * 20 + "0.8,1.0,50\n" * 10 + "0,0,2000\n")
    telemetry = tmp_path / "run.csv"
    port = running_robot.link.tcp.port
    status: list[int] = []
    args = ["replay", str(path), "--port", str(port), "--telemetry", str(telemetry)]
    controllers = running_robot.link.tcp.counters.controllers
    thread = threading.Thread(target=lambda: status.append(main(args)))
    thread.start()
    step_while(thread)
    out = capsys.readouterr().out
    # The host runs in this process, beside the robot's loop: a machine that holds its thread for
    # the robot's 200 ms link timeout costs the link (robot time runs on meanwhile), the robot
    # ends the controller and sends nothing until the host is back as a new one.
    reconnects = running_robot.link.tcp.counters.controllers - controllers - 1
    assert status == [0], out
    assert "robot schema 0xE9EFEE08" in out and "done: 31 commands" in out
    assert running_robot.link.queue.metrics.overflows == 0

    with open(telemetry, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 40  # 50 samples/s for >= 1.5 s of robot time, minus the start
    assert set(rows[0]) >= {"hostTimeS", "timestampMs", "leftPosition", "rightPosition", "cmdVx", "cmdOmega"}
    stamps = [int(r["timestampMs"]) for r in rows]
    gaps = [(a, b) for a, b in itertools.pairwise(stamps) if b - a != 20]
    assert stamps == sorted(stamps)
    assert not gaps or reconnects > 0, f"samples missing between robot times {gaps} ms, no reconnect:\n{out}"
    assert {float(r["cmdVx"]) for r in rows} >= {0.8}

    png = tmp_path / "run.png"
    assert main(["plot", str(telemetry), "-o", str(png)]) == 0
    printed = capsys.readouterr().out
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and png.stat().st_size > 20_000
    run = load_run(telemetry)
    xs, ys, headings = odometry(run["leftPosition"], run["rightPosition"], DEFAULT_TRACK_WIDTH_M)
    driven = math.hypot(xs[-1], ys[-1])
    assert driven > 0.6  # not an empty path: 0.8 m/s for over a second, ramped
    assert headings[-1] > 0.2  # and it turned left at the end, as commanded
    assert f"wrote {png}" in printed and "driven" in printed


def test_replay_against_the_wrong_schema_names_both_hashes(
    running_robot, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    port = running_robot.link.tcp.port
    schema = str(ROOT / "tests" / "data" / "test_schema.json")
    path = str(ROOT / "paths" / "square.csv")
    assert main(["replay", path, "--port", str(port), "--schema", schema]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: schema mismatch") and "0xE9EFEE08" in err and err.count("\n") == 1


def test_replay_of_a_bad_path_file_names_file_line_and_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("vx,omega,durationMs\n0.5,0,100\n0.5,0,-20\n")
    assert main(["replay", str(bad), "--port", "1"]) == 1  # refused before connecting
    assert capsys.readouterr().err == f"error: {bad}:3: durationMs must be 1..65535, got -20\n"


def test_replay_to_nothing_says_to_start_the_sim(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert main(["replay", str(ROOT / "paths" / "square.csv"), "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and "python run.py sim --nogui" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("a,b\n1,2\n", "missing column(s) hostTimeS, timestampMs"),
        (
            "hostTimeS,leftVelocity,rightVelocity,leftPosition,rightPosition,timestampMs,cmdVx,cmdOmega\n"
            "0,0,0,0,0,0,0,0\n0.02,0,0,x,0,20,0,0\n",
            ":3: leftPosition is not a number: 'x'",
        ),
        (
            "hostTimeS,leftVelocity,rightVelocity,leftPosition,rightPosition,timestampMs,cmdVx,cmdOmega\n"
            "0,0,0,0,0,0,0,0\n",
            "fewer than 2 telemetry rows",
        ),
    ],
)
def test_plot_errors_are_one_line(
    tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_file = tmp_path / "t.csv"
    csv_file.write_text(text)
    assert main(["plot", str(csv_file)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {csv_file}") and message in err and err.count("\n") == 1
    assert not (tmp_path / "t.png").exists()
    assert main(["plot", str(tmp_path / "none.csv")]) == 1
    assert "none.csv: no such file" in capsys.readouterr().err


# -- monitor against a real NT4 server ----------------------------------------------------------------


@pytest.fixture
def nt_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    inst = ntcore.NetworkTableInstance.create()
    port = free_port()
    inst.startServer(str(tmp_path / "nt.json"), "127.0.0.1", free_port(), port)
    yield inst, port
    inst.stopServer()
    ntcore.NetworkTableInstance.destroy(inst)


def publish(inst: ntcore.NetworkTableInstance, connected: bool) -> ntcore.NetworkTable:
    table = inst.getTable("SmartDashboard")
    table.putBoolean("Network/Connected", connected)
    table.putNumber("Network/QueueSize", 20)
    table.putNumber("Network/CmdVx", 1.0)
    table.putString("Network/SchemaHash", "0xE9EFEE08")
    table.putString("Network/Transport", "tcp" if connected else "none")
    table.putNumber("Network/TelemetryPackets", 0)
    table.putNumber("Network/TelemetrySent", 0)
    table.putNumber("Other/Ignored", 5)
    return table


def test_monitor_once_json_reads_every_network_key(nt_server, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    inst, port = nt_server
    publish(inst, connected=False)
    assert main(["monitor", "--once", "--json", "--port", str(port)]) == 0
    snapshot = json.loads(capsys.readouterr().out)
    assert snapshot["server"] == f"127.0.0.1:{port}" and snapshot["connected"] is True
    assert snapshot["keys"] == {
        "Network/CmdVx": 1.0,
        "Network/Connected": False,
        "Network/QueueSize": 20.0,
        "Network/SchemaHash": "0xE9EFEE08",
        "Network/TelemetryPackets": 0.0,
        "Network/TelemetrySent": 0.0,
        "Network/Transport": "none",
    }
    assert snapshot["telemetry"] is None  # no BCNP link open


def test_monitor_shows_the_preflight_checks_results_beside_the_network_keys(
    nt_server, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    """What the pre-flight check publishes under Preflight/ reaches the monitor, no NT4 client of
    one's own needed."""
    inst, port = nt_server
    table = publish(inst, connected=False)
    table.putString("Preflight/Result", "FAIL: VelocityLag")
    table.putString("Preflight/VelocityLag", "FAIL: the wheel speed reads 155 ms behind the position")
    assert main(["monitor", "--once", "--json", "--port", str(port)]) == 0
    keys = json.loads(capsys.readouterr().out)["keys"]
    assert keys["Preflight/Result"] == "FAIL: VelocityLag" and "Network/CmdVx" in keys
    assert keys["Preflight/VelocityLag"].startswith("FAIL: the wheel speed reads 155 ms")
    assert "Other/Ignored" not in keys


def test_monitor_measures_the_telemetry_rate_while_a_link_is_open(
    nt_server, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    inst, port = nt_server
    table = publish(inst, connected=True)
    stop = threading.Event()

    def robot() -> None:  # counts telemetry like a robot sending 25 packets/s of 2 samples
        packets = 0
        while not stop.wait(0.04):
            packets += 1
            table.putNumber("Network/TelemetryPackets", packets)
            table.putNumber("Network/TelemetrySent", 2 * packets)

    thread = threading.Thread(target=robot, daemon=True)
    thread.start()
    try:
        assert main(["monitor", "--once", "--json", "--port", str(port)]) == 0
    finally:
        stop.set()
        thread.join()
    rate = json.loads(capsys.readouterr().out)["telemetry"]
    assert rate is not None and rate["packets_per_s"] > 0
    assert rate["messages_per_s"] == pytest.approx(2 * rate["packets_per_s"], rel=0.2)


def test_monitor_once_plain_text(nt_server, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    inst, port = nt_server
    publish(inst, connected=False)
    assert main(["monitor", "--once", "--port", str(port)]) == 0
    out = capsys.readouterr().out
    assert f"NetworkTables 127.0.0.1:{port}: connected" in out
    assert "Network/SchemaHash" in out and "0xE9EFEE08" in out and "no BCNP link open" in out


def test_monitor_without_a_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert main(["monitor", "--once", "--port", str(port), "--timeout", "0.5"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: no NetworkTables server at 127.0.0.1:{port} (start the robot program, "
        "or the simulator: python run.py sim --nogui, in the robot project)\n"
    )
    assert main(["monitor", "--json"]) == 1
    assert "--json needs --once" in capsys.readouterr().err


def test_monitor_of_a_server_without_network_keys_says_so(
    nt_server, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    inst, port = nt_server
    inst.getTable("SmartDashboard").putNumber("Other/Thing", 1)
    assert main(["monitor", "--once", "--port", str(port), "--timeout", "1"]) == 1
    assert "has no Network/* keys: is the BCNP robot program running?" in capsys.readouterr().err


def test_monitor_rides_through_a_restarted_server(tmp_path: Path) -> None:
    """ntcore reconnects by itself; the monitor says when the server went and that it came back."""
    from bcnp.host.nt.monitor import Monitor, render_text

    port = free_port()

    def server(qsize: float) -> ntcore.NetworkTableInstance:
        inst = ntcore.NetworkTableInstance.create()
        inst.startServer(str(tmp_path / "nt.json"), "127.0.0.1", free_port(), port)
        publish(inst, connected=True).putNumber("Network/QueueSize", qsize)
        return inst

    first = server(20)
    with Monitor("127.0.0.1", port) as monitor:
        monitor.wait_for_keys(10.0)
        first.stopServer()
        ntcore.NetworkTableInstance.destroy(first)

        def polled(predicate: Callable[[], bool]) -> Callable[[], bool]:
            return lambda: monitor.poll() >= 0 and predicate()

        wait_until(polled(lambda: monitor.lost_since is not None), 10.0, "the monitor to see the loss")
        assert "NOT connected (lost" in render_text(monitor.snapshot())
        second = server(7)
        try:
            wait_until(polled(lambda: monitor.values.get("Network/QueueSize") == 7), 15.0, "the new values")
            snapshot = monitor.snapshot()
            assert snapshot.nt_connected and snapshot.reconnects == 1 and snapshot.lost_for is None
            assert "(1 reconnect(s))" in render_text(snapshot)
        finally:
            second.stopServer()
            ntcore.NetworkTableInstance.destroy(second)
