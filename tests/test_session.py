"""The host sessions' sans-I/O cores on a made-up timeline: the outage layer (LinkWatch), the
replay's schedule and resume (ReplaySession) and the follower's core (FollowSession). No
sockets, no clock: each step is told the time, the link's status and the telemetry, and what
it answers is checked."""

from __future__ import annotations

import pytest

from bcnp.host.link.core.state import LinkLoss, LinkState, LinkStatus
from bcnp.host.sessions.core.follow import FollowSession
from bcnp.host.sessions.core.replay import ReplaySession
from bcnp.host.sessions.core.session import EndedDown, LinkWatch, Outage, Send
from bcnp.paths import DriveLimits, PathCommand, from_commands
from bcnp.schema import Schema
from bcnp.wire import PacketView, decode_packet, encode_packet
from messages import DRIVE_CMD_SPEC, DRIVETRAIN_TELEMETRY_SPEC, SCHEMA


def up(generation: int, last_loss: LinkLoss | None = None) -> LinkStatus:
    return LinkStatus(LinkState.CONNECTED, generation, None, 0, "", generation - 1, last_loss)


def down(generation: int, at: float, reason: str = "closed by the robot") -> LinkStatus:
    loss = LinkLoss(at, reason)
    return LinkStatus(LinkState.RECONNECTING, generation, at, 1, reason, generation, loss)


def test_an_outage_is_dated_when_the_robot_was_last_heard_and_ends_with_a_new_connection() -> None:
    watch = LinkWatch(generation=1)
    assert watch.observe(up(1), now=100.0, elapsed=0.0) == (None, None)
    # Seen down at session time 5.0 (client clock 105.0); the robot was last heard at 104.6.
    went, back = watch.observe(down(1, at=104.6), now=105.0, elapsed=5.0)
    assert back is None and went == Outage(pytest.approx(4.6), "closed by the robot")  # type: ignore[arg-type]
    assert watch.observe(down(1, at=104.6), now=105.5, elapsed=5.5) == (None, None)  # still the same one
    went, back = watch.observe(up(2, LinkLoss(104.6, "closed by the robot")), now=106.0, elapsed=6.0)
    assert went is None and back is watch.outages[0] and back.back_at == 6.0
    assert watch.current is None and len(watch.outages) == 1


def test_a_link_lost_and_back_between_two_looks_is_one_outage_that_only_ends() -> None:
    watch = LinkWatch(generation=1)
    went, back = watch.observe(up(2, LinkLoss(101.0, "no telemetry for 0.5 s")), now=102.0, elapsed=2.0)
    assert went is None and back is not None
    assert (back.lost_at, back.back_at, back.reason) == (1.0, 2.0, "no telemetry for 0.5 s")


def commands(n: int, ms: int = 100) -> list[PathCommand]:
    return [PathCommand(0.1 * (i + 1), 0.0, ms) for i in range(n)]


def take(session: ReplaySession, elapsed: float) -> Send | None:
    send = session.step(elapsed, elapsed, True)
    if send is not None:
        session.delivered(send, 1)
    return send


def test_the_replay_sends_just_in_time_and_never_more_than_max_ahead() -> None:
    session = ReplaySession(commands(30), DRIVE_CMD_SPEC, lead=0.5, max_ahead=8)
    first = take(session, 0.0)
    assert first is not None and first.clear and len(first.messages) == 5  # those starting before 0.5 s
    assert take(session, 0.0) is None  # nothing new is due
    second = take(session, 0.35)
    assert second is not None and not second.clear
    assert session.sent <= 3 + 1 + 8  # the running command (index 3) plus max_ahead
    assert session.step(1.0, 1.0, False) is None  # down: nothing is sent


def test_after_an_outage_the_replay_resumes_now_with_the_running_commands_remainder() -> None:
    session = ReplaySession(commands(20), DRIVE_CMD_SPEC, lead=0.3)
    take(session, 0.0)
    outage = Outage(lost_at=0.42, reason="closed by the robot")
    session.went(outage, 0.5)
    assert session.step(0.8, 0.8, False) is None
    outage.back_at = 1.05
    session.back(outage, 1.05)
    send = take(session, 1.05)
    assert send is not None and send.clear  # the robot's queue is empty: CLEAR_QUEUE first
    remainder = send.messages[0]
    assert (remainder.vx, remainder.durationMs) == (pytest.approx(1.1), 50)  # command 10, 50 ms of it left
    assert outage.resumed_at == 10 and outage.dropped == 10 - 4 + 1  # from the one running at 0.42


