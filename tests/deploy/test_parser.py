"""StreamParser: framing, resync rules, error reports, bounds, garbage tolerance."""

from __future__ import annotations

import random
import struct
import zlib

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import examples

import bcnp
from bcnp import PacketError


class Collector:
    """A parser with everything it reports recorded."""

    def __init__(self, schema: bcnp.Schema, **kwargs: object) -> None:
        self.packets: list[bytes] = []
        self.views: list[bcnp.PacketView] = []
        self.errors: list[bcnp.ErrorInfo] = []
        self.parser = bcnp.StreamParser(schema, self._packet, self.errors.append, **kwargs)  # type: ignore[arg-type]

    def _packet(self, view: bcnp.PacketView) -> None:
        self.views.append(view)
        self.packets.append(view.to_bytes())

    def push_all(self, chunks: list[bytes]) -> None:
        for chunk in chunks:
            self.parser.push(chunk)

    @property
    def codes(self) -> list[PacketError]:
        return [e.code for e in self.errors]


def drive_packet(schema: bcnp.Schema, n: int, seed: int = 0, flags: int = 0) -> bytes:
    rng = random.Random(seed)
    spec = schema["DriveCmd"]
    msgs = [spec(rng.uniform(-1.5, 1.5), rng.uniform(-2.5, 2.5), rng.randint(0, 65535)) for _ in range(n)]
    return bcnp.encode_packet(spec, msgs, flags)


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def with_crc(body: bytes) -> bytes:
    return body + struct.pack(">I", zlib.crc32(body))


# -- framing -------------------------------------------------------------------


def test_single_packet_delivered_with_header_and_messages(schema: bcnp.Schema) -> None:
    packet = drive_packet(schema, 3, flags=bcnp.CLEAR_QUEUE)
    c = Collector(schema)
    c.parser.push(packet)
    assert c.packets == [packet]
    view = c.views[0]
    assert view.header.count == 3 and view.header.flags == bcnp.CLEAR_QUEUE and view.spec.name == "DriveCmd"
    assert list(view) == list(bcnp.decode_packet(schema, packet))
    assert c.errors == [] and c.parser.buffered == 0


def test_byte_by_byte_delivers_each_packet_when_its_last_byte_arrives(schema: bcnp.Schema) -> None:
    packets = [drive_packet(schema, n, seed=n) for n in (0, 1, 5, 2)]
    stream = b"".join(packets)
    ends = set()
    total = 0
    for p in packets:
        total += len(p)
        ends.add(total)
    c = Collector(schema)
    for i in range(len(stream)):
        c.parser.push(stream[i : i + 1])
        assert len(c.packets) == sum(1 for e in ends if e <= i + 1)
    assert c.packets == packets and c.errors == []


def test_every_packet_of_one_push_is_delivered(schema: bcnp.Schema) -> None:
    # No per-push budget: 10,000 packets in one push all come out.
    packets = [drive_packet(schema, 1, seed=i) for i in range(10_000)]
    c = Collector(schema)
    c.parser.push(b"".join(packets))
    assert c.packets == packets


def test_zero_message_packet_and_mixed_types(test_schema: bcnp.Schema) -> None:
    enc = test_schema["EncoderData"]
    prox = test_schema["ProximityAlert"]
    p1 = bcnp.encode_packet(enc, [enc(1, -5, 7), enc(255, 2**31 - 1, -(2**31))])
    p2 = bcnp.encode_packet(prox, [], bcnp.CLEAR_QUEUE)
    p3 = bcnp.encode_packet(prox, [prox(3, 120, 1)])
    c = Collector(test_schema)
    c.push_all(chunked(p1 + p2 + p3, 3))
    assert c.packets == [p1, p2, p3]
    assert [v.spec.name for v in c.views] == ["EncoderData", "ProximityAlert", "ProximityAlert"]
    assert len(c.views[1]) == 0 and c.views[1].clear_queue


