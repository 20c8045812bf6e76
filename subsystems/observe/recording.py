"""Every run recorded for AdvantageScope: WPILib's data log, with BCNP's own entries.

:func:`start_recording` (robotInit) starts WPILib's ``DataLogManager``, which
records NetworkTables (the ``Network/*`` keys among them) and the driver
station, joysticks included, to a ``.wpilog``: on a roboRIO in WPILib's
default place (a USB stick if one is plugged in), in the simulator under
``.sim/logs/`` (``BCNP_LOG_DIR`` overrides both).

:class:`BcnpRecorder` adds entries under ``BCNP/``, one per event, never per
byte or per queued message (a 65,535-message packet is one entry):

* ``BCNP/Packet/Type``, ``/Count``, ``/ClearQueue``: each packet handed to the
  queue (written by the receive thread; the data log is thread-safe), up to
  ``RECORD_PACKETS_PER_S`` a second (a second's worth in a burst); beyond that, a
  flood's packets are only counted: ``BCNP/Packet/Unrecorded`` (the total so far,
  written by the tick when it grew);
* ``BCNP/Command/Vx``, ``/Omega``, ``/DurationMs``: each command as it becomes
  active, after clamping;
* ``BCNP/Applied/Vx``, ``/Omega``: what the drivetrain applied after the
  acceleration limits, when it changes;
* ``BCNP/Controller``: each controller that connects or goes (transport, peer,
  both schema hashes; why it went: link lost, idle, closed or reset by the
  peer);
* ``BCNP/Refused``: each refused handshake or peer, and each UDP datagram from an
  earlier controller's address, with its reason (several in one tick: the last, with
  how many);
* ``BCNP/Connected``: the link's liveness when it changes (``False``: link lost);
* ``BCNP/Gyro``: the drivetrain's gyro when it changes: ``ok``, ``not answering: why``,
  ``disagrees with the wheels: why`` (either way the wheel loops drive alone), ``none``;
* ``BCNP/DriveFault``: why the drivetrain stopped until the next enable, when it changes
  (``""``: cleared by an enable);
* ``BCNP/ConfigErrors``: the SPARK MAX that refused their configuration, once at start
  when any did.

WPILib's writer pauses the whole log for good when it falls behind the records
(a slow USB stick, a starved writer thread); the recorder resumes it when the
robot starts and once a second, so a stall costs what fell in it only.

Controller and refusal events are read from the servers' counters once per
tick, so the transports need no hook for them and the tick pays a few
attribute reads.
"""

from __future__ import annotations

import operator
import os
import signal
import threading
import time
from pathlib import Path

import wpilib
from wpiutil.log import BooleanLogEntry, DataLog, DoubleLogEntry, IntegerLogEntry, StringLogEntry

import constants
from bcnp import PacketView
from bcnp.transport import TcpServer, UdpServer, format_address
from subsystems.drivetrain.drivetrain import Drivetrain
from subsystems.link.bcnp_link import BcnpLink

#: What a SIGTERM leaves the data log's writer to write what it holds, seconds.
FINISH_LOG_S = 0.2
#: Overrides where logs go (the tests point it at a temporary folder).
LOG_DIR_ENV = "BCNP_LOG_DIR"
PREFIX = "BCNP/"

#: Counters whose rise means a refused handshake or peer.
_REFUSALS = ("handshake_rejects", "handshake_timeouts", "refused", "peers_refused", "stale_datagrams")
_refusals = operator.attrgetter(*_REFUSALS)
#: Counters whose rise means a controller went (the server's stop counts none).
_DROPS = ("link_losses", "idle_drops", "disconnects")
_drops = operator.attrgetter(*_DROPS)


def log_dir(project_dir: Path) -> str:
    """Where this run's log goes: ``BCNP_LOG_DIR``, else ``.sim/logs`` in the simulator,
    else "" (WPILib's default on a roboRIO)."""
    override = os.environ.get(LOG_DIR_ENV, "").strip()
    if override:
        return override
    if wpilib.RobotBase.isSimulation():
        return str(project_dir / ".sim" / "logs")
    return ""


