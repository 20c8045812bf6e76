"""``monitor``: the robot's ``Network/*`` SmartDashboard keys through a real NT4 client.

Host only: needs ``pyntcore`` (the ``host`` extra); the robot never imports
this module. The client subscribes to every topic under
``/SmartDashboard/Network/`` with a 20 ms period, so it sees each robot tick
(50 Hz), and derives the telemetry rate from ``Network/TelemetryPackets`` and
``Network/TelemetrySent`` while ``Network/Connected`` is true.

ntcore reconnects by itself when the robot restarts or its radio comes back;
the monitor notes when the server went (``lost_since``) and counts the
reconnects, and says so while the values it shows are from before.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...defaults import NT_PORT, START_SIM
from .instance import new_instance, server_name, start, stop

__all__ = ["NT_PORT", "PREFIX", "PREFIXES", "Monitor", "NoServerError", "Snapshot", "TelemetryRate"]

PREFIX = "/SmartDashboard/Network/"
#: What the monitor shows: the link's keys, and the pre-flight check's results.
PREFIXES = (PREFIX, "/SmartDashboard/Preflight/")
_SMARTDASHBOARD = "/SmartDashboard/"
#: Window over which the telemetry rate is measured (seconds).
RATE_WINDOW = 1.0


class NoServerError(ConnectionError):
    """No NetworkTables server answered, or it has no ``Network/*`` keys."""


@dataclass(frozen=True)
class TelemetryRate:
    packets_per_s: float
    messages_per_s: float

    def as_json(self) -> dict[str, float]:
        per_s = {"packets_per_s": self.packets_per_s, "messages_per_s": self.messages_per_s}
        return {key: round(value, 2) for key, value in per_s.items()}


@dataclass(frozen=True)
class Snapshot:
    server: str
    nt_connected: bool
    values: dict[str, Any]  # "Network/CmdVx" -> value
    telemetry: TelemetryRate | None  # None unless a BCNP link is open and measured
    lost_for: float | None = None  # seconds since the server went, while it is gone
    reconnects: int = 0  # times the server came back

    @property
    def state(self) -> str:
        if self.nt_connected:
            return "connected"
        if self.lost_for is None:
            return "NOT connected"
        return f"NOT connected (lost {self.lost_for:.1f} s ago, reconnecting; values are from before)"

    def as_json(self) -> dict[str, Any]:
        rate = self.telemetry
        return {
            "server": self.server,
            "connected": self.nt_connected,
            "lost_for_s": None if self.lost_for is None else round(self.lost_for, 3),
            "reconnects": self.reconnects,
            "keys": dict(sorted(self.values.items())),
            "telemetry": None if rate is None else rate.as_json(),
        }


class Monitor:
    """An NT4 client (its own ntcore instance) that keeps the latest ``Network/*`` and
    ``Preflight/*`` values."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = NT_PORT,
        team: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import ntcore

        self.server = server_name(host, port, team)
        self.clock = clock
        self.values: dict[str, Any] = {}
        #: When the server went (monitor clock), while it is gone; and how often it came back.
        self.lost_since: float | None = None
        self.reconnects = 0
        self._was_connected = False
        self._samples: deque[tuple[float, float, float]] = deque()
        self._inst = new_instance()
        self._poller = ntcore.NetworkTableListenerPoller(self._inst)
        prefixes = list(PREFIXES)
        self._poller.addListener(prefixes, ntcore.EventFlags.kValueAll | ntcore.EventFlags.kImmediate)
        self._subscriber = ntcore.MultiSubscriber(self._inst, prefixes, ntcore.PubSubOptions(periodic=0.02))
        start(self._inst, "bcnp-monitor", host, port, team)

    def close(self) -> None:
        stop(self._inst, [self._poller, self._subscriber])

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def nt_connected(self) -> bool:
        return bool(self._inst.isConnected())

    def poll(self) -> int:
        """Takes in every value update since the last call; returns how many."""
        connected = self.nt_connected
        if connected != self._was_connected:
            self._was_connected = connected
            if not connected:
                self.lost_since = self.clock()
                self._samples.clear()
            elif self.lost_since is not None:
                self.lost_since = None
                self.reconnects += 1
        events = self._poller.readQueue()
        for event in events:
            data = event.data
            value = getattr(data, "value", None)
            topic = getattr(data, "topic", None)
            if value is None or topic is None:
                continue
            name = topic.getName()
            if name.startswith(_SMARTDASHBOARD):
                self.values[name[len(_SMARTDASHBOARD) :]] = value.value()
        if events:
            self._sample()
        return len(events)

    def _sample(self) -> None:
        now = self.clock()
        if self.values.get("Network/Connected") is not True:
            self._samples.clear()
            return
        packets = self.values.get("Network/TelemetryPackets")
        messages = self.values.get("Network/TelemetrySent")
        if not isinstance(packets, int | float) or not isinstance(messages, int | float):
            return
        self._samples.append((now, float(packets), float(messages)))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW:
            self._samples.popleft()

    def telemetry_rate(self) -> TelemetryRate | None:
        """Telemetry packets and messages per second over about the last second."""
        if len(self._samples) < 2:
            return None
        (t0, p0, m0), (t1, p1, m1) = self._samples[0], self._samples[-1]
        span = t1 - t0
        if span < RATE_WINDOW / 2:
            return None
        return TelemetryRate((p1 - p0) / span, (m1 - m0) / span)

    def snapshot(self) -> Snapshot:
        since = self.lost_since
        lost_for = None if since is None else self.clock() - since
        return Snapshot(
            self.server,
            self.nt_connected,
            dict(self.values),
            self.telemetry_rate() if self.nt_connected else None,
            lost_for,
            self.reconnects,
        )

    def wait_for_keys(self, timeout: float, sleep: Callable[[float], object] = time.sleep) -> None:
        """Waits until connected and every announced ``Network/*`` (and ``Preflight/*``) topic has a
        value.

        Raises :class:`NoServerError` naming the server after ``timeout`` seconds.
        """
        deadline = self.clock() + timeout
        while True:
            self.poll()
            topics = [self._inst.getTopics(prefix) for prefix in PREFIXES]
            if self.nt_connected and topics[0] and len(self.values) >= sum(map(len, topics)):
                return
            if self.clock() >= deadline:
                if not self.nt_connected:
                    raise NoServerError(
                        f"no NetworkTables server at {self.server} (start the robot program, "
                        f"or the simulator: {START_SIM})"
                    )
                raise NoServerError(
                    f"connected to NetworkTables at {self.server}, but it has no Network/* keys: "
                    "is the BCNP robot program running?"
                )
            sleep(0.02)

    def measure(self, seconds: float, sleep: Callable[[float], object] = time.sleep) -> None:
        """Keeps polling for ``seconds`` (to measure the telemetry rate)."""
        end = self.clock() + seconds
        while self.clock() < end:
            self.poll()
            sleep(0.02)
        self.poll()


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.4f}"
    return str(value)


def render_text(snapshot: Snapshot) -> str:
    """The snapshot as plain text: one ``key  value`` line per key, then the telemetry rate."""
    lines = [f"NetworkTables {snapshot.server}: {snapshot.state}"]
    if snapshot.reconnects:
        lines[0] += f" ({snapshot.reconnects} reconnect(s))"
    width = max((len(k) for k in snapshot.values), default=0)
    lines += [f"  {key:<{width}}  {format_value(v)}" for key, v in sorted(snapshot.values.items())]
    lines.append(f"  {'telemetry rate':<{width}}  {_rate_text(snapshot)}")
    return "\n".join(lines)


def _rate_text(snapshot: Snapshot) -> str:
    rate = snapshot.telemetry
    if rate is None:
        linked = snapshot.values.get("Network/Connected") is True
        return "measuring..." if linked else "- (no BCNP link open)"
    return f"{rate.packets_per_s:.1f} packets/s, {rate.messages_per_s:.1f} messages/s"


def run_live(monitor: Monitor, refresh_hz: float = 10.0) -> None:
    """A live terminal view until Ctrl-C (rich when installed, else redrawn plain text)."""
    try:
        from rich.live import Live
        from rich.table import Table
    except ImportError:  # pragma: no cover - the host extra installs rich
        while True:
            monitor.poll()
            print("\033[H\033[2J" + render_text(monitor.snapshot()), flush=True)
            time.sleep(1 / refresh_hz)

    def table() -> Table:
        snap = monitor.snapshot()
        state = "[green]connected[/]" if snap.nt_connected else f"[red]{snap.state}[/]"
        if snap.reconnects:
            state += f" ({snap.reconnects} reconnect(s))"
        t = Table(title=f"BCNP robot — NetworkTables {snap.server} {state}", title_justify="left")
        t.add_column("key")
        t.add_column("value", justify="right")
        for key, value in sorted(snap.values.items()):
            style = ""
            if key == "Network/Connected":
                style = "green" if value is True else "red"
            t.add_row(key, format_value(value), style=style)
        t.add_row("telemetry rate", _rate_text(snap), style="cyan")
        return t

    with Live(table(), refresh_per_second=refresh_hz, screen=False) as live:
        while True:
            monitor.poll()
            live.update(table())
            time.sleep(1 / refresh_hz)
