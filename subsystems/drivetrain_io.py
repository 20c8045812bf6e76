"""The drivetrain's hardware seam: one interface, one class per wiring.

:class:`~subsystems.drivetrain.Drivetrain` decides (kinematics, limits, stop
rules, odometry); a :class:`DrivetrainIO` carries out what it decided and
reports what the wheels did. Each wiring owns its motor controllers, sensors
and wheel-velocity loop, wherever that loop runs:

* :class:`KitbotIO`: two PWM controllers, two DIO quadrature encoders and an
  analog gyro; the velocity loop (feedforward + P) runs on the roboRIO.
* :class:`SparkMaxIO`: four SPARK MAX on CAN, followers following their
  leader, encoders read by the controllers; the velocity loop runs on the
  controllers, configured once at start and persisted.

``constants.DRIVETRAIN`` picks one (``BCNP_DRIVETRAIN`` overrides it):
:func:`make_io`. ``physics.py`` has the simulation side of each.

REVLib (``rev``) is imported by the SPARK MAX wiring only, when it is built: a
kitbot never loads it (about 8 ms of start-up here, far more on a roboRIO).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import wpilib
from wpimath.controller import PIDController, SimpleMotorFeedforwardMeters
from wpimath.geometry import Rotation2d

import constants

if TYPE_CHECKING:
    import rev

__all__ = ["DrivetrainIO", "DrivetrainInputs", "KitbotIO", "SparkMaxIO", "make_io"]


@dataclass
class DrivetrainInputs:
    """What the wheels did, read once per tick. Metres and m/s, forward positive on both sides."""

    left_position_m: float = 0.0
    right_position_m: float = 0.0
    left_velocity_mps: float = 0.0
    right_velocity_mps: float = 0.0
    #: From a gyro, counter-clockwise positive; ``None`` without one (the wheels give it).
    heading: Rotation2d | None = None


class DrivetrainIO(abc.ABC):
    """One wiring of a differential drivetrain."""

    #: The name ``constants.DRIVETRAIN`` and ``BCNP_DRIVETRAIN`` use for it.
    wiring = ""

    @abc.abstractmethod
    def set_wheel_speeds(self, left_mps: float, right_mps: float) -> None:
        """Drive each side at this speed (closed loop), from now until the next call."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Motors off now, in this call; a stop also keeps the motor watchdog fed."""

    @abc.abstractmethod
    def update_inputs(self, inputs: DrivetrainInputs) -> None:
        """Read the sensors into ``inputs``."""

    @abc.abstractmethod
    def outputs(self) -> tuple[float, float]:
        """What the left and right motors are driven at, as a fraction of full output (-1..1)."""

    @abc.abstractmethod
    def watchdogs(self) -> Sequence[wpilib.MotorSafety]:
        """The motor-safety watchdogs: each stops its motors when not fed for 100 ms."""


