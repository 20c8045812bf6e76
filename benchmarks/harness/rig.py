"""The proxy-and-host rig: a fault proxy in front of a robot's port, hosts connected through it,
and the ways a benchmark or a test drives a path with them.

:class:`Rig` starts a :class:`bcnp.host.proxy.fault_proxy.Proxy` (TCP, UDP or both; faults and a seed)
in front of ``127.0.0.1:port``, records its events with the wall time they happened
(:class:`Events`), gives clients connected through it (:meth:`Rig.connect`, retried while
the robot still holds a previous controller) and closes everything at its end; ``proxied=False``
gives clients straight to the robot, for a case without faults; ``reorder_held``: UDP held
through a drop and released in the link's jitter. :meth:`Rig.drop_once` is a
partition that happens once, when a path's time reaches a moment. :data:`FIELD` is the
field profile the benchmarks run their faulty cases under.

Driving: :func:`recorded_replay` (a replay with the robot's telemetry recorded on its
schedule), :func:`drive` (a path open loop, ``Replay``, or closed loop, ``Follower``,
``replay --follow``: on the robot's own pose, ``Network/Pose``, given its NetworkTables
port, else on the wheels) and :func:`watched_drive` (one through a rig of its own, the true
pose sampled around it). :func:`host_tool` runs ``python -m bcnp ...`` as a child, as a user
runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bcnp.host.link.client import Client, LinkClosedError, LinkError, ReconnectPolicy
from bcnp.host.proxy.core.faults import Faults
from bcnp.host.proxy.fault_proxy import Proxy
from bcnp.host.sessions.recorder import TelemetryRecorder, telemetry_spec
from bcnp.host.sessions.replay import Replay
from bcnp.paths import DriveLimits, PathCommand, Trajectory
from benchmarks.harness import ROOT
from benchmarks.harness.truth import FieldPose, Watched, watch_drive
from messages import SCHEMA

LOCAL = "127.0.0.1"
#: The field profile: 5 ms ± 3 ms of latency and 7 Mbit/s each way, 1 % of UDP datagrams lost.
FIELD = Faults(latency=0.005, jitter=0.003, bandwidth=7e6, loss=0.01)
#: How long a drive on the robot's pose waits for the first (a simulator answers within a second).
POSE_WAIT_S = 10.0


class Events:
    """A proxy's events (its ``on_event``) with the wall time each happened; each is also
    handed on to ``forward(seconds after the proxy's start, message)``."""

    def __init__(self, forward: Callable[[float, str], object] | None = None) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[float, str]] = []
        self._forward = forward

    def __call__(self, t: float, message: str) -> None:
        with self.lock:
            self.items.append((time.time(), message))
        if self._forward is not None:
            self._forward(t, message)

    def first(self, prefix: str) -> float | None:
        """Wall time of the first event that starts with ``prefix``."""
        with self.lock:
            return next((w for w, m in self.items if m.startswith(prefix)), None)


class Drop:
    """A partition of ``seconds`` the first time it is called with a path time of ``at`` s or
    more (a replay's progress, a follower's reference time)."""

    def __init__(self, proxy: Proxy, at: float, seconds: float) -> None:
        self.proxy, self.at, self.seconds = proxy, at, seconds
        #: The path time and the wall time it began; ``None`` until then.
        self.at_s: float | None = None
        self.wall: float | None = None
        self._lock = threading.Lock()

    def __call__(self, elapsed: float) -> None:
        with self._lock:
            if self.at_s is not None or elapsed < self.at:
                return
            self.at_s, self.wall = elapsed, time.time()
        self.proxy.partition(self.seconds)


class Rig:
    """A fault proxy in front of a robot's port and the clients through it; see the module docs."""

    def __init__(
        self,
        robot_port: int,
        transport: str = "both",
        *,
        faults: Faults | None = None,
        seed: int | None = None,
        on_event: Callable[[float, str], object] | None = None,
        proxied: bool = True,
        reorder_held: bool = False,
    ) -> None:
        if transport not in ("tcp", "udp", "both"):
            raise ValueError(f"transport: tcp, udp or both, not {transport!r}")
        self.robot_port = robot_port
        self.transport = transport
        self.events = Events(on_event)
        self.proxy: Proxy | None = None
        if proxied:
            self.proxy = Proxy(
                (LOCAL, robot_port),
                tcp=transport != "udp",
                udp=transport != "tcp",
                faults=faults,
                reorder_held=reorder_held,
                seed=seed,
                on_event=self.events,
            )
        self.clients: list[Client] = []

    def __enter__(self) -> Rig:
        if self.proxy is not None:
            self.proxy.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every client it gave, then the proxy."""
        for client in self.clients:
            client.close()
        if self.proxy is not None:
            self.proxy.close()

    def port(self, udp: bool) -> int:
        """Where a host connects: the proxy's port, or the robot's."""
        if self.proxy is None:
            return self.robot_port
        return self.proxy.udp_port if udp else self.proxy.tcp_port

    def client(self, udp: bool | None = None, **options: Any) -> Client:
        """A client through the rig (not connected yet), closed with it; ``udp`` defaults to the
        rig's transport. ``options`` go to :class:`~bcnp.host.link.client.Client`."""
        udp = self.transport == "udp" if udp is None else udp
        client = Client(SCHEMA, LOCAL, self.port(udp), udp=udp, **options)
        self.clients.append(client)
        return client

    def connect(
        self, udp: bool | None = None, *, within: float = 0.0, pause: float = 0.1, **options: Any
    ) -> Client:
        """A connected client (:meth:`client`). A robot may hold the previous controller (UDP: up
        to its link timeout) or be starting: until ``within`` s have passed, a refused connect is
        tried again with a new client after ``pause`` s; then its error is raised."""
        deadline = time.monotonic() + within
        while True:
            client = self.client(udp, **options)
            try:
                return client.connect()
            except LinkError as exc:
                client.close()
                self.clients.remove(client)
                if time.monotonic() > deadline:
                    if within <= 0:
                        raise
                    raise LinkClosedError(
                        f"no connection within {within:g} s: {exc}", client.host, client.port
                    ) from None
                time.sleep(pause)

    def drop_once(self, at: float, seconds: float) -> Drop:
        if self.proxy is None:
            raise RuntimeError("a rig without a proxy cannot drop the link")
        return Drop(self.proxy, at, seconds)