def test_a_path_that_ends_with_the_link_down_ends_the_session_with_the_outage() -> None:
    session = ReplaySession(commands(5), DRIVE_CMD_SPEC, lead=1.0, settle=0.3)
    take(session, 0.0)
    outage = Outage(lost_at=0.2, reason="reset")
    assert not session.finished(0.5, outage)
    with pytest.raises(EndedDown, match=r"link lost at 0.20 s \(reset\)"):
        session.finished(0.8, outage)
    # Lost only after the whole path had run: the session is over, not failed.
    assert session.finished(0.9, Outage(lost_at=0.6, reason="reset"))
    assert session.finished(0.8, None) and session.where() == "5/5 commands sent"


def test_a_path_ends_clean_only_once_a_robot_that_sends_telemetry_is_heard_after_its_end() -> None:
    """Over UDP (or a TCP link cut without a close) nothing tells the host that the robot
    dropped the link in the path's last moments but the silence, which the client judges
    only 0.5 s after the last telemetry: the settle (0.3 s) alone would end the session
    clean while the robot had stopped short of the end."""
    origin = 100.0  # the loop's clock at session time 0
    sample = telemetry(SCHEMA, 0, 0.0, 0.0, 0.0, 0.0)

    def run_to_the_end(heard_until: float) -> ReplaySession:
        """Five 100 ms commands (the path ends at 0.5 s), telemetry every 40 ms until ``heard_until``."""
        session = ReplaySession(commands(5), DRIVE_CMD_SPEC, lead=1.0, settle=0.3)
        t = 0.0
        while t < 0.8 - 1e-9:
            if t <= heard_until:
                session.on_telemetry(sample, origin + t)
            send = session.step(t, origin + t, True)
            if send is not None:
                session.delivered(send, 1)
            t = round(t + 0.04, 2)
        return session

    # Heard after the end: over once the path and its settle have run.
    heard = run_to_the_end(0.56)
    assert heard.last_heard == pytest.approx(0.56) and heard.finished(0.8, None)
    # Last heard 0.2 s before the end: not over at the settle's end; the client's silence
    # judgement (0.5 s after 0.28) turns it into an outage, which ends it failed.
    silent = run_to_the_end(0.28)
    assert not silent.finished(0.8, None) and not silent.finished(1.79, None)
    with pytest.raises(EndedDown, match=r"link lost at 0.28 s \(no telemetry for 0.5 s\)"):
        silent.finished(0.8, Outage(lost_at=0.28, reason="no telemetry for 0.5 s"))
    # A client that never judges silence: the doubt ends it, once HEARD_WAIT_S has passed.
    with pytest.raises(EndedDown, match=r"last heard at 0.28 s, before the path's end at 0.50 s"):
        silent.finished(1.8, None)
    # A robot that sends no telemetry at all is not judged by it.
    session = ReplaySession(commands(5), DRIVE_CMD_SPEC, lead=1.0, settle=0.3)
    take(session, 0.0)
    assert session.last_heard is None and session.finished(0.8, None)


# -- the follower's core ------------------------------------------------------------------------

LIMITS = DriveLimits()
#: 1 m straight ahead at 0.5 m/s (with the robot's ramps), then at rest.
STRAIGHT = from_commands([PathCommand(0.5, 0.0, 2000)], LIMITS)


def telemetry(
    schema: Schema, stamp_ms: int, left: float, right: float, left_v: float, right_v: float
) -> PacketView:
    """One telemetry packet of one sample, decoded as the client hands it over."""
    data = encode_packet(DRIVETRAIN_TELEMETRY_SPEC, [(left_v, right_v, left, right, stamp_ms)])
    return decode_packet(schema, data)


def follow(session: FollowSession, now: float, connected: bool = True) -> Send | None:
    send = session.step(now, now, connected)
    if send is not None:
        session.delivered(send, 1)
    return send


