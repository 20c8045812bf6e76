"""C++ header generator: the text of message_types.h, and the header compiled with g++ and
checked byte for byte against the Python codec in both directions.

The compiled side is tests/cpp/interop_main.cpp, a driver that reads one command per line
and answers one line each; its per-schema part (field readers and writers, dispatch by
message name) is generated here. Floats cross as IEEE-754 bit patterns, never as decimals.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import bcnp
from bcnp.codegen.cpp import render_cpp
from benchmarks.harness import ROOT

DATA = ROOT / "tests" / "data"
DRIVER = ROOT / "tests" / "cpp" / "interop_main.cpp"

CXX = shutil.which("g++") or shutil.which("c++")
CXX_FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic"]
#: Optimised, g++ warns of more (a value maybe used uninitialised): the header with every wire
#: type is built so; the other two at -O0, which compiles in two thirds of the time.
OPTIMISED = {"all_types": "-O1"}
# Stricter still, so the header stays clean in projects that turn these on.
CXX_EXTRA_WARNINGS = ["-Wshadow", "-Wconversion", "-Wsign-conversion", "-Wold-style-cast"]

DEFAULT = bcnp.load_schema(ROOT / "schema" / "messages.json")
TEST = bcnp.load_schema(DATA / "test_schema.json")

# Every wire type, float32 at scale 1, 1000, the default (10000) and the largest allowed;
# a nested namespace; field names that are also names inside the header (std, detail,
# the parameters of Encode/Decode, locals of the packet helpers); hostile descriptions.
ALL_TYPES_DOC: dict[str, Any] = {
    "version": "3.2",
    "namespace": "frc::interop",
    "description": "Every wire type.\nA description ending in a backslash \\",
    "messages": [
        {
            "id": 3,
            "name": "AllTypes",
            "description": "One field per type */ with a comment closer and a line splice ??/",
            "fields": [
                {"name": "s8", "type": "int8"},
                {"name": "u8", "type": "uint8"},
                {"name": "s16", "type": "int16"},
                {"name": "u16", "type": "uint16"},
                {"name": "s32", "type": "int32"},
                {"name": "u32", "type": "uint32"},
                {"name": "f1", "type": "float32", "scale": 1},
                {"name": "f1000", "type": "float32", "scale": 1000},
                {"name": "fDefault", "type": "float32", "description": "no scale: 10000 \\"},
                {"name": "fMax", "type": "float32", "scale": 2**31 - 1},
            ],
        },
        {
            "id": 65535,
            "name": "Clash",
            "fields": [
                {"name": "std", "type": "int32"},
                {"name": "detail", "type": "float32", "scale": 100},
                {"name": "data", "type": "uint8"},
                {"name": "size", "type": "uint16"},
                {"name": "out", "type": "int8"},
                {"name": "count", "type": "int16"},
                {"name": "flags", "type": "uint8"},
                {"name": "header", "type": "uint32"},
                {"name": "message", "type": "float32", "scale": 3},
            ],
        },
    ],
}
ALL_TYPES = bcnp.load_schema(ALL_TYPES_DOC)
SCHEMAS = {"default": DEFAULT, "test": TEST, "all_types": ALL_TYPES}
KNOWN_HASHES = {"default": 0xE9EFEE08, "test": 0x2A9C6F4F}  # the reference generator's

DRIVE_PACKET = bytes.fromhex(
    "03 02 01 00 01 00 02 00 00 3a 98 ff ff f6 3c 00 64 00 00 13 88 00 00 7a b8 ff ff 89 23 6a c4"
)
TELEMETRY_PACKET = bytes.fromhex(
    "03 02 00 00 02 00 01 00 00 30 39 ff ff cf c7 00 00 05 dc ff ff ff 06 00 01 e2 40 d0 14 b0 5c"
)
HANDSHAKE = bytes.fromhex("42 43 4e 50 e9 ef ee 08")

INT32_MAX = 2**31 - 1

# --------------------------------------------------------------------------- float32 helpers


def f32(x: float) -> float:
    """x rounded to the nearest float32 (the value a C++ float holds)."""
    return float(struct.unpack(">f", struct.pack(">f", x))[0])


def f32_bits(x: float) -> int:
    return int(struct.unpack(">I", struct.pack(">f", x))[0])


def f32_from_bits(bits: int) -> float:
    return float(struct.unpack(">f", struct.pack(">I", bits))[0])


def f32_step(x: float, up: bool) -> float:
    """The next float32 above (up) or below a finite float32 x."""
    if x == 0:
        return f32_from_bits(0x00000001 if up else 0x80000001)
    bits = f32_bits(x)
    return f32_from_bits(bits + 1 if (x > 0) == up else bits - 1)


def wire_ok(field: bcnp.FieldSpec, value: float) -> bool:
    try:
        field.to_wire(value)
    except ValueError:
        return False
    return True


def float_limits(field: bcnp.FieldSpec) -> tuple[float, float, float, float]:
    """(lowest, highest) float32 the field accepts, then the first refused below and above."""
    scale = field.effective_scale
    high = f32(INT32_MAX / scale)
    while wire_ok(field, f32_step(high, up=True)):
        high = f32_step(high, up=True)
    while not wire_ok(field, high):
        high = f32_step(high, up=False)
    low = f32(-(2**31) / scale)
    while wire_ok(field, f32_step(low, up=False)):
        low = f32_step(low, up=False)
    while not wire_ok(field, low):
        low = f32_step(low, up=True)
    return low, high, f32_step(low, up=False), f32_step(high, up=True)


def int_limits(field: bcnp.FieldSpec) -> tuple[int, int]:
    return field.field_type.raw_min, field.field_type.raw_max


# --------------------------------------------------------------------------- the compiled driver


def cpp_value(field: bcnp.FieldSpec, value: float) -> str:
    """A field value as the driver reads it: float bits (the value must be a float32) or decimal."""
    if field.is_float:
        value = float(value)
        assert value != value or f32(value) == value, f"{value!r} is not a float32"
        return f"f:{f32_bits(value):08x}"
    return str(int(value))


def parse_value(field: bcnp.FieldSpec, token: str) -> float:
    if field.is_float:
        assert token.startswith("f:"), token
        return f32_from_bits(int(token[2:], 16))
    return int(token)


def hex_arg(data: bytes) -> str:
    return data.hex() or "-"


def python_packet_hex(spec: bcnp.MessageSpec, messages: Sequence[Sequence[float]], flags: int = 0) -> str:
    """What the driver answers for an encode of ``messages``: the packet's hex, or "fail"."""
    try:
        return bcnp.encode_packet(spec, messages, flags=flags).hex()
    except ValueError:
        return "fail"


