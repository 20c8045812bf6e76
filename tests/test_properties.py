"""Properties of the receive path (parser, dispatcher) and of the queue's timing rules.

* any chunking of a valid stream gives exactly what one push gives, through the
  ``StreamParser`` and through the ``Dispatcher``, each packet delivered by the
  push that carries its last byte;
* arbitrary bytes never raise, only packets that really are in the stream come
  out, and every counter agrees with what was reported;
* garbage between packets (random bytes, fake and partial headers, damaged
  packets) never loses, duplicates or holds back an intact packet;
* ``MessageQueue`` against a small model of reference-behavior §4 (stateful).

Hypothesis draws the inputs; nothing here reads a clock or sleeps.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections import Counter
from typing import Any, NamedTuple

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from support import rule_start

import bcnp
from bcnp import MessageQueue, MessageQueueConfig, PacketError
from bcnp.parser import MAX_CANDIDATES
from bcnp.wire import MIN_PACKET_SIZE
from benchmarks.harness import ROOT

SCHEMA = bcnp.load_schema(ROOT / "schema" / "messages.json")
TEST_SCHEMA = bcnp.load_schema(ROOT / "tests" / "data" / "test_schema.json")
SCHEMAS = (SCHEMA, TEST_SCHEMA)
DRIVE = SCHEMA["DriveCmd"]

PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: How a chunk reaches ``push``: as bytes, or in a buffer the caller reuses afterwards.
KINDS = ("bytes", "bytearray", "memoryview")

#: The codes a stream parser reports (TOO_SMALL and SCHEMA_MISMATCH belong to decode_packet).
STREAM_CODES = {
    PacketError.UNSUPPORTED_VERSION,
    PacketError.UNKNOWN_MESSAGE_TYPE,
    PacketError.TOO_MANY_MESSAGES,
    PacketError.CHECKSUM_MISMATCH,
    PacketError.TRUNCATED,
}


# -- strategies ----------------------------------------------------------------------------------------


class Sent(NamedTuple):
    data: bytes
    spec: bcnp.MessageSpec
    flags: int
    messages: list[bcnp.Message]


# Each strategy below is made once per schema (functools.cache) and drawn from as often as needed:
# hypothesis validates every strategy object it is handed, and making them anew for each draw made
# the stream tests below up to three times slower (the same draws, the same examples).

FLAGS = st.sampled_from([0, bcnp.CLEAR_QUEUE]) | st.integers(0, 255)


@functools.cache
def raw_values(spec: bcnp.MessageSpec) -> tuple[st.SearchStrategy[int], ...]:
    """Each field's raw (wire) integers."""
    return tuple(st.integers(f.field_type.raw_min, f.field_type.raw_max) for f in spec.fields)


@functools.cache
@st.composite
def packets(draw: st.DrawFn, schema: bcnp.Schema, max_messages: int = 4) -> Sent:
    """One valid packet of any type of ``schema``: 0..max_messages messages, any flags byte."""
    spec = draw(st.sampled_from(schema.messages))
    count = draw(st.integers(0, max_messages))
    values = raw_values(spec)
    msgs = [spec.message_from_raw(tuple(draw(v) for v in values)) for _ in range(count)]
    flags = draw(FLAGS)
    return Sent(bcnp.encode_packet(spec, msgs, flags), spec, flags, msgs)


@functools.cache
def fake_headers(schema: bcnp.Schema) -> st.SearchStrategy[bytes]:
    """A 7-byte header with the right version: a known or unknown type, any count (often huge)."""
    ids = [m.id for m in schema.messages]
    return st.builds(
        lambda flags, type_id, count: (
            bytes((3, 2, flags)) + type_id.to_bytes(2, "big") + count.to_bytes(2, "big")
        ),
        st.integers(0, 255),
        st.sampled_from(ids) | st.integers(0, 0xFFFF),
        st.sampled_from([0, 1, 2, 0xFFFF]) | st.integers(0, 0xFFFF),
    )


