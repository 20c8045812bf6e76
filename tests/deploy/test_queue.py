"""MessageQueue: the timed execution rules of reference-behavior §4, with an injected clock.

Every test drives time explicitly (``update(now)``, ``notify_received(now)``,
``handle_packet(packet, now)``); nothing sleeps. Times are compared in whole
microseconds, the queue's internal unit, so boundaries are exact.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples, rule_start

import bcnp
import bcnp.defaults
from bcnp import MessageQueue, MessageQueueConfig
from bcnp.queue import COMPACT_RATIO
from benchmarks.harness import ROOT

SCHEMA = bcnp.load_schema(ROOT / "schema" / "messages.json")
TEST_SCHEMA = bcnp.load_schema(ROOT / "tests" / "data" / "test_schema.json")
DRIVE = SCHEMA["DriveCmd"]
TEST_CMD = TEST_SCHEMA["TestCmd"]
ENCODER = TEST_SCHEMA["EncoderData"]

US = 1_000_000


def cmd(k: int, duration_ms: int = 100) -> bcnp.Message:
    """DriveCmd number ``k``: vx carries k (wire value k * 100), so every message is distinct."""
    return DRIVE(vx=k / 100, omega=0.0, durationMs=duration_ms)


def cmd_index(msg: bcnp.Message | None) -> int | None:
    return None if msg is None else msg.raw[0] // 100


def packet(messages: list[bcnp.Message], flags: int = 0, spec: bcnp.MessageSpec = DRIVE) -> bcnp.PacketView:
    return bcnp.decode_packet(
        SCHEMA if spec is DRIVE else TEST_SCHEMA, bcnp.encode_packet(spec, messages, flags)
    )


def started_us(q: MessageQueue) -> int | None:
    start = q.active_started_at
    return None if start is None else round(start * US)


def tick(q: MessageQueue, now: float) -> bcnp.Message | None:
    """One robot tick with the link kept alive (a packet arrived at ``now``)."""
    q.notify_received(now)
    return q.update(now)


# -- basic timing -------------------------------------------------------------------------------------


def test_messages_run_for_their_duration_in_order() -> None:
    q = MessageQueue()
    msgs = [cmd(0, 100), cmd(1, 50), cmd(2, 200)]
    assert q.push_batch(msgs) == 3
    assert q.size() == 3
    assert len(q) == 3
    assert q.active() is None

    q.notify_received(0.0)
    assert q.update(0.0) == msgs[0]
    assert q.active() == msgs[0]
    assert q.active_started_at == 0.0
    assert q.size() == 2  # the active one is not counted

    expected = [
        (0.050, 0, 0),
        (0.0999, 0, 0),
        (0.100, 1, 100_000),
        (0.1499, 1, 100_000),
        (0.150, 2, 150_000),
        (0.3499, 2, 150_000),
    ]
    for now, index, start in expected:
        active = tick(q, now)
        assert active is q.active()
        assert active == msgs[index], now
        assert started_us(q) == start, now
    assert q.size() == 0
    assert tick(q, 0.350) is None
    assert q.active() is None
    assert q.active_started_at is None
    assert q.metrics == bcnp.QueueMetrics(received=3, overflows=0, skipped=0)


def test_nothing_runs_before_anything_was_received() -> None:
    q = MessageQueue()
    assert not q.link_alive(0.0)
    assert q.last_receive_time is None
    q.push(cmd(0))
    assert q.update(0.0) is None
    assert q.size() == 0  # never connected: the queue is cleared


# -- disconnect ---------------------------------------------------------------------------------------


def test_disconnect_clears_active_and_queue_and_forgets_the_cursor() -> None:
    q = MessageQueue()
    q.push_batch([cmd(0, 100), cmd(1, 300), cmd(2, 100), cmd(3, 100)])
    q.notify_received(0.0)
    assert cmd_index(q.update(0.0)) == 0
    assert cmd_index(q.update(0.150)) == 1  # started at the cursor, 0.100
    assert started_us(q) == 100_000
    assert cmd_index(q.update(0.200)) == 1  # exactly the timeout: still connected
    assert q.size() == 2

    assert q.update(0.200001) is None  # silent for more than 200 ms
    assert q.active() is None
    assert q.active_started_at is None
    assert q.size() == 0
    assert not q.link_alive(0.200001)

    # Coming back: the old messages are gone and a new batch starts at now,
    # not at the forgotten cursor (which would make it stale and skipped).
    q.push_batch([cmd(10, 100), cmd(11, 100)])
    q.notify_received(5.0)
    assert cmd_index(q.update(5.0)) == 10
    assert started_us(q) == 5_000_000
    assert cmd_index(tick(q, 5.1)) == 11
    assert started_us(q) == 5_100_000
    assert q.metrics.skipped == 0


def test_reconnect_after_a_timeout_starts_the_new_batch_at_now() -> None:
    q = MessageQueue()
    q.push_batch([cmd(0, 100), cmd(1, 100)])
    q.notify_received(0.0)
    assert cmd_index(q.update(0.0)) == 0
    assert cmd_index(q.update(0.1)) == 1  # the cursor is at 0.1
    assert q.update(0.3) is None  # timed out
    q.handle_packet(packet([cmd(20, 100), cmd(21, 100)]), 0.3)
    assert cmd_index(q.update(0.31)) == 20
    assert started_us(q) == 310_000
    assert q.metrics.skipped == 0


# -- lag spike ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lag", "active_index", "start_us", "skipped"),
    [
        # floor 0.4: #1 (ends 0.2) and #2 (ends 0.3) are stale; #3 ends exactly at the floor so it is
        # not skipped: clamped to 0.4 it completes inside the tick; #4 starts at 0.5.
        (0.1, 4, 500_000, 2),
        # floor 0.45: #1..#3 stale; #4 (0.4-0.5) clamped to 0.45 and still running.
        (0.05, 4, 450_000, 3),
        # floor 0.25: #1 stale; #2 clamped to 0.25 and done at 0.35; #3 done at 0.45; #4 runs from 0.45.
        (0.25, 4, 450_000, 1),
        # floor below zero: nothing stale, #1..#4 complete in the tick, #5 starts at its cursor 0.5.
        (1.0, 5, 500_000, 0),
    ],
)
def test_lag_spike_skips_stale_messages_and_keeps_one(
    lag: float, active_index: int, start_us: int, skipped: int
) -> None:
    q = MessageQueue(MessageQueueConfig(max_command_lag=lag))
    q.push_batch([cmd(k, 100) for k in range(10)])
    assert cmd_index(tick(q, 0.0)) == 0

    active = tick(q, 0.5)  # a 500 ms loop overrun; the link stayed alive
    assert active is not None
    assert cmd_index(active) == active_index
    assert started_us(q) == start_us
    assert q.metrics.skipped == skipped
    assert q.size() == 10 - 1 - active_index
    assert q.size() > 0  # not everything was thrown away

    # Execution continues from the virtual cursor, not from a new `now`.
    nxt = tick(q, start_us / US + 0.1)
    assert cmd_index(nxt) == active_index + 1
    assert started_us(q) == start_us + 100_000
    assert q.metrics.skipped == skipped


def test_a_message_that_ended_just_before_the_floor_is_skipped() -> None:
    q = MessageQueue()
    q.push_batch([cmd(k, 100) for k in range(4)])
    assert cmd_index(tick(q, 0.0)) == 0
    # floor = 0.500001 - 0.1 = 0.400001: #3 (0.3-0.4) now ended before it.
    active = tick(q, 0.500001)
    assert active is None
    assert q.metrics.skipped == 3
    assert q.size() == 0


# -- virtual time -------------------------------------------------------------------------------------


def test_virtual_time_queue_runs_dry() -> None:
    q = MessageQueue()
    first, second = cmd(0, 100), cmd(1, 100)
    q.push_batch([first, second])
    q.notify_received(0.0)
    assert q.update(0.0) == first
    assert q.update(0.095) == first
    assert q.update(0.105) == second
    assert started_us(q) == 100_000  # the cursor, not the tick time 0.105
    assert tick(q, 0.210) is None  # done: connected, nothing left
    assert q.link_alive(0.210)
    assert q.size() == 0
    assert q.metrics.skipped == 0


def test_virtual_time_none_because_of_the_timeout() -> None:
    q = MessageQueue()
    first, second = cmd(0, 100), cmd(1, 100)
    q.push_batch([first, second])
    q.notify_received(0.0)
    assert q.update(0.0) == first
    assert q.update(0.105) == second
    assert q.update(0.195) == second
    assert q.update(0.210) is None  # nothing received since 0.0
    assert not q.link_alive(0.210)


def test_virtual_time_timeout_drops_work_still_queued() -> None:
    q = MessageQueue()
    q.push_batch([cmd(0, 100), cmd(1, 100), cmd(2, 100)])
    q.notify_received(0.0)
    assert cmd_index(q.update(0.0)) == 0
    assert cmd_index(q.update(0.105)) == 1
    assert q.update(0.210) is None  # #1 ended at 0.2 and #2 was waiting, but the link is gone
    assert q.size() == 0
    assert tick(q, 0.300) is None  # reconnecting does not bring the dropped message back


def test_ten_one_ms_messages_finish_inside_one_tick() -> None:
    q = MessageQueue()
    q.push_batch([cmd(k, 1) for k in range(10)])
    assert cmd_index(tick(q, 0.0)) == 0
    assert q.size() == 9
    assert tick(q, 0.020) is None
    assert q.active() is None
    assert q.size() == 0
    assert q.metrics.skipped == 0
    assert q.metrics.received == 10


def test_sub_tick_messages_leave_the_next_one_at_its_virtual_start() -> None:
    q = MessageQueue()
    q.push_batch([cmd(k, 1) for k in range(10)] + [cmd(10, 100)])
    tick(q, 0.0)
    assert cmd_index(tick(q, 0.020)) == 10
    assert started_us(q) == 10_000  # after the ten 1 ms messages, not at 0.020
    assert q.metrics.skipped == 0


@pytest.mark.parametrize("seed", [1, 2, 3, 20250101])
def test_thousand_20ms_commands_do_not_drift_with_loop_jitter(seed: int) -> None:
    rng = random.Random(seed)
    n = 1000
    q = MessageQueue(MessageQueueConfig(capacity=n))
    msgs = [cmd(k, 20) for k in range(n)]
    assert q.push_batch(msgs) == n
    assert cmd_index(tick(q, 0.0)) == 0
    assert started_us(q) == 0

    seen = {0}
    last_index = 0
    now_us = 0
    step = 1
    while True:
        # nominal 20 ms tick +/- 5 ms, in whole microseconds
        nxt = 20_000 * step + rng.randint(-5_000, 5_000)
        step += 1
        if nxt >= 19_990_000:
            break
        assert nxt > now_us
        now_us = nxt
        active = tick(q, now_us / US)
        assert active is not None, f"ran dry at {now_us} us"
        k = cmd_index(active)
        assert k is not None
        # the active command is the one whose virtual slot [20k, 20k+20) ms holds now
        assert k == now_us // 20_000
        assert started_us(q) == 20_000 * k  # exact virtual start: no drift, no matter the jitter
        assert k >= last_index
        last_index = k
        seen.add(k)

    # Probe the end of the chain: the last command started at exactly 19.980 s, so it still runs
    # 1 ms before 20.000 s and is over at 20.000 s.
    assert cmd_index(tick(q, 19.999)) == n - 1
    assert started_us(q) == 19_980_000
    assert tick(q, 20.000) is None
    assert q.size() == 0
    assert q.metrics.skipped == 0
    # about a quarter of the commands fall between two ticks and complete inside one; none is lost
    assert len(seen) > n // 2


# -- connection timeout boundary ----------------------------------------------------------------------


def test_timeout_boundary_is_exact() -> None:
    q = MessageQueue()  # link_timeout 0.2
    q.push(cmd(0, 5000))
    q.notify_received(1.0)
    assert q.last_receive_time == 1.0
    assert cmd_index(q.update(1.0)) == 0
    assert q.link_alive(1.2)
    assert cmd_index(q.update(1.2)) == 0  # exactly timeout after the last receive: connected
    assert not q.link_alive(1.200001)
    assert q.update(1.200001) is None  # one microsecond later: gone
    assert q.size() == 0


def test_timeout_boundary_with_a_custom_timeout() -> None:
    q = MessageQueue(MessageQueueConfig(link_timeout=0.5))
    q.push(cmd(0, 5000))
    q.handle_packet(packet([cmd(1, 5000)]), 2.0)
    assert cmd_index(q.update(2.5)) == 0
    assert q.link_alive(2.5)
    assert not q.link_alive(2.500001)
    assert q.update(2.500001) is None


# -- overflow -----------------------------------------------------------------------------------------


def test_overflow_refuses_and_counts() -> None:
    q = MessageQueue(MessageQueueConfig(capacity=4))
    assert q.push(cmd(0)) is True
    assert q.push_batch([cmd(1), cmd(2), cmd(3), cmd(4), cmd(5)]) == 3
    assert q.size() == 4
    assert q.push(cmd(6)) is False
    assert q.push_batch([cmd(7), cmd(8)]) == 0
    assert q.metrics == bcnp.QueueMetrics(received=9, overflows=5, skipped=0)

    q.handle_packet(packet([cmd(9), cmd(10)]), 0.0)
    assert q.metrics.received == 11
    assert q.metrics.overflows == 7
    assert q.size() == 4

    # promoting one frees one slot
    assert cmd_index(q.update(0.0)) == 0
    assert q.size() == 3
    assert q.push_batch([cmd(11), cmd(12)]) == 1
    assert q.metrics == bcnp.QueueMetrics(received=13, overflows=8, skipped=0)
    assert [cmd_index(m) for m in q.drain()] == [1, 2, 3, 11]


def test_full_queue_never_blocks() -> None:
    q = MessageQueue(MessageQueueConfig(capacity=2))
    q.push_batch([cmd(0), cmd(1)])
    results: list[object] = []

    def producer() -> None:
        results.append(q.push(cmd(2)))
        results.append(q.push_batch([cmd(3), cmd(4)]))
        q.handle_packet(packet([cmd(5)]), 0.0)
        results.append(q.size())

    t = threading.Thread(target=producer)
    t.start()
    t.join(timeout=10)  # generous: it must return at once, nobody ever consumes
    assert not t.is_alive()
    assert results == [False, 0, 2]
    assert q.metrics.overflows == 4


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError):
        MessageQueueConfig(capacity=0)


def test_default_limits_are_the_spec_defaults() -> None:
    config = MessageQueueConfig()
    assert (config.capacity, config.link_timeout, config.max_command_lag) == (200, 0.2, 0.1)
    assert config == MessageQueueConfig(
        bcnp.defaults.QUEUE_CAPACITY, bcnp.defaults.LINK_TIMEOUT_S, bcnp.defaults.MAX_COMMAND_LAG_S
    )


# -- CLEAR_QUEUE and clear() --------------------------------------------------------------------------


def _running_queue() -> MessageQueue:
    """#0 ran 0.0-0.1, #1 is active since 0.1 (so the queue holds a virtual cursor), #2 waits."""
    q = MessageQueue()
    q.push_batch([cmd(0, 100), cmd(1, 100), cmd(2, 100)])
    assert cmd_index(tick(q, 0.0)) == 0
    assert cmd_index(tick(q, 0.1)) == 1
    assert q.size() == 1
    return q


