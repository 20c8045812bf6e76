"""The robot's BCNP link: TCP and UDP servers, dispatcher, command queue, telemetry.

:func:`build_link` makes the parts once from ``constants.py``; :class:`BcnpLink`
does the per-tick work (advance the queue, clamp the command, record
telemetry) and answers what ``subsystems/observe/network_keys.py`` publishes.

One controller at a time across both transports (the first peer to complete
the handshake owns the link until it drops). A controller whose link is lost
(no packet for the link timeout) is dropped (TCP) or unlocked (UDP): nothing it
sent before it connects or handshakes again runs, whichever of its receive
thread and the queue's tick finds the loss first. The receive threads stamp
packets with FPGA time, the same clock ``update()`` gets each tick, so pyfrc
tests control every timing rule. Nothing here touches a motor: ``update()``
returns the command to execute (clamped) or ``None`` for "stop".

Command latency (``Network/CmdLatencyP99Ms``): for each packet, the robot
time from its arrival (when the receive thread read it and queued it) to the
tick that took its first command off the queue, where that command started
(or, already over, completed or was skipped). 99th percentile, nearest rank,
over the last 500 such packets, in ms; 0 before the first. Packets that never
get there (refused by a full queue, dropped by a CLEAR_QUEUE or a link loss)
are not counted. Backlog counts: a packet queued behind 4 s of commands has a
latency of 4 s.

The transports log every refusal; while the link runs, each kind of warning
(``bcnp.transport.WARNING_LOGGERS``) passes a filter of its own that lets one
line through per ``BCNP_WARNING_PERIOD_S``, so a flood of bad input cannot fill
the console nor hide the first warning of another kind. The counters behind
the ``Network/*`` keys still count every refusal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast

import wpilib
from robotpy_ext.misc.periodic_filter import PeriodicFilter

import constants
from bcnp import Dispatcher, MessageQueue, PacketView, TelemetryAccumulator
from bcnp.connection import Connection
from bcnp.schema import Schema
from bcnp.transport import (
    WARNING_LOGGERS,
    ControllerSlot,
    LoopPriority,
    SharedQueue,
    TcpServer,
    UdpServer,
)
from messages import DRIVE_CMD_SPEC, DRIVETRAIN_TELEMETRY_SPEC, SCHEMA, DriveCmd, DrivetrainTelemetry
from subsystems.observe.loop_timing import RollingWindow

log = logging.getLogger("bcnp.link")

_UINT32 = 0xFFFFFFFF


def _clamp(value: float, limit: float) -> float:
    """``max(-limit, min(limit, value))``, written out (the same value, NaN included:
    without the builtins' argument parsing, twice a tick)."""
    value = value if value < limit else limit
    return value if value > -limit else -limit


@dataclass(frozen=True)
class LinkParts:
    """Everything the link is made of, built once by :func:`build_link`."""

    schema: Schema
    queue: MessageQueue
    shared_queue: SharedQueue
    dispatcher: Dispatcher
    slot: ControllerSlot
    tcp: TcpServer
    udp: UdpServer
    telemetry: TelemetryAccumulator
    priority: LoopPriority
    cmd_latency_ms: RollingWindow
    #: One filter per transport warning logger, attached while the link runs.
    warning_filters: dict[str, PeriodicFilter]


def build_link(
    port: int | None = None, *, clock: Callable[[], float] = wpilib.Timer.getFPGATimestamp
) -> BcnpLink:
    """The robot's link as ``constants.py`` describes it (``port`` overrides the
    configured one; 0 takes any free port). Nothing listens until ``start()``."""
    cmd_latency_ms = RollingWindow(constants.CMD_LATENCY_WINDOW_PACKETS)

    def packet_reached(arrival: float, now: float) -> None:
        # A packet that arrived while this tick was already running, after it read
        # ``now``, counts as 0.
        cmd_latency_ms.add(max(0.0, (now - arrival) * 1000.0))

    queue = MessageQueue(constants.BCNP_QUEUE, on_packet_reached=packet_reached)
    config = replace(constants.BCNP_TRANSPORT, port=constants.bcnp_port() if port is None else port)
    # The queue's own link loss ends the controller too (BcnpLink.update): see SharedQueue.
    shared = SharedQueue(queue, end_on_link_loss=config.end_on_link_loss)
    # robot.py marks each tick busy: the receive threads wait at their next safe point
    # meanwhile, and step aside just before each tick is due.
    priority = LoopPriority(period=constants.LOOP_PERIOD_S, lead=constants.LOOP_PRIORITY_LEAD_S)
    dispatcher = Dispatcher(SCHEMA, link_timeout=constants.BCNP_QUEUE.link_timeout)
    slot = ControllerSlot()
    # A new or lost controller drops the queue at once, in the receive thread,
    # before any byte of the next controller: commands never change hands.
    servers = {
        kind: kind(
            dispatcher,
            config,
            clock=clock,
            slot=slot,
            on_controller_change=shared.clear,
            pause=priority.pause,
            defer_sends=True,  # telemetry leaves from the receive thread, after the tick
        )
        for kind in (TcpServer, UdpServer)
    }
    telemetry = TelemetryAccumulator(
        DRIVETRAIN_TELEMETRY_SPEC,
        lambda packet: False,  # replaced by BcnpLink: sends go to whoever owns the slot
        flush_interval_ticks=constants.TELEMETRY_FLUSH_TICKS,
        max_buffered=constants.TELEMETRY_MAX_BUFFERED,
    )
    parts = LinkParts(
        schema=SCHEMA,
        queue=queue,
        shared_queue=shared,
        dispatcher=dispatcher,
        slot=slot,
        tcp=servers[TcpServer],  # type: ignore[arg-type]
        udp=servers[UdpServer],  # type: ignore[arg-type]
        telemetry=telemetry,
        priority=priority,
        cmd_latency_ms=cmd_latency_ms,
        # Warnings limited, errors never: they are rare and each one matters.
        warning_filters={
            name: PeriodicFilter(constants.BCNP_WARNING_PERIOD_S, bypass_level=logging.ERROR)
            for name in WARNING_LOGGERS
        },
    )
    link = BcnpLink(parts)
    dispatcher.register(DRIVE_CMD_SPEC, link.handle_packet)
    shared.on_link_lost = link.queue_lost_link
    return link


class BcnpLink:
    """The link's per-tick work and what its keys read. Build it with :func:`build_link`."""

    def __init__(
        self,
        parts: LinkParts,
        *,
        max_vx: float = constants.MAX_VX_MPS,
        max_omega: float = constants.MAX_OMEGA_RADPS,
    ) -> None:
        self.parts = parts
        self.schema = parts.schema
        self.queue = parts.queue
        self.dispatcher = parts.dispatcher
        self.slot = parts.slot
        self.tcp = parts.tcp
        self.udp = parts.udp
        self.telemetry = parts.telemetry
        self.telemetry.send = self._send
        self.priority = parts.priority
        self.cmd_latency_ms = parts.cmd_latency_ms
        #: Told of each packet handed to the queue and its arrival time, in the receive
        #: thread (the recorder).
        self.packet_observer: Callable[[PacketView, float], object] | None = None
        self.max_vx = max_vx
        self.max_omega = max_omega
        self.command: tuple[float, float] | None = None
        self.connected = False
        self.start_errors: list[str] = []
        self.telemetry_errors = 0
        self._telemetry_session: tuple[object, int] | None = None
        # queue_lost_link(): the controller to end, noted in the tick under the queue's lock.
        self._lost: tuple[TcpServer | UdpServer, Connection, float] | None = None

    # -- receive thread ----------------------------------------------------------------------

    def handle_packet(self, packet: PacketView, now: float) -> None:
        """Dispatcher handler for commands: into the queue, then to the observer
        (not after a link loss: the queue refuses them)."""
        if self.parts.shared_queue.handle_packet(packet, now):
            observer = self.packet_observer
            if observer is not None:
                observer(packet, now)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Listen on TCP and UDP. A port in use is logged, not raised: the robot still drives."""
        for name, warning_filter in self.parts.warning_filters.items():
            logging.getLogger(name).addFilter(warning_filter)  # adding twice keeps one
        for server in (self.tcp, self.udp):
            try:
                server.start()
            except OSError as exc:
                message = f"BCNP {server.kind} cannot listen on port {server.config.port}: {exc}"
                self.start_errors.append(message)
                log.error(message)
            else:
                log.info("BCNP %s listening on port %d", server.kind, server.port)

    def close(self) -> None:
        """End both servers' receive threads and close their sockets."""
        self.tcp.close()
        self.udp.close()
        # The loggers are global: a closed link's filters must not limit whoever logs next.
        for name, warning_filter in self.parts.warning_filters.items():
            logging.getLogger(name).removeFilter(warning_filter)

    # -- per tick (robot thread) -------------------------------------------------------------

    def update(self, now: float) -> tuple[float, float] | None:
        """Advance the queue to ``now``; the clamped (vx, omega) to run, or None to stop.

        A controller that closes, resets or times out has its queue dropped by
        the receive thread when it goes (``on_controller_change``), so the robot
        stops in the next tick; clearing here instead could race with the next
        controller's first packet. When the queue finds the link lost before the
        receive thread does, the controller's server is told to end it here.
        """
        owner = self.owner
        active = cast("DriveCmd | None", self.parts.shared_queue.update(now))  # the only queued type
        lost = self._lost
        if lost is not None:
            self._lost = None
            server, connection, silent_for = lost
            server.end_lost_link(connection, silent_for)
        self.connected = owner is not None and owner.link_alive(now)
        if active is None:
            self.command = None
        else:
            self.command = (_clamp(active.vx, self.max_vx), _clamp(active.omega, self.max_omega))
        return self.command

    def queue_lost_link(self, silent_for: float) -> None:
        """The queue declared the link lost (``SharedQueue.on_link_lost``: in the tick,
        under the queue's lock). The controller whose packets stopped still owns its
        server's connection, if any: one that goes clears the queue, under this lock, before
        another can take its place. :meth:`update` has its server end it."""
        owner = self.owner
        connection = None if owner is None else owner.connection
        self._lost = None if owner is None or connection is None else (owner, connection, silent_for)

    def record_telemetry(
        self, wheel_velocities: tuple[float, float], wheel_positions: tuple[float, float], now: float
    ) -> None:
        """One DrivetrainTelemetry for this tick; a packet goes out every 2nd tick."""
        owner = self.owner
        session = None if owner is None else (owner, owner.counters.controllers)
        if session != self._telemetry_session:
            self.telemetry.clear()  # a new (or no) controller gets none of the last one's samples
            self._telemetry_session = session
        if owner is None:
            return
        try:
            # Positional, in the schema's field order (leftVelocity, rightVelocity,
            # leftPosition, rightPosition, timestampMs): the constructor's fast path.
            sample = DrivetrainTelemetry(
                wheel_velocities[0],
                wheel_velocities[1],
                wheel_positions[0],
                wheel_positions[1],
                round(now * 1000) & _UINT32,
            )
        except (ValueError, TypeError) as exc:  # e.g. a NaN from a broken encoder
            self.telemetry_errors += 1
            log.debug("telemetry sample dropped: %s", exc)
        else:
            self.telemetry.record(sample)
        self.telemetry.tick()

    def flush_sends(self) -> None:
        """The tick's telemetry leaves now: the controller's receive thread writes it."""
        self.tcp.flush_sends()
        self.udp.flush_sends()

    def _send(self, packet: bytes) -> bool:
        owner = self.owner
        return owner is not None and owner.send(packet)

    # -- what the keys read -----------------------------------------------------------------

    @property
    def owner(self) -> TcpServer | UdpServer | None:
        """The server whose controller holds the link."""
        owner = self.slot.owner
        return owner if owner is self.tcp or owner is self.udp else None

    @property
    def command_or_zero(self) -> tuple[float, float]:
        return self.command if self.command is not None else (0.0, 0.0)

    @property
    def transport(self) -> str:
        owner = self.owner
        return owner.kind if owner is not None else "none"

    @property
    def peer_address(self) -> tuple[object, ...] | None:
        """The controller's address as its socket gives it; ``None`` while no controller."""
        owner = self.owner
        return owner.peer_address if owner is not None else None

    @property
    def remote_hash(self) -> int | None:
        """The controller's schema hash, else the last one any handshake carried."""
        owner = self.owner
        if owner is not None:
            return owner.remote_hash
        return self.tcp.remote_hash if self.tcp.remote_hash is not None else self.udp.remote_hash

    @property
    def last_drop(self) -> str:
        """``"ip:port: why"`` of the last controller that went, either transport ("" before)."""
        return self.slot.last_drop

    def counter(self, name: str) -> int:
        """A transport counter summed over TCP and UDP."""
        total: int = getattr(self.tcp.counters, name) + getattr(self.udp.counters, name)
        return total