def test_accepts_bytearray_and_memoryview_without_aliasing(schema: bcnp.Schema) -> None:
    packet = drive_packet(schema, 2)
    c = Collector(schema)
    buf = bytearray(packet)
    c.parser.push(memoryview(buf)[:10])
    c.parser.push(buf[10:])
    buf[:] = bytes(len(buf))  # the caller reuses its buffer: delivered data must not change
    assert c.packets == [packet]
    assert list(c.views[0]) == list(bcnp.decode_packet(schema, packet))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_chunking_gives_identical_output(test_schema: bcnp.Schema, data: st.DataObject) -> None:
    specs = list(test_schema)
    packets = []
    for _ in range(data.draw(st.integers(1, 12), label="packets")):
        spec = data.draw(st.sampled_from(specs))
        count = data.draw(st.integers(0, 4))
        raw = [
            tuple(data.draw(st.integers(f.field_type.raw_min, f.field_type.raw_max)) for f in spec.fields)
            for _ in range(count)
        ]
        msgs = [spec.message_from_raw(r) for r in raw]
        packets.append(bcnp.encode_packet(spec, msgs, data.draw(st.sampled_from([0, 1]))))
    stream = b"".join(packets)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(stream) - 1)), max_size=40), label="cuts"))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True) if a < b]
    whole = Collector(test_schema)
    whole.parser.push(stream)
    pieces = Collector(test_schema)
    pieces.push_all(chunks)
    assert whole.packets == pieces.packets == packets
    assert whole.errors == pieces.errors == []


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    garbage=st.lists(st.binary(min_size=0, max_size=40), min_size=6, max_size=6),
    size=st.integers(1, 64),
)
def test_garbage_between_packets_never_loses_an_intact_packet(
    schema: bcnp.Schema, garbage: list[bytes], size: int
) -> None:
    packets = [drive_packet(schema, n, seed=n) for n in (1, 0, 3, 2, 1)]
    stream = garbage[0] + b"".join(p + g for p, g in zip(packets, garbage[1:], strict=True))
    for chunks in ([stream], chunked(stream, size)):
        c = Collector(schema)
        c.push_all(chunks)
        assert c.packets == packets


# -- resync rules (reference-behavior §3) --------------------------------------------


def test_wrong_version_skips_to_next_version_pair(schema: bcnp.Schema) -> None:
    packet = drive_packet(schema, 1)
    c = Collector(schema)
    c.parser.push(b"\x00\x01\x02\x09\x03\x05" + packet)
    assert c.packets == [packet]
    # one report: the skip jumps straight to the next 03 02 pair
    assert c.errors == [bcnp.ErrorInfo(PacketError.UNSUPPORTED_VERSION, 0, 1)]


def test_unknown_type_reported_and_one_byte_skipped(schema: bcnp.Schema) -> None:
    packet = drive_packet(schema, 1)
    bogus = with_crc(bytes([3, 2, 0, 0, 99, 0, 0]))
    c = Collector(schema)
    c.parser.push(bogus + packet)
    assert c.packets == [packet]
    assert c.errors[0] == bcnp.ErrorInfo(PacketError.UNKNOWN_MESSAGE_TYPE, 0, 1)
    assert c.parser.consecutive_errors == 0  # the good packet reset the streak


def test_count_above_configured_maximum(schema: bcnp.Schema) -> None:
    big = drive_packet(schema, 11)
    ok = drive_packet(schema, 10)
    c = Collector(schema, max_messages=10)
    c.parser.push(big + ok)
    assert c.errors[0] == bcnp.ErrorInfo(PacketError.TOO_MANY_MESSAGES, 0, 1)
    assert c.packets == [ok]


