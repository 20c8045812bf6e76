"""schema/bcnp_codegen.py: info view, errors, JSON Schema, Python generation, drift check, hash parity."""

from __future__ import annotations

import copy
import json
import random
import socket
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bcnp
from bcnp.codegen.cli import main as codegen_main
from benchmarks.harness import ROOT

DATA = ROOT / "tests" / "data"
SCRIPT = ROOT / "schema" / "bcnp_codegen.py"
DEFAULT = ROOT / "schema" / "messages.json"


def run_cli(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=60
    )


# -- info view and command line ---------------------------------------------------------


def test_info_view_prints_version_hash_and_message_table() -> None:
    out = run_cli(DEFAULT)
    assert out.returncode == 0, out.stderr
    assert "Version:  3.2" in out.stdout
    assert "Hash:     0xE9EFEE08" in out.stdout
    rows = [line.split() for line in out.stdout.splitlines()]
    assert ["1", "DriveCmd", "10", "B", "vx", "float32", "10000", "m/s"] in rows
    assert ["durationMs", "uint16", "-", "ms"] in rows
    assert ["2", "DrivetrainTelemetry", "20", "B", "leftVelocity", "float32", "10000", "m/s"] in rows
    assert ["leftPosition", "float32", "1000", "m"] in rows


def test_info_marks_default_scale(tmp_path: Path) -> None:
    doc = {
        "version": "3.2",
        "messages": [{"id": 5, "name": "Ping", "fields": [{"name": "x", "type": "float32"}]}],
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    out = run_cli(path)
    assert "10000 (default)" in out.stdout and "4 B" in out.stdout


def test_help_documents_every_option_with_an_example() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    for option in ("--cpp DIR", "--python DIR", "--project", "--check"):
        assert option in out.stdout
    for example in ("--cpp src/generated", "--python host", "schema/messages.json --check"):
        assert example in out.stdout
    assert "exit status" in out.stdout


def test_invalid_schema_exits_2_with_one_line_per_problem(tmp_path: Path) -> None:
    doc = json.loads(DEFAULT.read_text())
    doc["messages"][0]["fields"][0]["type"] = "float64"
    doc["messages"][1]["id"] = 1
    doc["messages"][1]["fields"][2]["scale"] = 0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    out = run_cli(path)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 3 and "Traceback" not in out.stderr
    assert all(str(path) in line for line in lines)
    assert any("'DriveCmd'" in line and "'vx'" in line and "unknown type 'float64'" in line for line in lines)
    assert any("'DrivetrainTelemetry'" in line and "duplicate id 1" in line for line in lines)
    assert any("'leftPosition'" in line and "positive integer" in line for line in lines)


def test_missing_file_and_bad_json_exit_2_without_traceback(tmp_path: Path) -> None:
    missing = run_cli(tmp_path / "nope.json")
    assert missing.returncode == 2 and "nope.json" in missing.stderr and "Traceback" not in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "version": "3.2",\n  "messages": [\n    {"id": 1,,}\n  ]\n}\n')
    out = run_cli(bad)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{bad}:4:14: invalid JSON" in out.stderr


# -- JSON Schema and loader agree -------------------------------------------------------

JSON_SCHEMA = json.loads((ROOT / "schema" / "bcnp_schema.json").read_text())


def _valid() -> dict[str, Any]:
    return copy.deepcopy(json.loads(DEFAULT.read_text()))


def _mutate(path: list[Any], value: Any) -> dict[str, Any]:
    doc = _valid()
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