def interop_source(schema: bcnp.Schema) -> str:
    """interop_messages.inc: the schema-specific part of the driver."""
    lines = [
        f"namespace msgs = {schema.namespace or 'bcnp'};",
        "",
        "namespace {",
        "",
    ]
    for spec in schema.messages:
        kind = {True: "Float", False: "Int"}
        reads = " &&\n         ".join(f"Read{kind[f.is_float]}(in, message.{f.name})" for f in spec.fields)
        lines += [
            f"bool ReadFields(std::istream& in, msgs::{spec.name}& message) {{",
            f"  return {reads};",
            "}",
            "",
            f"void WriteFields(std::ostream& out, const msgs::{spec.name}& message) {{",
            *(f"  Write{kind[f.is_float]}(out, message.{f.name});" for f in spec.fields),
            "}",
            "",
        ]
    lines += [
        "std::string RunMessageCommand(const std::string& name, const std::string& command,",
        "                              std::istream& args) {",
        *(
            f'  if (name == "{spec.name}") {{\n'
            f"    return MessageCommand<msgs::{spec.name}>(command, args);\n"
            "  }"
            for spec in schema.messages
        ),
        '  return "error: unknown message " + name;',
        "}",
        "",
        "void PrintMessageInfo(std::ostream& out) {",
        *(
            f"  out << \" {s.name}=\" << static_cast<unsigned>(msgs::MessageTypeId::{s.name}) << ':'\n"
            f"      << msgs::k{s.name}Size << ':' << msgs::{s.name}::kWireSize << ':'\n"
            f"      << static_cast<unsigned>(msgs::{s.name}::kTypeId);"
            for s in schema.messages
        ),
        "}",
        "",
        "// The registry works in constant expressions.",
        'static_assert(msgs::LookupMessage(std::uint16_t{0}) == nullptr, "0 is no message");',
        *(
            f"static_assert(msgs::LookupMessage(msgs::MessageTypeId::{s.name})->wireSize == "
            f'msgs::k{s.name}Size, "{s.name}");'
            for s in schema.messages
        ),
        "",
        "}  // namespace",
        "",
    ]
    return "\n".join(lines)


