"""Differential drivetrain: what the robot decides, for any wiring.

``drive(vx, omega)`` and ``stop()`` store intent; ``periodic()`` (once per
tick, after the robot decided) reads the sensors, updates odometry, and turns
the intent into wheel speeds (acceleration limits, the turn-rate loop,
kinematics) that it hands to the wiring's :class:`DrivetrainIO`, which holds
them with its wheel-speed loops. ``stop()`` also stops the motors at once and
resets the acceleration limiters and every loop's integral, so a stop never
ramps and driving never resumes with an old integral. How the wheels are
driven (PWM or CAN, where the wheel loop runs) is the IO's business
(``subsystems/drivetrain/io.py``).

The turn-rate loop (:class:`TurnRateLoop`, ``subsystems/drivetrain/turn_loop.py``) makes the chassis
turn at the
commanded rate as the gyro measures it, not as the wheel difference implies:
wheels scrub on carpet, so a skid-steer chassis turns less than its wheel
speeds say. :class:`GyroWatch` (``subsystems/drivetrain/checks.py``) decides whether the gyro still
answers; when
it stops, the wheel loops drive alone (the correction fades out, never a
jump), a WPILib ``Alert`` shows and the recorder writes it to the data log.
``drive_volts`` applies voltages open loop (the SysId modes).

The interlocks (``subsystems/drivetrain/checks.py``) keep wrong wiring and failing
sensors from driving the robot away: a gyro whose turn disagrees with the
wheels' is distrusted as a silent one is; a side whose wheel runs against its
command stops the drivetrain until the next enable; a controller that refused its
configuration is reported at start. Odometry starts from the first tick's
readings, not the constructor's (a CAN controller may not have sent any yet).
"""

from __future__ import annotations

import math
from collections import deque

import wpilib
from wpimath.filter import SlewRateLimiter
from wpimath.geometry import Pose2d, Rotation2d
from wpimath.kinematics import ChassisSpeeds, DifferentialDriveKinematics, DifferentialDriveOdometry

import constants
from subsystems.drivetrain.checks import (
    GyroAgreement,
    GyroState,
    GyroWatch,
    SideCheck,
    SpinCheck,
    config_failures,
    volts_as_speed,
)
from subsystems.drivetrain.io import DrivetrainInputs, DrivetrainIO, make_io, wheel_heading
from subsystems.drivetrain.turn_loop import TurnRateLoop

__all__ = ["BrownoutWatch", "Drivetrain", "GyroWatch", "TurnRateLoop"]

_TAU = math.tau


def _limiter(rate: float | None) -> SlewRateLimiter | None:
    return None if rate is None else SlewRateLimiter(rate)


def _clamp(value: float, limit: float) -> float:
    return value if -limit < value < limit else math.copysign(limit, value)


class BrownoutWatch:
    """The roboRIO's brownout as the code sees it: the battery below its brownout voltage, then
    until it is back above ``RECOVER_V``, as the roboRIO keeps its outputs off (WPILib, "roboRIO
    Brownout and Understanding Current Draw"). Read from the voltage rather than
    ``isBrownedOut()``, which the simulator's HAL never sets."""

    RECOVER_V = 7.5

    def __init__(self) -> None:
        self.threshold = wpilib.RobotController.getBrownoutVoltage()
        self.active = False

    def update(self, battery_v: float) -> bool:
        if battery_v < self.threshold:  # the roboRIO decides on the same input voltage
            self.active = True
        elif battery_v > self.RECOVER_V:
            self.active = False
        return self.active


