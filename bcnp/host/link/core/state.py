"""A host's view of its link to a robot: a small state machine, no sockets, no clock.

The robot drops a controller whose link is lost (no packet for the link
timeout: TCP closed, UDP unpaired), restarts, reboots its radio; a host must
notice, connect and handshake again on its own, and stop trying when trying
cannot help. :class:`LinkMachine` takes what happened (``connected``,
``failed``, ``lost``, ``heard``) with ``now`` and answers :meth:`LinkMachine.poll`
with what to do next: :class:`Connect`, :class:`Disconnect` (the robot went
silent), :class:`Wait` or :class:`GiveUp`. The socket loop around it (the
client's :class:`bcnp.host.link.keeper.LinkKeeper`) only performs the answers.

States, after grpc's connectivity states (its READY is CONNECTED here, its
TRANSIENT_FAILURE RECONNECTING), each equal to the word it is named by
(``status().state == "connected"``)::

    CONNECTING ──connected──► CONNECTED ──lost / silent──► RECONNECTING ──retry time──► CONNECTING
         │                                                      │
         └───failed──► RECONNECTING (or CLOSED: fatal, give-up, reconnecting off)

The policy is plain data (:class:`ReconnectPolicy`): backoff doubling from
``initial_backoff`` to ``max_backoff`` with full jitter (each wait drawn from
[0, backoff], so hosts that lost the same robot do not retry in lockstep), the
telemetry silence that counts as a lost link, and how long to keep trying.
"""

from __future__ import annotations

import collections
import enum
import random
from dataclasses import dataclass

__all__ = [
    "Connect",
    "Disconnect",
    "GiveUp",
    "LinkLoss",
    "LinkMachine",
    "LinkState",
    "LinkStatus",
    "ReconnectPolicy",
    "SendTimes",
    "Wait",
]


class LinkState(enum.StrEnum):
    """Where the link is; each state is equal to its word (``LinkState.CONNECTED == "connected"``)."""

    CONNECTING = "connecting"  # the first connect and handshake under way, or a new attempt's
    CONNECTED = "connected"  # handshake passed, the link is up
    RECONNECTING = "reconnecting"  # lost; waiting before the next attempt
    CLOSED = "closed"  # for good: closed by the user, a fatal error, or given up


@dataclass(frozen=True)
class ReconnectPolicy:
    """When a host reconnects, and when it decides its link is gone."""

    #: ``False``: a lost link closes the client for good (the first loss is final).
    enabled: bool = True
    #: First wait after a loss or a failed attempt, doubled after each failure ...
    initial_backoff: float = 0.1
    #: ... up to this: a robot that comes back is reconnected within this (plus a handshake).
    max_backoff: float = 0.8
    #: Each wait is drawn uniformly from [(1 - jitter) * backoff, backoff]: 1 is full jitter.
    jitter: float = 1.0
    #: No telemetry for this long on a link that has sent some: the link is lost.
    #: ``None``: only a closed or reset connection counts (a robot without telemetry).
    silence_timeout: float | None = 0.5
    #: Give up after this many seconds without a link; ``None``: keep trying.
    give_up_after: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.initial_backoff <= self.max_backoff:
            raise ValueError("backoff must be 0 < initial_backoff <= max_backoff seconds")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")
        if self.silence_timeout is not None and self.silence_timeout <= 0:
            raise ValueError("silence_timeout must be > 0 seconds, or None")
        if self.give_up_after is not None and self.give_up_after < 0:
            raise ValueError("give_up_after must be >= 0 seconds, or None")


@dataclass(frozen=True)
class Connect:
    """Open a new connection and handshake; report :meth:`LinkMachine.connected` or ``failed``."""

    attempt: int  # 1 for the first attempt after a loss


@dataclass(frozen=True)
class Disconnect:
    """Close the socket: the robot is silent. The machine already counts the link as lost."""

    reason: str


@dataclass(frozen=True)
class Wait:
    """Nothing to do before ``until`` (``None``: until something happens)."""

    until: float | None


@dataclass(frozen=True)
class GiveUp:
    """Stop for good: ``reason`` says why, in a sentence for the user."""

    reason: str


Action = Connect | Disconnect | Wait | GiveUp


@dataclass(frozen=True)
class LinkLoss:
    """One lost link: when the robot was last known to be there (when it sent the last
    telemetry heard, or the handshake), on the host's clock, and why the link went."""

    at: float
    reason: str


