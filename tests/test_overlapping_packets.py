"""StreamParser: overlapping CRC-valid frames, the first one wins.

A packet cut short by one byte whose missing CRC byte is 0x03 (the first byte
of every packet) is made whole again by the packet that follows it. The stream
then holds two CRC-valid frames that overlap by one byte. A receiver cannot
tell that the first was never sent whole, so it delivers it, resumes at its
end and loses the second: the same outcome however the bytes are chunked.
"""

from __future__ import annotations

import pytest

import bcnp
from bcnp import PacketError


def cut_packet(schema: bcnp.Schema, last: int) -> bytes:
    """A DriveCmd packet whose last byte (the CRC's lowest) is ``last``."""
    spec = schema["DriveCmd"]
    for ms in range(65_536):
        packet = bcnp.encode_packet(spec, [spec(0.25, -0.5, ms)])
        if packet[-1] == last:
            return packet
    raise AssertionError(f"no DriveCmd packet ends in {last:#04x}")


def intact_packet(schema: bcnp.Schema, ms: int = 40) -> bytes:
    spec = schema["DriveCmd"]
    return bcnp.encode_packet(spec, [spec(1.0, 0.5, ms)], bcnp.CLEAR_QUEUE)


def run(schema: bcnp.Schema, stream: bytes, byte_by_byte: bool) -> tuple[list[bytes], list[bcnp.ErrorInfo]]:
    packets: list[bytes] = []
    errors: list[bcnp.ErrorInfo] = []
    parser = bcnp.StreamParser(schema, lambda view: packets.append(view.to_bytes()), errors.append)
    chunks = [stream[i : i + 1] for i in range(len(stream))] if byte_by_byte else [stream]
    for chunk in chunks:
        parser.push(chunk)
    assert parser.packets == len(packets)
    assert parser.bytes_received == sum(map(len, packets)) + parser.bytes_dropped + parser.buffered
    return packets, errors


@pytest.fixture(scope="module")
def overlap(schema: bcnp.Schema) -> tuple[bytes, bytes, bytes]:
    """(stream, the frame the cut packet becomes, the intact packet it runs into)."""
    first = cut_packet(schema, 0x03)
    second = intact_packet(schema)
    assert second[0] == 0x03
    return first[:-1] + second, first, second


@pytest.mark.parametrize("byte_by_byte", [False, True], ids=["one push", "byte by byte"])
def test_the_earlier_frame_is_delivered_and_the_packet_it_overlaps_is_lost(
    schema: bcnp.Schema, overlap: tuple[bytes, bytes, bytes], byte_by_byte: bool
) -> None:
    stream, first, second = overlap
    # Both frames lie whole in the stream, sharing the second packet's first byte.
    assert stream[: len(first)] == first and stream[len(first) - 1 :] == second
    packets, errors = run(schema, stream, byte_by_byte)
    assert packets == [first]
    assert errors
    assert (errors[0].code, errors[0].offset) == (PacketError.UNSUPPORTED_VERSION, len(first))


@pytest.mark.parametrize("byte_by_byte", [False, True], ids=["one push", "byte by byte"])
def test_packets_after_the_overlap_are_delivered(
    schema: bcnp.Schema, overlap: tuple[bytes, bytes, bytes], byte_by_byte: bool
) -> None:
    stream, first, _ = overlap
    after = intact_packet(schema, ms=1_000)
    packets, _ = run(schema, stream + after, byte_by_byte)
    assert packets == [first, after]


@pytest.mark.parametrize("byte_by_byte", [False, True], ids=["one push", "byte by byte"])
def test_the_earlier_frame_wins_behind_a_waiting_header(
    schema: bcnp.Schema, overlap: tuple[bytes, bytes, bytes], byte_by_byte: bool
) -> None:
    """Found by the search behind a garbage header claiming 65,535 messages, too."""
    stream, first, _ = overlap
    garbage = bytes((3, 2, 0, 0, 1, 0xFF, 0xFF))
    packets, errors = run(schema, garbage + stream, byte_by_byte)
    assert packets == [first]
    assert (errors[0].code, errors[0].offset) == (PacketError.TRUNCATED, 0)


@pytest.mark.parametrize("byte_by_byte", [False, True], ids=["one push", "byte by byte"])
def test_without_the_matching_byte_the_intact_packet_is_delivered(
    schema: bcnp.Schema, byte_by_byte: bool
) -> None:
    first = cut_packet(schema, 0x04)
    second = intact_packet(schema)
    packets, _ = run(schema, first[:-1] + second, byte_by_byte)
    assert packets == [second]
