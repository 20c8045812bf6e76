"""Every run is recorded: the real robot in the simulator, driven over a real link, and its
``.wpilog`` read back with wpiutil's DataLogReader."""

from __future__ import annotations

import itertools
import os
import socket
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
import wpilib
from support import LOG_POLL_S, wait_until
from test_robot import Sim, cmd
from wpiutil.log import DataLogReader, StringLogEntry

import bcnp
import constants
from bcnp.host.link.client import Client, SchemaMismatchError
from benchmarks.harness import ROOT
from benchmarks.harness.robotlog import Record, records
from messages import SCHEMA, DriveCmd


@pytest.fixture
def sim(control, robot) -> Iterator[Sim]:  # type: ignore[no-untyped-def]
    with control.run_robot():
        yield Sim(robot)


class Log(defaultdict[str, list[object]]):
    """Every entry's values by name, in order (what AdvantageScope opens); ``records``: every
    (name, value) in the order the log holds them, across entries."""

    def __init__(self, records: Iterable[tuple[str, object]] = ()) -> None:
        super().__init__(list)
        self.records: list[tuple[str, object]] = []
        for name, value in records:
            self[name].append(value)
            self.records.append((name, value))


#: The entry types a :class:`Log` holds.
LOG_TYPES = ("string", "int64", "double", "boolean")


def log_records() -> list[Record]:
    """The run's .wpilog as far as the log's writer thread has written it. The data log is
    the process's: it holds every earlier test's robot too (read once, as it grows:
    :class:`~benchmarks.harness.robotlog.LogTail`)."""
    wpilib.DataLogManager.getLog().flush()  # asks the writer thread; it writes a moment later
    directory = Path(wpilib.DataLogManager.getLogDir())
    assert directory == Path(os.environ["BCNP_LOG_DIR"])  # never the project folder in tests
    files = sorted(directory.glob("*.wpilog"), key=lambda p: p.stat().st_mtime)
    assert files, f"no .wpilog in {directory}"
    return records(files[-1])


def read_log() -> Log:
    """The whole run's log (see :func:`log_records`)."""
    return Log((name, value) for name, kind, _, value in log_records() if kind in LOG_TYPES)


def after_mark(text: str) -> Log | None:
    """What was recorded after the mark ``text``; None while the mark is not written yet."""
    at = mark_index(text)
    if at is None:
        return None
    return Log((name, value) for name, kind, _, value in log_records()[at:] if kind in LOG_TYPES)


def mark_index(text: str) -> int | None:
    """Where in :func:`log_records` what followed the mark ``text`` begins; None while the mark
    is not written yet. Each search goes on from where the last one ended, which starts where
    the log ended when the mark was made: a look costs what was written since, not the run."""
    found = log_records()
    for i in range(_search_from.get(text, 0), len(found)):
        name, _, _, value = found[i]
        if name == "Test/Mark" and value == text:
            _search_from[text] = i
            return i + 1
    _search_from[text] = len(found)
    return None


def mark() -> str:
    """A record of its own appended to the data log now, to find it by: what the robot
    recorded before it is before it in the file, what it records later is after it."""
    text = f"mark {next(_marks)}"
    _search_from[text] = len(log_records())  # all of it written before the mark
    StringLogEntry(wpilib.DataLogManager.getLog(), "Test/Mark").append(text)
    return text


#: Where the search for each mark goes on from: no record before that index is the mark.
_search_from: dict[str, int] = {}
_marks = itertools.count()


def read_log_after(text: str, ready: Callable[[Log], bool]) -> Log:
    """What was recorded after the mark ``text``, once the writer thread has written the
    mark and ``ready`` holds for what follows it."""
    seen: list[Log] = []
    reads = [0, 0]  # reads of the log, reads that had the mark

    def caught_up() -> bool:
        reads[0] += 1
        after = after_mark(text)
        if after is None:
            return False
        reads[1] += 1
        seen[:] = [after]
        return ready(after)

    try:
        wait_until(
            caught_up, timeout=15.0, what="the data log to be written", first_poll=LOG_POLL_S
        )  # shared cores
    except AssertionError as exc:  # what the reads saw: the mark never, or never what follows it
        logs = [(f.name, f.stat().st_size) for f in Path(wpilib.DataLogManager.getLogDir()).glob("*.wpilog")]
        after = {name: len(values) for name, values in seen[0].items()} if seen else None
        seen_as = f"{reads[0]} reads, {reads[1]} with {text!r}; {logs}; after it: {after}"
        raise AssertionError(f"{exc}: {seen_as}") from None
    return seen[0]