INVALID = {
    "id-zero": _mutate(["messages", 0, "id"], 0),
    "id-too-big": _mutate(["messages", 0, "id"], 65536),
    "id-string": _mutate(["messages", 0, "id"], "1"),
    "id-float": _mutate(["messages", 0, "id"], 1.5),
    "id-missing": _mutate(["messages", 0, "id"], KeyError),
    "name-not-pascal": _mutate(["messages", 0, "name"], "driveCmd"),
    "name-underscore": _mutate(["messages", 0, "name"], "Drive_Cmd"),
    "name-reserved": _mutate(["messages", 0, "name"], "MessageTypeId"),
    "field-not-camel": _mutate(["messages", 0, "fields", 0, "name"], "Vx"),
    "field-snake": _mutate(["messages", 0, "fields", 0, "name"], "duration_ms"),
    "field-reserved": _mutate(["messages", 0, "fields", 0, "name"], "class"),
    "field-reserved-bcnp": _mutate(["messages", 0, "fields", 0, "name"], "encode"),
    "unknown-type": _mutate(["messages", 0, "fields", 0, "type"], "float64"),
    "scale-on-int": _mutate(["messages", 0, "fields", 2, "scale"], 10),
    "scale-zero": _mutate(["messages", 0, "fields", 0, "scale"], 0),
    "scale-negative": _mutate(["messages", 0, "fields", 0, "scale"], -5),
    "scale-float": _mutate(["messages", 0, "fields", 0, "scale"], 2.5),
    "scale-string": _mutate(["messages", 0, "fields", 0, "scale"], "100"),
    "empty-fields": _mutate(["messages", 0, "fields"], []),
    "no-fields": _mutate(["messages", 0, "fields"], KeyError),
    "empty-messages": _mutate(["messages"], []),
    "no-version": _mutate(["version"], KeyError),
    "version-3.1": _mutate(["version"], "3.1"),
    "version-number": _mutate(["version"], 3.2),
    "version-4": _mutate(["version"], "4.0"),
    "unknown-top-key": _mutate(["comment"], "x"),
    "unknown-message-key": _mutate(["messages", 0, "fieldz"], []),
    "unknown-field-key": _mutate(["messages", 0, "fields", 0, "scal"], 10),
    "unit-not-string": _mutate(["messages", 0, "fields", 0, "unit"], 5),
    "name-cpp-header": _mutate(["messages", 0, "name"], "Crc32"),
    "namespace-dash": _mutate(["namespace"], "my-robot"),
    "namespace-keyword": _mutate(["namespace"], "team::class"),
    "namespace-std": _mutate(["namespace"], "std"),
    "top-level-list": [],  # type: ignore[dict-item]
}
# Uniqueness across array items has no draft-07 form: these are refused by the loader only.
LOADER_ONLY = {
    "duplicate-id": _mutate(["messages", 1, "id"], 1),
    "duplicate-name": _mutate(["messages", 1, "name"], "DriveCmd"),
    "duplicate-field": _mutate(["messages", 0, "fields", 1, "name"], "vx"),
}


def test_json_schema_is_draft_07_and_valid() -> None:
    assert JSON_SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(JSON_SCHEMA)


@pytest.mark.parametrize("path", [DEFAULT, DATA / "test_schema.json", DATA / "reference_robot_schema.json"])
def test_valid_schemas_pass_both(path: Path) -> None:
    doc = json.loads(path.read_text())
    jsonschema.Draft7Validator(JSON_SCHEMA).validate(doc)
    bcnp.load_schema(doc)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_every_invalid_fixture_is_rejected_by_both(name: str) -> None:
    doc = INVALID[name]
    assert list(jsonschema.Draft7Validator(JSON_SCHEMA).iter_errors(doc)), f"JSON Schema accepted {name}"
    with pytest.raises(bcnp.SchemaError):
        bcnp.load_schema(doc)


@pytest.mark.parametrize("name", sorted(LOADER_ONLY))
def test_uniqueness_rules_are_enforced_by_the_loader(name: str) -> None:
    with pytest.raises(bcnp.SchemaError, match="duplicate"):
        bcnp.load_schema(LOADER_ONLY[name])


# -- Python generation ------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("py")
    result = run_cli(DEFAULT, "--python", out)
    assert result.returncode == 0, result.stderr
    assert (out / "bcnp_messages.py").exists()
    return out


@pytest.fixture(scope="module")
def mod(generated: Path) -> Any:
    sys.path.insert(0, str(generated))
    try:
        import bcnp_messages

        return bcnp_messages
    finally:
        sys.path.remove(str(generated))