def test_push_batch_with_clear_drops_queue_and_active() -> None:
    q = _running_queue()
    assert q.push_batch([cmd(10, 100), cmd(11, 100)], clear=True) == 2
    assert q.active() is None  # stopped at once, not at the next tick
    assert q.size() == 2
    assert cmd_index(tick(q, 0.130)) == 10  # the new batch starts now, not at an old cursor
    assert started_us(q) == 130_000
    assert [cmd_index(m) for m in q.drain()] == [11]
    assert q.metrics.skipped == 0


def test_push_batch_without_clear_appends() -> None:
    q = _running_queue()
    assert q.push_batch([cmd(10, 100)]) == 1
    assert cmd_index(q.active()) == 1
    assert [cmd_index(m) for m in q.drain()] == [2, 10]


def test_clear_queue_packet_drops_queue_and_active() -> None:
    q = _running_queue()
    q.handle_packet(packet([cmd(10, 100), cmd(11, 100)], flags=bcnp.CLEAR_QUEUE), 0.130)
    assert q.active() is None
    assert q.size() == 2
    assert cmd_index(q.update(0.130)) == 10
    assert started_us(q) == 130_000
    assert cmd_index(q.update(0.230)) == 11  # handle_packet kept the link alive
    assert started_us(q) == 230_000
    assert q.size() == 0
    assert q.metrics.skipped == 0