@functools.cache
@st.composite
def damaged_packets(draw: st.DrawFn, schema: bcnp.Schema) -> bytes:
    """A valid packet made invalid: cut short, one bit flipped, wrong version or count tampered."""
    data = bytearray(draw(packets(schema)).data)
    how = draw(st.sampled_from(["truncate", "flip", "version", "count"]))
    if how == "truncate":
        return bytes(data[: draw(st.integers(1, len(data) - 1))])
    if how == "flip":
        bit = draw(st.integers(0, len(data) * 8 - 1))
        data[bit // 8] ^= 1 << (bit % 8)
    elif how == "version":
        i = draw(st.sampled_from([0, 1]))
        data[i] = (data[i] + draw(st.integers(1, 0xFF))) & 0xFF  # any other value
    else:
        count = int.from_bytes(data[5:7], "big") + draw(st.integers(1, 0xFFFF))
        data[5:7] = (count & 0xFFFF).to_bytes(2, "big")  # any other count
    return bytes(data)


@functools.cache
def partial_headers(schema: bcnp.Schema) -> st.SearchStrategy[bytes]:
    """The first 1..6 bytes of a header: what follows completes it (type and count read across both)."""
    return fake_headers(schema).flatmap(lambda h: st.sampled_from([6, 5, 4, 3, 2, 1]).map(lambda k: h[:k]))


@functools.cache
def garbage_pieces(schema: bcnp.Schema) -> st.SearchStrategy[bytes]:
    """Bytes that hold no complete valid packet, built to look like the start of one."""
    return st.one_of(
        st.binary(max_size=48),
        fake_headers(schema),
        partial_headers(schema),
        st.sampled_from([b"\x03", b"\x02", b"\x03\x02", b"\x03\x03\x02", b"\x02\x03"]),
        damaged_packets(schema),
    )


@functools.cache
@st.composite
def noise_pieces(draw: st.DrawFn, schema: bcnp.Schema) -> bytes:
    """Garbage or, half the time, a real packet."""
    if draw(st.booleans()):
        return draw(packets(schema)).data
    return draw(garbage_pieces(schema))


@st.composite
def chunkings(draw: st.DrawFn, stream: bytes, hints: tuple[int, ...] = ()) -> list[tuple[bytes, str]]:
    """``stream`` cut anywhere (up to 40 cuts, favouring the ``hints`` offsets) or into pieces of
    1..16 bytes (1: every byte its own push); the pieces take a short pattern of KINDS in turn."""
    if not stream:
        return []
    n = len(stream)
    if draw(st.booleans(), label="fixed size"):
        size = draw(st.integers(1, 16), label="size")
        bounds = [*range(0, n, size), n]
    else:
        anywhere = st.integers(1, max(1, n - 1))
        near = [h for h in hints if 0 < h < n]
        cuts = draw(
            st.sets(st.sampled_from(near) | anywhere if near else anywhere, max_size=40), label="cuts"
        )
        bounds = [0, *sorted(c for c in cuts if c < n), n]
    pieces = [stream[a:b] for a, b in itertools.pairwise(bounds) if a < b]
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=4), label="kinds")  # repeated
    return list(zip(pieces, itertools.cycle(kinds)))


def feed(push: Any, chunks: list[tuple[bytes, str]]) -> None:
    """``push(chunk, now)`` with ``now`` = the chunk's index; reused buffers are wiped after each push."""
    for i, (piece, kind) in enumerate(chunks):
        if kind == "bytes":
            push(piece, float(i))
            continue
        buf = bytearray(piece)
        push(buf if kind == "bytearray" else memoryview(buf), float(i))
        buf[:] = bytes(len(buf))  # the caller reuses its buffer: nothing delivered may change


def completing_chunk(chunks: list[tuple[bytes, str]], end: int) -> int:
    """Index of the chunk that carries stream byte ``end - 1``."""
    return bisect.bisect_left(list(itertools.accumulate(len(p) for p, _ in chunks)), end)


def describe(view: bcnp.PacketView) -> tuple[bytes, bcnp.PacketHeader, list[tuple[int, ...]]]:
    return view.to_bytes(), view.header, list(view.iter_raw())


def expected(sent: Sent) -> tuple[bytes, bcnp.PacketHeader, list[tuple[int, ...]]]:
    header = bcnp.PacketHeader(3, 2, sent.flags, sent.spec.id, len(sent.messages))
    return sent.data, header, [m.raw for m in sent.messages]