@dataclass
class Interop:
    """The driver compiled against one schema's generated header."""

    name: str
    schema: bcnp.Schema
    header: Path
    executable: Path

    def run(self, commands: Sequence[str]) -> list[str]:
        proc = subprocess.run(
            [str(self.executable)],
            input="".join(f"{c}\n" for c in commands),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        answers = proc.stdout.splitlines()
        assert len(answers) == len(commands), proc.stderr
        errors = [(c[:80], a) for c, a in zip(commands, answers, strict=True) if a.startswith("error")]
        assert not errors, errors
        return answers

    def one(self, command: str) -> str:
        return self.run([command])[0]

    # Command builders and answer parsers ------------------------------------------------

    def encode(self, spec: bcnp.MessageSpec, messages: Sequence[Sequence[float]], flags: int = 0) -> str:
        values = [cpp_value(f, v) for m in messages for f, v in zip(spec.fields, m, strict=True)]
        return " ".join(["encode", spec.name, str(flags), str(len(messages)), *values])

    def encode1(self, spec: bcnp.MessageSpec, values: Sequence[float], size: int | None = None) -> str:
        size = spec.wire_size if size is None else size
        fields = [cpp_value(f, v) for f, v in zip(spec.fields, values, strict=True)]
        return " ".join(["encode1", spec.name, str(size), *fields])

    def decoded(self, spec: bcnp.MessageSpec, answer: str) -> tuple[str, int, list[list[float]], str]:
        """A decode answer: status, flags, each message's values, the re-encoded packet (hex)."""
        head, *messages, again = answer.split(" | ")
        status, flags, count = head.split()
        assert int(count) == len(messages)
        values = [[parse_value(f, t) for f, t in zip(spec.fields, m.split(), strict=True)] for m in messages]
        return status, int(flags), values, again


def build(name: str, directory: Path) -> Interop:
    schema = SCHEMAS[name]
    if CXX is None:
        pytest.skip("no C++ compiler: neither g++ nor c++ is on PATH, the generated header cannot be built")
    header = directory / "bcnp" / "message_types.h"
    header.parent.mkdir(parents=True)
    header.write_text(render_cpp(schema), encoding="utf-8")
    (directory / "interop_messages.inc").write_text(interop_source(schema), encoding="utf-8")
    executable = directory / "interop"
    flags = [*CXX_FLAGS, OPTIMISED.get(name, "-O0"), *CXX_EXTRA_WARNINGS]
    command = [CXX, *flags, "-I", str(directory), str(DRIVER), "-o", str(executable)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(command)}\n{proc.stderr}"
    return Interop(name, schema, header, executable)


@pytest.fixture(scope="module")
def cpp_default(tmp_path_factory: pytest.TempPathFactory) -> Interop:
    return build("default", tmp_path_factory.mktemp("default"))


@pytest.fixture(scope="module")
def cpp_test(tmp_path_factory: pytest.TempPathFactory) -> Interop:
    return build("test", tmp_path_factory.mktemp("test"))


@pytest.fixture(scope="module")
def cpp_all_types(tmp_path_factory: pytest.TempPathFactory) -> Interop:
    return build("all_types", tmp_path_factory.mktemp("all_types"))


@pytest.fixture(params=list(SCHEMAS))
def cpp_any(request: pytest.FixtureRequest) -> Interop:
    """Each schema's driver in turn (each compiled once per module)."""
    interop: Interop = request.getfixturevalue(f"cpp_{request.param}")
    return interop


# --------------------------------------------------------------------------- header text


def test_header_starts_with_generated_by_line_naming_file_and_hash() -> None:
    for schema, name, hash_text in (
        (DEFAULT, "messages.json", "0xE9EFEE08"),
        (TEST, "test_schema.json", "0x2A9C6F4F"),
    ):
        first = render_cpp(schema).splitlines()[0]
        assert first.startswith("// Generated by schema/bcnp_codegen.py from ")
        assert f" {name} " in first
        assert hash_text in first
        assert "Do not edit" in first


def test_output_is_deterministic_and_independent_of_where_the_schema_lives(tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "messages.json"
    copy.parent.mkdir()
    shutil.copy(ROOT / "schema" / "messages.json", copy)
    text = render_cpp(DEFAULT)
    assert render_cpp(bcnp.load_schema(ROOT / "schema" / "messages.json")) == text
    assert render_cpp(bcnp.load_schema(copy)) == text
    assert str(ROOT) not in text
    assert str(tmp_path) not in text
    assert text.endswith("}  // namespace bcnp\n")


def test_namespace_defaults_to_bcnp_and_follows_the_schema() -> None:
    doc = json.loads((ROOT / "schema" / "messages.json").read_text(encoding="utf-8"))
    del doc["namespace"]
    assert "\nnamespace bcnp {\n" in render_cpp(bcnp.load_schema(doc))
    doc["namespace"] = "team254::link"
    assert "\nnamespace team254::link {\n" in render_cpp(bcnp.load_schema(doc))


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"namespace": "my-robot"}, "namespace"),
        ({"namespace": "class"}, "namespace"),
        ({"namespace": "std"}, "namespace"),
        ({"namespace": ""}, "namespace"),
        ({"message": "Crc32"}, "'Crc32' is a reserved word"),
        ({"message": "Handshake"}, "'Handshake' is a reserved word"),
    ],
    ids=["ns-dash", "ns-keyword", "ns-std", "ns-empty", "message-Crc32", "message-Handshake"],
)
def test_names_the_header_cannot_express_are_refused(change: dict[str, str], problem: str) -> None:
    # The loader refuses them (so the JSON Schema and every generator agree); render_cpp
    # would refuse them too.
    doc = json.loads((ROOT / "schema" / "messages.json").read_text(encoding="utf-8"))
    if "namespace" in change:
        doc["namespace"] = change["namespace"]
    if "message" in change:
        doc["messages"][0]["name"] = change["message"]
    with pytest.raises(ValueError, match=problem):
        render_cpp(bcnp.load_schema(doc))