def test_packet_without_clear_flag_appends() -> None:
    q = _running_queue()
    q.handle_packet(packet([cmd(10, 100)]), 0.130)
    assert cmd_index(q.update(0.130)) == 1
    assert [cmd_index(m) for m in q.drain()] == [2, 10]


def test_empty_clear_queue_packet_stops_now() -> None:
    q = _running_queue()
    q.handle_packet(packet([], flags=bcnp.CLEAR_QUEUE), 0.140)
    assert q.active() is None
    assert q.size() == 0
    assert q.update(0.140) is None  # #1 would run until 0.2 and #2 after it
    assert q.link_alive(0.140)  # an empty packet still counts as a receive
    assert q.metrics.received == 3
    # a new command afterwards starts fresh
    q.handle_packet(packet([cmd(10, 100)]), 0.150)
    assert cmd_index(q.update(0.150)) == 10
    assert started_us(q) == 150_000


def test_clear_stops_now() -> None:
    q = _running_queue()
    q.clear()
    assert q.active() is None
    assert q.size() == 0
    q.push(cmd(10, 100))
    assert cmd_index(tick(q, 0.140)) == 10
    assert started_us(q) == 140_000
    assert q.drain() == []


# -- arrival gap -----------------------------------------------------------------------------------------


def test_command_after_a_long_idle_gap_starts_now_and_is_not_skipped() -> None:
    q = MessageQueue()  # max_command_lag 0.1
    q.push(cmd(0, 100))
    assert cmd_index(tick(q, 0.0)) == 0
    assert tick(q, 0.100) is None  # ran dry; last command ended at 0.100
    assert tick(q, 0.300) is None
    q.handle_packet(packet([cmd(1, 100), cmd(2, 100)]), 0.500)  # 400 ms after the end: > lag
    assert cmd_index(q.update(0.500)) == 1
    assert started_us(q) == 500_000
    assert q.metrics.skipped == 0
    assert cmd_index(tick(q, 0.600)) == 2
    assert started_us(q) == 600_000


