"""The connection object on its own: bytes and ``now`` in, events out, no sockets and no clock."""

from __future__ import annotations

import pytest

import bcnp
from bcnp.connection import (
    Connection,
    ConnectionState,
    HandshakeAccepted,
    HandshakeFailure,
    HandshakeRejected,
    IdleTimeout,
    LinkLost,
    check_handshake,
    is_handshake_datagram,
)
from bcnp.wire import encode_handshake, encode_packet

OTHER_HASH = 0x12345678


class Recorder:
    """A Connection and what it delivered."""

    def __init__(self, schema: bcnp.Schema, *, now: float = 10.0, **kwargs: object) -> None:
        self.packets: list[tuple[bytes, float]] = []
        self.errors: list[bcnp.ErrorInfo] = []
        self.conn = Connection(
            schema,
            opened_at=now,
            on_packet=lambda p, t: self.packets.append((p.to_bytes(), t)),
            on_error=self.errors.append,
            **kwargs,  # type: ignore[arg-type]
        )


def drive(schema: bcnp.Schema, n: int = 2) -> bytes:
    spec = schema["DriveCmd"]
    return encode_packet(spec, [spec(vx=0.5, omega=0.1, durationMs=20 + i) for i in range(n)])


def test_our_handshake_is_the_magic_and_our_hash(schema: bcnp.Schema) -> None:
    conn = Recorder(schema).conn
    assert conn.handshake == b"BCNP" + schema.hash.to_bytes(4, "big") == encode_handshake(schema.hash)
    assert conn.state is ConnectionState.HANDSHAKE and conn.local_hash == schema.hash


def test_a_matching_handshake_in_single_bytes_then_data_held_until_accept(schema: bcnp.Schema) -> None:
    rec = Recorder(schema)
    conn = rec.conn
    hs = encode_handshake(schema.hash)
    packet = drive(schema)
    for i, byte in enumerate(hs[:-1]):
        assert conn.receive_data(bytes([byte]), 10.0 + i) is None
        assert conn.handshake_received == i + 1
    outcome = conn.receive_data(hs[-1:] + packet[:5], 11.0)
    assert outcome == HandshakeAccepted(schema.hash) and conn.remote_hash == schema.hash
    assert conn.state is ConnectionState.VERIFIED and rec.packets == []
    assert conn.receive_data(packet[5:], 11.5) is None  # still held: the owner has not taken the connection
    assert rec.packets == []
    assert conn.accept(12.0) == len(packet)
    assert conn.state is ConnectionState.OPEN and rec.packets == [(packet, 12.0)]
    assert conn.last_packet == 12.0 and conn.packets == 1
    conn.receive_data(packet, 12.5)
    assert rec.packets[-1] == (packet, 12.5)


def test_accept_is_only_for_a_verified_link(schema: bcnp.Schema) -> None:
    conn = Recorder(schema).conn
    with pytest.raises(RuntimeError, match="waiting for the peer"):
        conn.accept(1.0)


@pytest.mark.parametrize(
    ("received", "failure", "remote", "named"),
    [
        (b"BCNP" + OTHER_HASH.to_bytes(4, "big"), HandshakeFailure.HASH_MISMATCH, OTHER_HASH, "0x12345678"),
        (b"BCNQ" + OTHER_HASH.to_bytes(4, "big"), HandshakeFailure.WRONG_MAGIC, None, "b'BCNQ'"),
    ],
)
def test_a_refused_handshake_says_why_and_names_both_hashes(
    schema: bcnp.Schema, received: bytes, failure: HandshakeFailure, remote: int | None, named: str
) -> None:
    rec = Recorder(schema)
    outcome = rec.conn.receive_data(received + drive(schema), 10.1)
    assert isinstance(outcome, HandshakeRejected)
    assert outcome.failure is failure and outcome.remote_hash == remote and outcome.received == received
    assert (
        named in outcome.reason
        and f"0x{schema.hash:08X}" in outcome.reason
        and str(outcome) == outcome.reason
    )
    assert "0x12345678" in outcome.reason  # the peer's hash field, even behind a wrong magic
    assert rec.conn.state is ConnectionState.CLOSED and rec.packets == []
    assert rec.conn.parser.bytes_received == 0  # not one byte of a refused peer was parsed
    rec.conn.receive_data(drive(schema), 10.2)
    assert rec.packets == [] and rec.conn.parser.bytes_received == 0