def test_descriptions_stay_inside_one_line_comments() -> None:
    text = render_cpp(ALL_TYPES)
    assert " from <schema> " in text.splitlines()[0]
    for line in text.splitlines():
        assert not line.rstrip().endswith(("\\", "??/")), line
    assert "// Schema: Every wire type. A description ending in a backslash\n" in text


# --------------------------------------------------------------------------- compiled: vectors


def test_cpp_encodes_the_reference_vectors(cpp_default: Interop) -> None:
    drive = DEFAULT["DriveCmd"]
    telemetry = DEFAULT["DrivetrainTelemetry"]
    drive_cmd = cpp_default.encode(
        drive, [(1.5, -0.25, 100), (0.5, f32(3.1416), 65535)], flags=bcnp.CLEAR_QUEUE
    )
    telemetry_cmd = cpp_default.encode(telemetry, [(f32(1.2345), f32(-1.2345), 1.5, -0.25, 123456)])
    answers = cpp_default.run([drive_cmd, f"handshake {0xE9EFEE08}", telemetry_cmd])
    assert answers == [DRIVE_PACKET.hex(), HANDSHAKE.hex(), TELEMETRY_PACKET.hex()]


def test_cpp_decodes_the_reference_vectors(cpp_default: Interop) -> None:
    drive = DEFAULT["DriveCmd"]
    status, flags, values, again = cpp_default.decoded(
        drive, cpp_default.one(f"decode DriveCmd {DRIVE_PACKET.hex()}")
    )
    assert (status, flags) == ("Ok", bcnp.CLEAR_QUEUE)
    assert values == [[1.5, -0.25, 100], [0.5, f32(3.1416), 65535]]
    assert again == DRIVE_PACKET.hex()
    status, _, values, again = cpp_default.decoded(
        DEFAULT["DrivetrainTelemetry"],
        cpp_default.one(f"decode DrivetrainTelemetry {TELEMETRY_PACKET.hex()}"),
    )
    assert status == "Ok"
    assert values == [[f32(1.2345), f32(-1.2345), 1.5, -0.25, 123456]]
    assert again == TELEMETRY_PACKET.hex()