def test_command_within_the_lag_after_running_dry_continues_from_the_cursor() -> None:
    q = MessageQueue()
    q.push(cmd(0, 100))
    assert cmd_index(tick(q, 0.0)) == 0
    assert tick(q, 0.120) is None  # ended at 0.100 (virtual)
    q.handle_packet(packet([cmd(1, 100), cmd(2, 100)]), 0.150)  # 50 ms after the end: within lag
    assert cmd_index(q.update(0.150)) == 1
    assert started_us(q) == 100_000  # continues at the cursor, not at 0.150
    assert cmd_index(tick(q, 0.200)) == 2
    assert started_us(q) == 200_000
    assert q.metrics.skipped == 0


def test_command_arriving_after_a_gap_starts_now_even_if_no_tick_saw_the_queue_empty() -> None:
    q = MessageQueue()
    q.push(cmd(0, 100))
    assert cmd_index(tick(q, 0.0)) == 0
    assert cmd_index(tick(q, 0.090)) == 0  # still running; it ends at 0.100 (virtual)
    # The robot loop stalls; the next command arrives 300 ms after the end, then the loop resumes.
    q.handle_packet(packet([cmd(1, 100)]), 0.400)
    assert cmd_index(q.update(0.410)) == 1  # not a backlog: starts now, not skipped
    assert started_us(q) == 410_000 and q.metrics.skipped == 0


