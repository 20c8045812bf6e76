"""TelemetryAccumulator: robot-to-host batching (reference-behavior §6).

A plain list-appending ``send`` stands in for the transport; every sent
buffer is decoded with :func:`bcnp.decode_packet` to check it is one valid
packet holding the expected messages.
"""

from __future__ import annotations

import pytest

import bcnp
from bcnp import TelemetryAccumulator, TelemetryMetrics
from benchmarks.harness import ROOT

SCHEMA = bcnp.load_schema(ROOT / "schema" / "messages.json")
TELEMETRY = SCHEMA["DrivetrainTelemetry"]
DRIVE = SCHEMA["DriveCmd"]


def sample(k: int) -> bcnp.Message:
    return TELEMETRY(
        leftVelocity=k / 10,
        rightVelocity=-k / 10,
        leftPosition=k / 100,
        rightPosition=k / 1000,
        timestampMs=1000 + 20 * k,
    )


class Link:
    """A transport double: records what it is given, answers with ``ok``."""

    def __init__(self, ok: bool = True) -> None:
        self.ok = ok
        self.sent: list[bytes] = []

    def __call__(self, data: bytes) -> bool:
        self.sent.append(data)
        return self.ok

    def packets(self) -> list[bcnp.PacketView]:
        return [bcnp.decode_packet(SCHEMA, data) for data in self.sent]


def test_flushes_every_second_tick_as_one_packet() -> None:
    link = Link()
    acc = TelemetryAccumulator(TELEMETRY, link, flush_interval_ticks=2, max_buffered=32)

    acc.record(sample(0))
    assert acc.tick() is False
    assert link.sent == []
    assert acc.buffered == 1

    acc.record(sample(1))
    assert acc.tick() is True
    assert acc.buffered == 0
    [view] = link.packets()
    assert view.type_id == TELEMETRY.id
    assert view.count == 2
    assert view.flags == 0
    assert list(view) == [sample(0), sample(1)]
    assert view.to_bytes() == link.sent[0]
    assert acc.metrics == TelemetryMetrics(recorded=2, sent=2, packets=1, overflows=0, send_failures=0)

    # The next cycle: again nothing on the odd tick, one packet on the even one.
    for k in (2, 3, 4):
        acc.record(sample(k))
    assert acc.tick() is False
    assert len(link.sent) == 1
    acc.record(sample(5))
    assert acc.tick() is True
    assert len(link.sent) == 2
    assert list(link.packets()[1]) == [sample(k) for k in range(2, 6)]
    assert acc.metrics == TelemetryMetrics(recorded=6, sent=6, packets=2, overflows=0, send_failures=0)


@pytest.mark.parametrize("interval", [1, 3, 5])
def test_flush_interval_is_respected(interval: int) -> None:
    link = Link()
    acc = TelemetryAccumulator(TELEMETRY, link, flush_interval_ticks=interval)
    flushed_on: list[int] = []
    for n in range(1, 3 * interval + 1):
        acc.record(sample(n))
        if acc.tick():
            flushed_on.append(n)
    assert flushed_on == [interval, 2 * interval, 3 * interval]
    views = link.packets()
    assert [v.count for v in views] == [interval] * 3
    assert [m for v in views for m in v] == [sample(n) for n in range(1, 3 * interval + 1)]
    assert acc.metrics.packets == 3
    assert acc.metrics.sent == 3 * interval


def test_force_flush_sends_what_is_buffered_now() -> None:
    link = Link()
    acc = TelemetryAccumulator(TELEMETRY, link)
    for k in range(3):
        acc.record(sample(k))
    assert acc.force_flush() is True
    [view] = link.packets()
    assert view.count == 3
    assert list(view) == [sample(0), sample(1), sample(2)]
    assert acc.buffered == 0
    assert acc.force_flush() is False  # nothing left
    assert len(link.sent) == 1
    assert acc.metrics == TelemetryMetrics(recorded=3, sent=3, packets=1, overflows=0, send_failures=0)