def test_a_run_driven_over_a_real_link_is_recorded(sim: Sim, test_schema: bcnp.Schema) -> None:
    sim.tick(5)
    start = mark()  # the data log is the process's: only what follows is this test's
    host = sim.connect()
    peer = f"127.0.0.1:{host.link._sock.getsockname()[1]}"  # type: ignore[union-attr]
    sim.deliver(
        host.send, [cmd(2.0, -3.0, ms=300), DriveCmd(vx=0.5, omega=0.25, durationMs=200)], clear_queue=True
    )
    sim.deliver(host.send, [cmd(0.4, ms=100)] * 5)
    sim.run(0.56, host)  # the first three commands start: 300 ms, 200 ms, then the first 100 ms one
    host.close()
    wait_until(lambda: sim.link.slot.owner is None)
    sim.tick()
    with pytest.raises(SchemaMismatchError):
        Client(test_schema, "127.0.0.1", sim.link.tcp.port).connect()
    sim.tick(15)

    gone = f"disconnected tcp {peer}: closed by the peer"

    def refused_after_gone(log: Log) -> bool:
        """This test's refusal is in the log, so is everything recorded before it."""
        later = itertools.dropwhile(lambda record: record[1] != gone, log.records)
        return any(name == "BCNP/Refused" for name, _ in later)

    log = read_log_after(start, refused_after_gone)
    # Each packet handed to the queue, once, never per message (keepalives are packets of 0).
    packets = list(
        zip(log["BCNP/Packet/Type"], log["BCNP/Packet/Count"], log["BCNP/Packet/ClearQueue"], strict=True)
    )
    assert [p for p in packets if p[1]][-2:] == [("DriveCmd", 2, True), ("DriveCmd", 5, False)]
    assert ("DriveCmd", 0, False) in packets
    # Each command as it became active, after clamping to 1.5 m/s and 2.5 rad/s.
    assert log["BCNP/Command/Vx"][-3:] == [1.5, 0.5, 0.4]
    assert log["BCNP/Command/Omega"][-3:] == [-2.5, 0.25, 0.0]
    assert log["BCNP/Command/DurationMs"][-3:] == [300, 200, 100]
    # What the drivetrain applied after the acceleration limits: ramps of 3 m/s^2, then the stop.
    applied = log["BCNP/Applied/Vx"]
    assert applied[-1] == 0.0 and max(applied) <= 1.5 and pytest.approx(0.06) in applied
    # The controller coming and going, with both hashes; the refused peer with its reason.
    connected = [c for c in log["BCNP/Controller"] if peer in str(c)]
    assert connected == [
        f"connected tcp {peer}, schema 0x{SCHEMA.hash:08X} (ours 0x{SCHEMA.hash:08X})",
        gone,
    ]
    refused = str(log["BCNP/Refused"][-1])
    assert refused.startswith("tcp 127.0.0.1:") and f"0x{test_schema.hash:08X}" in refused
    assert f"0x{SCHEMA.hash:08X}" in refused  # ours too
    # Link loss; NetworkTables (the Network/* keys) recorded alongside.
    assert log["BCNP/Connected"][-2:] == [True, False]
    assert any(name.startswith("NT:/SmartDashboard/Network/") for name in log)


def test_a_controller_ended_for_link_loss_is_recorded_with_why(sim: Sim) -> None:
    sim.tick()
    start = mark()
    host = sim.connect()
    peer = f"127.0.0.1:{host.link._sock.getsockname()[1]}"  # type: ignore[union-attr]
    sim.deliver(host.send, [cmd(1.0, ms=5000)], clear_queue=True)
    sim.tick(11)  # silent: 220 ms after the last packet
    wait_until(lambda: sim.link.counter("link_losses") == 1, what="the link loss")
    sim.tick()
    host.close()
    gone = f"disconnected tcp {peer}: link lost: no packet for 0.220 s (link timeout 0.2 s)"
    controllers = read_log_after(start, lambda log: gone in log["BCNP/Controller"])["BCNP/Controller"]
    assert [c for c in controllers if peer in str(c)] == [
        f"connected tcp {peer}, schema 0x{SCHEMA.hash:08X} (ours 0x{SCHEMA.hash:08X})",
        gone,
    ]


def test_a_flood_of_bytes_is_one_entry_per_packet(sim: Sim) -> None:
    sim.tick()
    start = mark()
    with socket.create_connection(("127.0.0.1", sim.link.tcp.port), timeout=5) as raw:
        raw.recv(8)
        big = bcnp.encode_packet(DriveCmd.spec, [cmd(0.1, ms=10)] * 65_535)
        raw.sendall(bcnp.encode_handshake(SCHEMA.hash) + big + b"\x00" * 1000)
        wait_until(lambda: sim.link.queue.metrics.received >= 65_535, what="the big packet")
    log = read_log_after(start, lambda log: bool(log["BCNP/Packet/Count"]))
    assert log["BCNP/Packet/Count"] == [65_535]