def test_a_stream_that_ends_before_eight_bytes_is_too_short(schema: bcnp.Schema) -> None:
    conn = Recorder(schema).conn
    conn.receive_data(b"BCN", 10.1)
    outcome = conn.connection_lost()
    assert isinstance(outcome, HandshakeRejected) and outcome.failure is HandshakeFailure.TOO_SHORT
    assert "3 of 8 bytes" in outcome.reason and conn.state is ConnectionState.CLOSED
    open_conn = Recorder(schema).conn
    open_conn.receive_data(encode_handshake(schema.hash), 10.1)
    open_conn.accept(10.1)
    assert open_conn.connection_lost() is None and open_conn.state is ConnectionState.CLOSED


def test_the_handshake_deadline_is_decided_on_the_time_passed_in(schema: bcnp.Schema) -> None:
    late = Recorder(schema, now=100.0, handshake_timeout=2.0).conn
    late.receive_data(b"BCNP\x00", 101.0)
    assert late.check_deadlines(102.0) is None  # exactly 2 s: not over
    assert late.state is ConnectionState.HANDSHAKE
    outcome = late.check_deadlines(102.000001)
    assert isinstance(outcome, HandshakeRejected) and outcome.failure is HandshakeFailure.DEADLINE
    assert "no handshake within 2 s (5 of 8 bytes)" in outcome.reason and late.state is ConnectionState.CLOSED


def test_idle_and_link_timeouts_count_whole_microseconds(schema: bcnp.Schema) -> None:
    rec = Recorder(schema, now=0.0, idle_timeout=5.0, link_timeout=0.2)
    conn = rec.conn
    conn.receive_data(encode_handshake(schema.hash), 0.0)
    conn.accept(0.0)
    assert not conn.link_alive(0.0)  # no packet yet
    conn.receive_data(drive(schema), 0.35)
    assert conn.link_alive(0.55)  # 0.55 - 0.35 is 0.20000000000000007 in floats: not over
    assert not conn.link_alive(0.550001)
    assert conn.check_deadlines(5.35) is None
    assert conn.check_deadlines(5.350001) == IdleTimeout(5.0)
    assert conn.state is ConnectionState.OPEN  # the owner closes it
    assert conn.close() == 0 and not conn.link_alive(0.4)


def test_close_reports_the_partial_frame_it_drops(schema: bcnp.Schema) -> None:
    rec = Recorder(schema)
    conn = rec.conn
    conn.receive_data(encode_handshake(schema.hash), 10.0)
    conn.accept(10.0)
    packet = drive(schema, 5)
    conn.receive_data(packet + packet[:9], 10.1)
    assert len(rec.packets) == 1 and conn.parser.buffered == 9
    assert conn.close() == 9 and conn.close() == 0
    conn.receive_data(packet, 10.2)
    assert len(rec.packets) == 1


def test_parse_errors_reach_the_owner_and_the_stream_goes_on(schema: bcnp.Schema) -> None:
    rec = Recorder(schema)
    conn = rec.conn
    conn.receive_data(encode_handshake(schema.hash), 10.0)
    conn.accept(10.0)
    packet = drive(schema)
    conn.receive_data(packet + b"\x03\x02\x00\xff\xff\x00\x01" + packet, 10.1)
    assert [p for p, _ in rec.packets] == [packet, packet] and rec.errors