def test_constants_enum_values_and_sizes_match_the_schema(cpp_any: Interop) -> None:
    schema = cpp_any.schema
    info = dict(token.split("=", 1) for token in cpp_any.one("info").split())
    expected = {
        "major": "3",
        "minor": "2",
        "version": "3.2",
        "hash": str(schema.hash),
        "handshake_size": "8",
        "magic": b"BCNP".hex(),
        "header_size": "7",
        "crc_size": "4",
        "min_packet": "11",
        "max_messages": "65535",
        "clear_queue": "1",
        "Unknown": "0",
    }
    for spec in schema:
        size = spec.wire_size
        expected[spec.name] = f"{spec.id}:{size}:{size}:{spec.id}"
    assert info == expected
    if cpp_any.name in KNOWN_HASHES:
        assert info["hash"] == str(KNOWN_HASHES[cpp_any.name])


def test_registry_lookup_gives_name_and_size_or_none(cpp_any: Interop) -> None:
    schema = cpp_any.schema
    ids = sorted(
        {0, 65535, *range(0, 14), *(s.id for s in schema), *(s.id + 1 for s in schema if s.id < 65535)}
    )
    answers = cpp_any.run([f"lookup {i}" for i in ids])
    for type_id, answer in zip(ids, answers, strict=True):
        spec = schema.get(type_id)
        assert answer == ("none" if spec is None else f"{spec.name} {spec.wire_size} {spec.id}"), type_id


def test_crc32_is_zlib_crc32(cpp_default: Interop) -> None:
    rng = random.Random(32)
    buffers = [b"", b"123456789", bytes(range(256)), bytes(rng.getrandbits(8) for _ in range(999))]
    answers = cpp_default.run([f"crc {hex_arg(b)}" for b in buffers])
    assert [int(a) for a in answers] == [zlib.crc32(b) for b in buffers]
    assert int(answers[1]) == 0xCBF43926  # the CRC-32/IEEE check value
    head, tail = buffers[3][:100], buffers[3][100:]
    assert int(cpp_default.one(f"crc {tail.hex()} {zlib.crc32(head)}")) == zlib.crc32(buffers[3])


def test_handshake_encode_parse_and_validate(cpp_default: Interop) -> None:
    hashes = [0, 1, 0xE9EFEE08, 0x2A9C6F4F, 0xFFFFFFFF]
    assert cpp_default.run([f"handshake {h}" for h in hashes]) == [
        bcnp.encode_handshake(h).hex() for h in hashes
    ]
    good = bcnp.encode_handshake(DEFAULT.hash)
    cases = {
        good: f"{DEFAULT.hash} valid",
        good + DRIVE_PACKET: f"{DEFAULT.hash} valid",  # data may follow in the same segment
        bcnp.encode_handshake(TEST.hash): f"{TEST.hash} invalid",
        **{good[:i] + b"?" + good[i + 1 :]: "none invalid" for i in range(4)},  # each magic byte
        good[:7]: "none invalid",
        b"": "none invalid",
    }
    assert cpp_default.run([f"checkhs {hex_arg(c)}" for c in cases]) == list(cases.values())


# --------------------------------------------------------------------------- compiled: values


def boundary_messages(spec: bcnp.MessageSpec) -> list[list[float]]:
    """All fields at their minimum, at their maximum, zero, and small mixed values."""
    lows: list[float] = []
    highs: list[float] = []
    for field in spec.fields:
        low, high = float_limits(field)[:2] if field.is_float else int_limits(field)
        lows.append(low)
        highs.append(high)
    small = [
        (-0.5 if i % 2 else 0.25) if f.is_float else int_limits(f)[0] + 1 for i, f in enumerate(spec.fields)
    ]
    return [lows, highs, [0] * len(spec.fields), small]


@pytest.mark.parametrize("schema_name", ["all_types", "test", "default"])
def test_boundary_values_cpp_encode_equals_python(schema_name: str, request: pytest.FixtureRequest) -> None:
    interop: Interop = request.getfixturevalue(f"cpp_{schema_name}")
    schema = interop.schema
    commands = [interop.encode(spec, boundary_messages(spec)) for spec in schema]
    for spec, answer in zip(schema, interop.run(commands), strict=True):
        messages = boundary_messages(spec)
        python = bcnp.encode_packet(spec, messages)
        assert answer == python.hex(), spec.name
        view = bcnp.decode_packet(schema, bytes.fromhex(answer))
        assert [view.raw(i) for i in range(len(view))] == [spec(*m).raw for m in messages]