def test_crc_mismatch_skips_one_byte_and_keeps_following_packets(schema: bcnp.Schema) -> None:
    a, b, d = (drive_packet(schema, n, seed=n) for n in (2, 1, 3))
    bad = bytearray(a)
    bad[-1] ^= 0x40
    c = Collector(schema)
    c.parser.push(bytes(bad) + b + d)
    assert c.packets == [b, d]
    assert c.errors[0] == bcnp.ErrorInfo(PacketError.CHECKSUM_MISMATCH, 0, 1)


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_corrupted_length_cannot_swallow_the_packets_behind_it(schema: bcnp.Schema, chunk: int) -> None:
    a, b, d = (drive_packet(schema, n, seed=n) for n in (1, 2, 1))
    bad = bytearray(a)
    bad[6] = 4  # count 1 -> 4: the frame now claims b and part of d
    c = Collector(schema)
    c.push_all(chunked(bytes(bad) + b + d, chunk))
    assert c.packets == [b, d]
    assert c.errors and c.errors[0].offset == 0


def test_incomplete_frame_waits_without_error(schema: bcnp.Schema) -> None:
    packet = drive_packet(schema, 4)
    c = Collector(schema)
    c.parser.push(packet[:-1])
    assert c.packets == [] and c.errors == [] and c.parser.buffered == len(packet) - 1
    c.parser.push(packet[-1:])
    assert c.packets == [packet] and c.parser.buffered == 0


def test_errors_carry_stream_offsets_and_consecutive_counts(schema: bcnp.Schema) -> None:
    good = drive_packet(schema, 1)
    c = Collector(schema)
    c.parser.push(good)  # offsets 0..20
    c.parser.push(b"\x07\x07")  # error at 21
    c.parser.push(with_crc(bytes([3, 2, 0, 0, 50, 0, 0])))  # unknown type at 23
    c.parser.push(good)
    c.parser.push(b"\x09\x09")
    assert [(e.code, e.offset, e.consecutive_errors) for e in c.errors] == [
        (PacketError.UNSUPPORTED_VERSION, 21, 1),
        (PacketError.UNKNOWN_MESSAGE_TYPE, 23, 2),
        (PacketError.UNSUPPORTED_VERSION, 24, 3),
        (PacketError.UNSUPPORTED_VERSION, 23 + 11 + len(good), 1),
    ]
    assert c.packets == [good, good]
    assert c.parser.errors == 4 and c.parser.error_counts[PacketError.UNSUPPORTED_VERSION] == 3
    assert c.parser.last_error == c.errors[-1]
    assert "UNSUPPORTED_VERSION at stream offset" in str(c.errors[-1])


def test_legacy_v1_packet_is_unsupported_and_never_delivered(schema: bcnp.Schema) -> None:
    # BCNP 1.1: header major 1, minor 1, flags, count (1 byte), then 10-byte commands.
    legacy = bytes([1, 1, 1, 2]) + struct.pack(">ffH", 1.0, 0.5, 100) + struct.pack(">ffH", 0.0, 0.0, 50)
    packet = drive_packet(schema, 1)
    c = Collector(schema)
    c.parser.push(legacy)
    c.parser.push(packet)
    assert c.packets == [packet]
    assert c.errors and c.errors[0] == bcnp.ErrorInfo(PacketError.UNSUPPORTED_VERSION, 0, 1)
    assert all(e.code == PacketError.UNSUPPORTED_VERSION for e in c.errors)


def test_trailing_version_byte_pairs_across_pushes(schema: bcnp.Schema) -> None:
    packet = drive_packet(schema, 1)
    c = Collector(schema)
    c.parser.push(b"\x55\x03")  # garbage ending with the first half of a version pair
    c.parser.push(packet[1:])  # ... which the next chunk completes
    # 03 (kept) + packet[1:] is the packet again
    assert c.packets == [packet]
    assert c.codes == [PacketError.UNSUPPORTED_VERSION]


