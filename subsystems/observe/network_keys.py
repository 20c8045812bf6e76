"""The robot's ``Network/*`` keys on SmartDashboard: one table, one row per key.

Each row names the key, the NetworkTables type it is written as, where its
value comes from and what it means. :class:`NetworkKeys` writes every row
once per tick; adding a key is adding a row. The key table in docs/robot.md is
checked against what the robot publishes (tests/test_docs.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import wpilib

from bcnp.transport import format_address

if TYPE_CHECKING:
    from subsystems.drivetrain.drivetrain import Drivetrain
    from subsystems.link.bcnp_link import BcnpLink
    from subsystems.observe.loop_timing import LoopTiming

PREFIX = "Network/"

Value = bool | float | str | tuple[float, ...]
#: DrivetrainTelemetry's ``timestampMs`` is a uint32: the FPGA time in ms, wrapped.
_UINT32 = 0xFFFFFFFF


class RobotMode:
    """The driver station's mode as the robot last entered it: ``disabled``,
    ``autonomous``, ``teleop`` or ``test``. The robot sets :attr:`name` in each
    mode's Init (WPILib calls it once, on entering the mode), so no tick asks
    the driver station."""

    NAMES = ("disabled", "autonomous", "teleop", "test")

    def __init__(self) -> None:
        self.name = "disabled"  # a robot starts disabled


class TickTime:
    """The FPGA time (s) of the robot's tick: the ``now`` the tick runs on and stamps its
    DrivetrainTelemetry sample with. The robot sets :attr:`now` at each tick's start."""

    def __init__(self) -> None:
        self.now = 0.0


def telemetry_stamp_ms(now: float) -> int:
    """``now`` (FPGA s) as DrivetrainTelemetry's ``timestampMs`` stamps it (BcnpLink.record_telemetry)."""
    return round(now * 1000) & _UINT32


@dataclass(frozen=True)
class Sources:
    """What the keys are read from."""

    link: BcnpLink
    loop: LoopTiming
    #: Only the drivetrain's keys read it; a Sources made for the link's keys alone may omit it.
    drivetrain: Drivetrain = None  # type: ignore[assignment]
    mode: RobotMode = dataclasses.field(default_factory=RobotMode)
    tick: TickTime = dataclasses.field(default_factory=TickTime)


@dataclass(frozen=True)
class Key:
    name: str  # under Network/
    #: As written to NetworkTables: boolean, double, string, double[] (a tuple of floats).
    type: type[bool] | type[float] | type[str] | type[tuple[float, ...]]
    read: Callable[[Sources], Any]  # compared with the last tick's; written through ``show``
    meaning: str
    show: Callable[[Any], Value] | None = None  # the value as written, when ``read`` is not it


def _hex(value: int | None) -> str:
    return "" if value is None else f"0x{value:08X}"


def _pose(s: Sources) -> tuple[float, float, float, float]:
    """x, y (m), heading (rad) of the drivetrain's odometry and the tick's telemetry stamp (ms)."""
    pose = s.drivetrain.pose()
    return pose.X(), pose.Y(), pose.rotation().radians(), float(telemetry_stamp_ms(s.tick.now))


