"""BCNP robot: a TimedRobot (20 ms) that executes timed drive commands streamed by a host.

Autonomous runs the mode picked on the dashboard (``autonomous/``; by default
the active BCNP command, none → stop); teleop drives from
the Xbox controller while the BCNP queue keeps running and reporting;
disabled stops. The link, the drivetrain and every constant live elsewhere
(``subsystems/``, ``constants.py``); this file only maps modes to behaviour.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import wpilib
import wpimath
from robotpy_ext.autonomous import AutonomousModeSelector

import constants
from autonomous import Mode
from subsystems.drivetrain.drivetrain import Drivetrain
from subsystems.link.bcnp_link import build_link
from subsystems.observe.field_view import FieldView
from subsystems.observe.loop_timing import LoopTiming
from subsystems.observe.network_keys import NetworkKeys, RobotMode, Sources, TickTime
from subsystems.observe.recording import BcnpRecorder, start_recording


class BcnpRobot(wpilib.TimedRobot):
    def robotInit(self) -> None:
        # A thread waiting for the interpreter lock gets it after at most this
        # long (CPython's default is 5 ms): the tick starts on time under a flood.
        sys.setswitchinterval(constants.GIL_SWITCH_INTERVAL_S)
        log = start_recording(Path(constants.__file__).resolve().parent)
        self.drivetrain = Drivetrain()
        self.controller = wpilib.XboxController(constants.DRIVER_CONTROLLER_PORT)
        self.link = build_link()
        self.recorder = BcnpRecorder(log, self.link)
        self.link.packet_observer = self.recorder.packet
        self.loop_timing = LoopTiming(self.getPeriod())
        self.mode = RobotMode()  # Network/Mode and Network/Enabled: set in each mode's Init
        self.tick_time = TickTime()  # Network/Pose's stamp: the tick's time, as its telemetry's
        self.keys = NetworkKeys(
            Sources(self.link, self.loop_timing, self.drivetrain, self.mode, self.tick_time)
        )
        self.field_view = FieldView(self.link, self.drivetrain)  # SmartDashboard/Odometry
        # The modes in autonomous/, offered on SmartDashboard as "Autonomous Mode".
        self.automodes = AutonomousModeSelector("autonomous", self.link)
        # Everything made so far (WPILib, NetworkTables, the modules) lives as long
        # as the program: move it out of the collector's reach, so a full
        # collection, in whichever thread it falls, never holds the interpreter
        # for milliseconds while it walks tens of thousands of objects.
        gc.collect()
        gc.freeze()
        # Listen last: a host that connects the moment the robot listens has its
        # first command started at the first tick, which follows robotInit's end.
        self.link.start()

    def robotPeriodic(self) -> None:
        # While the tick runs, the receive threads wait between packets
        # (LoopPriority); the loop timing brackets it all.
        self.link.priority.busy()
        self.loop_timing.begin()
        try:
            self._tick()
            self.keys.publish()
            # Telemetry was queued during the tick: the receive thread sends it, so no
            # network write runs in the robot loop (a send on loopback runs the peer's side too).
            self.link.flush_sends()
        finally:
            self.loop_timing.end()
            self.link.priority.idle()

    def _tick(self) -> None:
        # One place, in a fixed order, every tick and in every mode: the autonomous
        # mode feeds the queue (a path played here), the queue advances, the mode
        # picks what the wheels do (the queue's command, a stop, or what it drives
        # itself), the drivetrain actuates, the mode records, then telemetry reports
        # this tick (the keys follow in robotPeriodic).
        now = self.tick_time.now = wpilib.Timer.getFPGATimestamp()
        autonomous = self.isAutonomousEnabled()
        # The chooser's "None" is no mode.
        active: Mode | None = self.automodes.active_mode if autonomous else None
        if autonomous:
            self.automodes.periodic()  # a path played on the robot is queued before the queue advances
        command = self.link.update(now)
        if autonomous:
            if active is not None and active.actuate(self.drivetrain, now):
                pass  # the mode drove the drivetrain itself (SysId's voltages)
            elif command is None or active is None or not active.runs_queue:
                self.drivetrain.stop()
            else:
                self.drivetrain.drive(*command)
        elif self.isTeleopEnabled():
            self.drivetrain.drive(*self._teleop_speeds())
        else:
            self.drivetrain.stop()
        self.drivetrain.periodic()
        if active is not None:
            active.record(self.drivetrain, now)
        self.link.record_telemetry(self.drivetrain.wheel_velocities(), self.drivetrain.wheel_positions(), now)
        self.field_view.periodic(now)
        self.recorder.tick(self.drivetrain)

    # WPILib calls each Init once, on entering the mode, before that tick's robotPeriodic:
    # the mode is named for the keys, the drive loops start with no integral carried over, and
    # an enable after a disable clears a drive fault.
    def disabledInit(self) -> None:
        self.mode.name = "disabled"
        self.drivetrain.mode_started(enabled=False)

    def teleopInit(self) -> None:
        self.mode.name = "teleop"
        self.drivetrain.mode_started(enabled=True)

    def testInit(self) -> None:
        self.mode.name = "test"
        self.drivetrain.mode_started(enabled=True)

    def autonomousInit(self) -> None:
        self.mode.name = "autonomous"
        self.drivetrain.mode_started(enabled=True)
        self.automodes.start()

    def autonomousExit(self) -> None:
        # Every way out of autonomous (disabled, teleop, test): a path played here stops now.
        self.automodes.disable()

    # Everything per tick happens in robotPeriodic, in one order for every mode.
    def disabledPeriodic(self) -> None:
        # The mode selected for autonomous gets ready now, motors off (a planned path).
        selected = self.automodes.chooser.getSelected()
        if selected is not None:
            selected.prepare()

    def autonomousPeriodic(self) -> None:
        pass

    def teleopPeriodic(self) -> None:
        pass

    def _teleop_speeds(self) -> tuple[float, float]:
        """Arcade: left stick forward/back, right stick turn (stick up is negative Y)."""
        forward = wpimath.applyDeadband(-self.controller.getLeftY(), constants.JOYSTICK_DEADBAND)
        turn = wpimath.applyDeadband(-self.controller.getRightX(), constants.JOYSTICK_DEADBAND)
        return forward * constants.MAX_VX_MPS, turn * constants.MAX_OMEGA_RADPS

    def endCompetition(self) -> None:
        link = getattr(self, "link", None)
        if link is not None:
            link.close()  # the receive threads and sockets go with the robot
        drivetrain = getattr(self, "drivetrain", None)
        if drivetrain is not None:
            drivetrain.close()
        super().endCompetition()
