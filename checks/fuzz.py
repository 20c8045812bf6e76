"""Fuzz the robot's receive path: StreamParser -> Dispatcher -> MessageQueue, and the handshake gate.

    python -m checks.fuzz [--inputs N] [--seed S] [--replay I] [--atheris]

By default N (1,000,000) inputs come from a seeded generator that needs only
the standard library, so a run is reproducible: input ``I`` of seed ``S`` is
rebuilt alone by ``--seed S --replay I``. The inputs are mutations of valid
packets of the robot's schema (bit flips, truncations, splices, tampered
count, type and version fields, forged packets with valid CRCs), random bytes,
valid packets mixed with garbage (fake headers claiming 65,535 messages,
partial headers, damaged packets) and handshakes, each pushed whole or cut
into chunks.

Stream inputs go through a ``Dispatcher`` (reset before each input) whose
DriveCmd handler feeds a ``MessageQueue``: the robot's configuration on even
inputs, tight limits (``max_buffer`` 4,096 bytes as in the reference,
``max_messages`` 200) on odd ones, where intact packets above the limits are
not expected. Checked for every input:

* no exception escapes ``push`` and no handler raised;
* every delivered packet has a known type id, decodes with ``decode_packet``
  to the same header and re-encodes with ``encode_packet`` to the same bytes,
  and the delivered packets lie in the input in order, without overlapping;
* every intact packet placed in the input is delivered, and (when nothing
  else came out) by the push that carried its last byte. First valid frame
  wins: where the bytes before an intact packet begin a CRC-valid frame that
  runs into it (a packet cut short, completed by the intact packet's first
  bytes), that frame, found by a left-to-right walk like the parser's, must
  be delivered instead, on the same terms. An input with
  ``MAX_CANDIDATES`` or more ``03 02`` pairs (the incomplete candidate headers
  the parser tracks behind a waiting frame) may hold a packet back until the
  waiting frame resolves: it is followed by a frame's worth of zeros, and
  then every intact packet must have been delivered;
* the counters agree with what was reported (packets, errors, bytes, queue);
  error offsets only move forward and the consecutive-error count is one more
  than the last, or 1 after a packet; an input of valid packets only reports
  no error and leaves nothing buffered.

Handshake inputs go through ``parse_handshake`` and the connection object that
decides every handshake, :class:`~bcnp.connection.Connection`, driven directly
as the servers and the host client drive it: as a stream (the input cut into
segments, then the end of the stream) and as a datagram (the input, then a
packet, then the handshake again). A handshake must be accepted exactly when
it is ``b"BCNP"`` + our hash (as a datagram: and nothing else); a refusal says
why (wrong magic, hash mismatch, too short) and names both hashes; after an
accepted stream handshake exactly the rest of the input reaches the parser
(once the owner accepts the connection), and no byte of a refused or unpaired peer
ever does.

With ``--atheris`` the same checks run under coverage-guided fuzzing of
bcnp's own code (needs ``pip install atheris``; ``--inputs`` runs, ``--seed``
libFuzzer's seed); arguments after ``--`` go to libFuzzer. A broken invariant
there stops the run and libFuzzer saves the input as ``crash-*``.

Exit status 1 when an exception escaped or an invariant broke (libFuzzer's own
non-zero status under ``--atheris``); the first failures are printed with the
seed and input index that reproduce them.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import logging
import random
import struct
import sys
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bcnp import (
    CLEAR_QUEUE,
    Dispatcher,
    ErrorInfo,
    HandshakeError,
    MessageQueue,
    MessageQueueConfig,
    PacketError,
    PacketView,
    decode_packet,
    encode_handshake,
    encode_packet,
    parse_handshake,
)
from bcnp.connection import (
    Connection,
    ConnectionState,
    HandshakeAccepted,
    HandshakeFailure,
    HandshakeRejected,
    is_handshake_datagram,
)
from bcnp.parser import MAX_CANDIDATES, StreamParser
from bcnp.wire import CRC_SIZE, HANDSHAKE_MAGIC, HANDSHAKE_SIZE, HEADER_SIZE, MIN_PACKET_SIZE
from messages import SCHEMA

DEFAULT_INPUTS = 1_000_000
MAX_FAILURES_SHOWN = 10

HANDSHAKE = encode_handshake(SCHEMA.hash)
TYPE_IDS = [m.id for m in SCHEMA.messages]
DRIVE = SCHEMA["DriveCmd"]
VERSION_PAIR = b"\x03\x02"
DELAYED = "intact packets delivered after a flush (too many candidates)"
REFUSED = "intact packets above the tight limits"
OVERLAPPED = "intact packets cut by an earlier valid frame"
WIRE_SIZES = {m.id: m.wire_size for m in SCHEMA.messages}
STREAM_CODES = frozenset(
    {
        PacketError.UNSUPPORTED_VERSION,
        PacketError.UNKNOWN_MESSAGE_TYPE,
        PacketError.TOO_MANY_MESSAGES,
        PacketError.CHECKSUM_MISMATCH,
        PacketError.TRUNCATED,
    }
)

_header = struct.Struct(">BBBHH")
_u32 = struct.Struct(">I")


# -- inputs ---------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One fuzz input: bytes, where to cut them into pushes, and what they must yield."""

    kind: str
    data: bytes
    cuts: list[int] = field(default_factory=list)
    #: (end offset, bytes) of every valid packet placed intact, or None when unknown
    intact: list[tuple[int, bytes]] | None = None
    #: only valid packets: no error may be reported
    clean: bool = False


