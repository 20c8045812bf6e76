"""Every run is recorded: the real robot in the simulator, driven over a real link, and its
``.wpilog`` read back with wpiutil's DataLogReader."""

from __future__ import annotations

import os
import socket
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import wpilib
from support import wait_until
from test_robot import Sim, cmd
from wpiutil.log import DataLogReader

import bcnp
import constants
from bcnp.host.client import Client, SchemaMismatchError
from messages import SCHEMA, DriveCmd


@pytest.fixture
def sim(control, robot) -> Iterator[Sim]:  # type: ignore[no-untyped-def]
    with control.run_robot():
        yield Sim(robot)


def read_log() -> dict[str, list[object]]:
    """Every entry of the run's .wpilog, by name, values in order (what AdvantageScope opens),
    as far as the log's writer thread has written it."""
    wpilib.DataLogManager.getLog().flush()  # asks the writer thread; it writes a moment later
    directory = Path(wpilib.DataLogManager.getLogDir())
    assert directory == Path(os.environ["BCNP_LOG_DIR"])  # never the project folder in tests
    files = sorted(directory.glob("*.wpilog"), key=lambda p: p.stat().st_mtime)
    assert files, f"no .wpilog in {directory}"
    entries: dict[int, tuple[str, str]] = {}
    values: dict[str, list[object]] = defaultdict(list)
    for record in DataLogReader(str(files[-1])):
        if record.isStart():
            start = record.getStartData()
            entries[start.entry] = (start.name, start.type)
        elif not record.isControl() and record.getEntry() in entries:
            name, kind = entries[record.getEntry()]
            read = {
                "string": record.getString,
                "int64": record.getInteger,
                "double": record.getDouble,
                "boolean": record.getBoolean,
            }.get(kind)
            if read is not None:
                values[name].append(read())
    return values


def read_log_when(ready: Callable[[dict[str, list[object]]], bool]) -> dict[str, list[object]]:
    """The log once ``ready`` holds for it: the writer thread has caught up."""
    seen: list[dict[str, list[object]]] = []

    def caught_up() -> bool:
        seen[:] = [read_log()]
        return ready(seen[0])

    wait_until(caught_up, what="the data log to be written")
    return seen[0]


def test_a_run_driven_over_a_real_link_is_recorded(sim: Sim, test_schema: bcnp.Schema) -> None:
    sim.tick(5)
    host = sim.connect()
    peer = f"127.0.0.1:{host._sock.getsockname()[1]}"  # type: ignore[union-attr]
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

    log = read_log_when(lambda log: log["BCNP/Connected"][-1:] == [False] and bool(log["BCNP/Refused"]))
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
        f"disconnected tcp {peer}: closed by the peer",
    ]
    refused = str(log["BCNP/Refused"][-1])
    assert refused.startswith("tcp 127.0.0.1:") and f"0x{test_schema.hash:08X}" in refused
    assert f"0x{SCHEMA.hash:08X}" in refused  # ours too
    # Link loss; NetworkTables (the Network/* keys) recorded alongside.
    assert log["BCNP/Connected"][-2:] == [True, False]
    assert any(name.startswith("NT:/SmartDashboard/Network/") for name in log)


def test_a_controller_ended_for_link_loss_is_recorded_with_why(sim: Sim) -> None:
    sim.tick()
    host = sim.connect()
    peer = f"127.0.0.1:{host._sock.getsockname()[1]}"  # type: ignore[union-attr]
    sim.deliver(host.send, [cmd(1.0, ms=5000)], clear_queue=True)
    sim.tick(11)  # silent: 220 ms after the last packet
    wait_until(lambda: sim.link.counter("link_losses") == 1, what="the link loss")
    sim.tick()
    host.close()
    gone = f"disconnected tcp {peer}: link lost: no packet for 0.220 s (link timeout 0.2 s)"
    log = read_log_when(lambda log: gone in log["BCNP/Controller"])
    assert [c for c in log["BCNP/Controller"] if peer in str(c)][-1] == gone


def test_a_flood_of_bytes_is_one_entry_per_packet(sim: Sim) -> None:
    sim.tick()
    before = len(read_log_when(lambda log: "BCNP/Connected" in log)["BCNP/Packet/Count"])
    with socket.create_connection(("127.0.0.1", sim.link.tcp.port), timeout=5) as raw:
        raw.recv(8)
        big = bcnp.encode_packet(DriveCmd.spec, [cmd(0.1, ms=10)] * 65_535)
        raw.sendall(bcnp.encode_handshake(SCHEMA.hash) + big + b"\x00" * 1000)
        wait_until(lambda: sim.link.queue.metrics.received >= 65_535, what="the big packet")
    counts = read_log_when(lambda log: len(log["BCNP/Packet/Count"]) > before)["BCNP/Packet/Count"][before:]
    assert counts == [65_535]


def test_a_flood_of_packets_is_recorded_up_to_the_budget_then_counted(sim: Sim) -> None:
    """A second's worth of packets (RECORD_PACKETS_PER_S) is recorded one by one; past
    it, a flood's packets are counted in BCNP/Packet/Unrecorded, not written (robot
    time stands still between ticks here: the budget does not refill during the burst)."""
    sim.tick()
    before = len(read_log_when(lambda log: "BCNP/Connected" in log)["BCNP/Packet/Count"])
    budget = constants.RECORD_PACKETS_PER_S
    flood = budget + 500
    packet = bcnp.encode_packet(DriveCmd.spec, [cmd(0.1, ms=10)])
    with socket.create_connection(("127.0.0.1", sim.link.tcp.port), timeout=5) as raw:
        raw.recv(8)
        raw.sendall(bcnp.encode_handshake(SCHEMA.hash) + packet * flood)
        wait_until(lambda: sim.link.queue.metrics.received >= flood, what="the flood")
    assert sim.robot.recorder.unrecorded == 500
    sim.tick()  # the tick writes the count
    log = read_log_when(lambda log: bool(log.get("BCNP/Packet/Unrecorded")))
    assert len(log["BCNP/Packet/Count"]) - before == budget
    assert log["BCNP/Packet/Unrecorded"][-1] == 500