def test_generated_module_is_standalone(generated: Path) -> None:
    # -S: no site-packages at all, only the standard library.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import bcnp_messages as m; "
        "print(hex(m.SCHEMA_HASH), sorted(k for k in sys.modules if k.startswith('bcnp')))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-E", "-c", code, str(generated)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["0xe9efee08", "['bcnp_messages']"]


def test_generated_module_public_names(mod: Any) -> None:
    assert (mod.PROTOCOL_MAJOR, mod.PROTOCOL_MINOR, mod.HEADER_SIZE_V3) == (3, 2, 7)
    assert mod.SCHEMA_HASH == 0xE9EFEE08 and mod.HANDSHAKE_MAGIC == b"BCNP"
    assert mod.crc32(b"123456789") == 0xCBF43926 == zlib.crc32(b"123456789")
    assert mod.MessageTypeId.Unknown == 0 and mod.MessageTypeId.DriveCmd == 1
    assert mod.MessageTypeId.DrivetrainTelemetry == 2
    assert {1: mod.DriveCmd, 2: mod.DrivetrainTelemetry} == mod.MESSAGE_REGISTRY
    assert (mod.DriveCmd.TYPE_ID, mod.DriveCmd.WIRE_SIZE) == (1, 10)
    assert (mod.DrivetrainTelemetry.TYPE_ID, mod.DrivetrainTelemetry.WIRE_SIZE) == (2, 20)
    assert set(mod.Message.__args__) == {mod.DriveCmd, mod.DrivetrainTelemetry}
    assert mod.encode_handshake() == bytes.fromhex("42434e50e9efee08")
    assert mod.validate_handshake(mod.encode_handshake())
    assert not mod.validate_handshake(bytes.fromhex("42434e50e9efee09"))
    assert not mod.validate_handshake(b"XCNP" + bytes.fromhex("e9efee08"))
    assert not mod.validate_handshake(mod.encode_handshake()[:7])


def test_generated_module_matches_core_vectors(mod: Any) -> None:
    packet = mod.encode_packet(
        mod.MessageTypeId.DriveCmd, [mod.DriveCmd(1.5, -0.25, 100), mod.DriveCmd(0.5, 3.1416, 65535)], flags=1
    )
    assert packet.hex(" ") == (
        "03 02 01 00 01 00 02 00 00 3a 98 ff ff f6 3c 00 64 00 00 13 88 00 00 7a b8 ff ff 89 23 6a c4"
    )
    telemetry = mod.encode_packet(2, [mod.DrivetrainTelemetry(1.2345, -1.2345, 1.5, -0.25, 123456)])
    assert telemetry.hex(" ") == (
        "03 02 00 00 02 00 01 00 00 30 39 ff ff cf c7 00 00 05 dc ff ff ff 06 00 01 e2 40 d0 14 b0 5c"
    )
    assert mod.DriveCmd.decode(mod.DriveCmd(1.5, -0.25, 100).encode()) == mod.DriveCmd(1.5, -0.25, 100)
    assert mod.DriveCmd.decode(b"\x00" * 9) is None
    type_id, flags, msgs = mod.decode_packet(packet)
    assert (type_id, flags, len(msgs)) == (1, 1, 2) and msgs[1].durationMs == 65535
    corrupt = bytearray(packet)
    corrupt[9] ^= 1
    assert mod.decode_packet(bytes(corrupt)) is None


def test_generated_module_rounds_half_away_and_refuses_out_of_range(mod: Any) -> None:
    assert mod.DriveCmd(0.03125, -0.03125, 0).encode()[:8] == bytes.fromhex("00000139fffffec7")  # 313, -313
    for bad in (mod.DriveCmd(1e6, 0, 0), mod.DriveCmd(float("nan"), 0, 0), mod.DriveCmd(0, 0, 65536)):
        with pytest.raises(ValueError, match=r"DriveCmd\.(vx|durationMs)"):
            bad.encode()
    with pytest.raises(ValueError):
        mod.encode_packet(99, [])
    with pytest.raises(TypeError):
        mod.encode_packet(1, [mod.DrivetrainTelemetry()])