class Receiver:
    """A Dispatcher whose handlers record ``(view, now)``; some types raise, some have no handler."""

    def __init__(
        self,
        schema: bcnp.Schema,
        unhandled: frozenset[int] = frozenset(),
        raising: frozenset[int] = frozenset(),
        **kwargs: Any,
    ) -> None:
        self.calls: list[tuple[bcnp.PacketView, float]] = []
        self.errors: list[bcnp.ErrorInfo] = []
        self.dispatcher = bcnp.Dispatcher(schema, on_error=self.errors.append, **kwargs)
        for spec in schema.messages:
            if spec.id in raising:
                self.dispatcher.register(spec, self._raise)
            elif spec.id not in unhandled:
                self.dispatcher.register(spec, self._record)

    def _record(self, view: bcnp.PacketView, now: float) -> None:
        self.calls.append((view, now))

    def _raise(self, view: bcnp.PacketView, now: float) -> None:
        self.calls.append((view, now))
        raise RuntimeError("handler bug")


class Events:
    """A bare StreamParser whose packets and errors land in one ordered list."""

    def __init__(self, schema: bcnp.Schema, **kwargs: Any) -> None:
        self.events: list[bcnp.PacketView | bcnp.ErrorInfo] = []
        self.parser = bcnp.StreamParser(schema, self.events.append, self.events.append, **kwargs)

    @property
    def views(self) -> list[bcnp.PacketView]:
        return [e for e in self.events if isinstance(e, bcnp.PacketView)]

    @property
    def errors(self) -> list[bcnp.ErrorInfo]:
        return [e for e in self.events if isinstance(e, bcnp.ErrorInfo)]


# -- (a) any chunking of a valid stream ------------------------------------------------------------------


@PROPERTY
@given(data=st.data())
def test_any_chunking_through_parser_and_dispatcher_matches_one_push(data: st.DataObject) -> None:
    """Several packets of several types (zero-message ones, CLEAR_QUEUE and reserved flag bits
    included), cut anywhere and handed over as bytes or as reused buffers: the parser and the
    dispatcher deliver exactly what one push delivers, in order, with no error; each packet is
    delivered by the push that carries its last byte, with that push's ``now``; and what was
    delivered stays intact after the caller reuses its buffers."""
    schema = data.draw(st.sampled_from(SCHEMAS), label="schema")
    sent = data.draw(st.lists(packets(schema), min_size=1, max_size=10), label="packets")
    stream = b"".join(s.data for s in sent)
    chunks = data.draw(chunkings(stream))
    ids = [m.id for m in schema.messages]
    unhandled = frozenset(data.draw(st.sets(st.sampled_from(ids)), label="unhandled"))
    want = [expected(s) for s in sent]
    ends = list(itertools.accumulate(len(s.data) for s in sent))
    done_at = [float(completing_chunk(chunks, e)) for e in ends]

    whole, pieces = Events(schema), Events(schema)
    whole.parser.push(stream)
    feed(lambda chunk, now: pieces.parser.push(chunk), chunks)
    one, many = Receiver(schema, unhandled), Receiver(schema, unhandled)
    one.dispatcher.push(stream, 0.0)
    feed(many.dispatcher.push, chunks)

    for c in (whole, pieces):
        assert [describe(v) for v in c.views] == want
        assert [list(v) for v in c.views] == [s.messages for s in sent]
        assert c.errors == [] and c.parser.buffered == 0
        assert c.parser.packets == len(sent) and c.parser.bytes_received == len(stream)
        assert c.parser.bytes_dropped == 0
    handled = [i for i, s in enumerate(sent) if s.spec.id not in unhandled]
    for r, nows in ((one, [0.0] * len(sent)), (many, done_at)):
        d = r.dispatcher
        assert [describe(v) for v, _ in r.calls] == [want[i] for i in handled]
        assert [now for _, now in r.calls] == [nows[i] for i in handled]
        assert d.packets_received == len(sent) and d.unhandled_packets == len(sent) - len(handled)
        assert d.last_receive_time == nows[-1]
        assert d.parse_errors == 0 and d.handler_errors == 0 and r.errors == []