class Drivetrain:
    """Owns the drive decisions; ``io`` owns the hardware. Motor safety stays on: a loop
    that stops calling ``periodic()`` for 100 ms has its motors stopped by WPILib."""

    def __init__(self, io: DrivetrainIO | None = None) -> None:
        self.io = io if io is not None else make_io(constants.drivetrain_wiring())
        self.period = constants.LOOP_PERIOD_S
        self.track_width = constants.TRACK_WIDTH_M
        self.kinematics = DifferentialDriveKinematics(self.track_width)
        self.vx_limiter = _limiter(constants.MAX_ACCEL_MPS2)
        self.omega_limiter = _limiter(constants.MAX_ALPHA_RADPS2)
        self.inputs = DrivetrainInputs()
        # Read here only to learn whether there is a gyro: a CAN controller may not have sent a
        # status frame yet, so odometry starts from the first tick's readings (``_start``).
        self.io.update_inputs(self.inputs)
        inputs = self.inputs
        #: The turn-rate loop: with a gyro.
        self.turn: TurnRateLoop | None = None
        self.gyro_watch: GyroWatch | None = None
        self.gyro_check: GyroAgreement | None = None
        if inputs.heading is not None:
            self.gyro_watch = GyroWatch(self.period)
            self.gyro_check = GyroAgreement(self.period)
            self.turn = TurnRateLoop(self.period)
        self.gyro_alert = wpilib.Alert(
            "Drivetrain",
            "Gyro not answering: the turn rate is the wheels' alone",
            wpilib.Alert.AlertType.kWarning,
        )
        self.gyro_disagrees_alert = wpilib.Alert(
            "Drivetrain",
            "Gyro disagrees with the wheels (reversed, wrong axis?): the turn rate is the wheels' alone",
            wpilib.Alert.AlertType.kWarning,
        )
        self._gyro_trusted = inputs.heading is not None
        #: "ok", "not answering", "disagrees with the wheels" or "none" (no gyro): kept as it
        #: changes, read every tick by the keys and the recorder.
        self.gyro_state = GyroState.NONE if inputs.heading is None else GyroState.OK
        self._started = False  # odometry anchored on a tick's readings
        # Without a trusted gyro the heading is the oldest of these (the gyro's heading and the
        # wheel positions on the last ticks it was trusted) plus what the wheels turned since:
        # a gyro found disagreeing was already wrong for the ticks it took to find it.
        anchors = 1
        if self.gyro_check is not None:
            anchors = self.gyro_check.window + round(constants.GYRO_DISAGREE_S / self.period) + 1
        self._anchors: deque[tuple[Rotation2d, float, float]] = deque(maxlen=anchors)
        if self.turn is not None:
            self.turn.recent = deque(maxlen=anchors)
        self._anchors.append((Rotation2d(), 0.0, 0.0))
        self._last_turns = (0.0, 0.0)  # the gyro's heading and the wheels' last tick, rad
        self.odometry = DifferentialDriveOdometry(Rotation2d(), 0.0, 0.0)
        #: Each side's speed against its command: a trip stops the drivetrain until the next enable.
        self.side_checks = (SideCheck("left", self.period), SideCheck("right", self.period))
        self.spin_check = SpinCheck(self.period)
        self._spin_turn = 0.0  # the wheels' turn (rad) at the last side check
        #: Why the drivetrain is stopped until the next enable ("" while it is not).
        self.drive_fault = ""
        self.drive_fault_alert = wpilib.Alert(
            "Drivetrain", "Drivetrain stopped until the next enable", wpilib.Alert.AlertType.kError
        )
        self._was_enabled = False
        self._last_volts: tuple[float, float] | None = None  # the voltages applied last tick
        #: The controllers that refused their configuration ("" when none, or none configured).
        self.config_errors = config_failures(inputs.config_results or ())
        self.config_alert = wpilib.Alert(
            "Drivetrain",
            f"Drivetrain configuration failed: {self.config_errors}",
            wpilib.Alert.AlertType.kError,
        )
        self.config_alert.set(bool(self.config_errors))
        self._vx = 0.0
        self._omega = 0.0
        self._volts: tuple[float, float] | None = None  # drive_volts: open loop
        self._ref = (0.0, 0.0)  # where each wheel should be now, m/s
        self._stopped = True
        self._stop_sent = False  # stop() already stopped the motors this tick
        #: What the chassis delivered, as read this tick (m/s, rad/s), and the intent less it:
        #: 0 after an open-loop tick, which drove voltages toward no speed (SysId, pre-flight).
        self.actual_vx = self.actual_omega = 0.0
        self.vx_error = self.omega_error = 0.0
        self._was = (0.0, 0.0)  # the intent of the last tick
        self._was_open_loop = False  # the last tick drove voltages (drive_volts), not a speed
        self._gyro_radians = 0.0  # the gyro's heading read this tick (the turn loop's input)
        self.brownout = BrownoutWatch()

    # -- intent -------------------------------------------------------------------------

    def drive(self, vx: float, omega: float) -> None:
        """Chassis speed for this tick (m/s, rad/s), through the acceleration limits."""
        if self.vx_limiter is not None:
            vx = self.vx_limiter.calculate(vx)
        if self.omega_limiter is not None:
            omega = self.omega_limiter.calculate(omega)
        self._vx, self._omega = vx, omega
        self._volts = None
        self._stopped = False

    def drive_volts(self, left: float, right: float) -> None:
        """Apply these voltages to the sides for this tick, open loop (SysId's tests)."""
        self._vx = self._omega = 0.0
        self._volts = (left, right)
        self._stopped = False

    def stop(self) -> None:
        """Wheels to 0 now: motors off in this very call, limiters and loops reset."""
        # Every tick while stopped, not once: a reset also restarts the limiter's clock, so
        # the first step after a stop is limited to one tick's worth of acceleration.
        for limiter in (self.vx_limiter, self.omega_limiter):
            if limiter is not None:
                limiter.reset(0.0)
        self._ref = (0.0, 0.0)
        if self.turn is not None:
            self.turn.reset()
        self._vx = self._omega = 0.0
        self._volts = None
        self._stopped = True
        self.io.stop()  # also clears the wheel loops' integrals
        self._stop_sent = True

    def reset_loops(self) -> None:
        """No integral anywhere, wheel loops and turn-rate loop (a change of mode): what
        follows starts from no correction. The wheels keep their speed references, so a
        robot still moving is not jolted."""
        self.io.reset_loops()
        if self.turn is not None:
            self.turn.reset()

    def mode_started(self, enabled: bool) -> None:
        """A driver-station mode began (its ``Init``): enabled after being disabled, a drive
        fault is cleared (a new enable is a new try); every mode starts with no integral."""
        if enabled and not self._was_enabled and self.drive_fault:
            self._clear_drive_fault()
        self._was_enabled = enabled
        self.reset_loops()

    # -- actuation ------------------------------------------------------------------------

    def periodic(self) -> None:
        stop_sent, self._stop_sent = self._stop_sent, False
        try:
            self._actuate(stop_sent)
        finally:
            self._was = (self._vx, self._omega)
            self._was_open_loop = self._volts is not None and not self._stopped

    def _actuate(self, stop_sent: bool) -> None:
        inputs = self.inputs
        self.io.update_inputs(inputs)  # first: the loops act on this tick's readings
        if not self._started:
            self._start()
        wheel_rate = (inputs.right_velocity_mps - inputs.left_velocity_mps) / self.track_width
        heading = self._heading(wheel_rate)
        self.odometry.update(heading, inputs.left_position_m, inputs.right_position_m)
        self._measure(wheel_rate)
        if not self._stopped and self._check_sides():
            self.stop()  # the fault: motors off in this tick, and every tick until the next enable
            self._stop_sent = False  # done for this tick, not the next
            stop_sent = True
        if self._stopped:
            self._last_volts = None
            if not stop_sent:  # once per tick is enough: stop() may have done it
                self.io.stop()
            return
        volts = self._volts
        self._last_volts = volts
        if volts is not None:
            self.io.set_voltages(*volts)
            return
        omega = self._omega
        turn = self.turn
        if self.brownout.update(inputs.battery_v):
            for check in self.side_checks:
                check.reset()  # the outputs are off: the wheels follow no command
            # The outputs are off: no loop integrates what it cannot drive, and the ramps start
            # again from what the wheels do, so nothing jolts when they return.
            self.io.hold()
            if turn is not None:
                turn.hold()
            if self.vx_limiter is not None:
                self.vx_limiter.reset(self.actual_vx)
            if self.omega_limiter is not None:
                self.omega_limiter.reset(self.actual_omega)
            self._ref = (inputs.left_velocity_mps, inputs.right_velocity_mps)
            return
        if not self._vx and not omega and self._ref == (0.0, 0.0):
            # At rest and to stay there: neutral (the idle mode holds it), not loops hunting
            # on sensor noise.
            self.io.stop()
            if turn is not None:
                turn.reset()
            return
        if turn is not None:
            if self._gyro_trusted:
                omega += turn.update(omega, self._gyro_radians)
            elif turn.fading:
                omega += turn.fade_out()
        wheels = self.kinematics.toWheelSpeeds(ChassisSpeeds(self._vx, 0.0, omega))
        left, right = self._ref
        self.io.set_wheel_speeds(left, right, wheels.left, wheels.right)
        self._ref = (wheels.left, wheels.right)

    def _start(self) -> None:
        """Odometry and the heading's anchor from this tick's readings: the first ones taken
        while the robot loop runs, when every sensor has had a tick to report."""
        inputs = self.inputs
        self._started = True
        heading = inputs.heading if inputs.heading is not None else Rotation2d()
        left, right = inputs.left_position_m, inputs.right_position_m
        self._anchors.clear()
        self._anchors.append((heading, left, right))
        self.odometry.resetPosition(heading, left, right, Pose2d())
        self._last_turns = (heading.radians(), self._wheel_turn())

    def _wheel_turn(self) -> float:
        inputs = self.inputs
        return (inputs.right_position_m - inputs.left_position_m) / self.track_width

    def _heading(self, wheel_rate: float) -> Rotation2d:
        """The gyro's heading while it is trusted (its radians kept for the turn loop), else
        the one it gave before it went wrong plus what the wheels turned since."""
        inputs = self.inputs
        heading = inputs.heading
        watch = self.gyro_watch
        check = self.gyro_check
        if heading is not None and watch is not None and check is not None:
            watch_ok, check_ok = watch.ok, check.ok
            self._gyro_radians = radians = heading.radians()
            wheel_turn = self._wheel_turn()
            last_gyro, last_wheels = self._last_turns
            self._last_turns = (radians, wheel_turn)
            if watch.update(radians, inputs.gyro_connected, wheel_rate):
                gyro_delta = math.remainder(radians - last_gyro, _TAU)
                wheel_delta = wheel_turn - last_wheels
                if math.isfinite(gyro_delta) and math.isfinite(wheel_delta):
                    check.update(gyro_delta, wheel_delta)
                else:
                    check.reset()
            else:
                check.reset()  # a silent gyro is GyroWatch's to judge
            trusted = watch.ok and check.ok
            if trusted and not self._gyro_trusted:
                self._anchors.clear()
            self._gyro_trusted = trusted
            if watch.ok is not watch_ok or check.ok is not check_ok:
                self._gyro_changed()
            if trusted:
                self._anchors.append((heading, inputs.left_position_m, inputs.right_position_m))
                return heading
        start, left0, right0 = self._anchors[0]
        return start + wheel_heading(
            inputs.left_position_m - left0, inputs.right_position_m - right0, self.track_width
        )

    def _check_sides(self) -> bool:
        """Each side's reading against what it was driven toward last tick (the wheel should
        be there now); whether the drivetrain is faulted."""
        if self.drive_fault:
            return True
        inputs = self.inputs
        volts = self._last_volts
        # Open loop (SysId), the side is driven toward the speed its voltage holds.
        commands = self._ref if volts is None else (volts_as_speed(volts[0]), volts_as_speed(volts[1]))
        left, right = self.side_checks
        fault = left.update(commands[0], inputs.left_velocity_mps) or right.update(
            commands[1], inputs.right_velocity_mps
        )
        # The wheels' turn rate from their positions, which reach the roboRIO without the velocity
        # filter's delay: with the speed late, a sharp turn's first 100 ms would read as a spin.
        turn = self._wheel_turn()
        wheel_rate = (turn - self._spin_turn) / self.period
        self._spin_turn = turn
        if not fault:
            fault = self.spin_check.update(inputs.turn_rate_radps, wheel_rate)
        if fault:
            self.drive_fault = fault
            self.drive_fault_alert.setText(f"Drivetrain stopped until the next enable: {fault}")
            self.drive_fault_alert.set(True)
            return True
        return False

    def _clear_drive_fault(self) -> None:
        self.drive_fault = ""
        self.drive_fault_alert.set(False)
        for check in self.side_checks:
            check.reset()
        self.spin_check.reset()

    def _measure(self, wheel_rate: float) -> None:
        """The chassis speed delivered: vx from the wheels, the turn rate from the gyro while
        it answers (else ``wheel_rate``, the wheels'), and the errors against the intent."""
        inputs = self.inputs
        self.actual_vx = vx = (inputs.left_velocity_mps + inputs.right_velocity_mps) * 0.5
        rate = inputs.turn_rate_radps
        if rate is None or not self._gyro_trusted:
            rate = wheel_rate
        self.actual_omega = rate
        if self._was_open_loop:
            # Open loop tracks no speed: an error against the 0 it stores would read the
            # whole speed (-2 m/s in a SysId step).
            self.vx_error = self.omega_error = 0.0
            return
        # Against what the wheels were to reach by now: last tick's intent.
        was_vx, was_omega = self._was
        self.vx_error = was_vx - vx
        self.omega_error = was_omega - rate

    def _gyro_changed(self) -> None:
        self.gyro_state = state = self._judge_gyro()
        self.gyro_alert.set(state is GyroState.NOT_ANSWERING)
        self.gyro_disagrees_alert.set(state is GyroState.DISAGREES)
        turn = self.turn
        if turn is not None:
            if self._gyro_trusted:
                turn.reset()  # trusted again: from where it points now
            elif state is GyroState.DISAGREES:
                turn.give_back()

    def close(self) -> None:
        """The robot program ends: the wiring releases its devices."""
        self.io.close()

    # -- state ------------------------------------------------------------------------------

    @property
    def commanded(self) -> tuple[float, float]:
        """(vx, omega) after the acceleration limits; (0, 0) when stopped."""
        return self._vx, self._omega

    @property
    def gyro_ok(self) -> bool | None:
        """Whether the gyro is trusted (it answers and agrees with the wheels); None without one."""
        return None if self.gyro_watch is None else self._gyro_trusted

    def wheel_velocities(self) -> tuple[float, float]:
        """Left and right wheel speed, m/s, as read this tick."""
        return self.inputs.left_velocity_mps, self.inputs.right_velocity_mps

    def wheel_positions(self) -> tuple[float, float]:
        """Left and right wheel distance since start, m, as read this tick."""
        return self.inputs.left_position_m, self.inputs.right_position_m

    def _judge_gyro(self) -> GyroState:
        watch = self.gyro_watch
        if watch is None:
            return GyroState.NONE
        if not watch.ok:
            return GyroState.NOT_ANSWERING
        check = self.gyro_check
        if check is not None and not check.ok:
            return GyroState.DISAGREES
        return GyroState.OK

    @property
    def gyro_reason(self) -> str:
        """Why the gyro is not trusted ("" while it is, or there is none)."""
        state = self.gyro_state
        if state is GyroState.NOT_ANSWERING and self.gyro_watch is not None:
            return self.gyro_watch.reason
        if state is GyroState.DISAGREES and self.gyro_check is not None:
            return self.gyro_check.reason
        return ""

    def pose(self) -> Pose2d:
        """Where odometry puts the robot, relative to where it started."""
        return self.odometry.getPose()
