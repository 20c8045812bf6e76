"""Wire format: exact bytes, value conversion, handshake, packet encode/decode and round trips."""

from __future__ import annotations

import math
import struct
import tracemalloc
import zlib
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

import bcnp
from bcnp import PacketError
from benchmarks.harness import ROOT

DATA = ROOT / "tests" / "data"

SCHEMA = bcnp.load_schema(ROOT / "schema" / "messages.json")
TEST_SCHEMA = bcnp.load_schema(DATA / "test_schema.json")
DRIVE_CMD = SCHEMA["DriveCmd"]
TELEMETRY = SCHEMA["DrivetrainTelemetry"]

FAST = settings(max_examples=examples(200), deadline=None)

# --------------------------------------------------------------------------- reference vectors

DRIVE_PACKET = bytes.fromhex(
    "03 02 01 00 01 00 02 00 00 3a 98 ff ff f6 3c 00 64 00 00 13 88 00 00 7a b8 ff ff 89 23 6a c4"
)
TELEMETRY_PACKET = bytes.fromhex(
    "03 02 00 00 02 00 01 00 00 30 39 ff ff cf c7 00 00 05 dc ff ff ff 06 00 01 e2 40 d0 14 b0 5c"
)
HANDSHAKE = bytes.fromhex("42 43 4e 50 e9 ef ee 08")


def drive_messages() -> list[bcnp.Message]:
    return [
        DRIVE_CMD(vx=1.5, omega=-0.25, durationMs=100),
        DRIVE_CMD(vx=0.5, omega=3.1416, durationMs=65535),
    ]


def with_crc(body: bytes) -> bytes:
    return body + struct.pack(">I", zlib.crc32(body))


def test_clear_queue_constant() -> None:
    assert bcnp.CLEAR_QUEUE == 0x01


def test_drivecmd_packet_bytes_match_reference() -> None:
    packet = bcnp.encode_packet(DRIVE_CMD, drive_messages(), flags=bcnp.CLEAR_QUEUE)
    assert packet == DRIVE_PACKET


def test_telemetry_packet_bytes_match_reference() -> None:
    msg = TELEMETRY(1.2345, -1.2345, 1.5, -0.25, 123456)
    assert bcnp.encode_packet(TELEMETRY, [msg]) == TELEMETRY_PACKET


def test_handshake_bytes_match_reference() -> None:
    assert bcnp.encode_handshake(0xE9EFEE08) == HANDSHAKE
    assert bcnp.encode_handshake(SCHEMA.hash) == HANDSHAKE


@pytest.mark.parametrize("packet", [DRIVE_PACKET, TELEMETRY_PACKET], ids=["drive", "telemetry"])
def test_crc_trailer_is_zlib_crc32_of_header_and_payload(packet: bytes) -> None:
    (crc,) = struct.unpack(">I", packet[-4:])
    assert crc == zlib.crc32(packet[:-4])


def test_zero_message_clear_queue_packet() -> None:
    packet = bcnp.encode_packet(DRIVE_CMD, [], flags=bcnp.CLEAR_QUEUE)
    header = bytes.fromhex("03 02 01 00 01 00 00")
    assert packet == header + struct.pack(">I", zlib.crc32(header))
    assert len(packet) == 11
    view = bcnp.decode_packet(SCHEMA, packet)
    assert len(view) == 0
    assert view.clear_queue
    assert list(view) == []
    assert view.header == bcnp.PacketHeader(3, 2, 1, 1, 0)


# --------------------------------------------------------------------------- value conversion

# One field per wire type, float32 at several scales and once without a scale.
ALL_TYPES_DOC: dict[str, Any] = {
    "version": "3.2",
    "messages": [
        {
            "id": 7,
            "name": "AllTypes",
            "fields": [
                {"name": "s8", "type": "int8"},
                {"name": "u8", "type": "uint8"},
                {"name": "s16", "type": "int16"},
                {"name": "u16", "type": "uint16"},
                {"name": "s32", "type": "int32"},
                {"name": "u32", "type": "uint32"},
                {"name": "f1", "type": "float32", "scale": 1},
                {"name": "f7", "type": "float32", "scale": 7},
                {"name": "f1000", "type": "float32", "scale": 1000},
                {"name": "f10000", "type": "float32", "scale": 10000},
                {"name": "fDefault", "type": "float32"},
            ],
        }
    ],
}
ALL_SCHEMA = bcnp.load_schema(ALL_TYPES_DOC)
ALL = ALL_SCHEMA["AllTypes"]