def test_command_queued_before_a_stall_is_a_backlog_and_skipped() -> None:
    q = MessageQueue()
    q.handle_packet(packet([cmd(0, 100), cmd(1, 100), cmd(2, 400)]), 0.0)
    assert cmd_index(q.update(0.0)) == 0
    q.notify_received(0.500)
    assert cmd_index(q.update(0.500)) == 2  # 1 arrived at 0.0: stale after the stall, skipped
    assert q.metrics.skipped == 1
    assert started_us(q) == 400_000  # 2 started at 0.200 (virtual), clamped to the lag floor


def test_command_exactly_at_the_lag_after_running_dry_continues_from_the_cursor() -> None:
    q = MessageQueue()
    q.push(cmd(0, 100))
    tick(q, 0.0)
    assert tick(q, 0.100) is None
    q.push(cmd(1, 150))
    assert cmd_index(tick(q, 0.200)) == 1  # cursor 0.100 == floor 0.100: not a gap
    assert started_us(q) == 100_000


# -- message types ------------------------------------------------------------------------------------


def test_any_type_with_a_duration_field_can_be_queued() -> None:
    q = MessageQueue()
    a = TEST_CMD(value1=1.5, value2=-2.25, durationMs=30)
    b = TEST_CMD(value1=0.0, value2=1.0, durationMs=10)
    c = TEST_CMD(value1=3.0, value2=4.0, durationMs=50)
    assert q.push(a)
    q.handle_packet(packet([b, c], spec=TEST_CMD), 0.0)
    assert q.update(0.0) == a
    assert q.update(0.030) == b
    assert q.update(0.040) == c
    assert started_us(q) == 40_000
    assert q.update(0.090) is None


def test_type_without_a_duration_field_is_refused() -> None:
    q = MessageQueue()
    q.push(cmd(0))
    enc = ENCODER(moduleId=1, position=2, velocity=3)
    with pytest.raises(TypeError):
        q.push(enc)
    with pytest.raises(TypeError):
        q.push_batch([cmd(1), enc])
    with pytest.raises(TypeError):
        q.handle_packet(bcnp.decode_packet(TEST_SCHEMA, bcnp.encode_packet(ENCODER, [enc])), 0.0)
    assert q.size() == 1  # nothing of a refused batch was queued
    assert q.metrics.received == 1


def test_drain_returns_waiting_messages_decoded_in_order() -> None:
    q = MessageQueue()
    q.push_batch([cmd(0), cmd(1)])
    q.handle_packet(packet([cmd(2), cmd(3), cmd(4)]), 0.0)
    q.push(cmd(5))
    assert cmd_index(q.update(0.0)) == 0
    drained = q.drain()
    assert drained == [cmd(k) for k in range(1, 6)]
    assert all(type(m) is DRIVE.message_class for m in drained)
    assert q.size() == 0
    assert q.drain() == []
    assert cmd_index(q.active()) == 0  # drain only takes the waiting ones


# -- zero-copy ingest ---------------------------------------------------------------------------------


class DecodeCounter:
    """A private copy of the schema whose DriveCmd counts the messages it decodes.

    ``PacketView`` decodes every message through ``spec.message_from_raw``; wrapping it on a
    schema loaded only for these tests counts decodes without touching the queue under test.
    """

    def __init__(self) -> None:
        self.schema = bcnp.load_schema(ROOT / "schema" / "messages.json")
        self.spec = self.schema["DriveCmd"]
        self.real = self.spec.message_from_raw
        self.count = 0

        def counting(raw: tuple[int, ...]) -> bcnp.Message:
            self.count += 1
            return self.real(raw)

        self.spec.message_from_raw = counting

    def big_packet(self, count: int, duration_ms: int) -> bcnp.PacketView:
        raw = self.real
        data = bcnp.encode_packet(self.spec, [raw((k, -k, duration_ms)) for k in range(count)])
        view = bcnp.decode_packet(self.schema, data)
        assert self.count == 0
        return view