# -- driving a path ------------------------------------------------------------------------------


def recorded_replay(
    client: Client, commands: Sequence[PathCommand], clock: Callable[[], float] = time.monotonic
) -> tuple[Replay, TelemetryRecorder]:
    """A replay of ``commands`` (not run yet) with the robot's telemetry recorded on its schedule."""
    replay = Replay(client, commands, clock=clock)
    spec = telemetry_spec(SCHEMA, client.command_spec)
    assert spec is not None
    recorder = replay.recorder = TelemetryRecorder(spec, replay.schedule)
    return replay, recorder


def drive(
    client: Client,
    mode: str,
    commands: Sequence[PathCommand],
    reference: Trajectory,
    limits: DriveLimits,
    at: Callable[[float], object] | None = None,
    nt_port: int | None = None,
) -> int:
    """Drives a path through a connected client, open loop (``mode="open"``: ``commands``
    replayed) or closed loop (``"follow"``: ``reference`` followed within ``limits``, on the
    robot's own pose from its NetworkTables server on ``127.0.0.1:nt_port`` if given, as
    ``replay --follow`` does, else on the wheel telemetry); ``at(path time)`` is called as
    it goes. Returns the outages it rode through."""
    if mode == "open":
        replay = Replay(client, commands)
        replay.run(None if at is None else lambda p: at(p.elapsed))
        return len(replay.outages)
    if mode != "follow":
        raise ValueError(f"mode: open or follow, not {mode!r}")

    def sleep(seconds: float) -> None:
        if at is not None:
            at(follower.reference_time)
        time.sleep(seconds)

    from bcnp.host.sessions.follow import Follower

    if nt_port is None:
        follower = Follower(client, reference, limits, sleep=sleep)
        return len(follower.run().outages)
    from bcnp.host.nt.pose import RobotPose

    with RobotPose(LOCAL, nt_port) as robot_pose:
        if robot_pose.wait(POSE_WAIT_S) is None:
            raise RuntimeError(f"no Network/Pose from the robot at {robot_pose.server} in {POSE_WAIT_S:g} s")
        follower = Follower(client, reference, limits, poses=robot_pose, sleep=sleep)
        return len(follower.run().outages)


def watched_drive(
    truth: FieldPose,
    robot_port: int,
    mode: str,
    plan: tuple[Sequence[PathCommand], Trajectory],
    limits: DriveLimits,
    *,
    transport: str = "tcp",
    proxied: bool = False,
    drop: tuple[float, float] | None = None,
    nt_port: int | None = None,
) -> tuple[Watched, int]:
    """:func:`drive` of ``plan`` (its commands and the trajectory they drive) by a new client
    (reconnecting) through a rig of its own, watched through ``truth`` (:func:`watch_drive`);
    ``drop``: a partition of ``drop[1]`` s when the path's time reaches ``drop[0]`` (the BCNP
    link's: NetworkTables does not go through the rig); ``nt_port``: ``"follow"`` on the
    robot's pose. Returns what was watched and the outages the drive rode through."""
    commands, reference = plan
    outages = [0]
    with Rig(robot_port, transport, proxied=proxied) as rig:
        at = None if drop is None else rig.drop_once(*drop)

        def run() -> None:
            client = rig.connect(reconnect=ReconnectPolicy())
            outages[0] = drive(client, mode, commands, reference, limits, at=at, nt_port=nt_port)

        watched = watch_drive(truth, run)
    return watched, outages[0]


def host_tool(*args: str, **options: Any) -> subprocess.Popen[str]:
    """``python -m bcnp ARGS`` as a child, as a user runs it from the project (unbuffered, its
    output and errors in one text pipe). ``options`` go to ``subprocess.Popen``."""
    return subprocess.Popen(
        [sys.executable, "-m", "bcnp", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        **options,
    )