# -- better than the reference -------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 100, 4096, 10**6])
def test_frame_larger_than_max_buffer_is_reported_and_skipped(schema: bcnp.Schema, chunk: int) -> None:
    big = drive_packet(schema, 200)  # 2,011 bytes
    after = [drive_packet(schema, 5, seed=i) for i in range(3)]
    c = Collector(schema, max_buffer=1000)
    for piece in chunked(big + b"".join(after), chunk):
        c.parser.push(piece)
        assert c.parser.buffered <= 1000
    assert c.packets == after
    assert c.errors[0] == bcnp.ErrorInfo(PacketError.TOO_MANY_MESSAGES, 0, 1)


@pytest.mark.full_suite
def test_default_max_buffer_holds_the_largest_legal_packet(schema: bcnp.Schema) -> None:
    c = Collector(schema)
    assert c.parser.max_buffer == 11 + 65535 * 20  # DrivetrainTelemetry is the widest message
    packet = drive_packet(schema, 65535)
    assert len(packet) == 655_361
    c.push_all(chunked(packet, 4096))
    assert c.packets == [packet] and c.errors == []
    assert len(c.views[0]) == 65535


@pytest.mark.parametrize("chunk", [None, 1, 9, 4096])
def test_garbage_header_claiming_65535_messages_does_not_stall_valid_packets(
    schema: bcnp.Schema, chunk: int | None
) -> None:
    garbage_header = bytes([3, 2, 0, 0, 1, 0xFF, 0xFF])  # DriveCmd x 65,535: 655 KB promised
    packets = [drive_packet(schema, n, seed=n) for n in (1, 3, 0, 2)]
    c = Collector(schema)
    if chunk is None:
        c.parser.push(garbage_header)
        for i, p in enumerate(packets):
            c.parser.push(p)
            assert len(c.packets) == i + 1  # delivered as soon as it is in the buffer
    else:
        stream = garbage_header + b"".join(packets)
        ends = []
        total = len(garbage_header)
        for p in packets:
            total += len(p)
            ends.append(total)
        pushed = 0
        for piece in chunked(stream, chunk):
            c.parser.push(piece)
            pushed += len(piece)
            assert len(c.packets) == sum(1 for e in ends if e <= pushed)
    assert c.packets == packets
    assert c.errors[0] == bcnp.ErrorInfo(PacketError.TRUNCATED, 0, 1)
    assert c.parser.buffered < 100


STEP = bcnp.parser.SEARCH_STEP
GARBAGE_HEADER = bytes([3, 2, 0, 0, 1, 0xFF, 0xFF])  # DriveCmd x 65,535: 655 KB promised


def searched_per_push(c: Collector, chunks: list[bytes]) -> list[tuple[int, int]]:
    """Pushes ``chunks``; for each, its size and the bytes the push searched behind a waiting header."""
    out = []
    for chunk in chunks:
        before = c.parser.bytes_searched
        c.parser.push(chunk)
        out.append((len(chunk), c.parser.bytes_searched - before))
    return out


def assert_each_push_searches_only_its_own_bytes(per_push: list[tuple[int, int]]) -> None:
    # Plus the one byte before the push: a 0x03 there may pair with the push's first byte.
    assert all(searched <= size + 1 for size, searched in per_push), per_push


@pytest.mark.parametrize("offset", [STEP - 1, STEP, STEP + 1, STEP + 2, 2 * STEP + 1, 3 * STEP - 7])
def test_search_step_slices_miss_no_packet_at_a_slice_boundary(schema: bcnp.Schema, offset: int) -> None:
    # The search behind a waiting header starts one byte after it; a packet whose 03 02 pair
    # straddles the end of a SEARCH_STEP slice (or of any chunk) must still be found, with the
    # same report as in one push.
    packet, follow = drive_packet(schema, 2, seed=1), drive_packet(schema, 1, seed=2)
    stream = GARBAGE_HEADER + bytes(offset - len(GARBAGE_HEADER)) + packet + follow
    whole = Collector(schema)
    whole.parser.push(stream)
    assert whole.packets == [packet, follow]
    assert whole.errors == [bcnp.ErrorInfo(PacketError.TRUNCATED, 0, 1)]
    assert whole.parser.bytes_searched == offset - 1  # from behind the header up to the packet
    for size in (STEP, 5000):
        sliced = Collector(schema)
        per_push = searched_per_push(sliced, chunked(stream, size))
        assert sliced.packets == whole.packets and sliced.errors == whole.errors
        assert_each_push_searches_only_its_own_bytes(per_push)