def _allocated_by(fn: Callable[[], object]) -> int:
    """Peak bytes allocated (above the starting point) while ``fn()`` runs."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.full_suite
def test_pushing_a_packet_does_not_decode_its_messages() -> None:
    n = bcnp.MAX_MESSAGES_PER_PACKET
    spy = DecodeCounter()
    view = spy.big_packet(n, 20)
    q = MessageQueue(MessageQueueConfig(capacity=n))

    pushed = _allocated_by(lambda: q.handle_packet(view, 0.0))
    assert q.size() == n
    assert pushed < 64 * 1024  # one object per message would be megabytes
    assert spy.count == 0

    # Control: decoding every message does cost that much, so the bound above means something.
    decoded_all = _allocated_by(lambda: list(view))
    assert decoded_all > 1024 * 1024
    spy.count = 0

    result: list[bcnp.Message | None] = []
    promoted = _allocated_by(lambda: result.append(q.update(0.0)))
    assert result[0] is not None
    assert result[0].raw == (0, 0, 20)
    assert promoted < 16 * 1024
    assert spy.count == 1  # only the promoted message was decoded
    assert q.size() == n - 1

    assert q.update(0.010) is result[0]  # still running: nothing new decoded
    assert spy.count == 1
    advanced = _allocated_by(lambda: result.append(q.update(0.020)))
    assert result[1] is not None
    assert result[1].raw == (1, -1, 20)
    assert advanced < 16 * 1024
    assert spy.count == 2


@pytest.mark.full_suite
def test_skipping_a_stale_backlog_does_not_decode_it() -> None:
    n = bcnp.MAX_MESSAGES_PER_PACKET
    spy = DecodeCounter()
    q = MessageQueue(MessageQueueConfig(capacity=n))
    q.handle_packet(spy.big_packet(n, 1), 0.0)
    assert q.update(0.0) is not None
    assert spy.count == 1
    q.notify_received(100.0)
    result: list[bcnp.Message | None] = []
    used = _allocated_by(lambda: result.append(q.update(100.0)))
    assert result == [None]
    assert q.metrics.skipped == n - 1
    assert used < 64 * 1024
    assert spy.count == 1  # durations are read from the packet bytes


def test_drain_decodes_on_inspection() -> None:
    spy = DecodeCounter()
    q = MessageQueue()
    q.handle_packet(spy.big_packet(5, 20), 0.0)
    assert spy.count == 0
    drained = q.drain()
    assert spy.count == 5
    assert [m.raw for m in drained] == [(k, -k, 20) for k in range(5)]


# -- threads ------------------------------------------------------------------------------------------


def _yield_cpu() -> None:
    """Let the other thread run (no waiting on a clock): interleaves the two loops finely."""
    if hasattr(os, "sched_yield"):
        os.sched_yield()


def test_concurrent_push_and_update_keep_counts_consistent() -> None:
    """A receive thread decodes and pushes packets while the robot thread ticks, each call under
    the one lock their owner holds (the queue itself takes none).

    With ``max_command_lag`` 0 no message can complete inside a tick (a promoted message starts at
    ``now`` at the earliest), so every dequeued message is either skipped or returned by update():
    received == overflows + skipped + executed + still waiting, exactly. The robot ticks every 3 ms
    and messages last 1 ms, so a backlog always has stale messages to skip.
    """
    packets_count, per_packet = 1000, 16
    raw = DRIVE.message_from_raw
    frames = [
        bcnp.encode_packet(DRIVE, [raw(((p * per_packet + i) * 100, 0, 1)) for i in range(per_packet)])
        for p in range(packets_count)
    ]
    q = MessageQueue(MessageQueueConfig(capacity=64, link_timeout=1e6, max_command_lag=0.0))
    lock = threading.Lock()
    errors: list[BaseException] = []
    executed: list[int] = []
    producer_done = threading.Event()
    start = threading.Barrier(2, timeout=30)

    def producer() -> None:
        try:
            start.wait()
            for p, frame in enumerate(frames):
                view = bcnp.decode_packet(SCHEMA, frame)
                with lock:
                    q.handle_packet(view, p * 0.001)
                _yield_cpu()
        except BaseException as exc:
            errors.append(exc)
        finally:
            producer_done.set()

    def consumer() -> None:
        try:
            start.wait()
            now_us = 0
            extra = 0
            while extra < 200:
                if producer_done.is_set():
                    extra += 1
                now_us += 3000
                with lock:
                    k = cmd_index(q.update(now_us / US))
                if k is not None and (not executed or executed[-1] != k):
                    executed.append(k)
                _yield_cpu()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=producer), threading.Thread(target=consumer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    assert not any(t.is_alive() for t in threads)
    assert errors == []
    m = q.metrics
    assert m.received == packets_count * per_packet
    assert m.received == m.overflows + m.skipped + len(executed) + q.size()
    assert executed == sorted(set(executed))  # FIFO: ids only ever increase
    assert m.skipped > 0 and executed  # both paths were exercised
    assert q.size() == 0  # the consumer ran on after the producer finished


# -- property -----------------------------------------------------------------------------------------


class RulesOracle:
    """The §4 rules (plus the documented arrival-gap addition) for a link that stays alive, in µs.

    Deliberately plain: a list of (id, duration, arrival) and a cursor. It says, per tick, which
    message is active and from when, and how many messages were skipped or completed inside the
    tick. A message's arrival is the last receive time when it was queued.
    """

    def __init__(self, lag_us: int) -> None:
        self.lag_us = lag_us
        self.pending: list[tuple[int, int, int | None]] = []  # (id, duration_us, arrival_us)
        self.active: tuple[int, int, int] | None = None  # (id, start_us, duration_us)
        self.cursor: int | None = None
        self.skipped = self.completed = self.executed = 0

    def update(self, t: int) -> None:
        if self.active is not None and t >= self.active[1] + self.active[2]:
            self.cursor = self.active[1] + self.active[2]
            self.active = None
        if self.active is not None:
            return
        while self.pending:
            ident, duration, arrival = self.pending.pop(0)
            start = rule_start(self.cursor, duration, arrival, t, self.lag_us)
            if start is None:
                assert self.cursor is not None
                self.skipped += 1
                self.cursor += duration
                continue
            if t - start >= duration:
                self.completed += 1
                self.cursor = start + duration
                continue
            self.active = (ident, start, duration)
            self.executed += 1
            return


_op = st.one_of(
    st.tuples(st.just("push"), st.lists(st.integers(0, 60), min_size=1, max_size=6)),
    # tick lengths in µs: robot-loop-like ones, ones around the 100 ms lag, and arbitrary ones
    st.tuples(
        st.just("tick"),
        st.sampled_from([0, 1_000, 5_000, 10_000, 20_000, 50_000, 99_000, 100_000, 101_000])
        | st.integers(0, 150_000),
    ),
)


@settings(max_examples=examples(500), deadline=None)
@given(ops=st.lists(_op, max_size=40), lag_us=st.sampled_from([0, 20_000, 100_000, 1_000_000]))
def test_property_every_message_is_accounted_for_and_starts_never_go_back(
    ops: list[tuple[str, object]], lag_us: int
) -> None:
    q = MessageQueue(MessageQueueConfig(capacity=10_000, max_command_lag=lag_us / US))
    oracle = RulesOracle(lag_us)
    pushed = 0
    now_us = 0
    next_id = 0  # first id not yet taken out of the queue
    executed = skipped = completed_in_tick = 0
    last_rx: int | None = None  # what the queue records as a pushed message's arrival
    prev: tuple[int, int, int] | None = None  # (id, start_us, duration_us) of the last active message

    def step(t: int) -> None:
        nonlocal next_id, executed, skipped, completed_in_tick, prev, last_rx
        size_before = q.size()
        skipped_before = q.metrics.skipped
        q.notify_received(t / US)
        last_rx = t
        active = q.update(t / US)
        oracle.update(t)
        consumed = size_before - q.size()
        skipped_now = q.metrics.skipped - skipped_before
        k = cmd_index(active)
        assert consumed >= 0 and skipped_now >= 0
        if prev is not None and t < prev[1] + prev[2]:
            assert k == prev[0]  # the active message runs for its whole duration
        if active is None:
            assert q.size() == 0  # promotion stops only at an active message or an empty queue
            new = 0
        elif prev is not None and k == prev[0]:
            assert consumed == 0 and skipped_now == 0
            new = 0
        else:
            new = 1
            assert k == next_id + consumed - 1  # FIFO: the active one is the last taken out
            start = started_us(q)
            assert start is not None
            duration = active.raw[2] * 1000
            assert t - lag_us <= start <= t < start + duration
            if prev is not None:
                assert start >= prev[1] + prev[2]  # virtual starts never go back, never overlap
            prev = (k, start, duration)
            executed += 1
        in_tick = consumed - skipped_now - new
        assert in_tick >= 0
        completed_in_tick += in_tick
        skipped += skipped_now
        next_id += consumed
        # and exactly what the rules say
        assert (k, started_us(q)) == ((None, None) if oracle.active is None else oracle.active[:2])
        assert (executed, skipped, completed_in_tick) == (oracle.executed, oracle.skipped, oracle.completed)

    for kind, arg in ops:
        if kind == "push":
            assert isinstance(arg, list)
            batch = [cmd(pushed + i, d) for i, d in enumerate(arg)]
            oracle.pending.extend((pushed + i, d * 1000, last_rx) for i, d in enumerate(arg))
            pushed += len(arg)
            assert q.push_batch(batch) == len(arg)
        else:
            assert isinstance(arg, int)
            now_us += arg
            step(now_us)
    now_us += 10_000_000  # far in the future: the backlog is stale (or a fresh start after a gap)
    step(now_us)
    for _ in range(pushed + 1):
        if q.size() == 0:
            break
        now_us += 60_000
        step(now_us)

    assert q.size() == 0
    assert executed + skipped + completed_in_tick == pushed
    assert q.metrics.skipped == skipped
    assert q.metrics.received == pushed


def test_a_full_queue_keeps_only_the_accepted_bytes_of_big_packets() -> None:
    """A full queue taking one command from each of 200 packets of 65,535 DriveCmds
    must hold those commands, not 200 x 655 KB of packets."""
    schema = bcnp.load_schema(ROOT / "schema" / "messages.json")
    drive = schema["DriveCmd"]
    big = bcnp.encode_packet(drive, [drive(vx=0.5, omega=0.0, durationMs=20)] * 65_535)
    queue = MessageQueue(MessageQueueConfig(capacity=200))
    small = bcnp.encode_packet(drive, [drive(vx=0.1, omega=0.0, durationMs=20)] * 200)
    queue.handle_packet(bcnp.decode_packet(schema, small), 1.0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200):
            now = 1.0 + 0.02 * i
            queue.update(now)  # a tick: one command taken off, one slot free
            fresh = big[:100] + big[100:]  # a new 655 KB buffer, as each read from a socket is
            queue.handle_packet(bcnp.decode_packet(schema, fresh), now)
            del fresh
            assert len(queue) == 200
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert queue.metrics.overflows == 200 * 65_534
    assert held < 1_000_000, f"{held:,} bytes held for 200 queued commands"
    assert [m.vx for m in queue.drain()] == [0.5] * 200  # what was kept decodes intact


@pytest.mark.parametrize("extra", [0, 1])
def test_a_partly_accepted_packet_is_copied_only_below_the_compact_ratio(extra: int) -> None:
    """The accepted messages are copied out when they are under 1/COMPACT_RATIO of the packet's
    buffer; at that share or above, the queue keeps the packet's own buffer."""
    count = 40
    data = bcnp.encode_packet(DRIVE, [cmd(k, 20) for k in range(count)])
    # The most messages that are still under 1/COMPACT_RATIO of the buffer, or one more.
    take = (len(data) - 1) // (DRIVE.wire_size * COMPACT_RATIO) + extra
    view = bcnp.decode_packet(SCHEMA, data)
    assert view.buffer is data
    q = MessageQueue(MessageQueueConfig(capacity=take))
    refs = sys.getrefcount(data)
    q.handle_packet(view, 0.0)
    del view
    # Kept: the queued view and the run hold the buffer (and the test's view is gone); copied:
    # nothing in the queue does.
    assert sys.getrefcount(data) == (refs + 1 if extra else refs - 1)
    assert q.metrics.overflows == count - take
    assert [cmd_index(m) for m in q.drain()] == list(range(take))


