"""The fault proxy's fault model: what a bad field network does to each direction, and the
events that change it over a run (:class:`Partition`, :class:`Heal`, :class:`Reset`,
:class:`SetFaults`). Plain data, no sockets or clock."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal

__all__ = ["Event", "Faults", "Heal", "Partition", "Reset", "SetFaults", "plain"]


@dataclass(frozen=True)
class Faults:
    """The faults of one direction: seconds, bits per second, probabilities 0..1."""

    latency: float = 0.0  # delay added to every chunk or datagram
    jitter: float = 0.0  # plus or minus this, uniform, drawn per chunk or datagram
    bandwidth: float | None = None  # bits/s of payload; None: unlimited
    loss: float = 0.0  # UDP: a datagram is dropped
    duplicate: float = 0.0  # UDP: a datagram is delivered twice
    reorder: float = 0.0  # UDP: a datagram is held back by reorder_delay, so the next overtakes it
    reorder_delay: float = 0.005

    def __post_init__(self) -> None:
        for name in ("latency", "jitter", "reorder_delay"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be >= 0 seconds, got {value}")
        if self.bandwidth is not None and not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f"bandwidth must be > 0 bits/s (or None), got {self.bandwidth}")
        for name in ("loss", "duplicate", "reorder"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be a probability from 0 to 1, got {getattr(self, name)}")

    def describe(self) -> str:
        """One line for people: ``"latency 5 ms ± 3 ms, bandwidth 7 Mbit/s, loss 1%"``."""
        parts = []
        if self.latency or self.jitter:
            jitter = f" ± {self.jitter * 1e3:g} ms" if self.jitter else ""
            parts.append(f"latency {self.latency * 1e3:g} ms{jitter}")
        if self.bandwidth is not None:
            parts.append(f"bandwidth {self.bandwidth / 1e6:g} Mbit/s")
        for name in ("loss", "duplicate", "reorder"):
            if getattr(self, name):
                parts.append(f"{name} {getattr(self, name) * 100:g}%")
        return ", ".join(parts) or "none"


@dataclass(frozen=True)
class Partition:
    """Cut the link for ``seconds``, or until :class:`Heal` when ``None``."""

    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.seconds is not None and not self.seconds >= 0:
            raise ValueError(f"a partition lasts >= 0 seconds (or None: until healed), got {self.seconds}")


@dataclass(frozen=True)
class Heal:
    """End a partition: held bytes are delivered at once, in order."""


@dataclass(frozen=True)
class Reset:
    """Abort every TCP connection on both sides (RST), drop held data, forget the UDP clients."""


@dataclass(frozen=True)
class SetFaults(Faults):
    """Replace the faults of ``direction`` with these (fields left out: no fault)."""

    direction: Literal["both", "up", "down"] = "both"


Event = Partition | Heal | Reset | SetFaults


def plain(faults: Faults) -> Faults:
    """The :class:`Faults` part of a :class:`SetFaults`."""
    return Faults(**{f.name: getattr(faults, f.name) for f in fields(Faults)})
