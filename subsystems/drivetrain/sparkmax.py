"""The SPARK MAX wiring: four SPARK MAX on CAN, a leader and a follower a side, the wheel-speed
feedback in the leaders' own closed loop and WPILib's feedforward from the roboRIO.
``sim/sparkmax.py`` is its simulated side.

REVLib (``rev``) is imported when this module is: :func:`subsystems.drivetrain.io.make_io`
imports it only when this wiring is built, never for a kitbot.
"""

from __future__ import annotations

import math

import rev
import wpilib
from wpimath.geometry import Rotation2d

import constants
from subsystems.drivetrain.io import (
    ClosedLoopIO,
    ConfigResult,
    DrivetrainInputs,
    MotorWatchdog,
    VelocityFilter,
    wheel_feedback,
    wheel_feedforward,
)

__all__ = ["SPARKMAX_GYROS", "SparkMaxIO"]

#: The names of REVLib's fault bits (``SparkBase.Faults``), as the inputs report them.
FAULT_NAMES = ("other", "motorType", "sensor", "can", "temperature", "gateDriver", "escEeprom", "firmware")


class SparkMaxIO(ClosedLoopIO):
    """Four SPARK MAX on CAN: a leader and a follower per side, the wheel-speed feedback on the leaders.

    Configured at start through REVLib's configuration API and persisted in the
    controllers' flash (``constants.SPARKMAX_*``): followers follow their
    leader, brake idle mode, the right side inverted, encoder conversion to
    metres and m/s, P in slot
    0. Each tick a leader gets a velocity setpoint (mid-way between where the
    wheel should be now and next tick) with WPILib's feedforward for that step
    as an arbitrary feedforward in volts; a stop also clears its integral. A
    :class:`MotorWatchdog` stops both leaders (and so their followers) when the
    robot loop stops feeding it. The gyro (``constants.SPARKMAX_GYRO``): an
    ADIS16470 IMU by default, an analog gyro, or none (the wheels give the heading).
    """

    wiring = "sparkmax"

    def __init__(self) -> None:
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
        #: The four, each side's leader then its follower, left side first: the order of
        #: ``config_errors`` and of every per-controller report.
        self.controllers = (self.left_leader, self.left_follower, self.right_leader, self.right_follower)
        #: REVLib's answer to each configure() call (kOk when the controller took it).
        self.config_errors: list[rev.REVLibError] = []
        for leader, follower, inverted in (
            (self.left_leader, self.left_follower, False),
            (self.right_leader, self.right_follower, constants.SPARKMAX_RIGHT_INVERTED),
        ):
            self._configure(leader, _leader_config(inverted))
            self._configure(follower, _follower_config(leader))
        self._config_results = tuple(
            ConfigResult(f"SPARK MAX {spark.getDeviceId()}", error.name, error == rev.REVLibError.kOk)
            for spark, error in zip(self.controllers, self.config_errors, strict=True)
        )
        self._relations = (
            _relation(self.left_leader, self.left_follower),
            _relation(self.right_leader, self.right_follower),
        )
        self.left_encoder = self.left_leader.getEncoder()
        self.right_encoder = self.right_leader.getEncoder()
        self.left_loop = self.left_leader.getClosedLoopController()
        self.right_loop = self.right_leader.getClosedLoopController()
        self.feedforward = wheel_feedforward()
        # The distance term on the roboRIO; the P on the speed is the controllers'.
        self.left_feedback = wheel_feedback(0.0)
        self.right_feedback = wheel_feedback(0.0)
        self._positions = (0.0, 0.0)  # the wheel distances last read
        self._speeds = (0.0, 0.0)  # and speeds
        self.watchdog = MotorWatchdog(
            (self.left_leader, self.right_leader), "SPARK MAX drivetrain", constants.MOTOR_SAFETY_TIMEOUT_S
        )
        self.gyro = _spark_max_gyro(constants.SPARKMAX_GYRO)
        self._driven = True  # the motors may be running: the next stop() stops them and clears the integrals

    def _configure(self, spark: rev.SparkMax, config: rev.SparkMaxConfig) -> None:
        self.config_errors.append(
            spark.configure(config, rev.ResetMode.kResetSafeParameters, rev.PersistMode.kPersistParameters)
        )

    def set_wheel_speeds(
        self, left_mps: float, right_mps: float, left_next: float, right_next: float
    ) -> None:
        self._driven = True
        velocity, feedforward, slot, volts = self._velocity, self.feedforward, self._slot, self._volts
        (left_m, right_m), (left_v, right_v) = self._positions, self._speeds
        left = feedforward.calculate(left_mps, left_next)
        left += self.left_feedback.calculate(left_mps, left_next, left_v, left_m)
        right = feedforward.calculate(right_mps, right_next)
        right += self.right_feedback.calculate(right_mps, right_next, right_v, right_m)
        self.left_loop.setSetpoint((left_mps + left_next) / 2, velocity, slot, left, volts)
        self.right_loop.setSetpoint((right_mps + right_next) / 2, velocity, slot, right, volts)
        self.watchdog.feed()

    def set_voltages(self, left_v: float, right_v: float) -> None:
        self._driven = True
        self.left_loop.setSetpoint(left_v, self._voltage)
        self.right_loop.setSetpoint(right_v, self._voltage)
        self.watchdog.feed()

    def _neutral(self) -> None:
        self.left_leader.stopMotor()
        self.right_leader.stopMotor()

    def update_inputs(self, inputs: DrivetrainInputs) -> None:
        inputs.left_position_m = left_m = self.left_encoder.getPosition()
        inputs.right_position_m = right_m = self.right_encoder.getPosition()
        inputs.left_velocity_mps = left_v = self.left_encoder.getVelocity()
        inputs.right_velocity_mps = right_v = self.right_encoder.getVelocity()
        self._positions, self._speeds = (left_m, right_m), (left_v, right_v)
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
        inputs.battery_v = wpilib.RobotController.getBatteryVoltage()
        left_leader, left_follower, right_leader, right_follower = self.controllers
        inputs.followers = (
            (left_leader.getAppliedOutput(), left_follower.getAppliedOutput()),
            (right_leader.getAppliedOutput(), right_follower.getAppliedOutput()),
        )
        inputs.follower_relations = self._relations
        inputs.config_results = self._config_results
        inputs.currents_a = (
            left_leader.getOutputCurrent() + left_follower.getOutputCurrent(),
            right_leader.getOutputCurrent() + right_follower.getOutputCurrent(),
        )
        faults: list[str] = []
        for spark in self.controllers:
            bits = spark.getFaults().rawBits
            if bits:
                faults += (
                    f"SPARK MAX {spark.getDeviceId()}: {name}"
                    for i, name in enumerate(FAULT_NAMES)
                    if bits >> i & 1
                )
        inputs.faults = tuple(faults)

    def outputs(self) -> tuple[float, float]:
        return self.left_leader.getAppliedOutput(), self.right_leader.getAppliedOutput()

    def velocity_filter(self) -> VelocityFilter:
        period, depth = constants.SPARKMAX_VELOCITY_PERIOD_MS, constants.SPARKMAX_VELOCITY_AVERAGE_DEPTH
        # The delay as WPILib's SysId counts REV's filter: half the period plus (depth - 1) / 2 ms.
        return VelocityFilter(
            f"SPARK MAX encoder: {period} ms measurement period, average of {depth}",
            (period / 2 + (depth - 1) / 2) / 1000,
        )


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
    config.closedLoop.pid(constants.SPARKMAX_WHEEL_KP, 0.0, 0.0)
    return config


