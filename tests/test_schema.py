"""Schema loading, validation, the schema hash and the message classes a schema builds."""

from __future__ import annotations

import copy
import json
import types
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bcnp
from benchmarks.harness import ROOT

DATA = ROOT / "tests" / "data"
DEFAULT_SCHEMA_PATH = ROOT / "schema" / "messages.json"
REFERENCE_SCHEMA_PATH = DATA / "reference_robot_schema.json"
TEST_SCHEMA_PATH = DATA / "test_schema.json"

REFERENCE_HASH = 0xE9EFEE08
TEST_SCHEMA_HASH = 0x2A9C6F4F
DRIVECMD_ALONE_HASH = 0x02D668B5


def reference_doc() -> dict[str, Any]:
    """A fresh, mutable copy of the reference robot's schema document."""
    return json.loads(REFERENCE_SCHEMA_PATH.read_text(encoding="utf-8"))


REFERENCE = bcnp.load_schema(REFERENCE_SCHEMA_PATH)
TEST_SCHEMA = bcnp.load_schema(TEST_SCHEMA_PATH)
DRIVE_CMD = REFERENCE["DriveCmd"]
TELEMETRY = REFERENCE["DrivetrainTelemetry"]


def write_schema(tmp_path: Path, doc: Any, name: str = "schema.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def load_error(path: Path) -> bcnp.SchemaError:
    with pytest.raises(bcnp.SchemaError) as info:
        bcnp.load_schema(path)
    return info.value


# --------------------------------------------------------------------------- valid schemas


def test_default_schema_loads_with_reference_hash() -> None:
    schema = bcnp.load_schema(DEFAULT_SCHEMA_PATH)
    assert schema.hash == REFERENCE_HASH
    assert schema.version == "3.2"
    assert [m.name for m in schema.messages] == ["DriveCmd", "DrivetrainTelemetry"]


def test_reference_robot_schema_hash() -> None:
    assert REFERENCE.hash == REFERENCE_HASH
    assert bcnp.compute_schema_hash(reference_doc()) == REFERENCE_HASH


def test_test_schema_loads_with_its_hash() -> None:
    assert TEST_SCHEMA.hash == TEST_SCHEMA_HASH
    assert [m.name for m in TEST_SCHEMA.messages] == [
        "TestCmd",
        "DrivetrainState",
        "EncoderData",
        "ProximityAlert",
    ]


def test_drivecmd_alone_hash() -> None:
    doc = reference_doc()
    doc["messages"] = [m for m in doc["messages"] if m["id"] == 1]
    schema = bcnp.load_schema(doc)
    assert schema.hash == DRIVECMD_ALONE_HASH
    assert [m.name for m in schema.messages] == ["DriveCmd"]


def test_load_schema_accepts_str_path_and_dict() -> None:
    from_str = bcnp.load_schema(str(REFERENCE_SCHEMA_PATH))
    from_dict = bcnp.load_schema(reference_doc())
    assert from_str.hash == from_dict.hash == REFERENCE_HASH


def test_float32_without_scale_hashes_without_scale_and_uses_default_on_wire() -> None:
    doc = {
        "version": "3.2",
        "messages": [{"id": 5, "name": "Speed", "fields": [{"name": "v", "type": "float32"}]}],
    }
    schema = bcnp.load_schema(doc)
    # The canonical text, written out by hand: no "scale" key for the field.
    canonical = (
        '{"messages":[{"fields":[{"name":"v","type":"float32"}],"id":5,"name":"Speed"}],"version":"3.2"}'
    )
    assert schema.hash == zlib.crc32(canonical.encode("utf-8"))

    scaled = copy.deepcopy(doc)
    scaled["messages"][0]["fields"][0]["scale"] = bcnp.DEFAULT_FLOAT_SCALE
    assert bcnp.load_schema(scaled).hash != schema.hash

    speed = schema["Speed"]
    assert speed.fields[0].scale is None
    assert bcnp.DEFAULT_FLOAT_SCALE == 10000
    msg = speed(v=1.5)
    assert msg.raw == (15000,)
    assert msg.v == 1.5


# --------------------------------------------------------------------------- hash sensitivity


def _set_top(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        doc[key] = value

    return mutate


def _del_top(key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        del doc[key]

    return mutate


def _msg_description(doc: dict[str, Any]) -> None:
    doc["messages"][0]["description"] = "something else entirely"


def _del_msg_description(doc: dict[str, Any]) -> None:
    del doc["messages"][1]["description"]


def _field_description(doc: dict[str, Any]) -> None:
    doc["messages"][0]["fields"][0]["description"] = "changed"


def _field_unit(doc: dict[str, Any]) -> None:
    doc["messages"][1]["fields"][2]["unit"] = "mm"


def _del_field_unit(doc: dict[str, Any]) -> None:
    del doc["messages"][0]["fields"][2]["unit"]


def _reverse_messages(doc: dict[str, Any]) -> None:
    doc["messages"].reverse()


@pytest.mark.parametrize(
    "mutate",
    [
        _set_top("description", "another description"),
        _del_top("description"),
        _set_top("namespace", "other_ns"),
        _del_top("namespace"),
        _set_top("$schema", "https://example.invalid/schema.json"),
        _del_top("$schema"),
        _msg_description,
        _del_msg_description,
        _field_description,
        _field_unit,
        _del_field_unit,
        _reverse_messages,
    ],
    ids=[
        "top-description",
        "no-top-description",
        "namespace",
        "no-namespace",
        "$schema",
        "no-$schema",
        "message-description",
        "no-message-description",
        "field-description",
        "field-unit",
        "no-field-unit",
        "message-order",
    ],
)
def test_hash_ignores_non_wire_details(mutate: Callable[[dict[str, Any]], None]) -> None:
    doc = reference_doc()
    mutate(doc)
    assert bcnp.load_schema(doc).hash == REFERENCE_HASH


def test_message_order_in_file_does_not_change_message_order() -> None:
    doc = reference_doc()
    doc["messages"].reverse()
    schema = bcnp.load_schema(doc)
    assert [m.id for m in schema.messages] == [1, 2]


def _swap_fields(doc: dict[str, Any]) -> None:
    fields = doc["messages"][0]["fields"]
    fields[0], fields[1] = fields[1], fields[0]


def _change_scale(doc: dict[str, Any]) -> None:
    doc["messages"][1]["fields"][2]["scale"] = 100


def _drop_scale(doc: dict[str, Any]) -> None:
    del doc["messages"][0]["fields"][0]["scale"]


def _change_type(doc: dict[str, Any]) -> None:
    doc["messages"][0]["fields"][2]["type"] = "uint32"


def _change_field_name(doc: dict[str, Any]) -> None:
    doc["messages"][0]["fields"][0]["name"] = "vX"


def _change_message_name(doc: dict[str, Any]) -> None:
    doc["messages"][0]["name"] = "DriveCommand"


def _change_id(doc: dict[str, Any]) -> None:
    doc["messages"][1]["id"] = 3


@pytest.mark.parametrize(
    "mutate",
    [
        _swap_fields,
        _change_scale,
        _drop_scale,
        _change_type,
        _change_field_name,
        _change_message_name,
        _change_id,
    ],
    ids=["field-order", "scale-value", "scale-removed", "type", "field-name", "message-name", "message-id"],
)
def test_hash_changes_with_wire_details(mutate: Callable[[dict[str, Any]], None]) -> None:
    doc = reference_doc()
    mutate(doc)
    schema = bcnp.load_schema(doc)
    assert schema.hash != REFERENCE_HASH
    assert schema.hash == bcnp.compute_schema_hash(doc)


def test_hash_changes_with_version() -> None:
    # Only "3.2" loads, so the version's part in the hash is checked on the hash function.
    doc = reference_doc()
    assert bcnp.compute_schema_hash(doc) == REFERENCE_HASH
    doc["version"] = "3.3"
    assert bcnp.compute_schema_hash(doc) != REFERENCE_HASH


# --------------------------------------------------------------------------- invalid schemas


def _msg(index: int, **changes: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        doc["messages"][index].update(changes)

    return mutate


def _del_msg_key(index: int, key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        del doc["messages"][index][key]

    return mutate


def _field(index: int, findex: int, **changes: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        doc["messages"][index]["fields"][findex].update(changes)

    return mutate


def _rename_field_key(index: int, findex: int, old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        field = doc["messages"][index]["fields"][findex]
        field[new] = field.pop(old)

    return mutate


# (mutation, substrings the single problem line must contain besides the file path)
INVALID_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], list[str]]] = {
    "duplicate-id": (_msg(1, id=1), ["DrivetrainTelemetry", "duplicate id 1"]),
    "id-zero": (_msg(0, id=0), ["DriveCmd", "id 0", "out of range"]),
    "id-65536": (_msg(1, id=65536), ["DrivetrainTelemetry", "id 65536", "out of range"]),
    "id-string": (_msg(0, id="1"), ["DriveCmd", "'1'", "integer"]),
    "id-float": (_msg(0, id=1.0), ["DriveCmd", "1.0", "integer"]),
    "id-bool": (_msg(0, id=True), ["DriveCmd", "True", "integer"]),
    "id-missing": (_del_msg_key(0, "id"), ["DriveCmd", "'id'", "required"]),
    "duplicate-message-name": (_msg(1, name="DriveCmd"), ["DriveCmd", "duplicate message name"]),
    "message-name-camel": (_msg(0, name="driveCmd"), ["driveCmd", "PascalCase"]),
    "message-name-underscore": (_msg(0, name="Drive_Cmd"), ["Drive_Cmd", "PascalCase"]),
    "message-name-digit": (_msg(0, name="1Drive"), ["1Drive", "PascalCase"]),
    "field-name-pascal": (_field(0, 0, name="Vx"), ["DriveCmd", "Vx", "camelCase"]),
    "field-name-underscore": (_field(0, 1, name="omega_z"), ["DriveCmd", "omega_z", "camelCase"]),
    "field-name-digit": (_field(1, 4, name="2stamp"), ["DrivetrainTelemetry", "2stamp", "camelCase"]),
    "duplicate-field-name": (_field(0, 1, name="vx"), ["DriveCmd", "'vx'", "duplicate field name"]),
    "unknown-type-float64": (
        _field(0, 2, type="float64"),
        ["DriveCmd", "durationMs", "unknown type", "float64"],
    ),
    "unknown-type-int64": (
        _field(1, 4, type="int64"),
        ["DrivetrainTelemetry", "timestampMs", "unknown type"],
    ),
    "unknown-type-case": (_field(0, 2, type="UInt16"), ["DriveCmd", "durationMs", "unknown type", "UInt16"]),
    "unknown-type-number": (_field(0, 2, type=2), ["DriveCmd", "durationMs", "unknown type"]),
    "scale-on-uint16": (_field(0, 2, scale=10), ["DriveCmd", "durationMs", "scale", "float32"]),
    "scale-on-uint32": (_field(1, 4, scale=1000), ["DrivetrainTelemetry", "timestampMs", "scale", "float32"]),
    "scale-zero": (_field(0, 0, scale=0), ["DriveCmd", "vx", "scale", "positive integer", "0"]),
    "scale-negative": (_field(0, 0, scale=-1), ["DriveCmd", "vx", "scale", "positive integer", "-1"]),
    "scale-fraction": (_field(0, 1, scale=1.5), ["DriveCmd", "omega", "scale", "positive integer", "1.5"]),
    "scale-string": (_field(0, 0, scale="10"), ["DriveCmd", "vx", "scale", "positive integer", "'10'"]),
    "scale-bool": (_field(0, 0, scale=True), ["DriveCmd", "vx", "scale", "positive integer", "True"]),
    "empty-fields": (_msg(0, fields=[]), ["DriveCmd", "'fields'", "non-empty"]),
    "missing-fields": (_del_msg_key(1, "fields"), ["DrivetrainTelemetry", "'fields'", "non-empty"]),
    "empty-messages": (_set_top("messages", []), ["'messages'", "non-empty"]),
    "missing-messages": (_del_top("messages"), ["'messages'", "non-empty"]),
    "version-missing": (_del_top("version"), ["'version'", "required"]),
    "version-3.1": (_set_top("version", "3.1"), ["version", "'3.1'", "not supported"]),
    "version-4.0": (_set_top("version", "4.0"), ["version", "'4.0'", "not supported"]),
    "version-number": (_set_top("version", 3.2), ["version", "3.2", "string"]),
    "version-x": (_set_top("version", "x"), ["version", "'x'"]),
    "field-key-typo-scal": (
        _rename_field_key(0, 0, "scale", "scal"),
        ["DriveCmd", "vx", "unknown key 'scal'"],
    ),
    "message-key-typo": (_msg(0, desc="x"), ["DriveCmd", "unknown key 'desc'"]),
    "top-key-typo": (_set_top("versoin", "3.2"), ["unknown key 'versoin'"]),
}
for _word in ("class", "if", "def", "return", "lambda", "while", "int", "yield", "kTypeId"):
    INVALID_CASES[f"reserved-field-{_word}"] = (
        _field(0, 0, name=_word),
        ["DriveCmd", repr(_word), "reserved"],
    )


@pytest.mark.parametrize("case", list(INVALID_CASES))
def test_invalid_schema_is_refused_with_file_message_field_and_rule(tmp_path: Path, case: str) -> None:
    mutate, expected = INVALID_CASES[case]
    doc = reference_doc()
    mutate(doc)
    path = write_schema(tmp_path, doc)
    err = load_error(path)
    assert isinstance(err, ValueError)
    assert len(err.problems) == 1, err.problems
    problem = err.problems[0]
    assert problem.startswith(str(path)), problem
    for part in expected:
        assert part in problem, (part, problem)
    assert str(err) == problem


@pytest.mark.parametrize("case", ["duplicate-id", "scale-on-uint16", "field-key-typo-scal", "version-4.0"])
def test_invalid_schema_dict_is_refused_too(case: str) -> None:
    mutate, expected = INVALID_CASES[case]
    doc = reference_doc()
    mutate(doc)
    with pytest.raises(bcnp.SchemaError) as info:
        bcnp.load_schema(doc)
    assert len(info.value.problems) == 1
    for part in expected:
        assert part in info.value.problems[0]


def test_several_problems_are_all_reported_one_line_each(tmp_path: Path) -> None:
    doc = reference_doc()
    doc["version"] = "4.0"
    doc["extra"] = True
    doc["messages"][1]["id"] = 1  # duplicate id
    doc["messages"][0]["fields"][0]["name"] = "Bad_Name"
    doc["messages"][0]["fields"][2]["scale"] = 10  # scale on uint16
    doc["messages"][1]["fields"][4]["type"] = "float64"
    path = write_schema(tmp_path, doc)
    err = load_error(path)
    problems = err.problems
    assert isinstance(problems, list)
    assert len(problems) == 6, problems
    for problem in problems:
        assert "\n" not in problem
        assert problem.startswith(str(path))
    assert str(err) == "\n".join(problems)
    rules = ["not supported", "unknown key 'extra'", "duplicate id 1", "camelCase", "scale", "unknown type"]
    for rule in rules:
        assert sum(rule in p for p in problems) >= 1, (rule, problems)
    assert any("Bad_Name" in p and "DriveCmd" in p for p in problems)
    assert any("timestampMs" in p and "DrivetrainTelemetry" in p and "float64" in p for p in problems)


def test_malformed_json_reports_path_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "version": "3.2",\n  "messages": [,]\n}\n', encoding="utf-8")
    err = load_error(path)
    assert len(err.problems) == 1
    # The stray comma is on line 3, column 16.
    assert f"{path}:3:16" in err.problems[0]


def test_truncated_json_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    text = REFERENCE_SCHEMA_PATH.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    err = load_error(path)
    assert str(path) in str(err)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "does_not_exist.json"
    err = load_error(path)
    assert len(err.problems) == 1
    assert str(path) in err.problems[0]


@pytest.mark.parametrize(
    "top", [[], [{"id": 1}], "3.2", 42, None], ids=["list", "list-of-obj", "str", "int", "null"]
)
def test_top_level_not_an_object_is_refused(tmp_path: Path, top: Any) -> None:
    path = write_schema(tmp_path, top)
    err = load_error(path)
    assert len(err.problems) == 1
    assert err.problems[0].startswith(str(path))
    assert "object" in err.problems[0]


def test_message_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    doc = reference_doc()
    doc["messages"].append("DriveCmd")
    err = load_error(write_schema(tmp_path, doc))
    assert len(err.problems) == 1
    assert "messages[2]" in err.problems[0]


# --------------------------------------------------------------------------- schema API


def test_schema_version_hash_and_message_order() -> None:
    doc = json.loads(TEST_SCHEMA_PATH.read_text(encoding="utf-8"))
    doc["messages"].reverse()
    schema = bcnp.load_schema(doc)
    assert schema.version == "3.2"
    assert schema.hash == TEST_SCHEMA_HASH
    assert [m.id for m in schema.messages] == [1, 10, 11, 12]
    assert len(schema) == 4
    assert [m.id for m in schema] == [1, 10, 11, 12]


@pytest.mark.parametrize(
    ("schema", "name", "msg_id", "wire_size"),
    [
        (REFERENCE, "DriveCmd", 1, 10),
        (REFERENCE, "DrivetrainTelemetry", 2, 20),
        (TEST_SCHEMA, "TestCmd", 1, 10),
        (TEST_SCHEMA, "DrivetrainState", 10, 20),
        (TEST_SCHEMA, "EncoderData", 11, 9),
        (TEST_SCHEMA, "ProximityAlert", 12, 4),
    ],
)
def test_lookup_by_name_and_id_and_wire_size(
    schema: bcnp.Schema, name: str, msg_id: int, wire_size: int
) -> None:
    spec = schema[name]
    assert schema[msg_id] is spec
    assert isinstance(spec, bcnp.MessageSpec)
    assert spec.id == msg_id
    assert spec.name == name
    assert spec.wire_size == wire_size
    assert sum(f.size for f in spec.fields) == wire_size


def test_message_spec_fields() -> None:
    fields = DRIVE_CMD.fields
    assert [(f.name, f.type, f.scale) for f in fields] == [
        ("vx", "float32", 10000),
        ("omega", "float32", 10000),
        ("durationMs", "uint16", None),
    ]
    assert [f.offset for f in fields] == [0, 4, 8]
    assert [(f.name, f.type, f.scale) for f in TELEMETRY.fields] == [
        ("leftVelocity", "float32", 10000),
        ("rightVelocity", "float32", 10000),
        ("leftPosition", "float32", 1000),
        ("rightPosition", "float32", 1000),
        ("timestampMs", "uint32", None),
    ]


@pytest.mark.parametrize("key", ["Nope", "drivecmd", 3, 0, 65535])
def test_unknown_message_raises_key_error(key: str | int) -> None:
    with pytest.raises(KeyError):
        REFERENCE[key]


# --------------------------------------------------------------------------- messages


def test_spec_call_builds_message_with_schema_attributes() -> None:
    msg = DRIVE_CMD(vx=1.5, omega=-0.25, durationMs=100)
    assert isinstance(msg, bcnp.Message)
    assert msg.vx == 1.5
    assert msg.omega == -0.25
    assert msg.durationMs == 100
    assert msg.raw == (15000, -2500, 100)
    assert DRIVE_CMD(1.5, -0.25, 100) == msg
    assert DRIVE_CMD(1.5, omega=-0.25, durationMs=100) == msg


def test_message_reads_back_wire_values() -> None:
    msg = DRIVE_CMD(vx=0.123456, omega=3.14159265, durationMs=7)
    assert msg.raw == (1235, 31416, 7)
    assert msg.vx == 0.1235
    assert msg.omega == 3.1416


def test_message_holds_its_bytes_on_the_wire() -> None:
    msg = DRIVE_CMD(vx=1.5, omega=-0.25, durationMs=100)
    assert msg.to_bytes() == bytes.fromhex("00003a98 fffff63c 0064")
    assert DRIVE_CMD.message_from_raw((15000, -2500, 100)) == msg
    assert DRIVE_CMD.message_from_raw(msg.raw).to_bytes() == msg.to_bytes()
    assert DRIVE_CMD.to_wire(msg) == DRIVE_CMD.to_wire((1.5, -0.25, 100)) == msg.to_bytes()
    assert DRIVE_CMD.to_wire({"vx": 1.5, "omega": -0.25, "durationMs": 100}) == msg.to_bytes()
    assert DRIVE_CMD.to_raw({"vx": 1.5, "omega": -0.25, "durationMs": 100}) == (15000, -2500, 100)
    with pytest.raises(TypeError):
        DRIVE_CMD.to_wire(TELEMETRY(1.5, -0.25, 0, 0, 100))


def test_pack_many_joins_messages_of_exactly_its_class() -> None:
    cls = DRIVE_CMD.message_class
    a = DRIVE_CMD(vx=1.5, omega=-0.25, durationMs=100)
    b = DRIVE_CMD(vx=-0.5, omega=3.1416, durationMs=65535)
    assert cls.pack_many([a, b, a]) == a.to_bytes() + b.to_bytes() + a.to_bytes()
    assert cls.pack_many([]) == b""
    assert cls.pack_many([a, (1.5, -0.25, 100)]) is None
    assert cls.pack_many([a, TEST_SCHEMA["TestCmd"](1.5, -0.25, 100)]) is None  # same layout, other type
    assert DRIVE_CMD.pack_messages([a, (1.5, -0.25, 100)]) == a.to_bytes() * 2
    # A message of a subclass, fully built, still reads like its parent but is not taken.
    sub = type("Sub", (cls,), {"__slots__": ()})(vx=1.5, omega=-0.25, durationMs=100)
    assert (sub.vx, sub.to_bytes(), sub == a) == (1.5, a.to_bytes(), False)
    assert cls.pack_many([a, sub]) is None
    # The same message loaded from another copy of the schema is another class.
    twin_spec = bcnp.load_schema(REFERENCE_SCHEMA_PATH)["DriveCmd"]
    assert cls.pack_many([a, twin_spec(vx=1.5, omega=-0.25, durationMs=100)]) is None
    # Something that answers to the class's own slot name without holding bytes is not taken.
    assert cls.pack_many([a, types.SimpleNamespace(**{cls._own_slot: 7})]) is None


def test_every_field_type_reads_back_from_the_bytes() -> None:
    spec = TEST_SCHEMA["ProximityAlert"]
    msg = spec(sensorId=255, distanceMm=65535, triggered=1)
    assert [getattr(msg, name) for name in spec.field_names] == [255, 65535, 1]
    assert msg.to_bytes() == spec.struct.pack(255, 65535, 1)


def test_messages_compare_by_type_and_wire_value() -> None:
    a = DRIVE_CMD(vx=1.5, omega=-0.25, durationMs=100)
    b = DRIVE_CMD(vx=1.500001, omega=-0.25000001, durationMs=100.0)  # same wire values
    c = DRIVE_CMD(vx=1.5001, omega=-0.25, durationMs=100)
    assert a == b
    assert (a != b) is False
    assert a != c
    # Same id, same layout, same wire values, but a different message type.
    other = TEST_SCHEMA["TestCmd"](value1=1.5, value2=-0.25, durationMs=100)
    assert other.raw == a.raw
    assert a != other
    assert other != a
    assert a != (15000, -2500, 100)
    assert a != TELEMETRY(1.5, -0.25, 0, 0, 100)


def test_messages_are_hashable() -> None:
    a = DRIVE_CMD(vx=1.5, omega=-0.25, durationMs=100)
    b = DRIVE_CMD(vx=1.5, omega=-0.25, durationMs=100)
    c = DRIVE_CMD(vx=1.0, omega=-0.25, durationMs=100)
    assert hash(a) == hash(b)
    assert len({a, b, c}) == 2
    assert {a: "x"}[b] == "x"


def test_message_repr_is_readable() -> None:
    text = repr(DRIVE_CMD(vx=1.5, omega=-0.25, durationMs=100))
    assert text.startswith("DriveCmd(")
    for part in ("vx=1.5", "omega=-0.25", "durationMs=100"):
        assert part in text
    assert (
        repr(TEST_SCHEMA["ProximityAlert"](1, 250, 0))
        == "ProximityAlert(sensorId=1, distanceMm=250, triggered=0)"
    )


def test_message_is_immutable() -> None:
    msg = DRIVE_CMD(vx=1.5, omega=-0.25, durationMs=100)
    with pytest.raises(AttributeError):
        msg.vx = 2.0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        msg.durationMs = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        msg.extra = 1  # type: ignore[attr-defined]
    assert msg.raw == (15000, -2500, 100)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), {}),
        ((1.5,), {}),
        ((1.5, -0.25), {}),
        ((), {"vx": 1.5, "omega": -0.25}),
        ((1.5, -0.25, 100), {"speed": 1}),
        ((), {"vx": 1.5, "omega": -0.25, "durationMs": 100, "duration": 1}),
        ((1.5, -0.25, 100), {"vx": 1.5}),
        ((1.5,), {"vx": 1.5, "omega": -0.25, "durationMs": 100}),
        ((1.5, -0.25, 100, 4), {}),
    ],
    ids=[
        "no-args",
        "missing-two",
        "missing-one",
        "missing-kw",
        "unknown-extra",
        "unknown-kw",
        "duplicate-all-positional",
        "duplicate-vx",
        "too-many-positional",
    ],
)
def test_bad_message_arguments_raise_type_error(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        DRIVE_CMD(*args, **kwargs)


def test_soft_keywords_are_valid_field_names() -> None:
    # "match" and "type" are soft keywords: valid identifiers on every Python version.
    doc = {
        "version": "3.2",
        "messages": [{"id": 1, "name": "Sensor", "fields": [{"name": "match", "type": "uint8"}]}],
    }
    doc["messages"][0]["fields"].append({"name": "type", "type": "uint8"})  # type: ignore[index]
    spec = bcnp.load_schema(doc)["Sensor"]
    assert spec(match=1, type=2).type == 2


@pytest.mark.parametrize("name", ["MessageTypeId", "Union", "Unknown", "None"])
def test_message_names_that_collide_with_generated_code_are_refused(name: str) -> None:
    fields = [{"name": "a", "type": "uint8"}]
    doc = {"version": "3.2", "messages": [{"id": 1, "name": name, "fields": fields}]}
    with pytest.raises(bcnp.SchemaError, match="reserved"):
        bcnp.load_schema(doc)