@dataclass(frozen=True)
class LinkStatus:
    """What a user sees of the link at one moment. A connected status carries no loss:
    ``lost_since`` is ``None``, ``lost_reason`` and ``last_error`` are empty; the latest
    loss stays in ``last_loss``."""

    state: LinkState
    #: Connections made so far (1 after the first handshake); a new one means the robot's queue is empty.
    generation: int
    #: While the link is down: when the robot was last known to be there. ``None`` while connected.
    lost_since: float | None
    #: Attempts since the link was lost.
    attempts: int
    #: While the link is down or closed: why the last attempt failed, or why the link went. ``""``
    #: while connected.
    last_error: str
    #: Links lost since the first connection.
    losses: int
    #: The latest lost link, kept once the link is back (``None`` before the first loss): a host
    #: that learns of a loss only after the reconnect dates its outage from here.
    last_loss: LinkLoss | None = None

    @property
    def connected(self) -> bool:
        return self.state is LinkState.CONNECTED

    @property
    def lost_reason(self) -> str:
        """While the link is down: why it went (``last_error`` may be a later failed attempt's).
        ``""`` while connected."""
        if self.lost_since is None or self.last_loss is None:
            return ""
        return self.last_loss.reason

    def describe(self, now: float) -> str:
        """One line: ``connected``, ``reconnecting (lost 1.2 s ago, attempt 3): why``, ..."""
        if self.state is LinkState.CONNECTED:
            return "connected"
        parts = []
        if self.lost_since is not None:
            parts.append(f"lost {now - self.lost_since:.1f} s ago")
        if self.attempts:
            parts.append(f"attempt {self.attempts}")
        detail = f" ({', '.join(parts)})" if parts else ""
        why = f": {self.last_error}" if self.last_error else ""
        return f"{self.state.value}{detail}{why}"


class SendTimes:
    """When the robot sent each telemetry packet, on the host's clock, from the robot's own
    timestamps: the stamp plus the smallest arrival-less-stamp among the packets of the
    last ``window`` seconds of robot time (the fastest trip, which includes the shortest
    one-way delay). A burst the network held back (a TCP link stalled, then released)
    arrives at once but is dated when it was sent, so a link lost after it is dated when
    the robot really went quiet.

    Never later than the arrival. The window lets the estimate follow a lasting change
    (a simulator paused, clocks at different rates, a slower route) within ``window``
    seconds of robot time. A stamp more than ``window`` behind the newest (a restart, a
    wrap) starts over; one that repeats or comes out of order (UDP) is dated like any
    while the newest stamp arrived less than ``stuck`` seconds before, and by its
    arrival after that (a robot that leaves the stamps at 0)."""

    def __init__(self, window: float = 1.0, stuck: float = 0.1) -> None:
        self.window = window
        self.stuck = stuck
        self._newest: float | None = None
        self._newest_arrived = 0.0  # when the newest stamp first arrived
        self._offsets: collections.deque[tuple[float, float]] = collections.deque()  # (stamp, offset)

    def reset(self) -> None:
        """A new connection: the robot's clock may have restarted."""
        self._newest = None
        self._offsets.clear()

    def sent(self, arrived: float, stamp: float | None) -> float:
        """The host time at which a packet stamped ``stamp`` (robot seconds) that
        ``arrived`` then was sent; ``arrived`` when it has no stamp."""
        if stamp is None:
            return arrived
        newest = self._newest
        offsets = self._offsets
        if newest is None or stamp < newest - self.window:
            offsets.clear()
            newest = None
        if newest is None or stamp > newest:
            self._newest = newest = stamp
            self._newest_arrived = arrived
        elif arrived - self._newest_arrived > self.stuck:
            return arrived  # stamps that stopped advancing (or are never filled in) say nothing
        offset = arrived - stamp
        while offsets and offsets[-1][1] >= offset:  # the window's minimum stays in front
            offsets.pop()
        offsets.append((stamp, offset))
        while offsets[0][0] < newest - self.window:
            offsets.popleft()
        return min(arrived, stamp + offsets[0][1])