def test_nothing_is_sent_when_the_buffer_is_empty() -> None:
    link = Link()
    acc = TelemetryAccumulator(TELEMETRY, link)
    assert [acc.tick() for _ in range(6)] == [False] * 6
    assert acc.force_flush() is False
    assert link.sent == []
    assert acc.metrics == TelemetryMetrics(recorded=0, sent=0, packets=0, overflows=0, send_failures=0)


def test_full_buffer_drops_the_oldest() -> None:
    link = Link()
    acc = TelemetryAccumulator(TELEMETRY, link, flush_interval_ticks=2, max_buffered=32)
    for k in range(40):
        acc.record(sample(k))
    assert acc.buffered == 32
    assert acc.metrics.overflows == 8
    assert acc.force_flush() is True
    [view] = link.packets()
    assert view.count == 32
    assert list(view) == [sample(k) for k in range(8, 40)]
    assert acc.metrics == TelemetryMetrics(recorded=40, sent=32, packets=1, overflows=8, send_failures=0)


def test_refused_send_is_counted_and_not_retried() -> None:
    link = Link(ok=False)
    acc = TelemetryAccumulator(TELEMETRY, link, flush_interval_ticks=2)
    acc.record(sample(0))
    acc.tick()
    acc.record(sample(1))
    assert acc.tick() is False  # send() said no
    assert len(link.sent) == 1
    assert bcnp.decode_packet(SCHEMA, link.sent[0]).count == 2
    assert acc.metrics == TelemetryMetrics(recorded=2, sent=0, packets=0, overflows=0, send_failures=1)
    assert acc.buffered == 0  # stale samples are dropped, not resent

    link.ok = True
    acc.record(sample(2))
    acc.tick()
    assert acc.tick() is True
    assert list(link.packets()[1]) == [sample(2)]
    assert acc.metrics == TelemetryMetrics(recorded=3, sent=1, packets=1, overflows=0, send_failures=1)


def test_raising_send_is_counted_and_never_reaches_the_caller() -> None:
    attempts: list[bytes] = []

    def broken(data: bytes) -> bool:
        attempts.append(data)
        raise OSError("network is unreachable")

    acc = TelemetryAccumulator(TELEMETRY, broken, flush_interval_ticks=2)
    acc.record(sample(0))
    assert acc.tick() is False
    assert acc.tick() is False  # the flush tick: send raised, swallowed
    acc.record(sample(1))
    assert acc.force_flush() is False
    assert len(attempts) == 2
    assert acc.metrics == TelemetryMetrics(recorded=2, sent=0, packets=0, overflows=0, send_failures=2)
    assert isinstance(acc.last_send_error, OSError)


def test_record_of_a_wrong_type_raises() -> None:
    link = Link()
    acc = TelemetryAccumulator(TELEMETRY, link)
    with pytest.raises(TypeError):
        acc.record(DRIVE(vx=1.0, omega=0.0, durationMs=20))
    with pytest.raises(TypeError):
        acc.record((1.0, 2.0, 3.0, 4.0, 5))  # type: ignore[arg-type]
    assert acc.buffered == 0
    assert acc.metrics.recorded == 0
    assert acc.force_flush() is False
    assert link.sent == []


def test_clear_drops_buffered_messages() -> None:
    link = Link()
    acc = TelemetryAccumulator(TELEMETRY, link)
    acc.record(sample(0))
    acc.clear()
    assert acc.buffered == 0
    assert acc.tick() is False
    assert acc.tick() is False
    assert link.sent == []


def test_invalid_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        TelemetryAccumulator(TELEMETRY, Link(), flush_interval_ticks=0)
    with pytest.raises(ValueError):
        TelemetryAccumulator(TELEMETRY, Link(), max_buffered=0)
    with pytest.raises(ValueError):
        TelemetryAccumulator(TELEMETRY, Link(), max_buffered=bcnp.MAX_MESSAGES_PER_PACKET + 1)