def test_peek_reads_the_waiting_messages_in_order_and_leaves_them_queued() -> None:
    q = MessageQueue()
    q.handle_packet(packet([cmd(1), cmd(2), cmd(3)]), 0.0)
    q.push_batch([cmd(4), cmd(5)])
    assert q.update(0.0) is not None  # cmd(1) runs: not waiting any more
    assert [cmd_index(m) for m in q.peek(10)] == [2, 3, 4, 5]
    assert [cmd_index(m) for m in q.peek(3)] == [2, 3, 4]  # across the two runs, cut at the limit
    assert q.peek(0) == []
    assert q.size() == 4 and [cmd_index(m) for m in q.drain()] == [2, 3, 4, 5]


def _grouped_raw(messages: list[bcnp.Message]) -> list[tuple[bcnp.MessageSpec, list[tuple[int, ...]]]]:
    """``peek_raw``'s answer worked out from ``peek``'s: runs of one type, their wire integers."""
    out: list[tuple[bcnp.MessageSpec, list[tuple[int, ...]]]] = []
    for message in messages:
        spec = type(message).spec
        if not out or out[-1][0] is not spec:
            out.append((spec, []))
        out[-1][1].append(message.raw)
    return out


def _some(spec: bcnp.MessageSpec, k: int) -> bcnp.Message:
    if spec is DRIVE:
        return cmd(k, 20 + k % 7)
    return TEST_CMD(value1=k / 8, value2=-k / 4, durationMs=10 + k % 5)