class LinkMachine:
    """The host's link life (see the module docs). Not thread-safe: one owner calls it."""

    def __init__(self, policy: ReconnectPolicy | None = None, rng: random.Random | None = None) -> None:
        self.policy = policy if policy is not None else ReconnectPolicy()
        self._rng = rng if rng is not None else random.Random()
        self.state = LinkState.CONNECTING
        self.generation = 0
        self.losses = 0
        self.attempts = 0
        self.last_error = ""
        self.lost_since: float | None = None
        self.last_loss: LinkLoss | None = None
        self._last_heard: float | None = None
        self._last_sent: float | None = None  # when the robot sent what was last heard
        self._send_times = SendTimes()
        self._heard_telemetry = False
        self._backoff = self.policy.initial_backoff
        self._retry_at = 0.0

    # -- what happened ---------------------------------------------------------------------

    def connecting(self) -> None:
        """An attempt starts (the owner performs :class:`Connect`)."""
        self.state = LinkState.CONNECTING

    def connected(self, now: float) -> None:
        """The handshake passed: the link is up, with a new (empty) queue on the robot."""
        self.state = LinkState.CONNECTED
        self.generation += 1
        self.attempts = 0
        self.lost_since = None
        self.last_error = ""
        self._last_heard = self._last_sent = now
        self._send_times.reset()
        self._heard_telemetry = False
        self._backoff = self.policy.initial_backoff

    def heard(self, now: float, stamp: float | None = None) -> None:
        """Telemetry arrived at ``now``: the robot is there. ``stamp``: the robot's own
        time on it, in seconds, which dates a loss that follows by when the robot sent it
        (:class:`SendTimes`); without one, by its arrival."""
        self._last_heard = now
        sent = self._send_times.sent(now, stamp)
        if self._last_sent is None or sent > self._last_sent:  # the newest send heard
            self._last_sent = sent
        self._heard_telemetry = True

    def lost(self, now: float, reason: str) -> None:
        """The connection closed, reset or failed to send."""
        if self.state is not LinkState.CONNECTED:
            return
        self.losses += 1
        self.last_error = reason
        heard = self._last_sent
        self.lost_since = heard if heard is not None else now
        self.last_loss = LinkLoss(self.lost_since, reason)
        if not self.policy.enabled:
            self.state = LinkState.CLOSED
            return
        self.state = LinkState.RECONNECTING
        self._retry_at = now  # the first attempt goes at once: the robot may be back already

    def failed(self, now: float, reason: str, *, fatal: bool = False) -> None:
        """An attempt failed; ``fatal`` (schema mismatch, an address that cannot work) ends it."""
        self.last_error = reason
        if fatal or not self.policy.enabled:
            self.state = LinkState.CLOSED
            return
        self.state = LinkState.RECONNECTING
        low = self._backoff * (1 - self.policy.jitter)
        self._retry_at = now + self._rng.uniform(low, self._backoff)
        self._backoff = min(self._backoff * 2, self.policy.max_backoff)

    def close(self, reason: str = "closed by the client") -> None:
        if self.state is not LinkState.CLOSED:
            self.state = LinkState.CLOSED
            self.last_error = reason

    # -- what to do ------------------------------------------------------------------------

    def poll(self, now: float) -> Action:
        state = self.state
        if state is LinkState.CONNECTED:
            silence = self.policy.silence_timeout
            heard = self._last_heard
            if silence is None or heard is None or not self._heard_telemetry:
                return Wait(None)  # a robot that sends no telemetry is not judged by it
            if now - heard > silence:
                self.lost(now, f"no telemetry for {now - heard:.1f} s")
                return Disconnect(self.last_error)
            return Wait(heard + silence)
        if state is LinkState.CLOSED:
            return GiveUp(self.last_error or "closed")
        limit = self.policy.give_up_after
        # At least one attempt first: a loss dated back by a stall may already be past the limit.
        if (
            limit is not None
            and self.lost_since is not None
            and now - self.lost_since >= limit
            and self.attempts
        ):
            self.state = LinkState.CLOSED
            down = now - self.lost_since
            self.last_error = f"no link for {down:.1f} s (gave up after {limit:g} s): {self.last_error}"
            return GiveUp(self.last_error)
        if state is LinkState.RECONNECTING and now >= self._retry_at:
            self.attempts += 1
            self.state = LinkState.CONNECTING
            return Connect(self.attempts)
        if state is LinkState.CONNECTING:
            return Wait(None)
        until = self._retry_at
        if limit is not None and self.lost_since is not None:
            until = min(until, self.lost_since + limit)
        return Wait(until)

    def status(self) -> LinkStatus:
        return LinkStatus(
            self.state,
            self.generation,
            self.lost_since,
            self.attempts,
            self.last_error,
            self.losses,
            self.last_loss,
        )
