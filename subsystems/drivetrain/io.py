"""The drivetrain's hardware seam: one interface, one class per wiring.

:class:`~subsystems.drivetrain.drivetrain.Drivetrain` decides (kinematics, limits, stop
rules, the turn-rate loop, odometry); a :class:`DrivetrainIO` carries out what
it decided and reports what the wheels and the gyro did. Each wiring owns its
motor controllers, sensors and wheel-speed loop, wherever that loop runs:

* :class:`KitbotIO`: two PWM controllers, two DIO quadrature encoders and an
  analog gyro; the wheel-speed loop (WPILib's feedforward with kS, kV, kA plus
  a PI controller, in volts) runs on the roboRIO.
* :class:`SparkMaxIO`: four SPARK MAX on CAN, followers following their
  leader, encoders read by the controllers, an ADIS16470 IMU (or an analog
  gyro, or none); the wheel-speed feedback (P and I) runs in the controllers'
  own closed loop, configured once at start and persisted, and the roboRIO's
  WPILib feedforward reaches them as an arbitrary feedforward in volts with
  every setpoint.

The drivetrain hands each side two speeds a tick: where the wheel should be
now and where at the next tick. The feedforward drives from one to the other;
the feedback corrects the wheel toward where it should be, and its integral
holds the wheel's speed (so its distance) against a weak side, a sagging
battery or more mass.

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
    #: The gyro's turn rate, rad/s counter-clockwise; ``None`` without a gyro.
    turn_rate_radps: float | None = None
    #: False when the gyro itself reports it has lost its sensor (an IMU's own check).
    gyro_connected: bool = True


class DrivetrainIO(abc.ABC):
    """One wiring of a differential drivetrain."""

    #: The name ``constants.DRIVETRAIN`` and ``BCNP_DRIVETRAIN`` use for it.
    wiring = ""
    #: The gyro the wiring reads (``physics.py`` simulates it); None: the wheels give the heading.
    gyro: wpilib.AnalogGyro | wpilib.ADIS16470_IMU | None = None

    @abc.abstractmethod
    def set_wheel_speeds(
        self, left_mps: float, right_mps: float, left_next: float, right_next: float
    ) -> None:
        """Drive each side closed loop: it should run at ``*_mps`` now and at ``*_next`` one tick
        from now (m/s). Holds until the next call."""

    @abc.abstractmethod
    def set_voltages(self, left_v: float, right_v: float) -> None:
        """Apply these voltages open loop (SysId's tests), compensated for the battery."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Motors off now, in this call; a stop also keeps the motor watchdog fed."""

    @abc.abstractmethod
    def reset_loops(self) -> None:
        """Clear the wheel-speed loops' integrals (``stop`` does it too)."""

    def hold(self) -> None:
        """The outputs are off for now (a brownout): the loops hold their integrals, the motor
        watchdogs stay fed, nothing is driven."""
        for watchdog in self.watchdogs():
            watchdog.feed()

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
    gyro: wpilib.AnalogGyro

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
        self.left_pid = _wheel_pid()
        self.right_pid = _wheel_pid()
        self._left_rate = self._right_rate = 0.0  # the wheel speeds last read (update_inputs)
        self._driven = True  # the motors may be running: the next stop() disables them

    def set_wheel_speeds(
        self, left_mps: float, right_mps: float, left_next: float, right_next: float
    ) -> None:
        self._driven = True  # first: a side set before an error must still be stopped
        battery = wpilib.RobotController.getBatteryVoltage()
        feedforward = self.feedforward
        left = feedforward.calculate(left_mps, left_next) + self.left_pid.calculate(self._left_rate, left_mps)
        right = feedforward.calculate(right_mps, right_next) + self.right_pid.calculate(
            self._right_rate, right_mps
        )
        self.left_motor.setVoltage(max(-battery, min(battery, left)))
        self.right_motor.setVoltage(max(-battery, min(battery, right)))
        self.watchdog.feed()

    def set_voltages(self, left_v: float, right_v: float) -> None:
        self._driven = True
        self.left_motor.setVoltage(left_v)
        self.right_motor.setVoltage(right_v)
        self.watchdog.feed()

    def stop(self) -> None:
        # Fed while stopped too, or an idle robot reports "Output not updated often enough".
        self.watchdog.feed()
        if self._driven:  # otherwise stopped since: the outputs are still disabled
            self.left_motor.stopMotor()
            self.right_motor.stopMotor()
            self.reset_loops()
            self._driven = False

    def reset_loops(self) -> None:
        self.left_pid.reset()
        self.right_pid.reset()

    def update_inputs(self, inputs: DrivetrainInputs) -> None:
        inputs.left_position_m = self.left_encoder.getDistance()
        inputs.right_position_m = self.right_encoder.getDistance()
        inputs.left_velocity_mps = self._left_rate = self.left_encoder.getRate()
        inputs.right_velocity_mps = self._right_rate = self.right_encoder.getRate()
        gyro = self.gyro
        inputs.heading = gyro.getRotation2d()
        inputs.turn_rate_radps = -math.radians(gyro.getRate())  # the analog gyro counts clockwise

    def outputs(self) -> tuple[float, float]:
        return self.left_motor.get(), self.right_motor.get()

    def watchdogs(self) -> Sequence[wpilib.MotorSafety]:
        return (self.watchdog,)


def wheel_feedforward() -> SimpleMotorFeedforwardMeters:
    """WPILib's feedforward for one side from SysId's kS, kV, kA (``constants.DRIVE_K*``) at the
    loop's period."""
    return SimpleMotorFeedforwardMeters(
        constants.DRIVE_KS_V,
        constants.DRIVE_KV_V_PER_MPS,
        constants.DRIVE_KA_V_PER_MPS2,
        constants.LOOP_PERIOD_S,
    )


def _wheel_pid() -> PIDController:
    """The kitbot's wheel-speed feedback, in volts per m/s of error: PI, its integral's share
    of the output bounded (``WHEEL_I_LIMIT_V``)."""
    pid = PIDController(
        constants.WHEEL_KP_V_PER_MPS, constants.WHEEL_KI_V_PER_M, 0.0, constants.LOOP_PERIOD_S
    )
    pid.setIntegratorRange(-constants.WHEEL_I_LIMIT_V, constants.WHEEL_I_LIMIT_V)
    return pid


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
    """Four SPARK MAX on CAN: a leader and a follower per side, the wheel-speed feedback on the leaders.

    Configured at start through REVLib's configuration API and persisted in the
    controllers' flash (``constants.SPARKMAX_*``): followers follow their
    leader, brake idle mode, the right side inverted, encoder conversion to
    metres and m/s, P and I (bounded by ``SPARKMAX_WHEEL_I_MAX_ACCUM``) in slot
    0. Each tick a leader gets a velocity setpoint (mid-way between where the
    wheel should be now and next tick) with WPILib's feedforward for that step
    as an arbitrary feedforward in volts; a stop also clears its integral. A
    :class:`MotorWatchdog` stops both leaders (and so their followers) when the
    robot loop stops feeding it. The gyro (``constants.SPARKMAX_GYRO``): an
    ADIS16470 IMU by default, an analog gyro, or none (the wheels give the heading).
    """

    wiring = "sparkmax"

    def __init__(self) -> None:
        import rev  # this wiring's library: imported when the wiring is built, never for a kitbot

        self._velocity = rev.SparkBase.ControlType.kVelocity
        self._voltage = rev.SparkBase.ControlType.kVoltage
        self._slot = rev.ClosedLoopSlot.kSlot0
        self._volts = rev.SparkClosedLoopController.ArbFFUnits.kVoltage
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
        self.feedforward = wheel_feedforward()
        self.watchdog = MotorWatchdog(
            (self.left_leader, self.right_leader), "SPARK MAX drivetrain", constants.MOTOR_SAFETY_TIMEOUT_S
        )
        self.gyro = _spark_max_gyro(constants.SPARKMAX_GYRO)
        self._driven = True  # the motors may be running: the next stop() stops them and clears the integrals

    def _configure(self, spark: rev.SparkMax, config: rev.SparkMaxConfig) -> None:
        import rev

        self.config_errors.append(
            spark.configure(config, rev.ResetMode.kResetSafeParameters, rev.PersistMode.kPersistParameters)
        )

    def set_wheel_speeds(
        self, left_mps: float, right_mps: float, left_next: float, right_next: float
    ) -> None:
        self._driven = True
        velocity, feedforward, slot, volts = self._velocity, self.feedforward, self._slot, self._volts
        self.left_loop.setSetpoint(
            (left_mps + left_next) / 2, velocity, slot, feedforward.calculate(left_mps, left_next), volts
        )
        self.right_loop.setSetpoint(
            (right_mps + right_next) / 2, velocity, slot, feedforward.calculate(right_mps, right_next), volts
        )
        self.watchdog.feed()

    def set_voltages(self, left_v: float, right_v: float) -> None:
        self._driven = True
        self.left_loop.setSetpoint(left_v, self._voltage)
        self.right_loop.setSetpoint(right_v, self._voltage)
        self.watchdog.feed()

    def stop(self) -> None:
        self.watchdog.feed()
        if self._driven:
            self.left_leader.stopMotor()
            self.right_leader.stopMotor()
            self.reset_loops()
            self._driven = False

    def reset_loops(self) -> None:
        self.left_loop.setIAccum(0.0)
        self.right_loop.setIAccum(0.0)

    def update_inputs(self, inputs: DrivetrainInputs) -> None:
        inputs.left_position_m = self.left_encoder.getPosition()
        inputs.right_position_m = self.right_encoder.getPosition()
        inputs.left_velocity_mps = self.left_encoder.getVelocity()
        inputs.right_velocity_mps = self.right_encoder.getVelocity()
        gyro = self.gyro
        if gyro is None:
            inputs.heading = inputs.turn_rate_radps = None
        elif isinstance(gyro, wpilib.AnalogGyro):
            inputs.heading = gyro.getRotation2d()
            inputs.turn_rate_radps = -math.radians(gyro.getRate())  # counts clockwise
        else:  # the IMU counts counter-clockwise
            inputs.heading = Rotation2d.fromDegrees(gyro.getAngle())
            inputs.turn_rate_radps = math.radians(gyro.getRate())
            inputs.gyro_connected = gyro.isConnected()

    def outputs(self) -> tuple[float, float]:
        return self.left_leader.getAppliedOutput(), self.right_leader.getAppliedOutput()

    def watchdogs(self) -> Sequence[wpilib.MotorSafety]:
        return (self.watchdog,)


#: The gyros the SPARK MAX wiring can read (``constants.SPARKMAX_GYRO``).
SPARKMAX_GYROS = ("adis16470", "analog", None)


def _spark_max_gyro(kind: str | None) -> wpilib.AnalogGyro | wpilib.ADIS16470_IMU | None:
    if kind == "adis16470":
        return wpilib.ADIS16470_IMU()  # on the roboRIO's onboard SPI port, yaw about the board's Z
    if kind == "analog":
        return wpilib.AnalogGyro(constants.GYRO_ANALOG)
    if kind is None:
        return None
    raise ValueError(f"unknown SPARKMAX_GYRO {kind!r}: one of {', '.join(map(repr, SPARKMAX_GYROS))}")


def _leader_config(inverted: bool) -> rev.SparkMaxConfig:
    import rev

    config = rev.SparkMaxConfig()
    config.inverted(inverted)
    config.setIdleMode(rev.SparkBaseConfig.IdleMode.kBrake)
    _limit_current(config)
    encoder = config.encoder
    encoder.positionConversionFactor(constants.SPARKMAX_POSITION_FACTOR_M_PER_ROT)
    encoder.velocityConversionFactor(constants.SPARKMAX_VELOCITY_FACTOR_MPS_PER_RPM)
    if constants.SPARKMAX_BRUSHLESS:  # the NEO's hall sensor
        encoder.uvwMeasurementPeriod(constants.SPARKMAX_VELOCITY_PERIOD_MS)
        encoder.uvwAverageDepth(constants.SPARKMAX_VELOCITY_AVERAGE_DEPTH)
    else:  # a brushed motor's encoder on the controller's data port: its resolution and filter
        encoder.countsPerRevolution(constants.SPARKMAX_ENCODER_CPR)
        encoder.quadratureMeasurementPeriod(constants.SPARKMAX_VELOCITY_PERIOD_MS)
        encoder.quadratureAverageDepth(constants.SPARKMAX_VELOCITY_AVERAGE_DEPTH)
    config.closedLoop.setFeedbackSensor(rev.FeedbackSensor.kPrimaryEncoder)
    # P and I here, in the firmware's units; the feedforward comes from the roboRIO with every setpoint.
    config.closedLoop.pid(constants.SPARKMAX_WHEEL_KP, constants.SPARKMAX_WHEEL_KI, 0.0)
    config.closedLoop.IMaxAccum(constants.SPARKMAX_WHEEL_I_MAX_ACCUM)
    return config


def _limit_current(config: rev.SparkMaxConfig) -> None:
    """The current limit for the motor type (``SPARKMAX_CURRENT_LIMIT_A``): REVLib's smart limit
    for a NEO; a brushed motor gets the secondary (hard) limit, the only one REVLib applies to it."""
    if constants.SPARKMAX_BRUSHLESS:
        config.smartCurrentLimit(constants.SPARKMAX_CURRENT_LIMIT_A)
    else:
        config.secondaryCurrentLimit(constants.SPARKMAX_CURRENT_LIMIT_A)


def _follower_config(leader: rev.SparkMax) -> rev.SparkMaxConfig:
    import rev

    config = rev.SparkMaxConfig()
    config.follow(leader)
    config.setIdleMode(rev.SparkBaseConfig.IdleMode.kBrake)
    _limit_current(config)
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