# -- (b) arbitrary bytes ------------------------------------------------------------------------------------


def assert_delivered_in_stream(delivered: list[bytes], stream: bytes) -> None:
    """The delivered packets lie in the stream in the order delivered, without overlapping."""
    pos = 0
    for packet in delivered:
        found = stream.find(packet, pos)
        assert found >= 0, f"delivered {packet.hex(' ')} is not in the stream after offset {pos}"
        pos = found + len(packet)


@PROPERTY
@given(data=st.data())
def test_noise_never_raises_and_only_real_packets_come_out(data: st.DataObject) -> None:
    """Random bytes, fake and partial headers, damaged and real packets, cut anywhere, with any
    buffer bound and message limit: nothing raises out of ``push`` (a raising handler included);
    every delivered packet is a valid packet of a known type that decodes and re-encodes to the same
    bytes and lies in the stream, in order; the counters agree with what was reported (packets,
    errors per code, bytes received, delivered, dropped and buffered, handler errors, unhandled
    packets); error offsets only move forward and
    each error's consecutive count is one more than the last, or 1 after a packet."""
    schema = data.draw(st.sampled_from(SCHEMAS), label="schema")
    pieces = data.draw(st.lists(noise_pieces(schema), max_size=12), label="pieces")
    stream = b"".join(pieces)
    chunks = data.draw(chunkings(stream))
    limits: dict[str, Any] = {
        "max_buffer": data.draw(st.sampled_from([None, MIN_PACKET_SIZE, 64, 200]), label="max_buffer"),
        "max_messages": data.draw(
            st.sampled_from([bcnp.MAX_MESSAGES_PER_PACKET, 3, 0]), label="max_messages"
        ),
    }
    roles = {
        m.id: data.draw(st.sampled_from(["record", "raise", "none"]), label=m.name) for m in schema.messages
    }
    unhandled = frozenset(i for i, role in roles.items() if role == "none")
    raising = frozenset(i for i, role in roles.items() if role == "raise")

    bare = Events(schema, **limits)
    feed(lambda chunk, now: bare.parser.push(chunk), chunks)
    r = Receiver(schema, unhandled, raising, **limits)
    feed(r.dispatcher.push, chunks)
    parser = bare.parser

    views = bare.views
    delivered = [v.to_bytes() for v in views]
    for view, raw in zip(views, delivered, strict=True):
        assert schema.get(view.type_id) is view.spec
        assert view.count <= parser.max_messages and len(raw) <= parser.max_buffer
        decoded = bcnp.decode_packet(schema, raw)
        assert decoded.header == view.header and list(decoded.iter_raw()) == list(view.iter_raw())
        assert bcnp.encode_packet(view.spec, list(view), view.flags) == raw
    assert_delivered_in_stream(delivered, stream)

    errors = bare.errors
    assert {e.code for e in errors} <= STREAM_CODES
    assert parser.errors == len(errors) == sum(parser.error_counts.values())
    assert parser.error_counts == Counter(e.code for e in errors)
    assert parser.packets == len(views) and parser.callback_errors == 0
    assert parser.bytes_received == len(stream) and parser.buffered <= parser.max_buffer
    # every byte is in a delivered packet, was dropped while resynchronising, or waits
    assert parser.bytes_received == sum(map(len, delivered)) + parser.bytes_dropped + parser.buffered
    offsets = [e.offset for e in errors]
    assert offsets == sorted(set(offsets)) and all(0 <= o < len(stream) for o in offsets)
    streak = 0
    for event in bare.events:
        streak = streak + 1 if isinstance(event, bcnp.ErrorInfo) else 0
        if isinstance(event, bcnp.ErrorInfo):
            assert event.consecutive_errors == streak
    assert parser.consecutive_errors == streak

    # The dispatcher saw the same stream: the same packets, the same errors, every packet accounted for.
    d = r.dispatcher
    assert [v.to_bytes() for v, _ in r.calls] == [
        b for b, v in zip(delivered, views, strict=True) if v.type_id not in unhandled
    ]
    assert r.errors == errors and d.parse_errors == len(errors)
    assert d.packets_received == len(views)
    assert d.unhandled_packets == sum(v.type_id in unhandled for v in views)
    assert d.handler_errors == sum(v.type_id in raising for v in views)
    assert (d.last_receive_time is None) == (not views)