def chunks_of(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(c for c in set(cuts) if 0 < c < len(data)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if a < b]


def with_crc(body: bytes) -> bytes:
    return body + _u32.pack(zlib.crc32(body))


def _raw_value(rng: random.Random, lo: int, hi: int) -> int:
    pick = rng.random()
    if pick < 0.1:
        return lo
    if pick < 0.2:
        return hi
    if pick < 0.3:
        return 0
    return rng.randint(lo, hi)


def build_pool(rng: random.Random) -> list[bytes]:
    """Valid packets of every type: 0..8 messages (a few of 100..300), any flags, extreme values."""
    pool = []
    for spec in SCHEMA.messages:
        for n in range(160):
            count = rng.randint(100, 300) if n < 4 else rng.choice((0, 0, 1, 1, 1, 2, 3, 4, 6, 8))
            msgs = [
                spec.message_from_raw(
                    tuple(_raw_value(rng, f.field_type.raw_min, f.field_type.raw_max) for f in spec.fields)
                )
                for _ in range(count)
            ]
            pool.append(encode_packet(spec, msgs, rng.choice((0, 0, CLEAR_QUEUE, rng.randrange(256)))))
    return pool


class Generator:
    """Seeded inputs: input ``i`` of seed ``s`` depends on nothing else (``Random(f"{s}:{i}")``)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.pool = build_pool(random.Random(f"{seed}:pool"))
        self.small = [p for p in self.pool if len(p) <= 200]

    def case(self, index: int) -> Case:
        rng = random.Random(f"{self.seed}:{index}")
        pick = rng.random()
        if pick < 0.20:
            case = self.handshake(rng)
        elif pick < 0.30:
            size = rng.choice((rng.randint(0, 16), rng.randint(0, 256), rng.randint(0, 2048)))
            case = Case("noise", rng.randbytes(size))
        elif pick < 0.45:
            case = Case("mutant", self.mutant(rng, rng.choice(self.pool), rng.randint(1, 3)))
        elif pick < 0.55:
            case = self.valid(rng)
        else:
            case = self.mix(rng)
        case.cuts = self.cuts(rng, len(case.data))
        return case

    # -- building blocks --

    def packet(self, rng: random.Random) -> bytes:
        """A valid packet: from the pool, or forged (any type, count, flags, payload; valid CRC)."""
        if rng.random() < 0.75:
            return rng.choice(self.small if rng.random() < 0.97 else self.pool)
        spec = SCHEMA[rng.choice(TYPE_IDS)]
        count = rng.choice((0, 1, 2, 5))
        header = _header.pack(3, 2, rng.randrange(256), spec.id, count)
        return with_crc(header + rng.randbytes(count * spec.wire_size))

    def fake_header(self, rng: random.Random) -> bytes:
        type_id = rng.choice((*TYPE_IDS, *TYPE_IDS, rng.randrange(0x10000)))
        count = rng.choice((0xFFFF, 0xFFFF, rng.randrange(0x10000), rng.randint(0, 10)))
        return _header.pack(3, 2, rng.randrange(256), type_id, count)

    def garbage(self, rng: random.Random) -> bytes:
        """Bytes meant to hold no valid packet (a chance collision would only add a packet)."""
        pick = rng.random()
        if pick < 0.25:
            return rng.randbytes(rng.randint(1, 64))
        if pick < 0.45:
            return self.fake_header(rng)
        if pick < 0.55:
            return self.fake_header(rng)[: rng.randint(1, 6)]
        if pick < 0.62:
            return rng.choice((b"\x03", b"\x02", b"\x03\x02", b"\x03\x03\x02", b"\x02\x03"))
        if pick < 0.99:
            return self.mutant(rng, self.packet(rng), rng.randint(1, 2), forge=False)
        # a flood of headers claiming 65,535 messages: more candidates than the parser tracks
        return b"".join(
            _header.pack(3, 2, 0, rng.choice(TYPE_IDS), 0xFFFF) for _ in range(rng.randint(1, 80))
        )

    def mutant(self, rng: random.Random, packet: bytes, rounds: int, forge: bool = True) -> bytes:
        data = bytearray(packet)
        for _ in range(rounds):
            if not data:
                data = bytearray(self.packet(rng))
            op = rng.randrange(11 if forge else 10)
            if op == 0:  # bit flips
                for _ in range(rng.randint(1, 3)):
                    bit = rng.randrange(len(data) * 8)
                    data[bit >> 3] ^= 1 << (bit & 7)
            elif op == 1:  # truncation
                del data[rng.randrange(len(data)) :]
            elif op == 2:  # splice with another packet
                other = self.packet(rng)
                data = data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other)) :]
            elif op == 3 and len(data) >= HEADER_SIZE:  # count field
                near = (int.from_bytes(data[5:7], "big") + rng.choice((-1, 1))) & 0xFFFF
                data[5:7] = rng.choice((0, 0xFFFF, rng.randrange(0x10000), near)).to_bytes(2, "big")
            elif op == 4 and len(data) >= HEADER_SIZE:  # type field
                data[3:5] = rng.choice((*TYPE_IDS, rng.randrange(0x10000))).to_bytes(2, "big")
            elif op == 5 and len(data) >= 2:  # version
                data[rng.randrange(2)] = rng.randrange(256)
            elif op == 6:  # insert random bytes
                at = rng.randrange(len(data) + 1)
                data[at:at] = rng.randbytes(rng.randint(1, 8))
            elif op == 7:  # delete a range
                at = rng.randrange(len(data))
                del data[at : at + rng.randint(1, 8)]
            elif op == 8 and len(data) >= 4:  # CRC trailer
                data[-4:] = rng.randbytes(4)
            elif op == 9:  # duplicate a slice
                a = rng.randrange(len(data))
                data[a:a] = data[a : a + rng.randint(1, 16)]
            elif len(data) >= HEADER_SIZE:  # forge: tamper with count, then make the CRC right again
                type_id, count = _header.unpack_from(data)[3:]
                spec = SCHEMA.get(type_id)
                if spec is not None:
                    count = rng.randint(0, 8)
                    body = bytes(data[:5]) + count.to_bytes(2, "big")
                    payload = bytes(data[HEADER_SIZE:])[: count * spec.wire_size]
                    payload += rng.randbytes(count * spec.wire_size - len(payload))
                    data = bytearray(with_crc(body + payload))
        return bytes(data)

    def valid(self, rng: random.Random) -> Case:
        intact, pos, parts = [], 0, []
        for _ in range(rng.randint(1, 8)):
            p = self.packet(rng)
            parts.append(p)
            pos += len(p)
            intact.append((pos, p))
        return Case("valid", b"".join(parts), intact=intact, clean=True)

    def mix(self, rng: random.Random) -> Case:
        intact, pos, parts = [], 0, []
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.45:
                piece = self.packet(rng)
                intact.append((pos + len(piece), piece))
            else:
                piece = self.garbage(rng)
            parts.append(piece)
            pos += len(piece)
        return Case("mix", b"".join(parts), intact=intact)

    def handshake(self, rng: random.Random) -> Case:
        pick = rng.random()
        data = bytearray(HANDSHAKE)
        if pick < 0.30:
            pass
        elif pick < 0.50:
            for _ in range(rng.randint(1, 2)):
                bit = rng.randrange(64)
                data[bit >> 3] ^= 1 << (bit & 7)
        elif pick < 0.60:
            data[4:] = rng.randbytes(4)
        elif pick < 0.68:
            data = bytearray(rng.randbytes(8))
        elif pick < 0.78:
            del data[rng.randrange(8) :]
        elif pick < 0.86:
            data[:4] = rng.choice((b"bcnp", b"BCNp", b"PNCB", b"BCN\x00", b"\x03\x02\x00\x00"))
        else:
            data = bytearray(rng.randbytes(rng.randint(0, 16)))
        if len(data) >= HANDSHAKE_SIZE and rng.random() < 0.4:
            data += b"".join(self.packet(rng) for _ in range(rng.randint(1, 3)))
            if rng.random() < 0.3:
                data += self.garbage(rng)
        return Case("handshake", bytes(data))

    @staticmethod
    def cuts(rng: random.Random, size: int) -> list[int]:
        pick = rng.random()
        if size < 2 or pick < 0.45:
            return []
        if pick < 0.80:
            return [rng.randrange(1, size) for _ in range(rng.randint(1, 6))]
        step = 1 if pick < 0.88 and size <= 256 else rng.randint(1, 16)
        return list(range(step, size, step))


# -- what the parser must deliver --------------------------------------------------------------------------


def valid_frame_end(data: bytes, pos: int, max_buffer: int, max_messages: int) -> int:
    """End of the CRC-valid frame within the limits that starts at ``pos``, or -1."""
    if len(data) - pos < HEADER_SIZE:
        return -1
    major, minor, _, type_id, count = _header.unpack_from(data, pos)
    wire_size = WIRE_SIZES.get(type_id)
    if (major, minor) != (3, 2) or wire_size is None or count > max_messages:
        return -1
    frame = MIN_PACKET_SIZE + count * wire_size
    end = pos + frame
    if frame > max_buffer or end > len(data):
        return -1
    return end if zlib.crc32(data[pos : end - CRC_SIZE]) == _u32.unpack_from(data, end - CRC_SIZE)[0] else -1


def expected_deliveries(
    data: bytes, fits: list[tuple[int, bytes]], max_buffer: int, max_messages: int
) -> tuple[list[tuple[int, bytes]], set[int]]:
    """The (end, bytes) a receiver must deliver for the intact packets ``fits``, and the ends of
    those that are not intact packets but frames overlapping them.

    A receiver cannot tell a CRC-valid frame that no one sent from one that was sent, so the
    first valid frame wins, left to right, and parsing resumes at its end: a packet cut short
    whose missing bytes happen to equal the next packet's first bytes is delivered, and the
    packet it runs into is lost. Only the bytes before each intact packet are walked; an intact
    packet reached at its start is known valid.
    """
    expected: list[tuple[int, bytes]] = []
    covering: set[int] = set()
    pos = frame_start = 0
    for end, packet in fits:
        start = end - len(packet)
        while pos < start:
            # An intact packet starts with 03, so no pair straddles its first byte.
            c = data.find(VERSION_PAIR, pos, start)
            if c < 0:
                pos = start
                break
            frame_end = valid_frame_end(data, c, max_buffer, max_messages)
            if frame_end < 0:
                pos = c + 1
            else:
                frame_start, pos = c, frame_end
        if pos == start:
            expected.append((end, packet))
            pos = end
        elif pos not in covering:
            covering.add(pos)
            expected.append((pos, data[frame_start:pos]))
    return expected, covering


class Lane:
    """One receive path: a Dispatcher whose handlers record what they get; DriveCmds go on to a queue."""

    def __init__(self, **limits: int) -> None:
        self.events: list[tuple[PacketView, float] | ErrorInfo] = []
        self.queue = MessageQueue(MessageQueueConfig())
        self.dispatcher = Dispatcher(SCHEMA, on_error=self.events.append, **limits)
        self.dispatcher.register(DRIVE, self._drive)
        for type_id in TYPE_IDS:
            if type_id != DRIVE.id:
                self.dispatcher.register(type_id, self._record)

    def _drive(self, view: PacketView, now: float) -> None:
        self.events.append((view, now))
        self.queue.handle_packet(view, now)

    def _record(self, view: PacketView, now: float) -> None:
        self.events.append((view, now))


# -- the harness -----------------------------------------------------------------------------------------


class Harness:
    """Runs cases through the receive path and the gates; counts outcomes and broken invariants."""

    PEER = ("198.51.100.7", 50_000)
    OTHER = ("198.51.100.8", 50_001)

    def __init__(self) -> None:
        # The robot's configuration, and tight limits (the reference's 4 KB buffer) on every 2nd input.
        self.lanes = (Lane(), Lane(max_buffer=4096, max_messages=200))
        self.verified: set[bytes] = set()
        self.stats: Counter[str] = Counter()
        self.codes: Counter[PacketError] = Counter()
        self.failures: list[str] = []
        self.failed = 0
        self.escaped = 0
        self._label = ""

    # -- bookkeeping --

    def fail(self, what: str) -> None:
        self.failed += 1
        if len(self.failures) < MAX_FAILURES_SHOWN:
            self.failures.append(f"{self._label}: {what}")

    def check(self, ok: object, what: str | Callable[[], str]) -> None:
        if not ok:
            self.fail(what() if callable(what) else what)

    def run(self, label: str, case: Case, index: int) -> None:
        """Run case number ``index`` (its time in seconds, and its lane: the robot's limits when even,
        tight ones when odd); ``label`` names it in failure reports."""
        self._label = label
        self.stats[f"inputs: {case.kind}"] += 1
        self.stats["bytes"] += len(case.data)
        now = float(index)
        try:
            if case.kind == "handshake":
                self.handshake(case, now)
            else:
                self.stream(case, self.lanes[index & 1], now)
        except Exception:
            self.escaped += 1
            if len(self.failures) < MAX_FAILURES_SHOWN:
                self.failures.append(f"{label}: exception escaped:\n{traceback.format_exc()}")

    # -- stream: parser, dispatcher, queue --

    def stream(self, case: Case, lane: Lane, base: float) -> None:
        d, p, q, events = lane.dispatcher, lane.dispatcher.parser, lane.queue, lane.events
        data = case.data
        d.reset()
        events.clear()
        dropped = p.bytes_dropped
        before = (p.packets, p.errors, p.bytes_received, d.packets_received, d.unhandled_packets)
        handler_errors, received = d.handler_errors, q.metrics.received
        pieces = chunks_of(data, case.cuts)
        ends = []
        total = 0
        for k, piece in enumerate(pieces):
            d.push(piece, base + k * 0.001)
            total += len(piece)
            ends.append(total)
        views = [e for e in events if not isinstance(e, ErrorInfo)]
        errors = [e for e in events if isinstance(e, ErrorInfo)]
        self.stats["packets delivered"] += len(views)
        self.stats["parse errors"] += len(errors)
        self.codes.update(e.code for e in errors)

        self.check(d.handler_errors == handler_errors, lambda: f"a handler raised: {d.last_handler_error!r}")
        self.check(p.packets - before[0] == len(views), "parser.packets disagrees with deliveries")
        self.check(p.errors - before[1] == len(errors), "parser.errors disagrees with reported errors")
        self.check(p.bytes_received - before[2] == len(data), "bytes_received disagrees with input")
        self.check(d.packets_received - before[3] == len(views), "packets_received disagrees with deliveries")
        self.check(d.unhandled_packets == before[4], "a packet of a handled type counted unhandled")
        self.check(sum(p.error_counts.values()) == p.errors, "error_counts do not add up to errors")
        self.check(p.buffered <= p.max_buffer, lambda: f"buffered {p.buffered} > max_buffer {p.max_buffer}")
        delivered_bytes = sum(MIN_PACKET_SIZE + v.count * v.spec.wire_size for v, _ in views)
        self.check(
            delivered_bytes + p.bytes_dropped - dropped + p.buffered == len(data),
            "bytes delivered + dropped + buffered disagree with the input",
        )

        # errors: known codes, offsets forward, consecutive counts
        streak, last_offset = 0, -1
        for event in events:
            if not isinstance(event, ErrorInfo):
                streak = 0
                continue
            streak += 1
            self.check(event.code in STREAM_CODES, lambda e=event: f"unexpected error code {e}")
            self.check(
                last_offset < event.offset < len(data), lambda e=event: f"error offset out of order: {e}"
            )
            self.check(event.consecutive_errors == streak, lambda e=event: f"consecutive count wrong: {e}")
            last_offset = event.offset

        # packets: valid, re-encodable, present in the input in order
        pos = 0
        drive_messages = 0
        for view, _ in views:
            raw = self.check_packet(view)
            if view.type_id == DRIVE.id:
                drive_messages += view.count
            found = data.find(raw, pos)
            self.check(
                found >= 0, lambda r=raw, at=pos: f"delivered {r.hex()} is not in the input after {at}"
            )
            pos = found + len(raw) if found >= 0 else pos

        # intact packets within this lane's limits: all delivered, and on time when nothing else came out
        refused = 0
        flush: list[tuple[int, bytes]] = []
        if case.intact is not None:
            fits = [
                (end, packet)
                for end, packet in case.intact
                if len(packet) <= p.max_buffer and _header.unpack_from(packet)[4] <= p.max_messages
            ]
            refused = len(case.intact) - len(fits)
            self.stats["intact packets placed"] += len(case.intact)
            self.stats[REFUSED] += refused
            expected, covering = expected_deliveries(data, fits, p.max_buffer, p.max_messages)
            self.stats[OVERLAPPED] += len(fits) - (len(expected) - len(covering))
            if data.count(VERSION_PAIR) >= MAX_CANDIDATES:
                flush = expected  # checked below, once any waiting frame has been resolved
            else:
                self.check_intact(expected, covering, views, ends, base)
        if case.clean and not refused:
            self.check(not errors, lambda: f"valid packets reported errors: {errors[:3]}")
            self.check(p.buffered == 0, "valid packets left bytes buffered")

        # queue: every DriveCmd offered, bounded, and it runs
        self.check(q.metrics.received - received == drive_messages, "queue received count disagrees")
        self.check(q.size() <= q.config.capacity, "queue above capacity")
        active = q.update(base + len(pieces) * 0.001)
        self.check(active is None or active.spec is DRIVE, "queue made a non-DriveCmd active")
        self.stats["queue messages received"] += drive_messages

        if flush:
            # With MAX_CANDIDATES candidates tracked behind a waiting frame, the search stops
            # at the next one, so a packet behind it may wait until that frame resolves: a
            # frame's worth of zeros (which hold no packet) resolves it; then all must be out.
            d.push(bytes(p.max_buffer), base + len(pieces) * 0.001)
            views = [e for e in events if not isinstance(e, ErrorInfo)]
            self.check_intact(flush, covering, views, ends, base, timed=False)
            self.stats[DELAYED] += len(flush) - len(covering)

    def check_packet(self, view: PacketView) -> bytes:
        spec = SCHEMA.get(view.type_id)
        raw = view.to_bytes()
        if spec is None or spec is not view.spec:
            self.fail(f"packet with unknown message id {view.type_id} delivered: {raw.hex()}")
            return raw
        self.check(
            len(raw) == MIN_PACKET_SIZE + view.count * spec.wire_size
            and _header.unpack_from(raw) == (3, 2, view.flags, view.type_id, view.count),
            lambda: f"view header disagrees with its bytes: {raw.hex()}",
        )
        if raw in self.verified:
            return raw
        try:
            decoded = decode_packet(SCHEMA, raw)
            self.check(decoded.header == view.header, lambda: f"decode_packet header differs: {raw.hex()}")
            again = encode_packet(spec, list(view), view.flags)
            self.check(again == raw, lambda: f"delivered packet re-encodes differently: {raw.hex()}")
        except Exception as exc:
            self.fail(f"delivered packet does not decode/re-encode ({exc!r}): {raw.hex()}")
            return raw
        if len(self.verified) > 200_000:
            self.verified.clear()
        self.verified.add(raw)
        return raw

    def check_intact(
        self,
        expected: list[tuple[int, bytes]],
        covering: set[int],
        views: list[tuple[PacketView, float]],
        ends: list[int],
        base: float,
        timed: bool = True,
    ) -> None:
        """``expected`` from :func:`expected_deliveries`; ``covering`` the ends of its frames that
        overlap an intact packet."""

        def what(end: int) -> str:
            return "valid frame over an intact packet" if end in covering else "intact packet"

        got = [(v.to_bytes(), now) for v, now in views]
        i = 0
        for end, packet in expected:
            while i < len(got) and got[i][0] != packet:
                i += 1
            if i == len(got):
                self.fail(f"{what(end)} ending at offset {end} was not delivered: {packet.hex()}")
                return
            i += 1
        if timed:
            self.stats["intact packets delivered"] += len(expected) - len(covering)
        if timed and len(got) == len(expected):
            for (end, _), (_, now) in zip(expected, got, strict=True):
                k = next(j for j, e in enumerate(ends) if e >= end)
                self.check(
                    now == base + k * 0.001,
                    lambda e=end, k=k: f"{what(e)} ending at {e} held back past push {k}",
                )

    # -- handshakes --

    def handshake(self, case: Case, now: float) -> None:
        data = case.data
        first = data[:HANDSHAKE_SIZE]
        good = len(data) >= HANDSHAKE_SIZE and first == HANDSHAKE
        magic_ok = len(data) >= HANDSHAKE_SIZE and first[:4] == HANDSHAKE_MAGIC
        hash_field = int.from_bytes(first[4:], "big") if len(first) == HANDSHAKE_SIZE else None
        try:
            value = parse_handshake(data)
        except HandshakeError:
            value = None
        want = hash_field if len(data) == HANDSHAKE_SIZE and magic_ok else None
        self.check(value == want, lambda: f"parse_handshake({data.hex()}) gave {value!r}, want {want!r}")
        self.stream_gate(case, now, good, magic_ok, hash_field)
        self.datagram_gate(data, now, magic_ok, hash_field)

    def check_refusal(self, outcome: HandshakeRejected, magic_ok: bool, hash_field: int | None) -> None:
        """A refusal of 8 bytes or more says why and names both hashes."""
        failure = HandshakeFailure.HASH_MISMATCH if magic_ok else HandshakeFailure.WRONG_MAGIC
        self.check(outcome.failure is failure, lambda: f"refused as {outcome.failure}, want {failure}")
        self.check(outcome.remote_hash == (hash_field if magic_ok else None), "refusal: remote hash wrong")
        self.check(f"0x{SCHEMA.hash:08X}" in outcome.reason, "refusal does not name our hash")
        self.check(f"0x{hash_field:08X}" in outcome.reason, "refusal does not name the peer's hash")

    def stream_gate(self, case: Case, now: float, good: bool, magic_ok: bool, hash_field: int | None) -> None:
        """The connection as a TCP server or client drives it: segments, then the end of the stream."""
        data = case.data
        got: list[bytes] = []
        conn = Connection(SCHEMA, opened_at=now, on_packet=lambda view, t: got.append(view.to_bytes()))
        self.check(conn.handshake == HANDSHAKE, "the connection's own handshake is not b'BCNP' + our hash")
        outcome: HandshakeAccepted | HandshakeRejected | None = None
        for segment in chunks_of(data, case.cuts):
            result = conn.receive_data(segment, now)
            if result is not None:
                self.check(outcome is None, "the handshake was decided twice")
                outcome = result
                if isinstance(result, HandshakeAccepted):
                    self.check(
                        not got and conn.state is ConnectionState.VERIFIED, "bytes delivered before accept"
                    )
                    conn.accept(now)
        if outcome is None:
            self.check(len(data) < HANDSHAKE_SIZE, "8 bytes or more left the handshake undecided")
            outcome = conn.connection_lost()
            self.check(
                isinstance(outcome, HandshakeRejected) and outcome.failure is HandshakeFailure.TOO_SHORT,
                "a stream that ended before 8 bytes was not refused as too short",
            )
            self.stats["handshakes incomplete (tcp)"] += 1
        accepted = isinstance(outcome, HandshakeAccepted)
        self.check(
            accepted == good, lambda: f"stream gate {'accepted' if accepted else 'refused'} {data[:8].hex()}"
        )
        if accepted:
            self.stats["handshakes accepted (tcp)"] += 1
            self.check(conn.remote_hash == SCHEMA.hash, "stream: remote hash not kept")
            rest = data[HANDSHAKE_SIZE:]
            self.check(conn.parser.bytes_received == len(rest), "stream: bytes after the handshake altered")
            ref: list[bytes] = []
            StreamParser(SCHEMA, lambda view: ref.append(view.to_bytes())).push(rest)
            self.check(got == ref, "stream: packets behind the handshake differ from the rest parsed alone")
        else:
            self.check(not got and conn.parser.bytes_received == 0, "stream: bytes of a refused peer parsed")
            self.check(conn.state is ConnectionState.CLOSED, "stream: a refused connection is not closed")
            if len(data) >= HANDSHAKE_SIZE:
                assert isinstance(outcome, HandshakeRejected)
                self.stats["handshakes rejected (tcp)"] += 1
                self.check_refusal(outcome, magic_ok, hash_field)

    def datagram_gate(self, data: bytes, now: float, magic_ok: bool, hash_field: int | None) -> None:
        """As the UDP server drives the connection: the input as a datagram, a packet, the handshake again."""
        exact = len(data) == HANDSHAKE_SIZE and magic_ok
        good = exact and hash_field == SCHEMA.hash
        self.check(is_handshake_datagram(data) == exact, "is_handshake_datagram decided wrongly")
        got: list[bytes] = []
        conn = Connection(
            SCHEMA, opened_at=now, on_packet=lambda view, t: got.append(view.to_bytes()), datagrams=True
        )
        follow = encode_packet(DRIVE, [DRIVE(0.5, 0.0, 20)])
        outcome = conn.receive_datagram(data, now)
        self.check(
            (outcome is not None) == exact, "datagram: a handshake went unanswered, or a non-handshake was"
        )
        paired = isinstance(outcome, HandshakeAccepted)
        self.check(paired == good, lambda: f"datagram gate {'paired' if paired else 'refused'} {data.hex()}")
        if paired:
            self.stats["handshakes accepted (udp)"] += 1
            conn.accept(now)
            conn.receive_datagram(follow, now)
            again = conn.receive_datagram(data, now)
            self.check(
                isinstance(again, HandshakeAccepted), "datagram: a repeated handshake was not answered"
            )
            self.check(
                got == [follow], "datagram: the paired peer's packet did not arrive, or a handshake did"
            )
        else:
            self.stats["handshakes rejected (udp)"] += 1
            conn.receive_datagram(follow, now)
            self.check(
                not got and conn.parser.bytes_received == 0, "datagram: an unpaired peer's bytes parsed"
            )
            if exact:
                assert isinstance(outcome, HandshakeRejected)
                self.check_refusal(outcome, magic_ok, hash_field)

    # -- self-check of the harness itself --

    def selftest(self) -> None:
        """The gates and the checks must see a good input as good and a bad one as bad."""
        packet = encode_packet(DRIVE, [DRIVE(1.0, 0.5, 40)], CLEAR_QUEUE)
        # A packet whose last CRC byte is 03, cut by that byte: the next packet's first byte
        # completes it, and it is the one to deliver.
        cut = next(c for ms in range(65_536) if (c := encode_packet(DRIVE, [DRIVE(0.0, 0.0, ms)]))[-1] == 3)
        overlap = cut[:-1] + packet
        cases = [
            Case("handshake", HANDSHAKE + packet, cuts=[3, 9]),
            Case("handshake", b"BCNP" + bytes(4) + packet),
            Case("handshake", HANDSHAKE[:5]),
            Case(
                "valid",
                packet + packet,
                intact=[(len(packet), packet), (2 * len(packet), packet)],
                clean=True,
            ),
            Case("mix", overlap, cuts=list(range(1, len(overlap))), intact=[(len(overlap), packet)]),
        ]
        for n, case in enumerate(cases):
            self.run(f"selftest {n}", case, n)
        ok = (
            not self.failed
            and not self.escaped
            and self.stats["handshakes accepted (tcp)"] == 1
            and self.stats["handshakes rejected (tcp)"] == 1
            and self.stats["handshakes incomplete (tcp)"] == 1
            and self.stats["intact packets delivered"] == 2
            and self.stats[OVERLAPPED] == 1
        )
        if not ok:
            raise SystemExit("fuzz harness self-test failed:\n" + "\n".join(self.failures))
        self.stats.clear()
        self.codes.clear()


# -- drivers -------------------------------------------------------------------------------------------------


def run_generated(harness: Harness, seed: int, inputs: int) -> None:
    gen = Generator(seed)
    run = harness.run
    for i in range(inputs):
        run(f"seed {seed} input {i}", gen.case(i), i)


def replay(seed: int, index: int) -> int:
    harness = Harness()
    harness.selftest()
    case = Generator(seed).case(index)
    print(f"seed {seed} input {index}: {case.kind}, {len(case.data)} bytes, cuts {sorted(set(case.cuts))}")
    print(f"  data {case.data.hex(' ')}")
    if case.intact is not None:
        print(f"  intact packets end at {[end for end, _ in case.intact]}")
    harness.run(f"seed {seed} input {index}", case, index)
    print(f"  outcome {dict(harness.stats)}")
    for failure in harness.failures:
        print(f"  FAIL {failure}")
    return 1 if harness.failed or harness.escaped else 0


def instrument_core(atheris: Any) -> int:
    """Coverage feedback from bcnp's own functions only; returns how many were instrumented."""
    done = 0
    for name, module in list(sys.modules.items()):
        if name != "bcnp" and not name.startswith("bcnp."):
            continue
        for obj in list(vars(module).values()):
            members = vars(obj).values() if inspect.isclass(obj) else (obj,)
            for member in members:
                func = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                if inspect.isfunction(func) and func.__module__ == name:
                    atheris.instrument_func(func)
                    done += 1
    return done


def run_atheris(harness: Harness, seed: int, inputs: int, extra: list[str]) -> None:
    import atheris

    instrument_core(atheris)
    gen = Generator(seed)
    pool = gen.small
    count = [0]

    def one_input(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        mode = fdp.ConsumeIntInRange(0, 3)
        cuts = [fdp.ConsumeIntInRange(1, 512) for _ in range(fdp.ConsumeIntInRange(0, 6))]
        if mode == 0:  # the fuzzer's bytes as they are
            case = Case("noise", fdp.ConsumeBytes(fdp.remaining_bytes()), cuts)
        elif mode == 1:  # the fuzzer's bytes as garbage between intact packets
            parts, intact, pos = [], [], 0
            for _ in range(fdp.ConsumeIntInRange(1, 4)):
                garbage = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64))
                packet = pool[fdp.ConsumeIntInRange(0, len(pool) - 1)]
                pos += len(garbage) + len(packet)
                parts += [garbage, packet]
                intact.append((pos, packet))
            case = Case("mix", b"".join(parts), cuts, intact=intact)
        elif mode == 2:  # a valid packet XORed with the fuzzer's bytes
            packet = bytearray(pool[fdp.ConsumeIntInRange(0, len(pool) - 1)])
            mask = fdp.ConsumeBytes(len(packet))
            for k, m in enumerate(mask):
                packet[k] ^= m
            case = Case("mutant", bytes(packet), cuts)
        else:
            case = Case("handshake", fdp.ConsumeBytes(fdp.remaining_bytes()), cuts)
        before = harness.failed + harness.escaped
        harness.run(f"atheris input {count[0]}", case, count[0])
        count[0] += 1
        if harness.failed + harness.escaped != before:
            raise AssertionError("\n".join(harness.failures[-1:]) or "invariant broken")

    atheris.Setup([sys.argv[0], f"-atheris_runs={inputs}", f"-seed={seed}", *extra], one_input)
    atheris.Fuzz()


