"""The robot's BCNP link: TCP and UDP servers, dispatcher, command queue, telemetry, keys.

One controller at a time across both transports (the first peer to complete
the handshake owns the link until it drops). The receive threads stamp
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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import wpilib

import constants
from bcnp import Dispatcher, MessageQueue, TelemetryAccumulator
from bcnp.messages import DRIVE_CMD_SPEC, DRIVETRAIN_TELEMETRY_SPEC, SCHEMA, DrivetrainTelemetry
from bcnp.transport import ControllerSlot, LoopPriority, TcpServer, TransportConfig, UdpServer
from subsystems.loop_timing import RollingWindow

log = logging.getLogger("bcnp.link")

_UINT32 = 0xFFFFFFFF


def _hex(value: int | None) -> str:
    return "" if value is None else f"0x{value:08X}"


def _clamp(value: float, limit: float) -> float:
    return max(-limit, min(limit, value))


@dataclass(frozen=True)
class LinkStatus:
    """Everything the link publishes under ``Network/`` (one snapshot per tick)."""

    connected: bool
    queue_size: int
    cmd_vx: float
    cmd_omega: float
    schema_hash: str
    parse_errors: int
    messages_rx: int
    queue_overflows: int
    messages_skipped: int
    telemetry_sent: int
    telemetry_packets: int
    transport: str
    peer: str
    remote_schema_hash: str
    handshake_rejects: int
    cmd_latency_p99_ms: float


class BcnpLink:
    def __init__(
        self,
        port: int | None = None,
        *,
        clock: Callable[[], float] = wpilib.Timer.getFPGATimestamp,
        max_vx: float = constants.MAX_VX_MPS,
        max_omega: float = constants.MAX_OMEGA_RADPS,
    ) -> None:
        self.clock = clock
        self.max_vx = max_vx
        self.max_omega = max_omega
        self.cmd_latency_ms = RollingWindow(constants.CMD_LATENCY_WINDOW_PACKETS)
        self.queue = MessageQueue(constants.BCNP_QUEUE, on_packet_reached=self._packet_reached)
        #: robot.py marks each tick busy: the receive threads wait at their next safe point
        #: meanwhile, and step aside just before each tick is due.
        self.priority = LoopPriority(period=constants.LOOP_PERIOD_S, lead=constants.LOOP_PRIORITY_LEAD_S)
        self.dispatcher = Dispatcher(
            SCHEMA, connection_timeout=constants.BCNP_QUEUE.connection_timeout, pause=self.priority.pause
        )
        self.dispatcher.register(DRIVE_CMD_SPEC, self.queue.handle_packet)
        config = TransportConfig(
            host=constants.BCNP_HOST,
            port=constants.bcnp_port() if port is None else port,
            handshake_timeout=constants.BCNP_HANDSHAKE_TIMEOUT_S,
            idle_timeout=constants.BCNP_IDLE_TIMEOUT_S,
            send_buffer_limit=constants.BCNP_SEND_BUFFER_BYTES,
        )
        self.slot = ControllerSlot()
        # A new or lost controller drops the queue at once, in the receive thread,
        # before any byte of the next controller: commands never change hands.
        self.tcp = TcpServer(
            self.dispatcher, config, clock=clock, slot=self.slot, on_controller_change=self.queue.clear
        )
        self.udp = UdpServer(
            self.dispatcher, config, clock=clock, slot=self.slot, on_controller_change=self.queue.clear
        )
        self.telemetry = TelemetryAccumulator(
            DRIVETRAIN_TELEMETRY_SPEC,
            self._send,
            flush_interval_ticks=constants.TELEMETRY_FLUSH_TICKS,
            max_buffered=constants.TELEMETRY_MAX_BUFFERED,
        )
        self.command: tuple[float, float] | None = None
        self.connected = False
        self.start_errors: list[str] = []
        self.telemetry_errors = 0
        self._telemetry_session: tuple[object, int] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Listen on TCP and UDP. A port in use is logged, not raised: the robot still drives."""
        for server in (self.tcp, self.udp):
            try:
                server.start()
            except OSError as exc:
                message = f"BCNP {server.kind} cannot listen on port {server.config.port}: {exc}"
                self.start_errors.append(message)
                log.error(message)
            else:
                log.info("BCNP %s listening on port %d", server.kind, server.port)

    def stop(self) -> None:
        self.tcp.stop()
        self.udp.stop()

    # -- per tick (robot thread) -------------------------------------------------------------

    def update(self, now: float) -> tuple[float, float] | None:
        """Advance the queue to ``now``; the clamped (vx, omega) to run, or None to stop.

        A controller that closes, resets or times out has its queue dropped by
        the receive thread when it goes (``on_controller_change``), so the robot
        stops in the next tick; clearing here instead could race with the next
        controller's first packet.
        """
        owner = self.slot.owner
        active = self.queue.update(now)
        self.connected = owner is not None and self.dispatcher.is_connected(now)
        if active is None:
            self.command = None
        else:
            self.command = (_clamp(active.vx, self.max_vx), _clamp(active.omega, self.max_omega))
        return self.command

    def _packet_reached(self, arrival: float, now: float) -> None:
        """Queue callback (robot thread, inside ``update``): one packet's command latency.

        A packet that arrived while this tick was already running, after it
        read ``now``, counts as 0."""
        self.cmd_latency_ms.add(max(0.0, (now - arrival) * 1000.0))

    def record_telemetry(
        self, wheel_velocities: tuple[float, float], wheel_positions: tuple[float, float], now: float
    ) -> None:
        """One DrivetrainTelemetry for this tick; a packet goes out every 2nd tick."""
        owner = self.slot.owner
        session = None if owner is None else (owner, owner.controllers)  # type: ignore[attr-defined]
        if session != self._telemetry_session:
            self.telemetry.clear()  # a new (or no) controller gets none of the last one's samples
            self._telemetry_session = session
        if owner is None:
            return
        try:
            sample = DrivetrainTelemetry(
                leftVelocity=wheel_velocities[0],
                rightVelocity=wheel_velocities[1],
                leftPosition=wheel_positions[0],
                rightPosition=wheel_positions[1],
                timestampMs=round(now * 1000) & _UINT32,
            )
        except (ValueError, TypeError) as exc:  # e.g. a NaN from a broken encoder
            self.telemetry_errors += 1
            log.debug("telemetry sample dropped: %s", exc)
        else:
            self.telemetry.record(sample)
        self.telemetry.tick()

    def _send(self, packet: bytes) -> bool:
        owner = self.slot.owner
        if owner is None:
            return False
        assert isinstance(owner, (TcpServer, UdpServer))
        return owner.send(packet)

    # -- status --------------------------------------------------------------------------------

    def status(self) -> LinkStatus:
        owner = self.slot.owner
        tcp, udp = self.tcp.status(), self.udp.status()
        current = tcp if owner is self.tcp else udp if owner is self.udp else None
        remote = (
            current.remote_hash
            if current
            else tcp.remote_hash
            if tcp.remote_hash is not None
            else udp.remote_hash
        )
        queue = self.queue.metrics
        telemetry = self.telemetry.metrics
        vx, omega = self.command if self.command is not None else (0.0, 0.0)
        return LinkStatus(
            connected=self.connected,
            queue_size=self.queue.size(),
            cmd_vx=vx,
            cmd_omega=omega,
            schema_hash=_hex(SCHEMA.hash),
            parse_errors=self.dispatcher.parse_errors,
            messages_rx=queue.received,
            queue_overflows=queue.overflows,
            messages_skipped=queue.skipped,
            telemetry_sent=telemetry.sent,
            telemetry_packets=telemetry.packets,
            transport=current.transport if current else "none",
            peer=current.peer if current else "",
            remote_schema_hash=_hex(remote),
            handshake_rejects=tcp.handshake_rejects + udp.handshake_rejects,
            cmd_latency_p99_ms=self.cmd_latency_ms.percentile(99),
        )

    def publish(self) -> LinkStatus:
        """Write the ``Network/*`` keys to SmartDashboard."""
        s = self.status()
        put_number = wpilib.SmartDashboard.putNumber
        put_string = wpilib.SmartDashboard.putString
        wpilib.SmartDashboard.putBoolean("Network/Connected", s.connected)
        put_number("Network/QueueSize", s.queue_size)
        put_number("Network/CmdVx", s.cmd_vx)
        put_number("Network/CmdW", s.cmd_omega)
        put_string("Network/SchemaHash", s.schema_hash)
        put_number("Network/ParseErrors", s.parse_errors)
        put_number("Network/MessagesRx", s.messages_rx)
        put_number("Network/QueueOverflows", s.queue_overflows)
        put_number("Network/MessagesSkipped", s.messages_skipped)
        put_number("Network/TelemetrySent", s.telemetry_sent)
        put_number("Network/TelemetryPackets", s.telemetry_packets)
        put_string("Network/Transport", s.transport)
        put_string("Network/Peer", s.peer)
        put_string("Network/RemoteSchemaHash", s.remote_schema_hash)
        put_number("Network/HandshakeRejects", s.handshake_rejects)
        put_number("Network/CmdLatencyP99Ms", s.cmd_latency_p99_ms)
        return s