@pytest.mark.parametrize("schema_name", ["all_types", "test", "default"])
def test_boundary_values_python_encode_cpp_decode(schema_name: str, request: pytest.FixtureRequest) -> None:
    interop: Interop = request.getfixturevalue(f"cpp_{schema_name}")
    schema = interop.schema
    packets = {spec.name: bcnp.encode_packet(spec, boundary_messages(spec), flags=1) for spec in schema}
    answers = interop.run([f"decode {name} {packet.hex()}" for name, packet in packets.items()])
    for spec, answer in zip(schema, answers, strict=True):
        status, flags, values, again = interop.decoded(spec, answer)
        assert (status, flags) == ("Ok", 1)
        view = bcnp.decode_packet(schema, packets[spec.name])
        for index, decoded in enumerate(values):
            raw = view.raw(index)
            expected = [
                f32(r / f.effective_scale) if f.is_float else r for f, r in zip(spec.fields, raw, strict=True)
            ]
            assert decoded == expected, (spec.name, index)  # integers exact, floats to the bit
        # C++ re-encodes what it decoded exactly as Python encodes those values ...
        assert again == python_packet_hex(spec, values, flags=1)
        # ... which is the original packet wherever a float can hold the wire value (|raw| < 2^23).
        small = bcnp.encode_packet(spec, boundary_messages(spec)[2:], flags=1)
        assert interop.decoded(spec, interop.one(f"decode {spec.name} {small.hex()}"))[3] == small.hex()


# (field name in AllTypes, float32 value, wire integer): halves go away from zero. Half to
# even would give 312, 62, 2, 0, 8388608; truncation 312, 62, 2, 0, 8388607.
TIES = [
    ("fDefault", 0.03125, 313),
    ("fDefault", -0.03125, -313),
    ("fDefault", 0.09375, 938),
    ("fDefault", 1000.03125, 10000313),
    ("fDefault", -1000.03125, -10000313),
    ("f1000", 0.0625, 63),
    ("f1000", -0.0625, -63),
    ("f1000", 2.5625, 2563),
    ("f1", 0.5, 1),
    ("f1", -0.5, -1),
    ("f1", 2.5, 3),
    ("f1", -2.5, -3),
    ("f1", 8388607.5, 8388608),
    ("fMax", 0.5, 1073741824),
    ("fMax", -0.5, -1073741824),
]


def test_ties_round_half_away_from_zero(cpp_all_types: Interop, cpp_default: Interop) -> None:
    spec = ALL_TYPES["AllTypes"]
    messages = []
    for name, value, _ in TIES:
        values: list[float] = [0] * len(spec.fields)
        values[spec.field_index(name)] = value
        messages.append(values)
    view = bcnp.decode_packet(
        ALL_TYPES, bytes.fromhex(cpp_all_types.one(cpp_all_types.encode(spec, messages)))
    )
    for index, (name, value, wire) in enumerate(TIES):
        assert f32(value) == value
        assert view.raw(index)[spec.field_index(name)] == wire, (name, value)
        assert spec.field(name).to_wire(value) == wire, (name, value)
    # The same ties through the default schema's DriveCmd (scale 10000) and telemetry (scale 1000).
    drive = DEFAULT["DriveCmd"]
    telemetry = DEFAULT["DrivetrainTelemetry"]
    answers = cpp_default.run(
        [
            cpp_default.encode(drive, [(0.03125, -0.03125, 0), (0.15625, -0.15625, 1)]),
            cpp_default.encode(telemetry, [(0, 0, 0.0625, -0.1875, 0)]),
        ]
    )
    assert bcnp.decode_packet(DEFAULT, bytes.fromhex(answers[0])).raw(0) == (313, -313, 0)
    assert bcnp.decode_packet(DEFAULT, bytes.fromhex(answers[0])).raw(1) == (1563, -1563, 1)
    assert bcnp.decode_packet(DEFAULT, bytes.fromhex(answers[1])).raw(0) == (0, 0, 63, -188, 0)