def test_datagrams_pair_on_a_handshake_and_answer_repeats(schema: bcnp.Schema) -> None:
    rec = Recorder(schema, datagrams=True)
    conn = rec.conn
    packet = drive(schema)
    assert conn.receive_datagram(packet, 10.0) is None  # before pairing: neither parsed nor activity
    assert conn.last_receive == 10.0 and conn.parser.bytes_received == 0
    outcome = conn.receive_datagram(encode_handshake(schema.hash), 10.5)
    assert outcome == HandshakeAccepted(schema.hash) and conn.accept(10.5) == 0
    conn.receive_datagram(packet, 10.6)
    assert rec.packets == [(packet, 10.6)]
    # The peer asks again (its answer was lost): decided again, never parsed.
    assert conn.receive_datagram(encode_handshake(schema.hash), 10.7) == HandshakeAccepted(schema.hash)
    wrong = conn.receive_datagram(encode_handshake(OTHER_HASH), 10.8)
    assert isinstance(wrong, HandshakeRejected) and conn.remote_hash == OTHER_HASH
    assert conn.state is ConnectionState.OPEN and conn.parser.bytes_received == len(packet)
    assert conn.last_receive == 10.8
    assert conn.check_deadlines(1000.0) == IdleTimeout(conn.idle_timeout)  # no handshake deadline over UDP


def test_check_handshake_and_the_datagram_shape() -> None:
    ours = 0xE9EFEE08
    assert check_handshake(encode_handshake(ours) + b"more", ours) == HandshakeAccepted(ours)
    assert check_handshake(b"", ours).failure is HandshakeFailure.TOO_SHORT  # type: ignore[union-attr]
    assert is_handshake_datagram(encode_handshake(ours)) and is_handshake_datagram(b"BCNP\0\0\0\0")
    assert not is_handshake_datagram(encode_handshake(ours) + b"\0")
    assert not is_handshake_datagram(b"BCNQ\0\0\0\0")


def test_bad_timeouts_are_refused(schema: bcnp.Schema) -> None:
    for kwargs in ({"handshake_timeout": 0}, {"idle_timeout": -1}, {"link_timeout": -0.1}):
        with pytest.raises(ValueError):
            Connection(schema, opened_at=0.0, **kwargs)  # type: ignore[arg-type]


# -- link loss (end_on_link_loss) ---------------------------------------------------------------


def open_connection(schema: bcnp.Schema, *, datagrams: bool = False, **kwargs: object) -> Recorder:
    """A connection opened at 0.0 that lost its link at 0.2 s without a packet (``end_on_link_loss``)."""
    rec = Recorder(schema, now=0.0, link_timeout=0.2, end_on_link_loss=True, datagrams=datagrams, **kwargs)
    if datagrams:
        rec.conn.receive_datagram(encode_handshake(schema.hash), 0.0)
    else:
        rec.conn.receive_data(encode_handshake(schema.hash), 0.0)
    rec.conn.accept(0.0)
    return rec


def test_bytes_after_the_link_timeout_are_dropped_unparsed_and_the_link_closes(schema: bcnp.Schema) -> None:
    rec = open_connection(schema)
    conn = rec.conn
    packet = drive(schema, 3)
    conn.receive_data(packet + packet[:9], 0.35)  # a packet, and a frame cut short
    assert len(rec.packets) == 1
    burst = packet[9:] + packet * 4  # the rest of that frame, and what the host sent meanwhile
    lost = conn.receive_data(burst, 0.6)
    assert lost == LinkLost(0.2, pytest.approx(0.25), 9 + len(burst))  # type: ignore[arg-type]
    assert str(lost) == "link lost: no packet for 0.250 s (link timeout 0.2 s)"
    assert conn.state is ConnectionState.CLOSED and len(rec.packets) == 1
    assert conn.parser.bytes_received == len(packet) + 9  # not one byte of the burst was parsed
    assert conn.receive_data(packet, 0.61) is None and len(rec.packets) == 1  # closed for good
    assert conn.check_deadlines(0.62) is None