class KitbotIO(DrivetrainIO):
    """The FRC kit-of-parts wiring: PWM motor controllers, DIO encoders, an analog gyro.

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
        self.feedforward = SimpleMotorFeedforwardMeters(
            constants.FEEDFORWARD_KS_V,
            constants.FEEDFORWARD_KV_V_PER_MPS,
            constants.FEEDFORWARD_KA_V_PER_MPS2,
        )
        self.left_pid = PIDController(constants.VELOCITY_KP_V_PER_MPS, 0.0, 0.0)
        self.right_pid = PIDController(constants.VELOCITY_KP_V_PER_MPS, 0.0, 0.0)
        self._driven = True  # the motors may be running: the next stop() disables them

    def set_wheel_speeds(self, left_mps: float, right_mps: float) -> None:
        self._driven = True  # first: a side set before an error must still be stopped
        self.left_motor.setVoltage(self._volts(left_mps, self.left_encoder, self.left_pid))
        self.right_motor.setVoltage(self._volts(right_mps, self.right_encoder, self.right_pid))
        self.watchdog.feed()

    def _volts(self, target: float, encoder: wpilib.Encoder, pid: PIDController) -> float:
        volts = self.feedforward.calculate(target) + pid.calculate(encoder.getRate(), target)
        battery = wpilib.RobotController.getBatteryVoltage()
        return max(-battery, min(battery, volts))

    def stop(self) -> None:
        # Fed while stopped too, or an idle robot reports "Output not updated often enough".
        self.watchdog.feed()
        if self._driven:  # otherwise stopped since: the outputs are still disabled
            self.left_motor.stopMotor()
            self.right_motor.stopMotor()
            self.left_pid.reset()
            self.right_pid.reset()
            self._driven = False

    def update_inputs(self, inputs: DrivetrainInputs) -> None:
        inputs.left_position_m = self.left_encoder.getDistance()
        inputs.right_position_m = self.right_encoder.getDistance()
        inputs.left_velocity_mps = self.left_encoder.getRate()
        inputs.right_velocity_mps = self.right_encoder.getRate()
        inputs.heading = self.gyro.getRotation2d()

    def outputs(self) -> tuple[float, float]:
        return self.left_motor.get(), self.right_motor.get()

    def watchdogs(self) -> Sequence[wpilib.MotorSafety]:
        return (self.watchdog,)


class MotorWatchdog(wpilib.MotorSafety):
    """WPILib motor safety for motor controllers that are not watchdogs themselves:
    not fed for ``timeout`` seconds, it stops ``motors`` (checked by WPILib each
    time driver-station data arrives, every 20 ms)."""

    def __init__(
        self, motors: Sequence[wpilib.interfaces.MotorController], description: str, timeout: float
    ) -> None:
        super().__init__()
        self._motors = tuple(motors)
        self._description = description
        self.setExpiration(timeout)
        self.setSafetyEnabled(True)

    def stopMotor(self) -> None:
        for motor in self._motors:
            motor.stopMotor()

    def getDescription(self) -> str:
        return self._description


class SparkMaxIO(DrivetrainIO):
    """Four SPARK MAX on CAN: a leader and a follower per side, the velocity loop on the leaders.

    Configured at start through REVLib's configuration API and persisted in the
    controllers' flash (``constants.SPARKMAX_*``): followers follow their
    leader, brake idle mode, the right side inverted, encoder conversion to
    metres and m/s, P and velocity feedforward in slot 0. Velocity commands go
    to the leaders' closed loops in m/s. A :class:`MotorWatchdog` stops both
    leaders (and so their followers) when the robot loop stops feeding it.
    An optional gyro (``constants.SPARKMAX_GYRO``); without one, the wheels
    give the heading.
    """

    wiring = "sparkmax"

    def __init__(self) -> None:
        import rev  # this wiring's library: imported when the wiring is built, never for a kitbot

        self._velocity = rev.SparkBase.ControlType.kVelocity
        motor_type = (
            rev.SparkLowLevel.MotorType.kBrushless
            if constants.SPARKMAX_BRUSHLESS
            else rev.SparkLowLevel.MotorType.kBrushed
        )
        self.left_leader = rev.SparkMax(constants.SPARKMAX_LEFT_LEADER_CAN, motor_type)
        self.left_follower = rev.SparkMax(constants.SPARKMAX_LEFT_FOLLOWER_CAN, motor_type)
        self.right_leader = rev.SparkMax(constants.SPARKMAX_RIGHT_LEADER_CAN, motor_type)
        self.right_follower = rev.SparkMax(constants.SPARKMAX_RIGHT_FOLLOWER_CAN, motor_type)
        #: REVLib's answer to each configure() call (kOk when the controller took it).
        self.config_errors: list[rev.REVLibError] = []
        for leader, follower, inverted in (
            (self.left_leader, self.left_follower, False),
            (self.right_leader, self.right_follower, constants.SPARKMAX_RIGHT_INVERTED),
        ):
            self._configure(leader, _leader_config(inverted))
            self._configure(follower, _follower_config(leader))
        self.left_encoder = self.left_leader.getEncoder()
        self.right_encoder = self.right_leader.getEncoder()
        self.left_loop = self.left_leader.getClosedLoopController()
        self.right_loop = self.right_leader.getClosedLoopController()
        self.watchdog = MotorWatchdog(
            (self.left_leader, self.right_leader), "SPARK MAX drivetrain", constants.MOTOR_SAFETY_TIMEOUT_S
        )
        self.gyro = wpilib.AnalogGyro(constants.GYRO_ANALOG) if constants.SPARKMAX_GYRO == "analog" else None

    def _configure(self, spark: rev.SparkMax, config: rev.SparkMaxConfig) -> None:
        import rev

        self.config_errors.append(
            spark.configure(config, rev.ResetMode.kResetSafeParameters, rev.PersistMode.kPersistParameters)
        )

    def set_wheel_speeds(self, left_mps: float, right_mps: float) -> None:
        velocity = self._velocity
        self.left_loop.setSetpoint(left_mps, velocity)
        self.right_loop.setSetpoint(right_mps, velocity)
        self.watchdog.feed()

    def stop(self) -> None:
        self.left_leader.stopMotor()
        self.right_leader.stopMotor()
        self.watchdog.feed()

    def update_inputs(self, inputs: DrivetrainInputs) -> None:
        inputs.left_position_m = self.left_encoder.getPosition()
        inputs.right_position_m = self.right_encoder.getPosition()
        inputs.left_velocity_mps = self.left_encoder.getVelocity()
        inputs.right_velocity_mps = self.right_encoder.getVelocity()
        inputs.heading = self.gyro.getRotation2d() if self.gyro is not None else None

    def outputs(self) -> tuple[float, float]:
        return self.left_leader.getAppliedOutput(), self.right_leader.getAppliedOutput()

    def watchdogs(self) -> Sequence[wpilib.MotorSafety]:
        return (self.watchdog,)


def _leader_config(inverted: bool) -> rev.SparkMaxConfig:
    import rev

    config = rev.SparkMaxConfig()
    config.inverted(inverted)
    config.setIdleMode(rev.SparkBaseConfig.IdleMode.kBrake)
    config.encoder.positionConversionFactor(constants.SPARKMAX_POSITION_FACTOR_M_PER_ROT)
    config.encoder.velocityConversionFactor(constants.SPARKMAX_VELOCITY_FACTOR_MPS_PER_RPM)
    if not constants.SPARKMAX_BRUSHLESS:
        # A brushed motor's encoder is wired to the controller's data port: tell it the resolution.
        config.encoder.countsPerRevolution(constants.SPARKMAX_ENCODER_CPR)
    config.closedLoop.setFeedbackSensor(rev.FeedbackSensor.kPrimaryEncoder)
    config.closedLoop.pid(
        constants.SPARKMAX_VELOCITY_KP, constants.SPARKMAX_VELOCITY_KI, constants.SPARKMAX_VELOCITY_KD
    )
    config.closedLoop.feedForward.kV(constants.SPARKMAX_VELOCITY_KV_V_PER_MPS)
    return config


def _follower_config(leader: rev.SparkMax) -> rev.SparkMaxConfig:
    import rev

    config = rev.SparkMaxConfig()
    config.follow(leader)
    config.setIdleMode(rev.SparkBaseConfig.IdleMode.kBrake)
    return config


WIRINGS: dict[str, type[DrivetrainIO]] = {io.wiring: io for io in (KitbotIO, SparkMaxIO)}


def make_io(wiring: str) -> DrivetrainIO:
    """The IO for ``wiring`` ("kitbot" or "sparkmax")."""
    try:
        return WIRINGS[wiring]()
    except KeyError:
        raise ValueError(f"unknown drivetrain wiring {wiring!r}: one of {', '.join(WIRINGS)}") from None


def wheel_heading(left_m: float, right_m: float, track_width_m: float) -> Rotation2d:
    """The heading the wheels imply since they were zeroed: the right side ahead of the left turns left."""
    return Rotation2d((right_m - left_m) / track_width_m if math.isfinite(right_m - left_m) else 0.0)