# -- (c) garbage between packets ---------------------------------------------------------------------------


@PROPERTY
@given(data=st.data())
def test_garbage_between_packets_never_loses_or_holds_back_an_intact_packet(data: st.DataObject) -> None:
    """Valid packets with garbage before, between and after them (random bytes, fake headers claiming
    up to 65,535 messages, partial headers, often one running into the next packet's first bytes, lone
    version bytes, truncated, bit-flipped, re-versioned and re-counted packets), cut anywhere (often
    inside a packet's header): every intact packet is delivered exactly once, in order, with
    nothing else, by the push that carries its last byte (no garbage header can hold one back or
    swallow it). Interior garbage is always reported; a stream without garbage reports nothing.
    Also with the tightest limits the packets allow (``max_messages``, ``max_buffer``), so that
    headers above them are skipped one byte at a time too.

    The claim is made for streams with fewer than ``MAX_CANDIDATES`` header-like ``03 02`` pairs: the
    parser tracks at most that many incomplete candidates behind a waiting frame, and a packet split
    across pushes behind more of them is held back until the waiting frame resolves (delayed, never
    lost: tests/deploy/test_parser.py covers that case)."""
    schema = data.draw(st.sampled_from(SCHEMAS), label="schema")
    sent = data.draw(st.lists(packets(schema), min_size=1, max_size=6), label="packets")
    garbage = st.lists(garbage_pieces(schema), max_size=4)
    gaps = [b"".join(data.draw(garbage, label=f"garbage {i}")) for i in range(len(sent) + 1)]
    lead = st.just(b"") | fake_headers(schema) | partial_headers(schema)
    for i in range(len(sent)):  # often a header right before the packet, or running into it
        gaps[i] += data.draw(lead, label=f"header before packet {i}")
    stream = gaps[0] + b"".join(s.data + g for s, g in zip(sent, gaps[1:], strict=True))
    assume(stream.count(b"\x03\x02") < MAX_CANDIDATES)
    ends, end = [], len(gaps[0])
    for s, g in zip(sent, gaps[1:], strict=True):
        end += len(s.data)
        ends.append(end)
        end += len(g)
    starts = [e - len(s.data) for e, s in zip(ends, sent, strict=True)]
    # cuts inside a packet's header, where a look-behind candidate straddles two pushes
    chunks = data.draw(chunkings(stream, tuple(a + k for a in starts for k in (0, 1, 2, 6, 7))))
    limits: dict[str, Any] = {}
    if data.draw(st.booleans(), label="tight limits"):
        limits["max_messages"] = max(len(s.messages) for s in sent) + data.draw(st.integers(0, 2))
        limits["max_buffer"] = max(len(s.data) for s in sent) + data.draw(st.integers(0, 32))

    r = Receiver(schema, **limits)
    feed(r.dispatcher.push, chunks)
    assert [describe(v) for v, _ in r.calls] == [expected(s) for s in sent]
    assert [now for _, now in r.calls] == [float(completing_chunk(chunks, e)) for e in ends]
    d = r.dispatcher
    assert d.packets_received == len(sent)
    if any(gaps[:-1]):
        assert d.parse_errors > 0
    if not any(gaps):
        assert d.parse_errors == 0 and d.parser.buffered == 0
    garbage = len(stream) - sum(len(s.data) for s in sent)
    assert d.parser.bytes_dropped + d.parser.buffered == garbage


# -- (d) MessageQueue against a model of reference-behavior §4 ---------------------------------------------

TIMEOUT_US = 200_000  # the queue's defaults: link timeout 200 ms, max command lag 100 ms
LAG_US = 100_000
TICK_US = 20_000