@settings(max_examples=examples(150), deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("packet"), st.booleans(), st.integers(1, 40), st.booleans()),
            st.tuples(st.just("push"), st.lists(st.booleans(), min_size=1, max_size=6)),
            st.tuples(st.just("tick"), st.integers(0, 120)),
            st.tuples(st.just("clear")),
        ),
        max_size=40,
    ),
    limit=st.integers(0, 30),
)
def test_peek_raw_reads_what_peek_reads_as_wire_integers(steps: list[tuple], limit: int) -> None:
    """Over packets of two types (some cut by a full queue, some copied down), pushes of mixed
    types, ticks that take messages off and clears: ``peek_raw`` is ``peek`` as wire integers,
    grouped by type, and reads the same again."""
    q = MessageQueue(MessageQueueConfig(capacity=24))
    now, k = 0.0, 0
    for step in steps:
        if step[0] == "packet":
            _, drive, count, clear = step
            spec = DRIVE if drive else TEST_CMD
            q.handle_packet(packet([_some(spec, k + i) for i in range(count)], clear, spec=spec), now)
            k += count
        elif step[0] == "push":
            q.push_batch([_some(DRIVE if drive else TEST_CMD, k + i) for i, drive in enumerate(step[1])])
            k += len(step[1])
        elif step[0] == "tick":
            now += step[1] / 1000
            tick(q, now)
        else:
            q.clear()
        expected = _grouped_raw(q.peek(limit))
        assert q.peek_raw(limit) == expected
        assert q.peek_raw(limit) == expected


def test_peek_raw_unpacks_a_packet_once() -> None:
    q = MessageQueue()
    q.handle_packet(packet([cmd(1), cmd(2), cmd(3)]), 0.0)
    q.handle_packet(packet([cmd(4)]), 0.0)
    first = q.peek_raw(10)
    assert first == [(DRIVE, [cmd(k).raw for k in (1, 2, 3, 4)])]
    assert q.update(0.0) is not None  # cmd(1) runs
    again = q.peek_raw(10)
    assert again == [(DRIVE, [cmd(k).raw for k in (2, 3, 4)])]
    # The same tuples: the packets were not unpacked again.
    assert all(a is b for a, b in zip(again[0][1], first[0][1][1:], strict=True))