def random_floats(rng: random.Random, count: int) -> Iterator[float]:
    """float32 values of every magnitude from 2^-30 to 2^33, both signs, and some zeros."""
    yield from (0.0, -0.0)
    for _ in range(count):
        exponent = rng.randint(-30, 33)
        mantissa = rng.getrandbits(23)
        value = (1 + mantissa / 2**23) * 2.0**exponent
        yield f32(-value if rng.getrandbits(1) else value)


def test_random_floats_encode_exactly_as_python(cpp_all_types: Interop) -> None:
    spec = ALL_TYPES["AllTypes"]
    rng = random.Random(2024)
    cases: list[list[float]] = []
    for field in spec.fields:
        if field.is_float:
            for value in random_floats(rng, 400):
                values: list[float] = [0] * len(spec.fields)
                values[spec.field_index(field.name)] = value
                cases.append(values)
    answers = cpp_all_types.run([cpp_all_types.encode1(spec, values) for values in cases])
    accepted = []
    refused = 0
    for values, answer in zip(cases, answers, strict=True):
        try:
            raw = spec(*values).raw
        except ValueError:
            assert answer == "fail " + "aa" * (spec.wire_size + 2), values
            refused += 1
        else:
            assert answer == "ok " + (spec.struct.pack(*raw) + b"\xaa\xaa").hex(), values
            accepted.append(values)
    assert len(accepted) > 1000 and refused > 100  # both sides of the range were exercised
    packet = cpp_all_types.one(cpp_all_types.encode(spec, accepted))
    assert packet == bcnp.encode_packet(spec, accepted).hex()


def test_random_wire_values_decode_exactly(cpp_all_types: Interop) -> None:
    """Any int32 on the wire decodes to float(raw / double(scale)), to the bit."""
    rng = random.Random(99)
    specs = list(ALL_TYPES)
    packets = {}
    for spec in specs:
        raws = []
        for _ in range(300):
            raws.append(tuple(rng.randint(*int_limits(f)) for f in spec.fields))
        raws.append(tuple(int_limits(f)[0] for f in spec.fields))
        raws.append(tuple(int_limits(f)[1] for f in spec.fields))
        packets[spec.name] = (raws, bcnp.encode_packet(spec, [spec.message_from_raw(r) for r in raws]))
    answers = cpp_all_types.run([f"decode {name} {packet.hex()}" for name, (_, packet) in packets.items()])
    for spec, answer in zip(specs, answers, strict=True):
        raws = packets[spec.name][0]
        status, _, values, again = cpp_all_types.decoded(spec, answer)
        assert status == "Ok"
        for raw, decoded in zip(raws, values, strict=True):
            expected = [
                f32(r / f.effective_scale) if f.is_float else r for f, r in zip(spec.fields, raw, strict=True)
            ]
            assert decoded == expected, raw
        # The float nearest an extreme wire value may scale back outside int32 (the float API
        # cannot hold every int32): then both sides refuse it.
        assert again == python_packet_hex(spec, values)


def test_nan_infinity_and_out_of_range_floats_are_refused(
    cpp_all_types: Interop, cpp_default: Interop
) -> None:
    nan = f32_from_bits(0x7FC00000)
    for interop, spec in ((cpp_all_types, ALL_TYPES["AllTypes"]), (cpp_default, DEFAULT["DriveCmd"])):
        cases: list[list[float]] = []
        for field in spec.fields:
            if field.is_float:
                for value in (nan, float("inf"), float("-inf"), *float_limits(field)[2:]):
                    values: list[float] = [0] * len(spec.fields)
                    values[spec.field_index(field.name)] = value
                    cases.append(values)
        answers = interop.run([interop.encode1(spec, values) for values in cases])
        untouched = "fail " + "aa" * (spec.wire_size + 2)
        for values, answer in zip(cases, answers, strict=True):
            assert answer == untouched, values  # refused, and nothing written
            with pytest.raises(ValueError):
                spec(*values)
        # One bad message among good ones fails the whole packet.
        good = [0.0] * len(spec.fields)
        assert interop.one(interop.encode(spec, [good, cases[0], good])) == "fail"
    assert float_limits(DEFAULT["DriveCmd"].field("vx"))[3] == 214748.375  # first float past the range


