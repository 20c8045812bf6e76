"""Time as the protocol counts it: seconds in, whole microseconds compared.

The queue, the dispatcher, the connection object and the transports all compare
times in whole microseconds, so they agree at every boundary (in float
seconds 4.03 - 2.03 is 2.0000000000000004, over a 2 s limit, and 0.55 - 0.35
is 0.20000000000000007, over a 200 ms one).
"""

from __future__ import annotations

__all__ = ["US_PER_S", "elapsed_over", "to_us"]

US_PER_S = 1_000_000


def to_us(seconds: float) -> int:
    """``seconds`` as whole microseconds (rounded to nearest)."""
    return round(seconds * US_PER_S)


def elapsed_over(now: float, since: float, limit: float) -> bool:
    """More than ``limit`` seconds from ``since`` to ``now``, in whole microseconds."""
    return to_us(now) - to_us(since) > to_us(limit)