def test_at_the_boundary_the_link_and_the_queue_agree(schema: bcnp.Schema) -> None:
    """Exactly the link timeout after the last packet is not over, for both; one microsecond
    more is over for both (0.55 - 0.35 is 0.20000000000000007 in floats)."""
    queue = bcnp.MessageQueue(bcnp.MessageQueueConfig(link_timeout=0.2))
    rec = open_connection(schema)
    rec.conn.on_packet = queue.handle_packet
    conn = rec.conn
    conn.receive_data(drive(schema), 0.35)
    assert queue.link_alive(0.55) and conn.check_deadlines(0.55) is None
    assert conn.receive_data(drive(schema), 0.55) is None  # taken: the link is not lost
    assert queue.last_receive_time == 0.55 and conn.state is ConnectionState.OPEN
    assert queue.link_alive(0.75) and conn.receive_data(drive(schema), 0.75) is None
    assert not queue.link_alive(0.950001)
    assert isinstance(conn.receive_data(drive(schema), 0.950001), LinkLost)
    assert queue.last_receive_time == 0.75 and conn.state is ConnectionState.CLOSED
    # The same deadline without data: found by the owner's check.
    other = open_connection(schema).conn
    other.receive_data(drive(schema), 0.35)
    assert other.check_deadlines(0.55) is None
    assert other.check_deadlines(0.550001) == LinkLost(0.2, pytest.approx(0.200001), 0)  # type: ignore[arg-type]
    assert other.state is ConnectionState.CLOSED


def test_before_the_first_packet_the_idle_timeout_applies_not_the_link_timeout(schema: bcnp.Schema) -> None:
    """A host that handshakes and waits (or only listens) has no link to lose yet."""
    rec = open_connection(schema, idle_timeout=5.0)
    conn = rec.conn
    assert conn.check_deadlines(4.0) is None
    assert conn.receive_data(drive(schema)[:5], 4.5) is None  # bytes, but no packet yet
    assert conn.check_deadlines(9.5) is None and conn.state is ConnectionState.OPEN
    assert conn.receive_data(drive(schema)[5:], 9.5) is None and len(rec.packets) == 1
    assert conn.check_deadlines(9.7) is None
    assert isinstance(conn.check_deadlines(9.700001), LinkLost)


def test_without_end_on_link_loss_late_bytes_are_parsed_as_the_reference_does(schema: bcnp.Schema) -> None:
    rec = Recorder(schema, now=0.0, link_timeout=0.2)
    conn = rec.conn
    conn.receive_data(encode_handshake(schema.hash), 0.0)
    conn.accept(0.0)
    conn.receive_data(drive(schema), 0.1)
    assert conn.check_deadlines(3.0) is None and not conn.link_alive(3.0)
    assert conn.receive_data(drive(schema), 3.0) is None and len(rec.packets) == 2


def test_a_datagram_after_the_link_timeout_is_dropped_and_a_new_handshake_is_a_new_connection(
    schema: bcnp.Schema,
) -> None:
    rec = open_connection(schema, datagrams=True)
    conn = rec.conn
    packet = drive(schema)
    conn.receive_datagram(packet, 0.1)
    assert conn.receive_datagram(packet, 0.3) is None and len(rec.packets) == 2
    assert conn.receive_datagram(packet, 0.500001) == LinkLost(0.2, pytest.approx(0.200001), len(packet))  # type: ignore[arg-type]
    assert conn.state is ConnectionState.CLOSED and len(rec.packets) == 2
    assert conn.receive_datagram(encode_handshake(schema.hash), 0.6) is None  # closed: the owner pairs anew
    # The peer's handshake after a loss is a LinkLost too: its owner unlocks it, then pairs it again.
    again = open_connection(schema, datagrams=True).conn
    again.receive_datagram(packet, 0.1)
    assert isinstance(again.receive_datagram(encode_handshake(schema.hash), 0.4), LinkLost)
    fresh = Recorder(schema, now=0.4, datagrams=True, end_on_link_loss=True)
    assert fresh.conn.receive_datagram(encode_handshake(schema.hash), 0.4) == HandshakeAccepted(schema.hash)
    fresh.conn.accept(0.4)
    fresh.conn.receive_datagram(packet, 0.45)
    assert fresh.packets == [(packet, 0.45)]


def test_the_owner_can_declare_the_link_lost(schema: bcnp.Schema) -> None:
    """The robot's queue, at its tick, may find the loss before the connection has seen the time."""
    rec = open_connection(schema)
    conn = rec.conn
    packet = drive(schema)
    conn.receive_data(packet + packet[:4], 0.1)
    assert conn.lose(0.25) == LinkLost(0.2, 0.25, 4)
    assert conn.state is ConnectionState.CLOSED and conn.receive_data(packet, 0.2) is None
    assert len(rec.packets) == 1