INT_RANGES = {
    "s8": (-128, 127),
    "u8": (0, 255),
    "s16": (-32768, 32767),
    "u16": (0, 65535),
    "s32": (-(2**31), 2**31 - 1),
    "u32": (0, 2**32 - 1),
}
FLOAT_SCALES = {"f1": 1, "f7": 7, "f1000": 1000, "f10000": 10000, "fDefault": 10000}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
STRUCT_CODES = {"s8": "b", "u8": "B", "s16": "h", "u16": "H", "s32": "i", "u32": "I"}
FIELD_FORMAT = ">" + "".join(STRUCT_CODES.get(f.name, "i") for f in ALL.fields)


def c_llround(q: Fraction) -> int:
    """C llround on an exact rational: nearest integer, halves away from zero."""
    magnitude = math.floor(abs(q) + Fraction(1, 2))
    return magnitude if q >= 0 else -magnitude


def as_float32(x: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", x))[0])


def zero_values(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {f.name: 0 for f in ALL.fields}
    values.update(changes)
    return values


def wire_of(field: str, value: Any) -> int:
    """The wire int of one field, read back from the encoded packet bytes."""
    packet = bcnp.encode_packet(ALL, [ALL(**zero_values(**{field: value}))])
    raw = struct.unpack(FIELD_FORMAT, packet[7:-4])
    return int(raw[ALL.field_names.index(field)])


def test_all_types_schema_layout() -> None:
    assert ALL.wire_size == 1 + 1 + 2 + 2 + 4 + 4 + 4 * 5
    assert struct.calcsize(FIELD_FORMAT) == ALL.wire_size


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("f10000", 0.03125, 313),  # 312.5 exactly: a tie
        ("f10000", -0.03125, -313),
        ("f10000", 0.00005, 1),  # 0.5 after scaling
        ("f10000", -0.00005, -1),
        ("f10000", 0.00025, 3),  # 2.5 after scaling
        ("f10000", -0.00025, -3),
        ("fDefault", 0.03125, 313),
        ("f1", 0.5, 1),
        ("f1", 2.5, 3),
        ("f1", -2.5, -3),
        ("f1", 1.4999999, 1),
        ("f1000", 0.0005, 1),
        ("f1000", -0.0025, -3),
        ("f10000", 1.23454, 12345),
        ("f10000", -1.23456, -12346),
    ],
)
def test_float32_rounds_half_away_from_zero(field: str, value: float, expected: int) -> None:
    assert wire_of(field, value) == expected


@pytest.mark.parametrize("value", [0.03125, -0.03125, 0.00025, -0.00025])
def test_float32_rounding_is_not_pythons_round(value: float) -> None:
    scaled = value * 10000
    assert scaled % 1 == 0.5  # a tie
    # Python's round() rounds halves to even; the wire rounds them away from zero.
    assert round(scaled) != wire_of("f10000", value)
    assert wire_of("f10000", value) == c_llround(Fraction(scaled))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("u16", 65536),
        ("u16", -1),
        ("s8", 128),
        ("s8", -129),
        ("u8", 256),
        ("u8", -1),
        ("s16", 32768),
        ("s16", -32769),
        ("s32", 2**31),
        ("s32", -(2**31) - 1),
        ("u32", 2**32),
        ("u32", -1),
    ],
)
def test_out_of_range_int_raises_value_error_naming_field_value_range(field: str, value: int) -> None:
    lo, hi = INT_RANGES[field]
    with pytest.raises(ValueError) as info:
        ALL(**zero_values(**{field: value}))
    text = str(info.value)
    assert field in text
    assert str(value) in text
    assert str(lo) in text and str(hi) in text


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("f10000", 214748.3648),
        ("f10000", -214748.3649),
        ("f10000", 214748.36475),  # rounds to 2**31
        ("fDefault", 1e6),
        ("f1000", 2147483.648),
        ("f1", 2147483647.5),
        ("f1", -2147483648.5),
        ("f7", 1e9),
        ("f10000", 1e300),
    ],
)
def test_float_leaving_int32_raises_value_error(field: str, value: float) -> None:
    with pytest.raises(ValueError) as info:
        ALL(**zero_values(**{field: value}))
    text = str(info.value)
    assert field in text
    assert repr(value) in text
    scale = FLOAT_SCALES[field]
    assert str(INT32_MAX / scale) in text and str(INT32_MIN / scale) in text