def _limit_current(config: rev.SparkMaxConfig) -> None:
    """The current limit for the motor type (``SPARKMAX_CURRENT_LIMIT_A``): REVLib's smart limit
    for a NEO; a brushed motor gets the secondary (hard) limit, the only one REVLib applies to it."""
    if constants.SPARKMAX_BRUSHLESS:
        config.smartCurrentLimit(constants.SPARKMAX_CURRENT_LIMIT_A)
    else:
        config.secondaryCurrentLimit(constants.SPARKMAX_CURRENT_LIMIT_A)


def _follower_config(leader: rev.SparkMax) -> rev.SparkMaxConfig:
    config = rev.SparkMaxConfig()
    config.follow(leader)
    config.setIdleMode(rev.SparkBaseConfig.IdleMode.kBrake)
    _limit_current(config)
    return config


def _relation(leader: rev.SparkMax, follower: rev.SparkMax) -> int:
    """How a follower's applied output relates to its leader's, as configured: +1 the same, -1
    the opposite. The follower drives its leader's output as the motor sees it, after the
    leader's inversion (its own inversion setting is ignored: REVLib's ``inverted``), so the
    follower of an inverted leader reports the opposite sign, unless it follows inverted too."""
    sign = -1 if leader.configAccessor.getInverted() else 1
    return -sign if follower.configAccessor.getFollowerModeInverted() else sign
