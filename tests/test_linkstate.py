"""The host's link state machine alone: events and ``now`` in, actions out; no socket, no clock."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bcnp.host.link.core.state import (
    Connect,
    Disconnect,
    GiveUp,
    LinkLoss,
    LinkMachine,
    LinkState,
    ReconnectPolicy,
    SendTimes,
    Wait,
)


def up(policy: ReconnectPolicy | None = None, now: float = 0.0) -> LinkMachine:
    machine = LinkMachine(policy, random.Random(1))
    machine.connected(now)
    return machine


def test_a_ready_link_waits_and_a_lost_one_is_retried_at_once() -> None:
    machine = up()
    assert machine.poll(1.0) == Wait(None)  # no telemetry yet: silence is not judged
    machine.lost(2.0, "closed by the robot")
    status = machine.status()
    assert (status.state, status.lost_since, status.losses) == (LinkState.RECONNECTING, 0.0, 1)
    assert machine.poll(2.0) == Connect(1)
    machine.connected(2.1)
    status = machine.status()
    assert status.connected and status.generation == 2 and status.attempts == 0
    # A connected status carries no loss; the latest one is kept apart.
    assert status.lost_since is None and status.lost_reason == "" and status.last_error == ""
    assert status.last_loss == LinkLoss(0.0, "closed by the robot")
    # Each state equals the word the docs use for it.
    assert status.state == "connected" and f"{status.state}" == "connected"
    assert [str(state) for state in LinkState] == ["connecting", "connected", "reconnecting", "closed"]


def test_telemetry_silence_is_a_lost_link_from_when_the_robot_was_last_heard() -> None:
    machine = up(ReconnectPolicy(silence_timeout=0.5))
    machine.heard(1.0)
    assert machine.poll(1.2) == Wait(1.5)
    assert machine.poll(1.5) == Wait(1.5)  # at the limit: not yet
    action = machine.poll(1.51)
    assert isinstance(action, Disconnect) and "no telemetry for 0.5 s" in action.reason
    assert machine.status().lost_since == 1.0
    assert machine.poll(1.51) == Connect(1)


def test_a_burst_released_late_dates_the_loss_by_when_the_robot_sent_it() -> None:
    """Telemetry every 20 ms of robot time (stamps 5.00 s on) comes through in a few ms;
    then the link stalls, the robot goes quiet 0.2 s later, and 1.8 s after that the
    stalled packets arrive together, followed by the reset."""
    machine = up(now=0.0)
    for i in range(10):
        machine.heard(10.0 + i * 0.02 + 0.003 * (i % 3), stamp=5.0 + i * 0.02)  # host 10.00 .. 10.18
    for i in range(10, 20):  # stamps 5.20 .. 5.38: sent 10.20 .. 10.38, all arriving at 12.2
        machine.heard(12.2, stamp=5.0 + i * 0.02)
    machine.lost(12.21, "reset by the robot")
    assert machine.status().lost_since == pytest.approx(10.38)
    # A new connection starts over (the robot's clock may have restarted): its first
    # packet is dated by its arrival, not by the old connection's offset (5.0 s).
    machine.connected(20.0)
    machine.heard(20.01, stamp=5.5)
    machine.lost(20.5, "closed by the robot")
    assert machine.status().lost_since == pytest.approx(20.01)
    # Without stamps the same arrivals date it when the burst arrived.
    plain = up(now=0.0)
    for i in range(10):
        plain.heard(10.0 + i * 0.02)
    plain.heard(12.2)
    plain.lost(12.21, "reset by the robot")
    assert plain.status().lost_since == 12.2


def test_send_times_follow_the_fastest_arrival_and_start_over_when_stamps_go_back() -> None:
    times = SendTimes(window=1.0)
    assert times.sent(100.0, None) == 100.0  # no stamp: its arrival
    assert times.sent(100.0, 7.0) == 100.0  # the first stamp: its arrival, offset 93
    assert times.sent(100.5, 7.2) == pytest.approx(100.2)  # 0.3 s late: dated 93 + 7.2
    assert times.sent(100.25, 7.25) == pytest.approx(100.25)  # as fast as the first
    assert times.sent(100.3, 7.3) == pytest.approx(100.3)
    assert times.sent(100.36, 7.3) == pytest.approx(100.3)  # a repeated stamp: sent with it
    assert times.sent(100.38, 7.28) == pytest.approx(100.28)  # out of order: its own send time
    assert times.sent(100.45, 7.3) == 100.45  # the newest stamp again 0.15 s on: stuck, arrival
    assert times.sent(101.0, 0.0) == 101.0  # more than the window back (a restart, a wrap): over
    assert times.sent(101.5, 0.4) == pytest.approx(101.4)  # from the new offset, 101.0
    times.reset()
    assert times.sent(200.0, 0.5) == 200.0


def test_stamps_left_at_zero_date_packets_by_their_arrival() -> None:
    times = SendTimes()
    assert [times.sent(t, 0.0) for t in (5.0, 5.04, 5.2, 6.0)] == [5.0, 5.0, 5.2, 6.0]


def test_send_times_follow_a_lasting_change_within_the_window_and_never_pass_the_arrival() -> None:
    times = SendTimes(window=1.0)
    for i in range(50):  # 20 ms apart on both clocks, offset 90
        assert times.sent(100.0 + i * 0.02, 10.0 + i * 0.02) == pytest.approx(100.0 + i * 0.02)
    # The robot's clock stops for 3 s (a paused simulator), then runs on: every packet now
    # takes 3 s more from stamp to arrival. Dated early while the window holds older ones...
    assert times.sent(104.0, 11.0) == pytest.approx(101.0)
    # ... and by its arrival once the window (1 s of robot time) has moved past them.
    for i in range(1, 60):
        arrived, stamp = 104.0 + i * 0.02, 11.0 + i * 0.02
        sent = times.sent(arrived, stamp)
        assert sent <= arrived
    assert sent == pytest.approx(arrived)
    # A robot clock 1 % slow: dated at most 1 % of the window early.
    slow = SendTimes(window=1.0)
    for i in range(500):
        arrived = i * 0.0202
        sent = slow.sent(arrived, i * 0.02)
        assert arrived - 0.0102 <= sent <= arrived


def test_silence_is_not_judged_without_a_silence_timeout() -> None:
    machine = up(ReconnectPolicy(silence_timeout=None))
    machine.heard(1.0)
    assert machine.poll(100.0) == Wait(None)


def test_backoff_doubles_to_its_cap_with_full_jitter_and_resets_on_connect() -> None:
    machine = up(ReconnectPolicy(initial_backoff=0.1, max_backoff=1.0, jitter=1.0))
    machine.lost(0.0, "reset")
    now, waits = 0.0, []
    for attempt in range(1, 9):
        action = machine.poll(now)
        assert action == Connect(attempt)
        machine.failed(now, "refused")
        wait = machine.poll(now)
        assert isinstance(wait, Wait) and wait.until is not None
        waits.append(wait.until - now)
        now = wait.until
    caps = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    assert all(0 <= w <= cap for w, cap in zip(waits, caps, strict=True))
    assert machine.status().attempts == 8
    machine.poll(now)
    machine.connected(now)
    machine.lost(now + 1, "reset")
    assert machine.poll(now + 1) == Connect(1)
    machine.failed(now + 1, "refused")
    wait = machine.poll(now + 1)
    assert isinstance(wait, Wait) and wait.until is not None and wait.until - (now + 1) <= 0.1


def test_no_jitter_waits_exactly_the_backoff() -> None:
    machine = up(ReconnectPolicy(initial_backoff=0.1, max_backoff=0.4, jitter=0.0))
    machine.lost(0.0, "reset")
    now = 0.0
    for expected in (0.1, 0.2, 0.4, 0.4):
        assert isinstance(machine.poll(now), Connect)
        machine.failed(now, "refused")
        assert machine.poll(now) == Wait(pytest.approx(now + expected))
        now += expected


def test_giving_up_counts_from_when_the_robot_was_last_heard() -> None:
    machine = up(ReconnectPolicy(give_up_after=2.0, silence_timeout=0.5))
    machine.heard(10.0)
    assert isinstance(machine.poll(10.6), Disconnect)
    now = 10.6
    while True:
        action = machine.poll(now)
        if isinstance(action, GiveUp):
            break
        if isinstance(action, Connect):
            machine.failed(now, "connection refused")
        else:
            assert isinstance(action, Wait) and action.until is not None
            assert action.until <= 12.0  # never sleeps past the give-up moment
            now = action.until
    assert now == pytest.approx(12.0)
    assert action.reason == "no link for 2.0 s (gave up after 2 s): connection refused"
    assert machine.status().state is LinkState.CLOSED


def test_a_loss_dated_back_past_the_give_up_limit_is_still_tried_once() -> None:
    """A stall longer than ``give_up_after``, then a close: the robot went quiet before the
    limit, but the host tries once before giving up."""
    machine = up(ReconnectPolicy(give_up_after=1.0, silence_timeout=None))
    machine.heard(10.0, stamp=1.0)
    machine.heard(12.0, stamp=1.2)  # sent at 10.2, held back 1.8 s
    machine.lost(12.0, "closed by the robot")
    assert machine.status().lost_since == pytest.approx(10.2)
    assert machine.poll(12.0) == Connect(1)
    machine.failed(12.0, "connection refused")
    action = machine.poll(12.0)
    assert isinstance(action, GiveUp) and action.reason.startswith("no link for 1.8 s")


def test_a_fatal_failure_and_reconnecting_off_close_for_good() -> None:
    machine = up()
    machine.lost(1.0, "reset")
    assert machine.poll(1.0) == Connect(1)
    machine.failed(1.0, "schema mismatch", fatal=True)
    assert machine.poll(5.0) == GiveUp("schema mismatch")

    off = up(ReconnectPolicy(enabled=False))
    off.lost(1.0, "closed by the robot")
    assert off.poll(1.0) == GiveUp("closed by the robot")


def test_a_loss_reported_twice_counts_once() -> None:
    machine = up()
    machine.lost(1.0, "send failed")
    machine.lost(1.0, "closed by the robot")
    status = machine.status()
    assert status.losses == 1 and status.last_error == "send failed"


def test_describe_says_state_age_attempt_and_cause() -> None:
    machine = up()
    assert machine.status().describe(0.0) == "connected"
    machine.heard(1.0)
    machine.lost(1.5, "closed by the robot")
    machine.poll(1.5)
    machine.failed(1.5, "connection refused")
    assert machine.status().describe(3.0) == "reconnecting (lost 2.0 s ago, attempt 1): connection refused"
    assert machine.status().lost_reason == "closed by the robot"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_backoff": 0},
        {"initial_backoff": 2, "max_backoff": 1},
        {"jitter": 1.5},
        {"silence_timeout": 0},
        {"give_up_after": -1},
    ],
)
def test_bad_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ReconnectPolicy(**kwargs)


events = st.lists(
    st.tuples(
        st.sampled_from(["heard", "lost", "failed", "fatal", "poll", "connect"]),
        st.floats(min_value=0.0, max_value=2.0),
    ),
    max_size=60,
)


@given(events, st.booleans(), st.none() | st.floats(min_value=0.0, max_value=5.0))
def test_any_sequence_keeps_the_machine_consistent(
    sequence: list[tuple[str, float]], enabled: bool, give_up: float | None
) -> None:
    """Whatever happens: closed stays closed, a Connect only comes while down,
    a wait never lies in the past, a loss is dated within its link and the
    generation only grows."""
    machine = up(ReconnectPolicy(enabled=enabled, give_up_after=give_up))
    now = connected_at = 0.0
    generation = machine.generation
    for name, dt in sequence:
        now += dt
        before = machine.state
        if name == "heard":
            machine.heard(now, stamp=now / 2 if dt > 0.5 else None)
        elif name == "lost":
            machine.lost(now, "reset")
        elif name in ("failed", "fatal") and before is LinkState.CONNECTING:
            machine.failed(now, "refused", fatal=name == "fatal")
        elif name == "connect" and before is LinkState.CONNECTING:
            machine.connected(now)
            connected_at = now
        elif name == "poll":
            action = machine.poll(now)
            if isinstance(action, Connect):
                assert before is LinkState.RECONNECTING
            if isinstance(action, Wait) and action.until is not None:
                assert action.until >= now - 1e-9 or before is LinkState.CONNECTED
            if isinstance(action, GiveUp):
                assert machine.state is LinkState.CLOSED
        if before is LinkState.CLOSED:
            assert machine.state is LinkState.CLOSED
        lost_since = machine.status().lost_since
        assert lost_since is None or connected_at - 1e-9 <= lost_since <= now + 1e-9  # dated within the link
        assert machine.generation >= generation
        generation = machine.generation