def test_the_follower_plans_the_reference_ahead_and_corrects_a_robot_that_lags() -> None:
    session = FollowSession(STRAIGHT, LIMITS, command_spec=DRIVE_CMD_SPEC)
    first = follow(session, 0.0)
    # Nothing heard yet: the reference's own speeds for the horizon, replacing the robot's queue.
    assert first is not None and first.clear
    assert [m.durationMs for m in first.messages] == [20] * 10
    assert follow(session, 0.02) is None  # no news, the plan still reaches past the horizon
    # Half a second in, the robot reports it has not moved: the correction asks for more than
    # the reference's speed, for 40 ms, then the reference's speeds again.
    for t in range(2, 26):
        follow(session, t * 0.02)
    ref = STRAIGHT.sample(0.5)
    session.on_telemetry(telemetry(SCHEMA, 500, 0.0, 0.0, ref.vx, ref.vx), now=0.5)
    send = follow(session, 0.52)
    assert send is not None and send.clear
    correction = send.messages[0]
    assert correction.durationMs == 40 and correction.vx > STRAIGHT.sample(0.55).vx + 0.1
    assert session.max_error == pytest.approx(STRAIGHT.sample(session.reference_time).x, abs=0.03)


def test_the_followers_reference_waits_through_an_outage_and_while_the_robot_stands_still() -> None:
    session = FollowSession(STRAIGHT, LIMITS, command_spec=DRIVE_CMD_SPEC)
    for t in range(0, 51):  # 1 s with the link up
        follow(session, t * 0.02)
    assert session.reference_time == pytest.approx(1.0)
    outage = Outage(lost_at=0.8, reason="closed by the robot")
    session.went(outage, 1.0)  # seen at 1.0 s: the robot stopped when it last heard us
    assert session.reference_time == pytest.approx(0.8)
    assert follow(session, 1.5, connected=False) is None
    outage.back_at = 2.0
    session.back(outage, 2.0)
    send = follow(session, 2.0)
    assert send is not None and send.clear and session.reference_time == pytest.approx(0.8)
    # The robot answers but stands still while the reference moves: after 0.1 s by its own
    # clock the reference goes back to where the standing began and stays there.
    for n in range(10):
        session.on_telemetry(telemetry(SCHEMA, 3000 + 20 * n, 0.4, 0.4, 0.0, 0.0), now=2.02 + 0.02 * n)
        follow(session, 2.02 + 0.02 * n)
    held = session.reference_time
    assert held == pytest.approx(0.82, abs=0.03)
    for n in range(10, 20):
        session.on_telemetry(telemetry(SCHEMA, 3000 + 20 * n, 0.4, 0.4, 0.0, 0.0), now=2.02 + 0.02 * n)
        follow(session, 2.02 + 0.02 * n)
    assert session.reference_time == held


def test_the_follower_is_done_at_the_end_and_at_rest() -> None:
    session = FollowSession(STRAIGHT, LIMITS, command_spec=DRIVE_CMD_SPEC, tolerance=0.02)
    end = STRAIGHT.end
    t = 0.0
    while t < STRAIGHT.total + 0.1:
        session.on_telemetry(telemetry(SCHEMA, round(t * 1000), 0.0, 0.0, 0.5, 0.5), now=t)
        follow(session, t)
        t += 0.02
    assert not session.done  # moving
    session.on_telemetry(telemetry(SCHEMA, round(t * 1000), 0.0, 0.0, 0.0, 0.0), now=t)
    follow(session, t)
    t += 0.02
    assert not session.done  # at rest, but the estimate is still at the start
    session.on_telemetry(telemetry(SCHEMA, round(t * 1000), end.x, end.x, 0.3, 0.3), now=t)
    follow(session, t)
    t += 0.02
    assert not session.done  # at the end, still moving: it would coast on
    session.on_telemetry(telemetry(SCHEMA, round(t * 1000), end.x, end.x, 0.0, 0.0), now=t)
    assert follow(session, t) is None and session.done
    result = session.result(t)
    assert result.final_error < 0.02 and result.reference_time == pytest.approx(STRAIGHT.total)
