"""The kitbot wiring: two PWM motor controllers, two DIO quadrature encoders and an analog
gyro; the wheel-speed loop (WPILib's feedforward with kS, kV, kA plus a PI controller, in
volts) runs on the roboRIO. ``sim/kitbot.py`` is its simulated side."""

from __future__ import annotations

import math

import wpilib

import constants
from subsystems.drivetrain.io import (
    ClosedLoopIO,
    DrivetrainInputs,
    MotorWatchdog,
    VelocityFilter,
    wheel_feedback,
    wheel_feedforward,
)

__all__ = ["KitbotIO"]


class KitbotIO(ClosedLoopIO):
    """The FRC kit-of-parts wiring: PWM motor controllers, DIO encoders, an analog gyro.

    Each side's voltage is WPILib's feedforward (kS, kV, kA: from where the wheel
    should be now to where it should be next tick) plus a PI controller on the
    wheel's speed error now; both PI controllers are reset whenever the motors
    are stopped, so driving never resumes with an old integral.

    One :class:`MotorWatchdog` stops both motor controllers when the robot loop
    stops feeding it. Not the controllers' own motor safety: each call on a PWM
    motor controller costs about 3 us in RobotPy 2026 (pybind11 finds the
    controller's class by trying every PWM controller type), ten times a call
    on an encoder or on the watchdog, and a stopped drivetrain would make four
    such calls per tick only to feed them. A stopped drivetrain makes none.
    """

    wiring = "kitbot"

    def __init__(self) -> None:
        self.left_motor = wpilib.PWMSparkMax(constants.LEFT_MOTOR_PWM)
        self.right_motor = wpilib.PWMSparkMax(constants.RIGHT_MOTOR_PWM)
        self.right_motor.setInverted(True)
        self.watchdog = MotorWatchdog(
            (self.left_motor, self.right_motor), "kitbot drivetrain", constants.MOTOR_SAFETY_TIMEOUT_S
        )

        self.left_encoder = wpilib.Encoder(*constants.LEFT_ENCODER_DIO)
        self.right_encoder = wpilib.Encoder(*constants.RIGHT_ENCODER_DIO)
        self.right_encoder.setReverseDirection(constants.RIGHT_ENCODER_REVERSED)
        for encoder in (self.left_encoder, self.right_encoder):
            encoder.setDistancePerPulse(constants.ENCODER_DISTANCE_PER_PULSE_M)
            encoder.reset()

        self.gyro = wpilib.AnalogGyro(constants.GYRO_ANALOG)
        self.feedforward = wheel_feedforward()
        self.left_feedback = wheel_feedback(constants.WHEEL_KP_V_PER_MPS)
        self.right_feedback = wheel_feedback(constants.WHEEL_KP_V_PER_MPS)
        self._left_rate = self._right_rate = 0.0  # the wheel speeds last read (update_inputs)
        self._left_m = self._right_m = 0.0  # the wheel distances last read
        self._battery = 12.0  # the battery last read (update_inputs)
        self._driven = True  # the motors may be running: the next stop() disables them

    def set_wheel_speeds(
        self, left_mps: float, right_mps: float, left_next: float, right_next: float
    ) -> None:
        self._driven = True  # first: a side set before an error must still be stopped
        battery = self._battery
        feedforward = self.feedforward
        left = feedforward.calculate(left_mps, left_next) + self.left_feedback.calculate(
            left_mps, left_next, self._left_rate, self._left_m
        )
        right = feedforward.calculate(right_mps, right_next) + self.right_feedback.calculate(
            right_mps, right_next, self._right_rate, self._right_m
        )
        self.left_motor.setVoltage(max(-battery, min(battery, left)))
        self.right_motor.setVoltage(max(-battery, min(battery, right)))
        self.watchdog.feed()

    def set_voltages(self, left_v: float, right_v: float) -> None:
        self._driven = True
        self.left_motor.setVoltage(left_v)
        self.right_motor.setVoltage(right_v)
        self.watchdog.feed()

    def _neutral(self) -> None:
        self.left_motor.stopMotor()
        self.right_motor.stopMotor()

    def update_inputs(self, inputs: DrivetrainInputs) -> None:
        inputs.left_position_m = self._left_m = self.left_encoder.getDistance()
        inputs.right_position_m = self._right_m = self.right_encoder.getDistance()
        inputs.left_velocity_mps = self._left_rate = self.left_encoder.getRate()
        inputs.right_velocity_mps = self._right_rate = self.right_encoder.getRate()
        gyro = self.gyro
        inputs.heading = gyro.getRotation2d()
        inputs.turn_rate_radps = -math.radians(gyro.getRate())  # the analog gyro counts clockwise
        inputs.battery_v = self._battery = wpilib.RobotController.getBatteryVoltage()

    def outputs(self) -> tuple[float, float]:
        return self.left_motor.get(), self.right_motor.get()

    def velocity_filter(self) -> VelocityFilter:
        # WPILib's Encoder.getRate: the FPGA times the last whole pulse (ENCODER_CPR 360 a wheel
        # turn: 1.3 mm, 1.3 ms at 1 m/s), so the rate lags by half a pulse; nothing to set.
        return VelocityFilter("roboRIO FPGA: the period of the last encoder pulse", 0.0)
