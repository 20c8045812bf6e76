"""Differential drivetrain: motors, encoders, gyro, closed-loop wheel velocity, odometry.

``drive(vx, omega)`` and ``stop()`` store intent; ``periodic()`` (once per
tick, after the robot decided) actuates and updates odometry. ``stop()``
also zeroes the motors at once and resets the acceleration limiters, so a
stop never ramps.
"""

from __future__ import annotations

import wpilib
from wpimath.controller import PIDController, SimpleMotorFeedforwardMeters
from wpimath.filter import SlewRateLimiter
from wpimath.geometry import Pose2d
from wpimath.kinematics import ChassisSpeeds, DifferentialDriveKinematics, DifferentialDriveOdometry

import constants


def _limiter(rate: float | None) -> SlewRateLimiter | None:
    return None if rate is None else SlewRateLimiter(rate)


class Drivetrain:
    """Owns the drive motors and sensors. Motor safety stays enabled: a loop that
    stops calling ``periodic()`` for 100 ms has its motors stopped by WPILib."""

    def __init__(self) -> None:
        self.left_motor = wpilib.PWMSparkMax(constants.LEFT_MOTOR_PWM)
        self.right_motor = wpilib.PWMSparkMax(constants.RIGHT_MOTOR_PWM)
        self.right_motor.setInverted(True)
        self.left_motor.setSafetyEnabled(True)
        self.right_motor.setSafetyEnabled(True)

        self.left_encoder = wpilib.Encoder(*constants.LEFT_ENCODER_DIO)
        self.right_encoder = wpilib.Encoder(*constants.RIGHT_ENCODER_DIO)
        self.right_encoder.setReverseDirection(constants.RIGHT_ENCODER_REVERSED)
        for encoder in (self.left_encoder, self.right_encoder):
            encoder.setDistancePerPulse(constants.ENCODER_DISTANCE_PER_PULSE_M)
            encoder.reset()

        self.gyro = wpilib.AnalogGyro(constants.GYRO_ANALOG)

        self.kinematics = DifferentialDriveKinematics(constants.TRACK_WIDTH_M)
        self.feedforward = SimpleMotorFeedforwardMeters(
            constants.FEEDFORWARD_KS_V,
            constants.FEEDFORWARD_KV_V_PER_MPS,
            constants.FEEDFORWARD_KA_V_PER_MPS2,
        )
        self.left_pid = PIDController(constants.VELOCITY_KP_V_PER_MPS, 0.0, 0.0)
        self.right_pid = PIDController(constants.VELOCITY_KP_V_PER_MPS, 0.0, 0.0)
        self.vx_limiter = _limiter(constants.MAX_ACCEL_MPS2)
        self.omega_limiter = _limiter(constants.MAX_ALPHA_RADPS2)
        self.odometry = DifferentialDriveOdometry(self.gyro.getRotation2d(), 0.0, 0.0)

        self._vx = 0.0
        self._omega = 0.0
        self._stopped = True

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
        """Wheels to 0 now: motors off in this very call, limiters and PID reset."""
        self._vx = self._omega = 0.0
        self._stopped = True
        for limiter in (self.vx_limiter, self.omega_limiter):
            if limiter is not None:
                limiter.reset(0.0)
        self.left_pid.reset()
        self.right_pid.reset()
        self._hold_stopped()

    def _hold_stopped(self) -> None:
        # stopMotor() does not feed motor safety: feed first, or an idle robot
        # reports "Output not updated often enough" every 100 ms.
        for motor in (self.left_motor, self.right_motor):
            motor.feed()
            motor.stopMotor()

    # -- actuation ------------------------------------------------------------------------

    def periodic(self) -> None:
        if self._stopped:
            self._hold_stopped()
        else:
            wheels = self.kinematics.toWheelSpeeds(ChassisSpeeds(self._vx, 0.0, self._omega))
            self.left_motor.setVoltage(self._wheel_volts(wheels.left, self.left_encoder, self.left_pid))
            self.right_motor.setVoltage(self._wheel_volts(wheels.right, self.right_encoder, self.right_pid))
        self.odometry.update(
            self.gyro.getRotation2d(), self.left_encoder.getDistance(), self.right_encoder.getDistance()
        )

    def _wheel_volts(self, target: float, encoder: wpilib.Encoder, pid: PIDController) -> float:
        volts = self.feedforward.calculate(target) + pid.calculate(encoder.getRate(), target)
        battery = wpilib.RobotController.getBatteryVoltage()
        return max(-battery, min(battery, volts))

    # -- state ------------------------------------------------------------------------------

    @property
    def commanded(self) -> tuple[float, float]:
        """(vx, omega) after the acceleration limits; (0, 0) when stopped."""
        return self._vx, self._omega

    def wheel_velocities(self) -> tuple[float, float]:
        """Left and right wheel speed, m/s."""
        return self.left_encoder.getRate(), self.right_encoder.getRate()

    def wheel_positions(self) -> tuple[float, float]:
        """Left and right wheel distance since start, m."""
        return self.left_encoder.getDistance(), self.right_encoder.getDistance()

    def pose(self) -> Pose2d:
        return self.odometry.getPose()