@settings(max_examples=200, deadline=None)
@given(
    vx=st.floats(-214748.359375, 214748.359375, allow_nan=False, width=32),
    omega=st.one_of(st.integers(-(2**20), 2**20).map(lambda k: k / 32), st.floats(-10, 10)),
    ms=st.integers(0, 65535),
)
def test_generated_module_bytes_equal_the_runtime_codec(
    mod: Any, schema: bcnp.Schema, vx: float, omega: float, ms: int
) -> None:
    spec = schema["DriveCmd"]
    assert mod.encode_packet(1, [mod.DriveCmd(vx, omega, ms)]) == bcnp.encode_packet(
        spec, [spec(vx, omega, ms)]
    )


HOST_SCRIPT = """
import socket, sys
sys.path.insert(0, sys.argv[1])
from bcnp_messages import (CLEAR_QUEUE, DriveCmd, MessageTypeId, encode_handshake, encode_packet,
                           validate_handshake)

with socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=5) as sock:
    sock.sendall(encode_handshake())
    reply = b""
    while len(reply) < 8:
        reply += sock.recv(8 - len(reply))
    assert validate_handshake(reply), reply
    batch = [DriveCmd(vx=0.5, omega=0.0, durationMs=200), DriveCmd(vx=0.0, omega=1.25, durationMs=300)]
    sock.sendall(encode_packet(MessageTypeId.DriveCmd, batch, flags=CLEAR_QUEUE))
print("sent")
"""