@pytest.mark.parametrize("every", [7, 100, STEP // 2])
def test_search_step_slices_bound_the_search_however_many_candidates_it_meets(
    schema: bcnp.Schema, every: int
) -> None:
    # Dead candidates (03 02 with an unknown type) every `every` bytes behind a header promising
    # 655 KB: one push searches all of them and finds the real packet behind them; in
    # SEARCH_STEP slices each push searches no more than its own bytes, with the same outcome.
    dead = bytes([3, 2, 0, 0xFF, 0xFE, 0, 1]) + bytes(every - 7)
    filler = dead * (400_000 // every)
    packet = drive_packet(schema, 2)
    stream = GARBAGE_HEADER + filler + packet
    whole = Collector(schema)
    whole.parser.push(stream)
    assert whole.packets == [packet] and whole.codes == [PacketError.TRUNCATED]
    assert whole.parser.bytes_searched == len(GARBAGE_HEADER) - 1 + len(filler)
    sliced = Collector(schema)
    per_push = searched_per_push(sliced, chunked(stream, STEP))
    assert sliced.packets == whole.packets and sliced.errors == whole.errors
    assert_each_push_searches_only_its_own_bytes(per_push)


def test_search_behind_a_waiting_header_covers_each_byte_once_per_push(schema: bcnp.Schema) -> None:
    # 600 KB behind a header promising 655 KB: one push searches all of it, once; pushed in
    # SEARCH_STEP slices, each push searches only its own bytes, so a receive thread that
    # yields between slices holds the interpreter for one slice's search at a time.
    filler = bytes(600_000)
    whole = Collector(schema)
    whole.parser.push(GARBAGE_HEADER + filler)
    assert whole.parser.bytes_searched == len(GARBAGE_HEADER) - 1 + len(filler)
    sliced = Collector(schema)
    per_push = searched_per_push(sliced, chunked(GARBAGE_HEADER + filler, STEP))
    assert_each_push_searches_only_its_own_bytes(per_push)
    assert sum(searched for _, searched in per_push) <= len(GARBAGE_HEADER + filler) + len(per_push)
    packet = drive_packet(schema, 3)
    for c in (whole, sliced):
        c.parser.push(packet)
        assert c.packets == [packet] and c.codes == [PacketError.TRUNCATED]
        assert c.parser.buffered == 0
    assert sliced.errors == whole.errors


@pytest.mark.full_suite
def test_largest_packet_in_search_step_slices_gives_what_one_push_gives(schema: bcnp.Schema) -> None:
    # A real 655 KB frame is searched behind while it streams in; slice by slice that search
    # stays within each push's bytes, and packets, errors and counters come out as in one push.
    big = drive_packet(schema, 65535, seed=5)
    bad = bytearray(drive_packet(schema, 4, seed=6))
    bad[-1] ^= 1
    small = [drive_packet(schema, n, seed=n) for n in (3, 0, 1)]
    stream = big + small[0] + bytes(bad) + b"\x00" * 1000 + small[1] + GARBAGE_HEADER + small[2]
    whole = Collector(schema)
    whole.parser.push(stream)
    assert whole.packets == [big, *small]
    assert whole.parser.bytes_searched == len(GARBAGE_HEADER) - 1  # the big frame was whole: no search
    sliced = Collector(schema)
    per_push = searched_per_push(sliced, chunked(stream, STEP))
    assert sliced.packets == whole.packets and sliced.errors == whole.errors
    assert_each_push_searches_only_its_own_bytes(per_push)
    assert sliced.parser.bytes_searched >= len(big) - len(GARBAGE_HEADER)  # the search did run
    for attr in ("packets", "errors", "bytes_received", "bytes_dropped", "buffered"):
        assert getattr(sliced.parser, attr) == getattr(whole.parser, attr), attr


@pytest.mark.parametrize("padding", [0, 1])
def test_a_small_packet_in_a_big_chunk_gets_its_own_bytes(schema: bcnp.Schema, padding: int) -> None:
    # Under 1/OWN_COPY_RATIO of the buffer it was parsed from, a packet is copied out, so a
    # queue of views never pins chunks many times the data it holds; otherwise it is a view.
    packet = drive_packet(schema, 2)
    ratio = bcnp.parser.OWN_COPY_RATIO
    stream = packet + bytes(len(packet) * (ratio - 1) + padding)  # zeros: one resync, no packet
    c = Collector(schema)
    c.parser.push(stream)
    assert c.packets == [packet] and c.codes == [PacketError.UNSUPPORTED_VERSION]
    view = c.views[0]
    if padding:
        assert view.buffer == packet and view.payload_offset == bcnp.HEADER_SIZE
    else:
        assert view.buffer == stream and view.payload_offset == bcnp.HEADER_SIZE
    assert bytes(view.payload) == packet[bcnp.HEADER_SIZE : -4]


def test_big_valid_packet_is_not_cut_by_speculation(schema: bcnp.Schema) -> None:
    # Payload values that contain many "03 02" pairs and DriveCmd-like headers.
    spec = schema["DriveCmd"]
    msgs = [spec.message_from_raw((0x03020001, 0x00010302, 0x0302)) for _ in range(5000)]
    packet = bcnp.encode_packet(spec, msgs)
    follow = drive_packet(schema, 2)
    c = Collector(schema)
    c.push_all(chunked(packet + follow, 1000))
    assert c.packets == [packet, follow] and c.errors == []


@pytest.mark.parametrize("chunk", [None, 4096, 333])
def test_megabyte_of_random_bytes_interleaved_with_1000_packets(
    schema: bcnp.Schema, chunk: int | None
) -> None:
    rng = random.Random(2026)
    packets = [drive_packet(schema, rng.randint(0, 20), seed=i) for i in range(1000)]
    parts = []
    for p in packets:
        parts.append(rng.randbytes(1000 + rng.randint(0, 100)))
        parts.append(p)
    stream = b"".join(parts)
    assert len(stream) > 1_000_000
    c = Collector(schema)
    c.push_all([stream] if chunk is None else chunked(stream, chunk))
    assert c.packets == packets  # every intact packet, in order
    assert c.parser.packets == 1000 and c.parser.errors > 0


def test_callback_exceptions_are_counted_and_do_not_stop_the_stream(schema: bcnp.Schema) -> None:
    seen: list[int] = []

    def handler(view: bcnp.PacketView) -> None:
        seen.append(len(view))
        if len(view) == 2:
            raise RuntimeError("handler bug")

    def on_error(info: bcnp.ErrorInfo) -> None:
        raise RuntimeError("error-callback bug")

    parser = bcnp.StreamParser(schema, handler, on_error)
    parser.push(drive_packet(schema, 1) + b"\x00\x00" + drive_packet(schema, 2) + drive_packet(schema, 3))
    assert seen == [1, 2, 3]
    assert parser.callback_errors == 2
    assert isinstance(parser.last_callback_error, RuntimeError)
    assert parser.packets == 3 and parser.errors == 1


def test_reset_discards_partial_frame_and_offsets(schema: bcnp.Schema) -> None:
    packet = drive_packet(schema, 3)
    c = Collector(schema)
    c.parser.push(packet[:15])
    c.parser.reset()
    assert c.parser.buffered == 0
    c.parser.push(b"\x01\x01" + packet)
    assert c.packets == [packet]
    assert c.errors == [bcnp.ErrorInfo(PacketError.UNSUPPORTED_VERSION, 0, 1)]


def test_arbitrary_bytes_never_raise(schema: bcnp.Schema) -> None:
    rng = random.Random(7)
    c = Collector(schema)
    for _ in range(300):
        piece = rng.randbytes(rng.randint(0, 3000))
        if rng.random() < 0.3:
            piece = bytes([3, 2, 0, 0, rng.choice([1, 2]), rng.randint(0, 255), rng.randint(0, 255)]) + piece
        c.parser.push(piece)
        assert c.parser.buffered <= c.parser.max_buffer
    packet = drive_packet(schema, 1)
    c.parser.reset()
    c.parser.push(packet)
    assert c.packets[-1] == packet


def test_constructor_limits(schema: bcnp.Schema) -> None:
    with pytest.raises(ValueError):
        bcnp.StreamParser(schema, print, max_buffer=10)
    with pytest.raises(ValueError):
        bcnp.StreamParser(schema, print, max_messages=70000)


@pytest.mark.parametrize("fakes", [63, 64, 65, 200])
def test_a_packet_behind_many_fake_headers_is_delayed_never_lost(schema: bcnp.Schema, fakes: int) -> None:
    """More incomplete look-behind candidates than the parser tracks (64) must not make it
    skip a real packet split across pushes."""
    drive = schema["DriveCmd"]
    fake = bytes([3, 2, 0, 0, 1, 0xFF, 0xFF])  # a header claiming 65,535 DriveCmds
    a = bcnp.encode_packet(drive, [drive(vx=1.0, omega=0.0, durationMs=20)])
    b = bcnp.encode_packet(drive, [drive(vx=2.0, omega=0.0, durationMs=20)])
    got: list[bytes] = []
    parser = bcnp.StreamParser(schema, lambda v: got.append(v.to_bytes()))
    for chunk in (fake * fakes + a[:10], a[10:], b):
        parser.push(chunk)
    parser.push(bytes(65_535 * drive.wire_size))  # the first fake frame completes (and fails its CRC)
    assert got[:2] == [a, b]  # both, in order


# -- search budget: a bounded step per call, resumed by the owner ------------------------------------


def budgeted_feed(c: Collector, data: bytes, step: int) -> list[int]:
    """Pushes ``data`` in slices of ``step`` with ``search_budget`` = ``step`` set on the parser,
    resuming while a search is pending, as a transport does; returns the bytes each call searched."""
    searched = []
    parser = c.parser
    for piece in chunked(data, step):
        before = parser.bytes_searched
        parser.push(piece)
        searched.append(parser.bytes_searched - before)
        while parser.search_pending:
            before = parser.bytes_searched
            parser.resume()
            searched.append(parser.bytes_searched - before)
    return searched


def path_a_stream(schema: bcnp.Schema) -> bytes:
    """A waiting frame that completes with a bad CRC after 100 KB, a fake header early inside it
    (so the re-parse searches the 100 KB behind that one), then valid packets."""
    drive = schema["DriveCmd"]
    count = 10_000  # 100,011-byte frame
    inner = bytearray(count * drive.wire_size)
    inner[3:10] = GARBAGE_HEADER  # re-parsed after the CRC failure: 655 KB promised again
    waiting = bytes([3, 2, 0, 0, drive.id]) + count.to_bytes(2, "big") + bytes(inner) + b"\0\0\0\0"
    return waiting + drive_packet(schema, 3, seed=1) + drive_packet(schema, 1, seed=2)


def path_b_stream(schema: bcnp.Schema) -> bytes:
    """A waiting header, then more fake headers than the parser tracks, each promising 50 KB:
    the search stops at the one too many until the tracked ones resolve (their CRCs fail),
    then goes on over everything that arrived meanwhile, where a valid packet waits."""
    fake = bytes([3, 2, 0, 0, schema["DriveCmd"].id]) + (5_000).to_bytes(2, "big")
    fakes = fake * (bcnp.parser.MAX_CANDIDATES + 2)
    return GARBAGE_HEADER + fakes + bytes(80_000) + drive_packet(schema, 2, seed=3) + bytes(300)


@pytest.mark.parametrize("stream", [path_a_stream, path_b_stream], ids=["crc-fail", "candidates-full"])
@pytest.mark.parametrize("step", [STEP, 4096, 997])
def test_a_search_budget_bounds_every_call_and_changes_nothing_delivered(
    schema: bcnp.Schema, stream: object, step: int
) -> None:
    data = stream(schema)  # type: ignore[operator]
    whole = Collector(schema)
    for piece in chunked(data, step):
        whole.parser.push(piece)
    budgeted = Collector(schema, search_budget=step)
    searched = budgeted_feed(budgeted, data, step)
    assert budgeted.packets == whole.packets and budgeted.errors == whole.errors
    assert budgeted.parser.buffered == whole.parser.buffered
    assert budgeted.parser.bytes_dropped == whole.parser.bytes_dropped
    assert max(searched) <= step + 5, max(searched)
    assert len(budgeted.packets) >= 1
    # Without the budget, one push searched far more than its own bytes: what the budget is for.
    unbounded = searched_per_push(Collector(schema), chunked(data, step))
    assert max(s for _, s in unbounded) > 3 * step


def test_a_push_with_a_search_pending_finishes_it_first(schema: bcnp.Schema) -> None:
    """An owner that pushes without resuming loses nothing and keeps the order."""
    data = path_a_stream(schema)
    whole = Collector(schema)
    whole.parser.push(data)
    lazy = Collector(schema, search_budget=1000)
    for piece in chunked(data, 50_000):
        lazy.parser.push(piece)
    while lazy.parser.search_pending:
        lazy.parser.resume()
    assert lazy.packets == whole.packets and lazy.errors == whole.errors


def test_a_search_budget_must_be_positive(schema: bcnp.Schema) -> None:
    with pytest.raises(ValueError, match="search_budget"):
        bcnp.StreamParser(schema, print, search_budget=0)
    parser = bcnp.StreamParser(schema, print, search_budget=1)
    parser.resume()  # nothing pending: nothing happens
    assert not parser.search_pending and parser.bytes_searched == 0


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(
        st.one_of(
            st.binary(max_size=60),
            st.just(GARBAGE_HEADER),
            st.integers(1, 40).map(lambda n: bytes([3, 2, 0, 0, 1]) + n.to_bytes(2, "big")),
            st.integers(0, 6),  # a valid packet of that many DriveCmds
        ),
        max_size=30,
    ),
    size=st.integers(1, 300),
    budget=st.integers(1, 200),
)
# Found by the above: a search finds a packet 12 bytes in, parsing goes on to another waiting
# frame, and that search had a whole budget of its own (19 bytes in one call of 13).
@example(
    parts=[GARBAGE_HEADER, 3, bytes([3, 2, 0, 0, 1, 0, 5]), GARBAGE_HEADER, b"\0", b"\0", 3, GARBAGE_HEADER],
    size=13,
    budget=13,
)
def test_any_search_budget_delivers_what_no_budget_does(
    schema: bcnp.Schema, parts: list[bytes | int], size: int, budget: int
) -> None:
    stream = b"".join(drive_packet(schema, p, seed=p) if isinstance(p, int) else p for p in parts)
    stream += bytes(700)  # resolve what waits, as far as 700 bytes can
    free = Collector(schema)
    free.push_all(chunked(stream, size))
    bounded = Collector(schema, search_budget=budget)
    searched = budgeted_feed(bounded, stream, size) if size <= budget else None
    if searched is None:  # slices larger than the budget: pushed as they are, then resumed
        for piece in chunked(stream, size):
            bounded.parser.push(piece)
            while bounded.parser.search_pending:
                bounded.parser.resume()
    assert bounded.packets == free.packets and bounded.errors == free.errors
    assert bounded.parser.buffered == free.parser.buffered
    if searched is not None:
        assert max(searched, default=0) <= budget + 5