class QueueModel:
    """reference-behavior §4 (and the README's arrival-gap addition) as plain data, in microseconds.

    ``waiting`` holds (id, duration, arrival) where arrival is the last receive time when the
    message was queued; ``running`` is (id, start, end) of the active message.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.waiting: list[tuple[int, int, int | None]] = []
        self.running: tuple[int, int, int] | None = None
        self.cursor: int | None = None
        self.last_rx: int | None = None
        self.received = self.overflows = self.skipped = 0

    def stop(self) -> None:
        self.waiting = []
        self.running = None
        self.cursor = None

    def offer(self, batch: list[tuple[int, int]], clear: bool = False) -> int:
        """Queue (id, duration_ms) pairs; returns how many fitted."""
        if clear:
            self.stop()
        fitted = 0
        for ident, ms in batch:
            self.received += 1
            if len(self.waiting) < self.capacity:
                self.waiting.append((ident, ms * 1000, self.last_rx))
                fitted += 1
            else:
                self.overflows += 1
        return fitted

    def packet(self, t: int, batch: list[tuple[int, int]], clear: bool) -> None:
        if clear:
            self.stop()
        self.last_rx = t
        self.offer(batch)

    def connected(self, t: int) -> bool:
        return self.last_rx is not None and t - self.last_rx <= TIMEOUT_US

    def update(self, t: int) -> None:
        if not self.connected(t):
            self.stop()  # 1. link lost: nothing queued, nothing running, no cursor
            return
        if self.running is not None and t >= self.running[2]:
            self.cursor = self.running[2]  # 2. it ends at start + duration, not at t
            self.running = None
        while self.running is None and self.waiting:  # 3./4. promote, skipping what is stale
            ident, duration, arrival = self.waiting.pop(0)
            start = rule_start(self.cursor, duration, arrival, t, LAG_US)
            if start is None:
                assert self.cursor is not None
                self.skipped += 1
                self.cursor += duration
                continue
            if start + duration <= t:
                self.cursor = start + duration  # ran its whole duration inside this tick
                continue
            self.running = (ident, start, start + duration)


DURATIONS_MS = (
    st.sampled_from([TICK_US // 1000, 0, 1]) | st.integers(0, 60) | st.sampled_from([150, 250, 1000])
)
STEPS_US = st.sampled_from([TICK_US]) | st.integers(0, 60_000)


class QueueMachine(RuleBasedStateMachine):
    """Pushes, packets (CLEAR_QUEUE, keepalives), liveness, jittered ticks, timeout edges, link loss
    and overflow, with the queue and the model compared after every step. Message k carries k in
    its vx wire value, so identities are compared, not just durations."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.next_id = 0
        self.queue = MessageQueue()
        self.model = QueueModel(200)

    @initialize(capacity=st.integers(1, 8), start=st.integers(0, 10**9))
    def configure(self, capacity: int, start: int) -> None:
        self.queue = MessageQueue(MessageQueueConfig(capacity=capacity))
        self.model = QueueModel(capacity)
        self.now = start

    # -- helpers --

    def batch(self, durations: list[int]) -> tuple[list[bcnp.Message], list[tuple[int, int]]]:
        idents = range(self.next_id, self.next_id + len(durations))
        self.next_id += len(durations)
        msgs = [DRIVE.message_from_raw((k, 0, ms)) for k, ms in zip(idents, durations, strict=True)]
        return msgs, list(zip(idents, durations, strict=True))

    def send_packet(self, durations: list[int], flags: int) -> None:
        msgs, pairs = self.batch(durations)
        view = bcnp.decode_packet(SCHEMA, bcnp.encode_packet(DRIVE, msgs, flags))
        self.queue.handle_packet(view, self.now / 1e6)
        self.model.packet(self.now, pairs, bool(flags & bcnp.CLEAR_QUEUE))

    def update(self) -> bcnp.Message | None:
        before = self.queue.active()
        active = self.queue.update(self.now / 1e6)
        self.model.update(self.now)
        assert active is self.queue.active()
        self.check_active()
        if self.model.running is not None:
            _, start, end = self.model.running
            assert start <= self.now < end  # what is active has not run its duration yet
            if active is not before:
                # newly promoted: stale commands are skipped, never started late
                assert self.now - LAG_US <= start
        return active

    # -- rules --

    @rule(ms=DURATIONS_MS)
    def push(self, ms: int) -> None:
        msgs, pairs = self.batch([ms])
        assert self.queue.push(msgs[0]) == (self.model.offer(pairs) == 1)

    @rule(durations=st.lists(DURATIONS_MS, max_size=6), clear=st.booleans())
    def push_batch(self, durations: list[int], clear: bool) -> None:
        msgs, pairs = self.batch(durations)
        assert self.queue.push_batch(msgs, clear=clear) == self.model.offer(pairs, clear)

    @rule(
        durations=st.lists(DURATIONS_MS, max_size=6),
        flags=st.sampled_from([0, bcnp.CLEAR_QUEUE, 0xFE, 0xFF]),
    )
    def packet(self, durations: list[int], flags: int) -> None:
        """One packet's messages under one lock: CLEAR_QUEUE first, liveness, batch push (a packet
        with no messages is a keepalive, or with CLEAR_QUEUE a stop)."""
        self.send_packet(durations, flags)

    @rule()
    def notify_received(self) -> None:
        self.queue.notify_received(self.now / 1e6)
        self.model.last_rx = self.now

    @rule(step=STEPS_US, alive=st.booleans())
    def tick(self, step: int, alive: bool) -> None:
        self.now += step
        if alive:
            self.notify_received()
        self.update()

    @rule(
        step=st.sampled_from([LAG_US, LAG_US + 1]) | st.integers(LAG_US - TICK_US, TIMEOUT_US),
        alive=st.booleans(),
    )
    def stall(self, step: int, alive: bool) -> None:
        """The robot loop stalls past the command lag: the backlog that would have ended before
        ``now - lag`` is skipped, the next one starts no earlier than ``now - lag``."""
        self.tick(step, alive)

    @rule(n=st.integers(2, 7), late=st.just(0) | st.integers(1, LAG_US))
    def stale_backlog(self, n: int, late: int) -> None:
        """A CLEAR_QUEUE packet of 20 ms commands and a long one; the first starts, then the loop
        stalls until the second would have ended ``late`` µs before ``now - lag`` (a keepalive keeps
        the link up): with ``late > 0`` it is skipped and counted, never run late (ending exactly at
        ``now - lag`` is not stale), and what runs next starts no earlier than ``now - lag``."""
        n = min(n, self.model.capacity - 1)
        if n < 2:
            return
        skipped = self.queue.metrics.skipped
        self.send_packet([TICK_US // 1000] * n + [1000], bcnp.CLEAR_QUEUE)
        self.update()
        self.now += 2 * TICK_US + LAG_US + late
        self.notify_received()
        active = self.update()
        assert active is not None  # the long one at the latest; update() checked its start
        assert (self.queue.metrics.skipped > skipped) == (late > 0)

    @rule(gap=st.sampled_from([LAG_US, LAG_US + 1]) | st.integers(0, TIMEOUT_US))
    def resume_after_gap(self, gap: int) -> None:
        """The queue runs dry (link kept up); the next command arrives ``gap`` µs after the last one
        ended. Beyond the lag it starts at now (it follows a gap in the stream, it is no backlog and
        is not skipped); within the lag it continues from the cursor, time-locked to the plan."""
        self.send_packet([TICK_US // 1000], bcnp.CLEAR_QUEUE)
        self.update()
        end = self.now = self.now + TICK_US
        self.notify_received()
        assert self.update() is None and self.queue.size() == 0
        self.now += gap
        self.send_packet([1000], 0)
        assert self.update() is not None
        start = self.queue.active_started_at
        assert start is not None and round(start * 1e6) == (self.now if gap > LAG_US else end)

    @rule(offset=st.sampled_from([-1, 0, 1]))
    def tick_at_timeout_edge(self, offset: int) -> None:
        """An update 1 µs before, exactly at, or 1 µs after the 200 ms link timeout."""
        last = self.model.last_rx
        edge = (self.now if last is None else last) + TIMEOUT_US + offset
        self.now = max(self.now, edge)
        self.update()
        if last is not None and self.now == edge:
            assert self.queue.link_alive(self.now / 1e6) == (offset <= 0)
        if not self.model.connected(self.now):
            assert self.queue.active() is None and self.queue.size() == 0

    @rule(extra=st.integers(1, 5_000_000))
    def link_loss(self, extra: int) -> None:
        """No packet for longer than the timeout: everything goes, and stays gone."""
        last = self.model.last_rx
        self.now = max(self.now, (self.now if last is None else last) + TIMEOUT_US) + extra
        assert self.update() is None
        assert self.queue.size() == 0 and not self.queue.link_alive(self.now / 1e6)

    @rule(extra=st.integers(1, 5), ms=DURATIONS_MS)
    def overflow(self, extra: int, ms: int) -> None:
        """A batch larger than the free space: the rest is refused and counted."""
        free = self.model.capacity - len(self.model.waiting)
        overflows = self.queue.metrics.overflows
        msgs, pairs = self.batch([ms] * (free + extra))
        assert self.queue.push_batch(msgs) == self.model.offer(pairs) == free
        assert self.queue.metrics.overflows == overflows + extra
        assert self.queue.size() == self.model.capacity

    @rule(
        n=st.integers(1, 7),
        steps=st.lists(st.sampled_from([TICK_US]) | st.integers(5_000, 60_000), min_size=1),
    )
    def chain_of_ticks(self, n: int, steps: list[int]) -> None:
        """A CLEAR_QUEUE packet of 20 ms commands and a long sentinel, then ticks jittered by 5..60 ms
        with keepalives: command k starts at exactly start + 20 ms * k (the cursor never drifts with
        the jitter), the sentinel at start + 20 ms * n, and nothing is skipped."""
        n = min(n, self.model.capacity - 1)
        skipped = self.queue.metrics.skipped
        self.send_packet([TICK_US // 1000] * n + [1000], bcnp.CLEAR_QUEUE)
        first = self.next_id - n - 1
        self.update()
        origin = self.now
        starts: dict[int, int] = {}
        for step in itertools.cycle(steps):
            active = self.queue.active()
            assert active is not None
            start = self.queue.active_started_at
            assert start is not None
            starts.setdefault(active.raw[0] - first, round(start * 1e6))
            if active.raw[0] - first == n:
                break
            self.now += step
            self.notify_received()
            self.update()
        assert starts == {k: origin + k * TICK_US for k in starts}
        assert starts[n] == origin + n * TICK_US
        assert self.queue.metrics.skipped == skipped

    # -- invariants --

    def check_active(self) -> None:
        active, running = self.queue.active(), self.model.running
        if running is None:
            assert active is None
            assert self.queue.active_started_at is None
            return
        assert active is not None and active.raw[0] == running[0]
        start = self.queue.active_started_at
        assert start is not None and round(start * 1e6) == running[1]

    @invariant()
    def agrees_with_model(self) -> None:
        q, m = self.queue, self.model
        assert q.size() == len(m.waiting) <= m.capacity
        assert q.metrics == bcnp.QueueMetrics(m.received, m.overflows, m.skipped)
        assert q.link_alive(self.now / 1e6) == m.connected(self.now)
        last = q.last_receive_time
        assert (None if last is None else round(last * 1e6)) == m.last_rx
        self.check_active()


QueueMachine.TestCase.settings = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
test_message_queue_matches_model = QueueMachine.TestCase


RECEIVE_TIMES = st.sampled_from([0.0, -0.0, 0.35, 0.55, 2.03, 4.03, 1e9 / 7]) | st.floats(0, 1e6)


@PROPERTY
@given(st.lists(st.tuples(RECEIVE_TIMES, st.booleans()), max_size=20))
def test_every_packet_records_its_own_receive_time(steps: list[tuple[float, bool]]) -> None:
    """handle_packet keeps its last receive time converted (the packets of one push share it):
    the same time again, an earlier one, or a notify_received in between never leave a stale one."""
    q = MessageQueue()
    keepalive = bcnp.decode_packet(SCHEMA, bcnp.encode_packet(DRIVE, []))
    for now, notify in steps:
        if notify:
            q.notify_received(now + 1.0)
        q.handle_packet(keepalive, now)
        assert q.last_receive_time == bcnp.timebase.to_us(now) / bcnp.timebase.US_PER_S
        assert q.link_alive(now)