def test_host_script_written_against_generated_names_drives_the_runtime(
    generated: Path, schema: bcnp.Schema, tmp_path: Path
) -> None:
    """A reference-style host script: real loopback TCP, handshake both ways, one CLEAR_QUEUE batch."""
    queue = bcnp.MessageQueue()
    dispatcher = bcnp.Dispatcher(schema)
    dispatcher.register("DriveCmd", queue.handle_packet)
    received: dict[str, Any] = {}
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(5)
            conn.sendall(bcnp.encode_handshake(schema.hash))
            data = b""
            while True:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            received["hash"] = bcnp.parse_handshake(data[:8])
            dispatcher.push(data[8:], 1.0)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        script = tmp_path / "host.py"
        script.write_text(HOST_SCRIPT)
        out = subprocess.run(
            [sys.executable, str(script), str(generated), str(port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        thread.join(5)
    finally:
        server.close()
    assert received["hash"] == schema.hash
    assert dispatcher.parse_errors == 0 and queue.size() == 2
    first = queue.update(1.0)
    assert first is not None and (first.vx, first.omega, first.durationMs) == (0.5, 0.0, 200)


# -- the project's own typed module and the drift check ---------------------------------


def test_project_typed_module_is_the_runtime(schema: bcnp.Schema) -> None:
    import messages

    assert messages.SCHEMA_HASH == schema.hash == 0xE9EFEE08
    assert messages.DriveCmd is messages.DRIVE_CMD_SPEC.message_class
    cmd = messages.DriveCmd(vx=1.0, omega=0.5, durationMs=20)
    packet = bcnp.encode_packet(messages.DRIVE_CMD_SPEC, [cmd])
    assert bcnp.decode_packet(schema, packet)[0].vx == 1.0
    assert messages.SCHEMA_DOCUMENT["messages"][0]["name"] == "DriveCmd"


def test_committed_generated_files_are_current() -> None:
    out = run_cli(DEFAULT, "--check")
    assert out.returncode == 0, out.stderr
    assert "messages.py" in out.stdout and "schema/bcnp_schema.json" in out.stdout


def test_check_names_stale_and_missing_files(tmp_path: Path) -> None:
    assert run_cli(DEFAULT, "--python", tmp_path).returncode == 0
    assert run_cli(DEFAULT, "--python", tmp_path, "--check").returncode == 0
    target = tmp_path / "bcnp_messages.py"
    target.write_text(target.read_text().replace("SCHEMA_HASH = 0xE9EFEE08", "SCHEMA_HASH = 0x00000000"))
    stale = run_cli(DEFAULT, "--python", tmp_path, "--check")
    assert stale.returncode == 1 and f"stale: {target}" in stale.stderr
    target.unlink()
    missing = run_cli(DEFAULT, "--python", tmp_path, "--check")
    assert missing.returncode == 1 and f"missing: {target}" in missing.stderr
    assert not target.exists()  # --check writes nothing


def test_check_detects_a_schema_change_against_committed_files(tmp_path: Path) -> None:
    doc = json.loads(DEFAULT.read_text())
    doc["messages"][0]["fields"][2]["type"] = "uint32"
    changed = tmp_path / "messages.json"
    changed.write_text(json.dumps(doc))
    out = run_cli(changed, "--check")
    assert out.returncode == 1 and "messages.py" in out.stderr


def test_generation_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run_cli(DEFAULT, "--python", a)
    run_cli(DEFAULT, "--python", b, cwd=tmp_path)
    assert (a / "bcnp_messages.py").read_bytes() == (b / "bcnp_messages.py").read_bytes()


# -- hash parity on random schemas ----------------------------------------------------------

TYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "float32"]


def _random_schema(rng: random.Random) -> dict[str, Any]:
    ids = rng.sample(range(1, 65536), rng.randint(1, 6))
    messages = []
    for n, mid in enumerate(ids):
        fields = []
        for k in range(rng.randint(1, 6)):
            ftype = rng.choice(TYPES)
            field: dict[str, Any] = {"name": f"f{k}{rng.choice(['', 'Val', 'X9'])}", "type": ftype}
            if ftype == "float32" and rng.random() < 0.6:
                field["scale"] = rng.choice([1, 10, 100, 1000, 10000, 65536, 1000000])
            if rng.random() < 0.5:
                field["unit"] = rng.choice(["m/s", "rad", "ms", "°C", "ticks"])
            if rng.random() < 0.5:
                field["description"] = rng.choice(["a value", "Ünïcode text", 'quote "x"'])
            fields.append(field)
        rng.shuffle(fields)
        msg: dict[str, Any] = {
            "id": mid,
            "name": f"Msg{n}{rng.choice(['', 'Cmd', 'State'])}",
            "fields": fields,
        }
        if rng.random() < 0.5:
            msg["description"] = "described"
        messages.append(msg)
    doc: dict[str, Any] = {"version": rng.choice(["3.2", "3.2.0", "3.2.2", "3.2.17"]), "messages": messages}
    if rng.random() < 0.5:
        doc["namespace"] = "team254"
    return doc


def _reference_hash(doc: dict[str, Any]) -> int:
    """reference-behavior §1, written independently of bcnp.schema."""
    msgs = []
    for m in sorted(doc["messages"], key=lambda m: m["id"]):
        fields = [{k: f[k] for k in ("name", "type", "scale") if k in f} for f in m["fields"]]
        msgs.append({"id": m["id"], "name": m["name"], "fields": fields})
    text = json.dumps({"messages": msgs, "version": doc["version"]}, sort_keys=True, separators=(",", ":"))
    return zlib.crc32(text.encode()) & 0xFFFFFFFF


def test_hash_parity_on_200_random_schemas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(20261120)
    for i in range(200):
        doc = _random_schema(rng)
        path = tmp_path / f"s{i}.json"
        path.write_text(json.dumps(doc, indent=rng.choice([None, 2])))
        assert codegen_main([str(path)]) == 0
        printed = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Hash:"))
        assert printed.split()[1] == f"0x{_reference_hash(doc):08X}", doc
        # descriptions and units never change the hash
        stripped = copy.deepcopy(doc)
        for m in stripped["messages"]:
            m.pop("description", None)
            for f in m["fields"]:
                f.pop("unit", None)
                f.pop("description", None)
        assert bcnp.load_schema(stripped).hash == _reference_hash(doc)
