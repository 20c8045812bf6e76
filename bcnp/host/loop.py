"""The one socket loop around a host session (:mod:`bcnp.host.session`): replay and follow alike."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from .client import Client, LinkClosedError, LinkDownError
from .session import EndedDown, LinkWatch, Outage, Session

__all__ = ["drive"]


def drive(
    client: Client,
    session: Session,
    *,
    outages: list[Outage],
    start: float,
    step: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    on_outage: Callable[[Outage], object] | None = None,
    on_step: Callable[[], object] | None = None,
) -> None:
    """Runs ``session`` on ``client`` until it is finished, its time counted from ``start``
    (``clock``), one step every ``step`` seconds; each outage is appended to ``outages``.

    ``on_outage`` hears of each outage when the link goes and when it is back;
    ``on_step`` is called after each step. Raises :class:`LinkClosedError` when the
    client closes for good (reconnecting off, a schema mismatch, given up) or the
    session ends with the link down."""
    watch = LinkWatch(client.status().generation, outages)
    while True:
        now = clock()
        elapsed = now - start
        status = client.status()
        if client.closed_reason is not None:
            raise LinkClosedError(
                f"lost the link to the robot at {client.address} after {elapsed:.1f} s "
                f"({session.where()}): {client.closed_reason}",
                client.host,
                client.port,
            )
        went, back = watch.observe(status, client.clock(), elapsed)
        for outage, tell in ((went, session.went), (back, session.back)):
            if outage is not None:
                tell(outage, elapsed)
                if on_outage is not None:
                    on_outage(outage)
        send = session.step(elapsed, now, status.connected)
        if send is not None:
            with contextlib.suppress(LinkDownError):  # the next step sees the outage
                session.delivered(send, client.send(send.messages, clear_queue=send.clear))
        try:
            if session.finished(elapsed, watch.current):
                return
        except EndedDown as exc:
            raise LinkClosedError(
                f"the path ended with the link to {client.address} down: {exc}", client.host, client.port
            ) from None
        if on_step is not None:
            on_step()
        sleep(step)