def test_encode_and_decode_respect_the_buffer_size(cpp_test: Interop) -> None:
    spec = TEST["EncoderData"]
    values = (255, -(2**31), 2**31 - 1)
    message = spec.struct.pack(*spec(*values).raw)
    size = spec.wire_size
    answers = cpp_test.run(
        [
            cpp_test.encode1(spec, values, size - 1),
            cpp_test.encode1(spec, values, 0),
            cpp_test.encode1(spec, values, size),
            f"decode1 EncoderData {message[:-1].hex()}",
            "decode1 EncoderData -",
            f"decode1 EncoderData {(message + b'extra').hex()}",
        ]
    )
    assert answers[:2] == ["fail " + "aa" * (size + 2)] * 2
    assert answers[2] == "ok " + (message + b"\xaa\xaa").hex()
    assert answers[3:] == ["none", "none", "255 -2147483648 2147483647"]


def test_packet_count_limit(cpp_default: Interop) -> None:
    drive = DEFAULT["DriveCmd"]
    rng = random.Random(7)
    batch = [(f32(rng.uniform(-2, 2)), f32(rng.uniform(-3, 3)), rng.randrange(65536)) for _ in range(1000)]
    most = [(0.0, 0.0, 20)] * bcnp.MAX_MESSAGES_PER_PACKET
    answers = cpp_default.run(
        [
            cpp_default.encode(drive, batch, flags=0xFE),
            cpp_default.encode(drive, most),
            cpp_default.encode(drive, [*most, (0.0, 0.0, 20)]),
            cpp_default.encode(drive, [], flags=bcnp.CLEAR_QUEUE),
        ]
    )
    assert answers[0] == bcnp.encode_packet(drive, batch, flags=0xFE).hex()
    assert answers[1] == bcnp.encode_packet(drive, most).hex()
    assert answers[2] == "fail"
    assert answers[3] == bcnp.encode_packet(drive, [], flags=bcnp.CLEAR_QUEUE).hex()


# --------------------------------------------------------------------------- compiled: packets


def python_status(schema: bcnp.Schema, packet: bytes) -> str:
    try:
        bcnp.decode_packet(schema, packet)
    except bcnp.PacketDecodeError as exc:
        return "".join(word.capitalize() for word in exc.code.name.split("_"))
    return "Ok"


def test_packet_validation_matches_python_decode_packet(cpp_test: Interop) -> None:
    spec = TEST["DrivetrainState"]
    good = bcnp.encode_packet(spec, [(0.5, -0.5, -7, 7, 123)] * 3, flags=bcnp.CLEAR_QUEUE)
    flipped = bytearray(good)
    flipped[12] ^= 0x10
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0x01
    unknown = bytearray(good)
    unknown[4] = 99
    cases = {
        "ok": good,
        "empty": b"",
        "too small": good[:10],
        "version 3.1": bytes([3, 1]) + good[2:],
        "version 2.2": bytes([2, 2]) + good[2:],
        "unknown type": bytes(unknown),
        "truncated": good[:-1],
        "extra byte": good + b"\x00",
        "payload bit flipped": bytes(flipped),
        "crc bit flipped": bytes(bad_crc),
        "zero messages": bcnp.encode_packet(TEST["EncoderData"], [], flags=bcnp.CLEAR_QUEUE),
    }
    answers = cpp_test.run([f"validate {hex_arg(packet)}" for packet in cases.values()])
    for (label, packet), answer in zip(cases.items(), answers, strict=True):
        status, *header = answer.split()
        assert status == python_status(TEST, packet), label
        if status not in ("TooSmall", "UnsupportedVersion"):
            major, minor, flags, type_id, count = struct.unpack_from(">BBBHH", packet)
            assert header == [str(v) for v in (major, minor, flags, type_id, count)], label
    assert answers[0] == "Ok 3 2 1 10 3"
    assert answers[-1] == "Ok 3 2 1 11 0"
    decodes = cpp_test.run(
        [
            f"decode DrivetrainState {cases['crc bit flipped'].hex()}",
            f"decode EncoderData {good.hex()}",
            f"decode EncoderData {cases['zero messages'].hex()}",
        ]
    )
    assert decodes[0].startswith("ChecksumMismatch 1 0 | ")
    assert decodes[1].startswith("WrongMessageType 1 0 | ")
    assert decodes[2] == f"Ok 1 0 | {cases['zero messages'].hex()}"