def start_recording(project_dir: Path) -> DataLog:
    """Start WPILib's data log with NetworkTables and the driver station (joysticks included),
    and have a SIGTERM end it whole (:func:`finish_log_on_sigterm`)."""
    directory = log_dir(project_dir)
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
    wpilib.DataLogManager.start(directory)
    wpilib.DataLogManager.logNetworkTables(True)
    log = wpilib.DataLogManager.getLog()
    wpilib.DriverStation.startDataLog(log, True)
    finish_log_on_sigterm()
    return log


def finish_log_on_sigterm() -> bool:
    """On SIGTERM (``python run.py sim`` stopping the simulator, a roboRIO stopping the
    program), write what the data log still holds (:data:`FINISH_LOG_S` for it), then exit
    with 128 + SIGTERM. Without it the process dies with up to a quarter second of records
    (the writer's period) unwritten. Only from the main thread and only over the default action; False when
    not installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False

    def finish(signum: int, _frame: object) -> None:
        # flush() wakes the writer thread; it returns before the write, and DataLogManager.stop()
        # drops what is pending, so the writer gets a moment of its own instead.
        wpilib.DataLogManager.getLog().flush()
        time.sleep(FINISH_LOG_S)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, finish)
    return True


class _ServerWatch:
    """What one server looked like at the last tick."""

    __slots__ = ("server", "controllers", "peer", "remote_hash", "drops", "refusals", "left_uncounted")

    def __init__(self, server: TcpServer | UdpServer) -> None:
        self.server = server
        counters = server.counters
        self.controllers = counters.controllers
        self.peer = server.peer_address
        self.remote_hash = server.remote_hash
        self.drops = sum(_drops(counters))
        self.refusals = sum(_refusals(counters))
        self.left_uncounted = False  # the last tick saw its peer go before its count rose


#: Ticks between two resumes of the data log (1 s): see :meth:`BcnpRecorder.tick`.
RESUME_EVERY_TICKS = 50


class BcnpRecorder:
    def __init__(self, log: DataLog, link: BcnpLink) -> None:
        self.link = link
        # WPILib's log writer pauses the log for good when it falls behind (a slow USB stick,
        # a starved thread: "outgoing buffers exceeded threshold, pausing logging"); the
        # recorder resumes it at start and then once a second, so a stall loses what fell in
        # it, never the rest of the match. A writer still behind pauses it again.
        self._log = log
        self._ticks = 0
        log.resume()
        self.local_hash = link.schema.hash
        self._packet_type = StringLogEntry(log, PREFIX + "Packet/Type")
        self._packet_count = IntegerLogEntry(log, PREFIX + "Packet/Count")
        self._packet_clear = BooleanLogEntry(log, PREFIX + "Packet/ClearQueue")
        self._command_vx = DoubleLogEntry(log, PREFIX + "Command/Vx", "m/s")
        self._command_omega = DoubleLogEntry(log, PREFIX + "Command/Omega", "rad/s")
        self._command_ms = IntegerLogEntry(log, PREFIX + "Command/DurationMs", "ms")
        self._applied_vx = DoubleLogEntry(log, PREFIX + "Applied/Vx", "m/s")
        self._applied_omega = DoubleLogEntry(log, PREFIX + "Applied/Omega", "rad/s")
        self._controller = StringLogEntry(log, PREFIX + "Controller")
        self._refused = StringLogEntry(log, PREFIX + "Refused")
        self._connected = BooleanLogEntry(log, PREFIX + "Connected")
        self._gyro = StringLogEntry(log, PREFIX + "Gyro")
        self._gyro_state: str | None = None
        self._drive_fault_entry = StringLogEntry(log, PREFIX + "DriveFault")
        self._drive_fault = ""
        self._config_errors = StringLogEntry(log, PREFIX + "ConfigErrors")
        self._config_logged = False
        self._unrecorded = IntegerLogEntry(log, PREFIX + "Packet/Unrecorded")
        self.packets_per_s = float(constants.RECORD_PACKETS_PER_S)
        self._budget = self.packets_per_s
        self._budget_time = 0.0
        self.unrecorded = 0  # packets past the budget (receive thread)
        self._unrecorded_logged = 0
        self._watches = [_ServerWatch(link.tcp), _ServerWatch(link.udp)]
        self._active: object | None = None
        self._applied: tuple[float, float] | None = None
        self._was_connected: bool | None = None

    # -- receive thread ------------------------------------------------------------------------

    def packet(self, packet: PacketView, now: float) -> None:
        """A packet handed to the queue at ``now`` (robot seconds): recorded while the
        budget lasts (a token bucket: ``packets_per_s`` a second, a second's worth at most)."""
        rate = self.packets_per_s
        budget = min(rate, self._budget + (now - self._budget_time) * rate)
        self._budget_time = now
        if budget < 1.0:
            self._budget = budget
            self.unrecorded += 1
            return
        self._budget = budget - 1.0
        self._packet_type.append(packet.spec.name)
        self._packet_count.append(packet.count)
        self._packet_clear.append(packet.clear_queue)

    # -- robot thread ----------------------------------------------------------------------------

    def tick(self, drivetrain: Drivetrain) -> None:
        """After the tick's work: what changed since the last tick."""
        self._ticks += 1
        if self._ticks >= RESUME_EVERY_TICKS:
            self._ticks = 0
            self._log.resume()
        link = self.link
        active = link.queue.active()
        if active is not self._active:
            self._active = active
            if active is not None and link.command is not None:
                vx, omega = link.command
                self._command_vx.append(vx)
                self._command_omega.append(omega)
                self._command_ms.append(int(active.durationMs))  # type: ignore[attr-defined]
        applied = drivetrain.commanded
        if applied != self._applied:
            self._applied = applied
            self._applied_vx.append(applied[0])
            self._applied_omega.append(applied[1])
        gyro = drivetrain.gyro_state
        if gyro != self._gyro_state:
            self._gyro_state = gyro
            reason = drivetrain.gyro_reason
            self._gyro.append(f"{gyro}: {reason}" if reason else gyro)
        fault = drivetrain.drive_fault
        if fault != self._drive_fault:
            self._drive_fault = fault
            self._drive_fault_entry.append(fault)
        if not self._config_logged:
            self._config_logged = True
            if drivetrain.config_errors:
                self._config_errors.append(drivetrain.config_errors)
        if link.connected != self._was_connected:
            self._was_connected = link.connected
            self._connected.append(link.connected)
        for watch in self._watches:
            self._watch(watch)
        unrecorded = self.unrecorded
        if unrecorded != self._unrecorded_logged:
            self._unrecorded_logged = unrecorded
            self._unrecorded.append(unrecorded)

    def _watch(self, watch: _ServerWatch) -> None:
        server = watch.server
        counters = server.counters
        peer = server.peer_address
        kind = server.kind
        drops = sum(_drops(counters))
        counted = drops != watch.drops
        # A UDP peer unlocked for link loss may pair again before the next tick: same peer.
        left = bool(watch.peer) and peer != watch.peer
        # The receive thread ends a controller in one step, but the counters and the peer
        # are read apart: a departure can show by its peer going one tick and by its count
        # the next, or the other way round. Either way it is recorded once.
        if (counted and not watch.left_uncounted) or left:
            # "ip:port: why" (link lost, idle, closed or reset by the peer, the server stopped).
            self._controller.append(f"disconnected {kind} {server.last_drop}")
        if counters.controllers != watch.controllers:
            remote = server.remote_hash
            theirs = "?" if remote is None else f"0x{remote:08X}"
            where = format_address(peer) or "(gone within the tick)"
            self._controller.append(
                f"connected {kind} {where}, schema {theirs} (ours 0x{self.local_hash:08X})"
            )
        refusals = sum(_refusals(counters))
        if refusals != watch.refusals:
            more = refusals - watch.refusals
            self._refused.append(
                f"{kind} {server.last_reject}" + (f" (and {more - 1} more)" if more > 1 else "")
            )
        watch.controllers = counters.controllers
        watch.left_uncounted = left and not counted
        # Counted while its peer still shows: that peer is not watched for going as well.
        watch.peer = None if counted and peer == watch.peer else peer
        watch.drops = drops
        watch.refusals = refusals
