"""The host's link state machine alone: events and ``now`` in, actions out; no socket, no clock."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bcnp.host.linkstate import (
    Connect,
    Disconnect,
    GiveUp,
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
    assert (status.state, status.lost_since, status.losses) == (LinkState.BACKOFF, 0.0, 1)
    assert machine.poll(2.0) == Connect(1)
    machine.connected(2.1)
    status = machine.status()
    assert status.connected and status.generation == 2 and status.attempts == 0
    assert status.lost_since is None and status.last_lost_at == 0.0
    assert status.lost_reason == "closed by the robot"


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
    assert machine.status().lost_since == pytest.approx(10.38, abs=1e-3)  # 0.2 ms drift allowance
    # Without stamps the same arrivals date it when the burst arrived.
    plain = up(now=0.0)
    for i in range(10):
        plain.heard(10.0 + i * 0.02)
    plain.heard(12.2)
    plain.lost(12.21, "reset by the robot")
    assert plain.status().lost_since == 12.2


def test_send_times_follow_the_fastest_arrival_and_start_over_when_stamps_go_back() -> None:
    times = SendTimes(drift=0.0)
    assert times.sent(100.0, None) == 100.0  # no stamp: its arrival
    assert times.sent(100.0, 7.0) == 100.0  # the first stamp: its arrival, offset 93
    assert times.sent(100.5, 7.2) == pytest.approx(100.2)  # 0.3 s late: dated 93 + 7.2
    assert times.sent(100.25, 7.25) == pytest.approx(100.25)  # faster than any before
    assert times.sent(100.31, 7.3) == pytest.approx(100.3)  # the offset is now 93.0 again
    assert times.sent(101.0, 0.0) == 101.0  # went back (a restart, a wrap): start over
    assert times.sent(101.02, 0.0) == 101.02  # stamps that do not advance: arrival
    assert times.sent(101.5, 0.4) == pytest.approx(101.42)  # from the last start, offset 101.02
    times.reset()
    assert times.sent(200.0, 0.5) == 200.0


def test_send_times_let_the_offset_drift_slowly_and_are_never_after_the_arrival() -> None:
    times = SendTimes(drift=1e-3)
    times.sent(0.0, 0.0)
    # A robot clock 500 ppm slow: each arrival 0.5 ms later than the stamps say.
    for i in range(1, 101):
        sent = times.sent(i * 1.0005, float(i))
        assert sent <= i * 1.0005
    assert sent == pytest.approx(100.05, abs=1e-9)  # followed: drift within the allowance
    # A late one: its send time, give or take the allowance for one second (1 ms).
    assert times.sent(101.5, 101.0) == pytest.approx(101.051, abs=1e-9)


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
    a wait never lies in the past and the generation only grows."""
    machine = up(ReconnectPolicy(enabled=enabled, give_up_after=give_up))
    now = 0.0
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
        elif name == "poll":
            action = machine.poll(now)
            if isinstance(action, Connect):
                assert before is LinkState.BACKOFF
            if isinstance(action, Wait) and action.until is not None:
                assert action.until >= now - 1e-9 or before is LinkState.READY
            if isinstance(action, GiveUp):
                assert machine.state is LinkState.CLOSED
        if before is LinkState.CLOSED:
            assert machine.state is LinkState.CLOSED
        assert machine.generation >= generation
        generation = machine.generation
