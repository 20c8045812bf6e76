"""The periodic sender: a host thread that sends packets on a period, or as fast as the link
takes them, and counts what it sent.

:class:`Sender` calls its ``next_packet(t)`` for each slot (``t``: the slot's time, seconds
after the first) and sends what it returns (:class:`Burst`: encoded bytes, and how many
packets and messages they hold) until stopped or given ``None``. On a period, a slot missed
(the sender fell behind) is skipped, never made up in a burst. A lost link ends it (its
error in :attr:`Sent.error`), or with ``keep_going`` costs that packet only (a client that
reconnects on its own).

:func:`replanning` is the re-planning host the loop-timing soak and the start-up benchmark's
live host send: every 20 ms a CLEAR_QUEUE packet of the next ten 20 ms DriveCmds.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The re-planning host: one packet per period, each of this many commands of one period.
PERIOD_S = 0.02
HORIZON = 10


@dataclass(frozen=True)
class Burst:
    """What one slot sends: encoded bytes (one packet or several back to back), and how many
    packets and messages they hold."""

    data: bytes
    packets: int
    messages: int


@dataclass
class Sent:
    packets: int = 0
    messages: int = 0
    error: BaseException | None = None


NextPacket = Callable[[float], Burst | None]


def send_loop(
    client: Any,
    next_packet: NextPacket,
    stop: threading.Event,
    sent: Sent,
    *,
    period: float | None = None,
    keep_going: bool = False,
) -> None:
    """Sends ``next_packet(t)`` every ``period`` s (``None``: as fast as the link takes them)
    until ``stop`` is set or it gives ``None``; see the module docs. Never raises."""
    from bcnp.host.link.client import LinkError

    t0 = next_send = time.monotonic()
    try:
        while not stop.is_set():
            burst = next_packet(next_send - t0)
            if burst is None:
                return
            try:
                client.link.send_packets([burst.data])
            except LinkError:
                if not keep_going:
                    raise
            else:
                sent.packets += burst.packets
                sent.messages += burst.messages
            if period is None:
                continue
            next_send += period
            late = time.monotonic() - next_send
            if late > period:  # fell behind: skip the missed slots, never burst
                next_send += period * math.ceil(late / period)
            stop.wait(max(0.0, next_send - time.monotonic()))
    except BaseException as exc:  # reported, not raised in a thread
        sent.error = exc


class Sender:
    """:func:`send_loop` in a thread of its own: :meth:`start`, then :meth:`close`."""

    def __init__(
        self,
        client: Any,
        next_packet: NextPacket,
        *,
        period: float | None = None,
        keep_going: bool = False,
        name: str = "sender",
    ) -> None:
        self.sent = Sent()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=send_loop,
            args=(client, next_packet, self._stop, self.sent),
            kwargs={"period": period, "keep_going": keep_going},
            name=name,
            daemon=True,
        )

    def start(self) -> Sender:
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> bool:
        """Stop sending; whether the thread ended within ``timeout`` s."""
        self._stop.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()


def replanning(horizon: int = HORIZON, period: float = PERIOD_S) -> NextPacket:
    """A re-planning host's packets: at ``t``, CLEAR_QUEUE and the next ``horizon`` commands of
    ``period`` (1 m/s, turning at 0.8 rad/s times a 20 s sine)."""
    from bcnp.wire import CLEAR_QUEUE, encode_packet
    from messages import DriveCmd

    ms = round(period * 1000)

    def packet(t: float) -> Burst:
        plan = [
            DriveCmd(vx=1.0, omega=0.8 * math.sin(2 * math.pi * (t + i * period) / 20), durationMs=ms)
            for i in range(horizon)
        ]
        return Burst(encode_packet(DriveCmd.spec, plan, CLEAR_QUEUE), 1, horizon)

    return packet