KEYS: tuple[Key, ...] = (
    Key(
        "Enabled",
        bool,
        lambda s: s.mode.name != "disabled",
        "the robot is enabled (its mode is not disabled); BCNP commands drive only in autonomous",
    ),
    Key(
        "Mode",
        str,
        lambda s: s.mode.name,
        '"disabled", "autonomous", "teleop" or "test": what BCNP commands do in each is in docs/robot.md',
    ),
    Key(
        "Connected",
        bool,
        lambda s: s.link.connected,
        "a controller owns the link and sent a packet within the link timeout (200 ms)",
    ),
    Key("QueueSize", float, lambda s: s.link.queue.size(), "commands waiting (the running one not included)"),
    Key(
        "CmdVx",
        float,
        lambda s: s.link.command_or_zero[0],
        "running command's vx after clamping, m/s (0: none)",
    ),
    Key(
        "CmdW",
        float,
        lambda s: s.link.command_or_zero[1],
        "running command's omega after clamping, rad/s (0: none)",
    ),
    Key(
        "ActualVx",
        float,
        lambda s: s.drivetrain.actual_vx,
        "forward speed the chassis delivers, from the wheel encoders, m/s",
    ),
    Key(
        "ActualW",
        float,
        lambda s: s.drivetrain.actual_omega,
        "turn rate the chassis delivers, rad/s: the gyro's (the wheels' without one that answers)",
    ),
    Key(
        "VxError",
        float,
        lambda s: s.drivetrain.vx_error,
        "vx the drivetrain drives toward (after the acceleration limits; 0 stopped) less ActualVx, m/s;"
        " 0 in open loop (SysId, pre-flight check), which tracks no speed",
    ),
    Key(
        "WError",
        float,
        lambda s: s.drivetrain.omega_error,
        "omega the drivetrain drives toward (after the acceleration limits; 0 stopped) less ActualW,"
        " rad/s; 0 in open loop (SysId, pre-flight check), which tracks no speed",
    ),
    Key(
        "Gyro",
        str,
        lambda s: s.drivetrain.gyro_state,
        '"ok", "not answering" or "disagrees with the wheels" (either way the wheel loops drive alone)'
        ' or "none" (no gyro: heading from the wheels)',
    ),
    Key(
        "DriveFault",
        str,
        lambda s: s.drivetrain.drive_fault,
        "why the drivetrain is stopped until the next enable: which side runs against its command"
        ' ("" when none)',
    ),
    Key(
        "ConfigErrors",
        str,
        lambda s: s.drivetrain.config_errors,
        'the CAN controllers that refused their configuration at start, "SPARK MAX 4: kTimeout; TalonFX 2:'
        ' TX_FAILED; ..." ("" when none)',
    ),
    Key("SchemaHash", str, lambda s: s.link.schema.hash, "this robot's schema hash", _hex),
    Key("ParseErrors", float, lambda s: s.link.counter("parse_errors"), "parser resyncs, both transports"),
    Key("MessagesRx", float, lambda s: s.link.queue.received, "commands offered to the queue"),
    Key("QueueOverflows", float, lambda s: s.link.queue.overflows, "commands refused by a full queue"),
    Key(
        "MessagesSkipped",
        float,
        lambda s: s.link.queue.skipped,
        "stale commands skipped, never run late",
    ),
    Key("TelemetrySent", float, lambda s: s.link.telemetry.sent, "telemetry messages sent"),
    Key("TelemetryPackets", float, lambda s: s.link.telemetry.packets, "telemetry packets sent"),
    Key("Transport", str, lambda s: s.link.transport, '"tcp", "udp" or "none": who holds the link'),
    Key(
        "Peer",
        str,
        lambda s: s.link.peer_address,
        'the controller\'s "ip:port" ("" when none)',
        format_address,
    ),
    Key(
        "RemoteSchemaHash",
        str,
        lambda s: s.link.remote_hash,
        "schema hash of the last handshake received, good or bad",
        _hex,
    ),
    Key(
        "HandshakeRejects",
        float,
        lambda s: s.link.counter("handshake_rejects"),
        "handshakes refused for a wrong magic or schema hash",
    ),
    Key(
        "PeersRefused",
        float,
        lambda s: s.link.counter("peers_refused"),
        "connections and datagrams refused from peers outside BCNP_ALLOWED_PEERS, both transports",
    ),
    Key(
        "LinkLosses",
        float,
        lambda s: s.link.counter("link_losses"),
        "controllers dropped (TCP) or unlocked (UDP) for link loss, both transports",
    ),
    Key(
        "LastDrop",
        str,
        lambda s: s.link.last_drop,
        '"ip:port: why" of the last controller that went (link lost, idle, closed or reset by the peer)',
    ),
    Key(
        "CmdLatencyP99Ms",
        float,
        lambda s: s.link.cmd_latency_ms.percentile(99),
        "99th percentile of packet arrival to its first command starting, last 500 packets, ms",
    ),
    Key(
        "LoopP99Ms",
        float,
        lambda s: s.loop.durations_ms.percentile(99),
        "99th percentile of robotPeriodic's duration over the last 500 ticks, ms (wall time)",
    ),
    Key(
        "LoopMaxMs",
        float,
        lambda s: s.loop.durations_ms.max(),
        "longest robotPeriodic of the last 500 ticks, ms",
    ),
    Key(
        "LoopPeriodMaxMs",
        float,
        lambda s: s.loop.periods_ms.max(),
        "longest start-to-start period of the last 500 ticks, ms (robot time)",
    ),
    Key("Overruns", float, lambda s: s.loop.overruns, "ticks that started later than period + 5 ms"),
    Key(
        "Pose",
        tuple,
        _pose,
        "[x m, y m, heading rad, timestampMs]: the drivetrain's odometry (the gyro's heading while it is"
        " trusted) and the FPGA time (ms) of this tick, the timestampMs of its DrivetrainTelemetry"
        " sample; one array, so a reader gets the pose and its stamp together",
    ),
)


_UNSET = object()


class NetworkKeys:
    """Writes :data:`KEYS` to SmartDashboard; the writers are looked up once, and a key
    is written when its value changed (SmartDashboard keeps the last one), so a tick
    pays for the few keys that move, not for all of them.

    The loop goes over the readers alone; a row's name, writer and ``show`` are unpacked
    only when its value changed. (Tried and not kept: reading every value into a list
    compared with the last at once, cheaper on a tick where nothing changed, dearer on
    a live tick where a few keys change every time; ``operator.attrgetter`` readers,
    whose generic attribute lookups cost more than a lambda's specialised ones.)"""

    def __init__(self, sources: Sources, keys: tuple[Key, ...] = KEYS) -> None:
        self.sources = sources
        self.keys = keys
        put: dict[type, Callable[[str, Value], object]] = {
            bool: wpilib.SmartDashboard.putBoolean,  # type: ignore[dict-item]
            float: wpilib.SmartDashboard.putNumber,  # type: ignore[dict-item]
            str: wpilib.SmartDashboard.putString,  # type: ignore[dict-item]
            tuple: wpilib.SmartDashboard.putNumberArray,  # type: ignore[dict-item]
        }
        self._writes = tuple((PREFIX + key.name, put[key.type], key.show) for key in keys)
        self._reads = tuple(key.read for key in keys)
        self._last: list[object] = [_UNSET] * len(keys)

    def publish(self) -> None:
        sources = self.sources
        last = self._last
        writes = self._writes
        for i, read in enumerate(self._reads):
            value = read(sources)
            if value != last[i]:
                last[i] = value
                name, write, show = writes[i]
                write(name, value if show is None else show(value))
