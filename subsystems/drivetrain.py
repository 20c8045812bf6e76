"""Differential drivetrain: what the robot decides, for any wiring.

``drive(vx, omega)`` and ``stop()`` store intent; ``periodic()`` (once per
tick, after the robot decided) turns it into wheel speeds (kinematics,
acceleration limits), hands them to the wiring's :class:`DrivetrainIO`,
reads back what the wheels did and updates odometry. ``stop()`` also stops
the motors at once and resets the acceleration limiters, so a stop never
ramps. How the wheels are driven (PWM or CAN, where the velocity loop runs)
is the IO's business (``subsystems/drivetrain_io.py``).
"""

from __future__ import annotations

from wpimath.filter import SlewRateLimiter
from wpimath.geometry import Pose2d, Rotation2d
from wpimath.kinematics import ChassisSpeeds, DifferentialDriveKinematics, DifferentialDriveOdometry

import constants
from subsystems.drivetrain_io import DrivetrainInputs, DrivetrainIO, make_io, wheel_heading


def _limiter(rate: float | None) -> SlewRateLimiter | None:
    return None if rate is None else SlewRateLimiter(rate)


class Drivetrain:
    """Owns the drive decisions; ``io`` owns the hardware. Motor safety stays on: a loop
    that stops calling ``periodic()`` for 100 ms has its motors stopped by WPILib."""

    def __init__(self, io: DrivetrainIO | None = None) -> None:
        self.io = io if io is not None else make_io(constants.drivetrain_wiring())
        self.kinematics = DifferentialDriveKinematics(constants.TRACK_WIDTH_M)
        self.vx_limiter = _limiter(constants.MAX_ACCEL_MPS2)
        self.omega_limiter = _limiter(constants.MAX_ALPHA_RADPS2)
        self.inputs = DrivetrainInputs()
        self.io.update_inputs(self.inputs)
        self._wheel_zero = (self.inputs.left_position_m, self.inputs.right_position_m)
        self.odometry = DifferentialDriveOdometry(
            self._heading(), self.inputs.left_position_m, self.inputs.right_position_m
        )
        self._vx = 0.0
        self._omega = 0.0
        self._stopped = True
        self._stop_sent = False  # stop() already stopped the motors this tick

    # -- intent -------------------------------------------------------------------------

    def drive(self, vx: float, omega: float) -> None:
        """Chassis speed for this tick (m/s, rad/s), through the acceleration limits."""
        if self.vx_limiter is not None:
            vx = self.vx_limiter.calculate(vx)
        if self.omega_limiter is not None:
            omega = self.omega_limiter.calculate(omega)
        self._vx, self._omega = vx, omega
        self._stopped = False

    def stop(self) -> None:
        """Wheels to 0 now: motors off in this very call, limiters reset."""
        # Every tick while stopped, not once: a reset also restarts the limiter's clock, so
        # the first step after a stop is limited to one tick's worth of acceleration.
        for limiter in (self.vx_limiter, self.omega_limiter):
            if limiter is not None:
                limiter.reset(0.0)
        self._vx = self._omega = 0.0
        self._stopped = True
        self.io.stop()
        self._stop_sent = True

    # -- actuation ------------------------------------------------------------------------

    def periodic(self) -> None:
        stop_sent, self._stop_sent = self._stop_sent, False
        if self._stopped:
            if not stop_sent:  # once per tick is enough: stop() may have done it
                self.io.stop()
        else:
            wheels = self.kinematics.toWheelSpeeds(ChassisSpeeds(self._vx, 0.0, self._omega))
            self.io.set_wheel_speeds(wheels.left, wheels.right)
        inputs = self.inputs
        self.io.update_inputs(inputs)
        self.odometry.update(self._heading(), inputs.left_position_m, inputs.right_position_m)

    def _heading(self) -> Rotation2d:
        inputs = self.inputs
        if inputs.heading is not None:
            return inputs.heading
        left0, right0 = self._wheel_zero
        return wheel_heading(
            inputs.left_position_m - left0, inputs.right_position_m - right0, constants.TRACK_WIDTH_M
        )

    # -- state ------------------------------------------------------------------------------

    @property
    def commanded(self) -> tuple[float, float]:
        """(vx, omega) after the acceleration limits; (0, 0) when stopped."""
        return self._vx, self._omega

    def wheel_velocities(self) -> tuple[float, float]:
        """Left and right wheel speed, m/s, as read this tick."""
        return self.inputs.left_velocity_mps, self.inputs.right_velocity_mps

    def wheel_positions(self) -> tuple[float, float]:
        """Left and right wheel distance since start, m, as read this tick."""
        return self.inputs.left_position_m, self.inputs.right_position_m

    def pose(self) -> Pose2d:
        """Where odometry puts the robot, relative to where it started."""
        return self.odometry.getPose()