def report(harness: Harness, mode: str, seed: int, elapsed: float) -> None:
    stats = harness.stats
    kinds = {k.removeprefix("inputs: "): v for k, v in sorted(stats.items()) if k.startswith("inputs: ")}
    runs = sum(kinds.values())
    rows: list[tuple[str, str]] = [
        ("inputs run", f"{runs:,}"),
        ("bytes", f"{stats['bytes']:,}"),
        ("elapsed", f"{elapsed:.1f} s"),
        ("inputs/s", f"{runs / elapsed if elapsed else 0.0:,.0f}"),
        *((f"  {kind} inputs", f"{n:,}") for kind, n in kinds.items()),
        ("packets delivered", f"{stats['packets delivered']:,}"),
        ("intact packets placed", f"{stats['intact packets placed']:,}"),
        ("  checked: all delivered", f"{stats['intact packets delivered']:,}"),
        ("  not expected: above the 4 KB lane's limits", f"{stats[REFUSED]:,}"),
        ("  cut by an earlier valid frame, checked instead", f"{stats[OVERLAPPED]:,}"),
        (f"  >= {MAX_CANDIDATES} '03 02' pairs: all delivered after a flush", f"{stats[DELAYED]:,}"),
        ("queue messages received", f"{stats['queue messages received']:,}"),
        ("parse errors", f"{stats['parse errors']:,}"),
        *((f"  {code.name}", f"{n:,}") for code, n in sorted(harness.codes.items())),
        *((key, f"{stats[key]:,}") for key in sorted(k for k in stats if k.startswith("handshakes"))),
        ("invariant failures", f"{harness.failed:,}"),
        ("escaped exceptions", f"{harness.escaped:,}"),
    ]
    print(f"BCNP fuzz ({mode}), seed {seed}, Python {sys.version.split()[0]}")
    for label, value in rows:
        print(f"  {label:<48}{value:>14}")
    for failure in harness.failures:
        print(f"  FAIL {failure}")
    print("FAILED" if harness.failed or harness.escaped else "OK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--inputs", type=int, default=DEFAULT_INPUTS, help="inputs to run (default 1,000,000)"
    )
    parser.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    parser.add_argument("--replay", type=int, metavar="I", help="run input I of --seed alone, verbosely")
    parser.add_argument("--atheris", action="store_true", help="coverage-guided fuzzing with atheris")
    parser.add_argument("libfuzzer", nargs="*", help="after --: arguments for libFuzzer (--atheris)")
    args = parser.parse_args(argv)
    if args.libfuzzer and not args.atheris:
        parser.error("libFuzzer arguments need --atheris")
    # The gates log every rejection; the fuzzer counts them instead.
    logging.getLogger("bcnp.transport").setLevel(logging.CRITICAL)
    if args.replay is not None:
        return replay(args.seed, args.replay)
    harness = Harness()
    harness.selftest()
    start = time.perf_counter()
    try:
        if args.atheris:
            run_atheris(harness, args.seed, max(1, args.inputs), args.libfuzzer)
        else:
            run_generated(harness, args.seed, max(1, args.inputs))
    finally:
        report(harness, "atheris" if args.atheris else "generator", args.seed, time.perf_counter() - start)
    return 1 if harness.failed or harness.escaped else 0


if __name__ == "__main__":
    raise SystemExit(main())