def test_a_flood_of_packets_is_recorded_up_to_the_budget_then_counted(sim: Sim) -> None:
    """A second's worth of packets (RECORD_PACKETS_PER_S) is recorded one by one; past
    it, a flood's packets are counted in BCNP/Packet/Unrecorded, not written (robot
    time stands still between ticks here: the budget does not refill during the burst)."""
    sim.tick()
    start = mark()
    budget = constants.RECORD_PACKETS_PER_S
    flood = budget + 500
    packet = bcnp.encode_packet(DriveCmd.spec, [cmd(0.1, ms=10)])
    with socket.create_connection(("127.0.0.1", sim.link.tcp.port), timeout=5) as raw:
        raw.recv(8)
        raw.sendall(bcnp.encode_handshake(SCHEMA.hash) + packet * flood)
        wait_until(lambda: sim.link.queue.metrics.received >= flood, what="the flood")
    assert sim.robot.recorder.unrecorded == 500
    sim.tick()  # the tick writes the count
    # The count comes after every recorded packet (the receive thread recorded them first).
    log = read_log_after(start, lambda log: bool(log["BCNP/Packet/Unrecorded"]))
    assert len(log["BCNP/Packet/Count"]) == budget
    assert log["BCNP/Packet/Unrecorded"] == [500]


def test_a_gyro_that_stops_answering_and_the_delivered_speed_are_recorded(
    control,
    robot,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setenv("BCNP_DRIVETRAIN", "kitbot")
    monkeypatch.setenv("BCNP_SIM_GYRO_FAIL_S", "1.0")
    with control.run_robot():
        sim = Sim(robot)
        sim.tick()
        text = mark()
        with sim.connect() as host:
            sim.deliver(host.send, [cmd(0.5, 1.0, ms=3000)], clear_queue=True)
            sim.run(1.5, host)
        log = read_log_after(text, lambda log: bool(log["BCNP/Gyro"]))
    assert log["BCNP/Gyro"] == ["not answering: the gyro's reading stopped while the wheels turn"]
    actual = log["NT:/SmartDashboard/Network/ActualVx"]
    assert actual and max(actual) == pytest.approx(0.5, abs=0.05)  # type: ignore[type-var]
    assert log["NT:/SmartDashboard/Network/ActualW"]


def test_the_robots_mode_is_recorded(sim: Sim) -> None:
    """Network/Mode and Network/Enabled reach the .wpilog (DataLogManager records NetworkTables)."""
    sim.tick(2, enabled=False)
    text = mark()
    sim.tick(3, autonomous=True)
    sim.tick(3, autonomous=False)  # teleop
    sim.tick(3, enabled=False)

    def three_modes(log: Log) -> bool:
        return len(log["NT:/SmartDashboard/Network/Mode"]) >= 3

    log = read_log_after(text, three_modes)
    assert log["NT:/SmartDashboard/Network/Mode"][-3:] == ["autonomous", "teleop", "disabled"]
    assert log["NT:/SmartDashboard/Network/Enabled"][-3:] == [True, False]  # teleop is enabled too: no change


def test_a_log_the_writer_paused_is_resumed_within_a_second(sim: Sim) -> None:
    """WPILib's writer pauses the log for good when it falls behind (it pauses it as
    DataLog.pause() does): the recorder resumes it, and what the robot does a second later
    is recorded again."""
    sim.tick(2)
    log = wpilib.DataLogManager.getLog()
    log.pause()
    lost = mark()  # dropped: the log is paused
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(0.2, ms=300)], clear_queue=True)
        sim.run(0.5, host)
        sim.run(0.6, host)  # past the recorder's next resume (once a second of ticks)
        text = mark()
        sim.deliver(host.send, [cmd(0.7, ms=300)], clear_queue=True)
        sim.run(0.1, host)
        after = read_log_after(text, lambda log: 0.7 in log["BCNP/Command/Vx"])
    assert after["BCNP/Command/Vx"] == [0.7]
    assert ("Test/Mark", lost) not in read_log().records


_SIGTERM_CHILD = """
import os, signal, sys, time
import wpilib
from wpiutil.log import StringLogEntry
from subsystems.observe.recording import finish_log_on_sigterm
wpilib.DataLogManager.start(sys.argv[1])
entry = StringLogEntry(wpilib.DataLogManager.getLog(), "Test/Last")
assert finish_log_on_sigterm()
time.sleep(1.0)  # a log that has been running: its file open, written each quarter second
entry.append("written just before the signal")
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(10)
"""


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
def test_a_sigterm_writes_the_log_whole_before_the_robot_exits(tmp_path: Path) -> None:
    """What python run.py sim (and a roboRIO) stops the robot with: the records of the last
    quarter second are written, not lost with the process."""
    import signal
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-c", _SIGTERM_CHILD, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 128 + signal.SIGTERM, child.stderr
    assert "Traceback" not in child.stderr
    (path,) = tmp_path.glob("*.wpilog")
    reader = DataLogReader(str(path))
    names: dict[int, str] = {}
    values = []
    for record in reader:
        if record.isStart():
            names[record.getStartData().entry] = record.getStartData().name
        elif not record.isControl() and names.get(record.getEntry()) == "Test/Last":
            values.append(record.getString())
    assert values == ["written just before the signal"]