@pytest.mark.parametrize("field", ["f1", "f10000", "fDefault"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_float_raises_value_error(field: str, value: float) -> None:
    with pytest.raises(ValueError) as info:
        ALL(**zero_values(**{field: value}))
    text = str(info.value)
    assert field in text
    assert repr(value) in text


def test_float32_extremes_are_accepted() -> None:
    assert wire_of("f10000", 214748.3647) == INT32_MAX
    assert wire_of("f10000", -214748.3648) == INT32_MIN
    assert wire_of("f1000", INT32_MAX / 1000) == INT32_MAX
    assert wire_of("f1", float(INT32_MIN)) == INT32_MIN


@pytest.mark.parametrize("field", ["s8", "u8", "s16", "u16", "s32", "u32"])
@pytest.mark.parametrize("value", [100.5, 0.1, -0.5, 1e-9 + 3])
def test_non_integral_float_for_int_field_raises(field: str, value: float) -> None:
    with pytest.raises(ValueError) as info:
        ALL(**zero_values(**{field: value}))
    assert field in str(info.value)


@pytest.mark.parametrize("field", ["s8", "u8", "s16", "u16", "s32", "u32"])
def test_integral_float_for_int_field_is_accepted(field: str) -> None:
    msg = ALL(**zero_values(**{field: 100.0}))
    value = getattr(msg, field)
    assert value == 100
    assert type(value) is int
    assert wire_of(field, 100.0) == 100


# --------------------------------------------------------------------------- handshake


@pytest.mark.parametrize("schema_hash", [0, 1, 0x2A9C6F4F, 0xE9EFEE08, 0xFFFFFFFF])
def test_handshake_round_trip(schema_hash: int) -> None:
    data = bcnp.encode_handshake(schema_hash)
    assert len(data) == 8
    assert data[:4] == b"BCNP"
    assert bcnp.parse_handshake(data) == schema_hash


@FAST
@given(st.integers(0, 2**32 - 1))
def test_handshake_round_trip_property(schema_hash: int) -> None:
    data = bcnp.encode_handshake(schema_hash)
    assert data == b"BCNP" + schema_hash.to_bytes(4, "big")
    assert bcnp.parse_handshake(data) == schema_hash
    assert bcnp.parse_handshake(bytearray(data)) == schema_hash


@pytest.mark.parametrize("length", [0, 7, 9, 16])
def test_handshake_wrong_length(length: int) -> None:
    data = (HANDSHAKE * 2)[:length]
    with pytest.raises(bcnp.HandshakeError) as info:
        bcnp.parse_handshake(data)
    assert isinstance(info.value, ValueError)
    text = str(info.value)
    assert "8 bytes" in text
    assert f"got {length}" in text


@pytest.mark.parametrize("magic", [b"BCNQ", b"bcnp", b"\x00\x00\x00\x00", b"PNCB"])
def test_handshake_wrong_magic(magic: bytes) -> None:
    with pytest.raises(bcnp.HandshakeError) as info:
        bcnp.parse_handshake(magic + HANDSHAKE[4:])
    assert "magic" in str(info.value)
    assert repr(magic) in str(info.value)


def test_handshake_error_is_value_error() -> None:
    assert issubclass(bcnp.HandshakeError, ValueError)


@pytest.mark.parametrize("schema_hash", [-1, 2**32])
def test_encode_handshake_refuses_non_u32(schema_hash: int) -> None:
    with pytest.raises(ValueError):
        bcnp.encode_handshake(schema_hash)


# --------------------------------------------------------------------------- decode_packet


def test_decode_reference_packet() -> None:
    view = bcnp.decode_packet(SCHEMA, DRIVE_PACKET)
    assert isinstance(view, bcnp.PacketView)
    assert view.header == bcnp.PacketHeader(major=3, minor=2, flags=1, type_id=1, count=2)
    header = view.header
    assert (header.major, header.minor, header.flags, header.type_id, header.count) == (3, 2, 1, 1, 2)
    assert view.spec is DRIVE_CMD
    assert view.clear_queue is True
    assert len(view) == 2
    first, second = drive_messages()
    assert view[0] == first
    assert view[1] == second
    assert view[-1] == second
    assert view[-2] == first
    assert view[0:2] == [first, second]
    assert view[1:] == [second]
    assert view[::-1] == [second, first]
    assert list(view) == [first, second]
    assert view.raw(0) == (15000, -2500, 100)
    assert view.raw(1) == (5000, 31416, 65535)
    assert view[1].omega == 3.1416
    assert view.to_bytes() == DRIVE_PACKET


def test_decode_telemetry_packet_without_clear_queue() -> None:
    view = bcnp.decode_packet(SCHEMA, TELEMETRY_PACKET)
    assert view.clear_queue is False
    assert view.header.flags == 0
    assert view.spec is TELEMETRY
    msg = view[0]
    assert msg == TELEMETRY(1.2345, -1.2345, 1.5, -0.25, 123456)
    assert (msg.leftVelocity, msg.rightVelocity, msg.leftPosition, msg.rightPosition, msg.timestampMs) == (
        1.2345,
        -1.2345,
        1.5,
        -0.25,
        123456,
    )


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_decode_accepts_bytes_like(kind: type) -> None:
    view = bcnp.decode_packet(SCHEMA, kind(DRIVE_PACKET))
    assert list(view) == drive_messages()
    assert view.to_bytes() == DRIVE_PACKET


@pytest.mark.parametrize("index", [2, 3, -3])
def test_packet_view_index_out_of_range(index: int) -> None:
    view = bcnp.decode_packet(SCHEMA, DRIVE_PACKET)
    with pytest.raises(IndexError):
        view[index]


@pytest.mark.parametrize("index", [2, -1])
def test_packet_view_raw_out_of_range(index: int) -> None:
    view = bcnp.decode_packet(SCHEMA, DRIVE_PACKET)
    with pytest.raises(IndexError):
        view.raw(index)


def decode_error(data: bytes, schema: bcnp.Schema = SCHEMA) -> bcnp.PacketDecodeError:
    with pytest.raises(bcnp.PacketDecodeError) as info:
        bcnp.decode_packet(schema, data)
    assert isinstance(info.value, ValueError)
    return info.value


@pytest.mark.parametrize("size", [0, 1, 7, 10])
def test_decode_too_small(size: int) -> None:
    assert decode_error(DRIVE_PACKET[:size]).code is PacketError.TOO_SMALL


def test_decode_legacy_v11_packet_is_unsupported_version() -> None:
    # BCNP 1.1: header major 1, minor 1, flags, count (u8), then 10-byte commands
    # (vx float BE, omega float BE, duration u16 BE), no CRC.
    legacy = (
        struct.pack(">BBBB", 1, 1, 0, 2) + struct.pack(">ffH", 1.0, 0.5, 100) + struct.pack(">ffH", 0, 0, 5)
    )
    assert len(legacy) == 24
    assert decode_error(legacy).code is PacketError.UNSUPPORTED_VERSION


@pytest.mark.parametrize(("major", "minor"), [(3, 1), (4, 2), (2, 2), (3, 3), (1, 1)])
def test_decode_other_versions_are_unsupported(major: int, minor: int) -> None:
    packet = with_crc(bytes([major, minor]) + DRIVE_PACKET[2:-4])
    assert decode_error(packet).code is PacketError.UNSUPPORTED_VERSION


@pytest.mark.parametrize("type_id", [0, 3, 10, 0xFFFF])
def test_decode_unknown_message_type(type_id: int) -> None:
    packet = with_crc(DRIVE_PACKET[:3] + struct.pack(">H", type_id) + DRIVE_PACKET[5:-4])
    assert decode_error(packet).code is PacketError.UNKNOWN_MESSAGE_TYPE


def test_decode_unknown_type_depends_on_schema() -> None:
    # Type 10 is DrivetrainState in the test schema, unknown in the default one.
    packet = bcnp.encode_packet(TEST_SCHEMA[10], [TEST_SCHEMA[10](1, 2, 3, 4, 5)])
    assert decode_error(packet).code is PacketError.UNKNOWN_MESSAGE_TYPE
    assert bcnp.decode_packet(TEST_SCHEMA, packet)[0].raw == (10000, 20000, 3, 4, 5)


@pytest.mark.parametrize("cut", [1, 4, 10, 20])
def test_decode_truncated(cut: int) -> None:
    assert decode_error(DRIVE_PACKET[:-cut]).code is PacketError.TRUNCATED


def test_decode_count_larger_than_buffer_is_truncated() -> None:
    packet = with_crc(DRIVE_PACKET[:5] + struct.pack(">H", 3) + DRIVE_PACKET[7:-4])
    assert decode_error(packet).code is PacketError.TRUNCATED


@pytest.mark.parametrize("extra", [b"\x00", b"\x03\x02", bytes(10)])
def test_decode_longer_buffer_is_schema_mismatch(extra: bytes) -> None:
    assert decode_error(DRIVE_PACKET + extra).code is PacketError.SCHEMA_MISMATCH


def test_decode_packet_from_wider_layout_is_schema_mismatch() -> None:
    # A sender whose DriveCmd has one more field: frames are longer than ours.
    doc = {
        "version": "3.2",
        "messages": [
            {
                "id": 1,
                "name": "DriveCmd",
                "fields": [
                    {"name": "vx", "type": "float32", "scale": 10000},
                    {"name": "omega", "type": "float32", "scale": 10000},
                    {"name": "durationMs", "type": "uint16"},
                    {"name": "mode", "type": "uint8"},
                ],
            }
        ],
    }
    wider = bcnp.load_schema(doc)["DriveCmd"]
    packet = bcnp.encode_packet(wider, [wider(1.0, 0.0, 100, 1)] * 10)
    assert decode_error(packet).code is PacketError.SCHEMA_MISMATCH


def test_check_header_returns_spec_flags_count_and_frame() -> None:
    assert bcnp.wire.check_header(DRIVE_PACKET, 0, SCHEMA.by_id) == (DRIVE_CMD, 1, 2, len(DRIVE_PACKET))
    # Anywhere in a buffer, bytes-like, whatever follows the header.
    padded = bytearray(b"\x55" * 5 + DRIVE_PACKET[:7])
    assert bcnp.wire.check_header(memoryview(padded), 5, SCHEMA.by_id) == (DRIVE_CMD, 1, 2, 31)


def header(major: int = 3, minor: int = 2, type_id: int = 1, count: int = 2) -> bytes:
    return struct.pack(">BBBHH", major, minor, 0, type_id, count)


@pytest.mark.parametrize(
    ("data", "limits", "expected"),
    [
        (header(major=2), {}, PacketError.UNSUPPORTED_VERSION),
        (header(minor=1), {}, PacketError.UNSUPPORTED_VERSION),
        (header(major=2, type_id=99, count=9), {"max_messages": 1}, PacketError.UNSUPPORTED_VERSION),
        (header(type_id=99), {}, PacketError.UNKNOWN_MESSAGE_TYPE),
        (header(type_id=99, count=9), {"max_messages": 1, "max_frame": 11}, PacketError.UNKNOWN_MESSAGE_TYPE),
        (header(count=11), {"max_messages": 10}, PacketError.TOO_MANY_MESSAGES),
        (header(count=10), {"max_messages": 10}, (DRIVE_CMD, 0, 10, 111)),
        (header(count=10), {"max_frame": 110}, PacketError.TOO_MANY_MESSAGES),
        (header(count=10), {"max_frame": 111}, (DRIVE_CMD, 0, 10, 111)),
        (header(count=0xFFFF), {}, (DRIVE_CMD, 0, 0xFFFF, 655_361)),
    ],
)
def test_check_header_rules_in_order(data: bytes, limits: dict[str, int], expected: object) -> None:
    assert bcnp.wire.check_header(data, 0, SCHEMA.by_id, **limits) == expected


def test_packet_view_exposes_its_buffer_and_payload_offset_without_copying() -> None:
    data = b"\x55\x55" + DRIVE_PACKET
    view = bcnp.PacketView(DRIVE_CMD, 1, 2, data, 2 + bcnp.HEADER_SIZE)
    assert view.buffer is data and view.payload_offset == 9
    assert view.to_bytes() == DRIVE_PACKET
    assert DRIVE_CMD.struct.unpack_from(view.buffer, view.payload_offset + DRIVE_CMD.wire_size) == view.raw(1)
    decoded = bcnp.decode_packet(SCHEMA, DRIVE_PACKET)
    assert decoded.buffer is DRIVE_PACKET and decoded.payload_offset == bcnp.HEADER_SIZE


CHECKED_BITS = range(bcnp.HEADER_SIZE * 8, len(DRIVE_PACKET) * 8)


@FAST
@given(st.sampled_from(CHECKED_BITS))
def test_any_flipped_payload_or_crc_bit_is_checksum_mismatch(bit: int) -> None:
    corrupted = bytearray(DRIVE_PACKET)
    corrupted[bit // 8] ^= 1 << (bit % 8)
    assert decode_error(bytes(corrupted)).code is PacketError.CHECKSUM_MISMATCH


@pytest.mark.parametrize("bit", range(8))
def test_flipped_flags_bit_is_checksum_mismatch(bit: int) -> None:
    corrupted = bytearray(DRIVE_PACKET)
    corrupted[2] ^= 1 << bit
    assert decode_error(bytes(corrupted)).code is PacketError.CHECKSUM_MISMATCH


def test_decode_error_codes_are_the_spec_codes() -> None:
    assert [e.name for e in PacketError] == [
        "TOO_SMALL",
        "UNSUPPORTED_VERSION",
        "TOO_MANY_MESSAGES",
        "TRUNCATED",
        "CHECKSUM_MISMATCH",
        "UNKNOWN_MESSAGE_TYPE",
        "SCHEMA_MISMATCH",
    ]


# --------------------------------------------------------------------------- big packets, laziness


@pytest.fixture(scope="module")
def max_batch() -> list[bcnp.Message]:
    return [DRIVE_CMD(vx=(i % 301) / 100, omega=-(i % 97) / 64, durationMs=i) for i in range(65535)]


@pytest.fixture(scope="module")
def max_packet(max_batch: list[bcnp.Message]) -> bytes:
    return bcnp.encode_packet(DRIVE_CMD, max_batch)


@pytest.mark.full_suite
def test_max_packet_size_and_round_trip(max_batch: list[bcnp.Message], max_packet: bytes) -> None:
    assert len(max_packet) == 655_361
    assert max_packet[5:7] == b"\xff\xff"
    view = bcnp.decode_packet(SCHEMA, max_packet)
    assert len(view) == 65535
    assert list(view) == max_batch
    assert view[-1].durationMs == 65534


@pytest.mark.full_suite
def test_decoding_does_not_build_a_message_per_entry(max_packet: bytes) -> None:
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        view = bcnp.decode_packet(SCHEMA, max_packet)
        after_decode, peak_decode = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        msg = view[40000]
        _, peak_access = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # One message object per entry would be megabytes (65,535 x (object + tuple));
    # a lazy view costs a few hundred bytes, well under one byte per message.
    assert peak_decode - before < 65535
    assert after_decode - before < 65535
    # Reading one message decodes that one only.
    assert peak_access - after_decode < 4096
    assert msg == DRIVE_CMD(vx=(40000 % 301) / 100, omega=-(40000 % 97) / 64, durationMs=40000)


# --------------------------------------------------------------------------- encode_packet


def test_encode_accepts_tuples_and_dicts() -> None:
    first = drive_messages()[0]
    as_tuples = bcnp.encode_packet(DRIVE_CMD, [(1.5, -0.25, 100), (0.5, 3.1416, 65535)], flags=1)
    as_dicts = bcnp.encode_packet(
        DRIVE_CMD,
        [{"vx": 1.5, "omega": -0.25, "durationMs": 100}, {"durationMs": 65535, "omega": 3.1416, "vx": 0.5}],
        flags=1,
    )
    mixed = bcnp.encode_packet(DRIVE_CMD, [first, {"vx": 0.5, "omega": 3.1416, "durationMs": 65535}], flags=1)
    assert as_tuples == as_dicts == mixed == DRIVE_PACKET


def test_encode_accepts_any_iterable() -> None:
    packet = bcnp.encode_packet(DRIVE_CMD, iter(drive_messages()), flags=bcnp.CLEAR_QUEUE)
    assert packet == DRIVE_PACKET


@pytest.mark.parametrize(
    "bad",
    [
        (1.5, -0.25, 65536),
        (1.5, -0.25, -1),
        (1.5, math.nan, 100),
        (math.inf, 0.0, 100),
        (214748.3648, 0.0, 100),
        (1.5, -0.25, 100.5),
        {"vx": 1.5, "omega": -0.25, "durationMs": 70000},
        {"vx": -math.inf, "omega": -0.25, "durationMs": 1},
    ],
)
def test_encode_validates_plain_values(bad: Any) -> None:
    with pytest.raises(ValueError):
        bcnp.encode_packet(DRIVE_CMD, [drive_messages()[0], bad])


def test_encode_refuses_message_of_another_spec() -> None:
    telemetry = TELEMETRY(1.0, 1.0, 1.0, 1.0, 1)
    with pytest.raises(TypeError):
        bcnp.encode_packet(DRIVE_CMD, [telemetry])
    with pytest.raises(TypeError):
        bcnp.encode_packet(DRIVE_CMD, [drive_messages()[0], telemetry])
    same_layout = TEST_SCHEMA["TestCmd"](1.5, -0.25, 100)
    with pytest.raises(TypeError):
        bcnp.encode_packet(DRIVE_CMD, [same_layout])


def test_encode_refuses_more_than_65535_messages() -> None:
    msg = drive_messages()[0]
    with pytest.raises(ValueError):
        bcnp.encode_packet(DRIVE_CMD, [msg] * 65536)
    assert len(bcnp.encode_packet(DRIVE_CMD, [msg] * 65535)) == 655_361


@pytest.mark.parametrize("flags", [-1, 256, 1000])
def test_encode_refuses_flags_outside_a_byte(flags: int) -> None:
    with pytest.raises(ValueError):
        bcnp.encode_packet(DRIVE_CMD, drive_messages(), flags=flags)


@pytest.mark.parametrize("flags", [0, 1, 2, 0x80, 0xFF])
def test_encode_flags_travel_in_header(flags: int) -> None:
    packet = bcnp.encode_packet(DRIVE_CMD, drive_messages(), flags=flags)
    assert packet[2] == flags
    view = bcnp.decode_packet(SCHEMA, packet)
    assert view.header.flags == flags
    assert view.clear_queue is bool(flags & 1)


@pytest.mark.full_suite
def test_encode_of_a_big_batch_is_the_wire_integers_packed_back_to_back() -> None:
    # The payload computed independently: every message's wire integers in one struct pack.
    messages = [
        DRIVE_CMD(vx=(k % 301) / 100 - 1.5, omega=-(k % 97) / 64 + 0.75, durationMs=k % 65536)
        for k in range(65535)
    ]
    flat = [value for message in messages for value in message.raw]
    payload = struct.pack(">" + "iiH" * len(messages), *flat)
    packet = bcnp.encode_packet(DRIVE_CMD, messages, flags=bcnp.CLEAR_QUEUE)
    assert packet == with_crc(bytes((3, 2, 1, 0, 1, 0xFF, 0xFF)) + payload)
    # The same batch given as plain values, or with one message swapped for its values,
    # is validated on the slow path and encodes to the same bytes.
    as_values = [tuple(m.as_dict().values()) for m in messages[:1000]]
    assert bcnp.encode_packet(DRIVE_CMD, as_values) == bcnp.encode_packet(DRIVE_CMD, messages[:1000])
    mixed: list[Any] = [*messages[:999], as_values[999]]
    assert bcnp.encode_packet(DRIVE_CMD, mixed) == bcnp.encode_packet(DRIVE_CMD, messages[:1000])


def test_encode_refuses_a_message_of_a_subclass_or_a_lookalike() -> None:
    # The fast path takes only messages of exactly the spec's class; anything else
    # goes through validation, which refuses messages that are not the spec's own.
    sub = type("Sub", (DRIVE_CMD.message_class,), {"__slots__": ()})
    twin = DRIVE_CMD.message_from_raw((15000, -2500, 100))
    lookalike: bcnp.Message = object.__new__(sub)
    assert DRIVE_CMD.message_class.pack_many([twin, lookalike]) is None
    with pytest.raises(TypeError):
        bcnp.encode_packet(DRIVE_CMD, [twin, lookalike])


# --------------------------------------------------------------------------- round-trip properties


def int_values(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([lo, hi, 0 if lo <= 0 <= hi else lo]), st.integers(lo, hi))


def float_values(scale: int) -> st.SearchStrategy[float]:
    lo, hi = INT32_MIN / scale, INT32_MAX / scale
    return st.one_of(
        st.sampled_from([lo, hi, 0.0, -0.0]),
        st.floats(lo, hi, allow_nan=False, allow_infinity=False),
        st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False),
        st.integers(-(10**6), 10**6).map(lambda n: (n + 0.5) / scale),
    )


ALL_VALUES = st.fixed_dictionaries(
    {
        **{name: int_values(lo, hi) for name, (lo, hi) in INT_RANGES.items()},
        **{name: float_values(scale) for name, scale in FLOAT_SCALES.items()},
    }
)


def expected_wire(values: dict[str, Any]) -> tuple[int, ...]:
    """Wire ints computed independently: C llround of the (double) product value * scale."""
    out = []
    for field in ALL.fields:
        value = values[field.name]
        if field.name in FLOAT_SCALES:
            out.append(c_llround(Fraction(value * FLOAT_SCALES[field.name])))
        else:
            out.append(value)
    return tuple(out)


@FAST
@given(ALL_VALUES)
def test_round_trip_all_types(values: dict[str, Any]) -> None:
    msg = ALL(**values)
    packet = bcnp.encode_packet(ALL, [msg])
    assert len(packet) == 11 + ALL.wire_size
    wire = struct.unpack(FIELD_FORMAT, packet[7:-4])
    assert wire == expected_wire(values)
    assert msg.raw == wire
    decoded = bcnp.decode_packet(ALL_SCHEMA, packet)[0]
    assert decoded == msg
    assert decoded.raw == msg.raw
    for name in INT_RANGES:
        assert getattr(decoded, name) == values[name]
    for name, scale in FLOAT_SCALES.items():
        raw = wire[ALL.field_names.index(name)]
        assert getattr(decoded, name) == raw / scale
        # The value read back is within half a wire step of the value given.
        assert abs(getattr(decoded, name) - values[name]) <= 0.5 / scale * (1 + 1e-9) + 1e-9 * abs(
            values[name]
        )


@FAST
@given(st.lists(ALL_VALUES, max_size=8), st.integers(0, 255))
def test_round_trip_batches(batch: list[dict[str, Any]], flags: int) -> None:
    messages = [ALL(**values) for values in batch]
    packet = bcnp.encode_packet(ALL, messages, flags=flags)
    assert len(packet) == bcnp.frame_size(ALL, len(messages))
    expected_payload = b"".join(struct.pack(FIELD_FORMAT, *expected_wire(values)) for values in batch)
    assert packet[bcnp.HEADER_SIZE : -bcnp.wire.CRC_SIZE] == expected_payload
    view = bcnp.decode_packet(ALL_SCHEMA, packet)
    assert view.header == bcnp.PacketHeader(3, 2, flags, 7, len(messages))
    assert list(view) == messages
    assert [view.raw(i) for i in range(len(view))] == [m.raw for m in messages]
    assert view.to_bytes() == packet


def two_adic_valuation(n: int) -> int:
    return (n & -n).bit_length() - 1


def float32_bounds(scale: int) -> tuple[float, float]:
    """The extreme float32 values whose scaled value still rounds into int32."""

    def step_toward_zero(x: float) -> float:
        bits = struct.unpack(">I", struct.pack(">f", x))[0]
        return float(struct.unpack(">f", struct.pack(">I", bits - 1))[0])

    lo, hi = as_float32(INT32_MIN / scale), as_float32(INT32_MAX / scale)
    while c_llround(Fraction(lo) * scale) < INT32_MIN:
        lo = step_toward_zero(lo)
    while c_llround(Fraction(hi) * scale) > INT32_MAX:
        hi = step_toward_zero(hi)
    return lo, hi


@st.composite
def float32_case(draw: st.DrawFn) -> tuple[str, float]:
    """A float32 field and a value exactly representable as float32 that fits its wire range."""
    name = draw(st.sampled_from(sorted(FLOAT_SCALES)))
    scale = FLOAT_SCALES[name]
    lo, hi = float32_bounds(scale)
    kind = draw(st.sampled_from(["tie", "any", "small", "edge"]))
    if kind == "tie":
        # odd / 2**(v+1) with 2**v the power of two in scale: value * scale is a half-integer.
        denominator = 2 ** (two_adic_valuation(scale) + 1)
        bound = min(2**23 - 1, (INT32_MAX * denominator) // scale // 2 - 1)
        value = (2 * draw(st.integers(-bound, bound)) + 1) / denominator
    elif kind == "any":
        value = draw(st.floats(lo, hi, width=32))
    elif kind == "small":
        value = draw(st.floats(-100.0, 100.0, width=32))
    else:
        value = draw(st.sampled_from([lo, hi]))
    return name, value


@FAST
@given(float32_case())
def test_float32_wire_int_is_exact_llround(case: tuple[str, float]) -> None:
    name, value = case
    assert as_float32(value) == value
    scale = FLOAT_SCALES[name]
    expected = c_llround(Fraction(value) * scale)
    assert wire_of(name, value) == expected
    assert ALL(**zero_values(**{name: value})).raw[ALL.field_names.index(name)] == expected


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("f1", 0.5, 1),
        ("f1", -0.5, -1),
        ("f1", 1.5, 2),
        ("f1", -1.5, -2),
        ("f1", 8388607.5, 8388608),
        ("f7", 0.5, 4),  # 3.5
        ("f7", -0.5, -4),
        ("f1000", 0.0625, 63),  # 62.5
        ("f10000", 0.03125, 313),
        ("fDefault", -0.03125, -313),
    ],
)
def test_float32_exact_ties(name: str, value: float, expected: int) -> None:
    assert as_float32(value) == value
    assert c_llround(Fraction(value) * FLOAT_SCALES[name]) == expected
    assert wire_of(name, value) == expected
