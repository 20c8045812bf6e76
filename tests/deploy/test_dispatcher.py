"""Dispatcher: routing by type, liveness, counters; the core end to end; sans-I/O."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

import bcnp
from benchmarks.harness import ROOT


def drive(schema: bcnp.Schema, *cmds: tuple[float, float, int], flags: int = 0) -> bytes:
    spec = schema["DriveCmd"]
    return bcnp.encode_packet(spec, [spec(*c) for c in cmds], flags)


def telemetry(schema: bcnp.Schema) -> bytes:
    spec = schema["DrivetrainTelemetry"]
    return bcnp.encode_packet(spec, [spec(0.1, 0.2, 0.3, 0.4, 5)])


def test_register_routes_by_type_with_receive_time(schema: bcnp.Schema) -> None:
    d = bcnp.Dispatcher(schema)
    got: list[tuple[str, int, float]] = []
    d.register("DriveCmd", lambda p, now: got.append(("drive", len(p), now)))
    d.register(2, lambda p, now: got.append(("telemetry", len(p), now)))
    d.push(drive(schema, (1, 0, 20), (0, 1, 20)) + telemetry(schema), 3.5)
    d.push(drive(schema, (1, 0, 20)), 3.52)
    assert got == [("drive", 2, 3.5), ("telemetry", 1, 3.5), ("drive", 1, 3.52)]
    assert d.packets_received == 3 and d.last_receive_time == 3.52


def test_a_packet_is_done_once_its_handler_returned_or_raised_or_it_had_none(schema: bcnp.Schema) -> None:
    """``packets_done`` is what another thread waits on for a packet to be queued: it counts a
    packet after its handler, where ``packets_received`` counts it before."""
    d = bcnp.Dispatcher(schema)
    during: list[tuple[int, int]] = []

    def handler(packet: bcnp.PacketView, now: float) -> None:
        during.append((d.packets_received, d.packets_done))
        if len(during) == 2:
            raise ValueError("a handler's bug")

    d.register("DriveCmd", handler)
    d.push(drive(schema, (1, 0, 20)) + drive(schema, (1, 0, 20)) + telemetry(schema), 1.0)
    assert during == [(1, 0), (2, 1)]
    assert (d.packets_received, d.packets_done, d.unhandled_packets, d.handler_errors) == (3, 3, 1, 1)


def test_register_by_spec_and_unregister(schema: bcnp.Schema, test_schema: bcnp.Schema) -> None:
    d = bcnp.Dispatcher(schema)
    got: list[int] = []
    d.register(schema["DriveCmd"], lambda p, now: got.append(len(p)))
    d.push(drive(schema, (0, 0, 1)), 0.0)
    d.unregister("DriveCmd")
    d.push(drive(schema, (0, 0, 1)), 0.0)
    assert got == [1] and d.unhandled_packets == 1
    with pytest.raises(KeyError):
        d.register("NoSuchMessage", lambda p, now: None)
    with pytest.raises(KeyError):
        d.register(77, lambda p, now: None)
    with pytest.raises(KeyError):
        d.register(test_schema["EncoderData"], lambda p, now: None)
    with pytest.raises(TypeError):
        d.register("DriveCmd", "not callable")  # type: ignore[arg-type]


def test_unhandled_packets_still_prove_the_link_alive(schema: bcnp.Schema) -> None:
    d = bcnp.Dispatcher(schema, link_timeout=0.2)
    assert not d.link_alive(0.0) and d.last_receive_time is None
    d.push(telemetry(schema), 10.0)
    assert d.unhandled_packets == 1
    assert d.link_alive(10.0) and d.link_alive(10.2)
    assert not d.link_alive(10.200001)


def test_parse_errors_and_error_callback(schema: bcnp.Schema) -> None:
    infos: list[bcnp.ErrorInfo] = []
    d = bcnp.Dispatcher(schema, on_error=infos.append)
    d.push(b"\x00\x00\x00" + drive(schema, (0, 0, 1)), 1.0)
    assert d.parse_errors == 1
    assert infos == [bcnp.ErrorInfo(bcnp.PacketError.UNSUPPORTED_VERSION, 0, 1)]
    assert d.last_receive_time == 1.0


def test_handler_exception_is_counted_and_stream_continues(schema: bcnp.Schema) -> None:
    d = bcnp.Dispatcher(schema)
    got: list[int] = []

    def handler(p: bcnp.PacketView, now: float) -> None:
        got.append(len(p))
        if len(p) == 1:
            raise ValueError("bad handler")

    d.register("DriveCmd", handler)
    d.push(drive(schema, (0, 0, 1)) + drive(schema, (0, 0, 1), (0, 0, 2)), 0.0)
    assert got == [1, 2]
    assert d.handler_errors == 1 and isinstance(d.last_handler_error, ValueError)


def test_reset_forgets_partial_frame_and_liveness(schema: bcnp.Schema) -> None:
    d = bcnp.Dispatcher(schema)
    got: list[int] = []
    d.register("DriveCmd", lambda p, now: got.append(len(p)))
    packet = drive(schema, (0, 0, 1))
    d.push(packet, 0.0)
    d.push(packet[:9], 0.01)
    d.reset()
    assert d.last_receive_time is None and d.parser.buffered == 0
    d.push(packet, 0.02)
    assert got == [1, 1] and d.parse_errors == 0


def test_core_end_to_end_bytes_to_active_command(schema: bcnp.Schema) -> None:
    """Bytes -> parser -> dispatcher -> queue -> update(now) -> active command."""
    queue = bcnp.MessageQueue()
    d = bcnp.Dispatcher(schema)
    d.register("DriveCmd", queue.handle_packet)
    stream = drive(schema, (1.0, 0.0, 100), (0.5, -0.5, 100))
    for i in range(0, len(stream), 4):
        d.push(stream[i : i + 4], 5.0)
    assert queue.size() == 2 and queue.link_alive(5.0)
    active = queue.update(5.0)
    assert active is not None and (active.vx, active.omega, active.durationMs) == (1.0, 0.0, 100)
    d.push(drive(schema, flags=bcnp.CLEAR_QUEUE), 5.05)  # zero-message CLEAR_QUEUE: stop now
    assert queue.update(5.05) is None and queue.size() == 0
    assert queue.update(5.3) is None  # and nothing arrived since: disconnected


CORE_MODULES = ["schema", "wire", "parser", "dispatcher", "queue", "telemetry"]
FORBIDDEN_IMPORTS = {"socket", "selectors", "asyncio", "time", "wpilib", "ntcore", "hal", "datetime"}


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_modules_are_sans_io(module: str) -> None:
    """No sockets, no clocks, no wpilib/ntcore, no threads started in the core."""
    tree = ast.parse((ROOT / "bcnp" / f"{module}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = {node.module.split(".")[0]}
        else:
            names = set()
        assert not names & FORBIDDEN_IMPORTS, f"bcnp/{module}.py imports {names & FORBIDDEN_IMPORTS}"
        if isinstance(node, ast.Attribute):
            assert node.attr not in {"Thread", "start_new_thread"}, f"bcnp/{module}.py starts a thread"


def test_importing_bcnp_loads_no_robot_or_network_modules() -> None:
    code = (
        "import sys, bcnp; "
        "print(sorted(m for m in ('wpilib', 'ntcore', 'hal', 'socket', 'asyncio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
