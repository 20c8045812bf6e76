"""The SPARK MAX as its firmware runs, on REVLib's device I/O.

REVLib's own simulation (``SparkMaxSim.iterate``) integrates the closed loop's I term per
second of simulated time; the firmware sums ``error x kI`` on every 1 ms loop, so a gain
tuned on REVLib's simulation is 1000 times too strong on a controller (docs/robot.md,
"Device models"). :class:`SparkMaxFirmware` is the firmware's loop instead, as REV's
"Closed Loop Control" page documents it:

* called every 1 ms; setpoint and measurement in native units after the conversion factors;
* ``iState += error x kI`` on each call, reset to 0 while ``|error| > IZone`` (IZone 0: never),
  bounded to +-IMaxAccum (0: unbounded); kP per native unit, kI per (native unit x ms), kD per
  (native unit / ms), output as a duty cycle (1 = full);
* P + I + D + the configured feedforward, bounded to the slot's output range, plus the
  arbitrary feedforward (volts over the bus voltage, or duty);
* velocity from the encoder through the configured filter (:class:`sim.sensors.RevVelocityFilter`);
* the current limit: a NEO's smart limit (REVLib's docstring: the stall limit up to the limit
  RPM, then linearly to the free limit at free speed), a brushed motor's secondary limit (as a
  bound on the current),
  the idle mode when neutral (brake: leads shorted; coast: open), neutral while the robot is
  disabled or browned out, the integrator held then;
* followers drive their leader's output, inverted if so configured; a controller not
  following idles;
* the roboRIO reads position and velocity from periodic CAN status frames (REVLib's
  ``signals`` periods, 20 ms by default), out of step with its loop.

The robot's code talks to REVLib as on a robot: setpoints, control type, arbitrary
feedforward and IAccum are read from REVLib's simulated device (a ``setIAccum`` by the code
resets the firmware's integrator), the applied output, current, bus voltage, position and
velocity written back.

A duty cycle of 0 (``stopMotor()``) is neutral: the idle mode holds the motor.

:class:`SparkMaxDevices` are the wiring's four controllers so; :class:`IdealSparkMaxDevices`
(``BCNP_SIM_DEVICE=ideal``) run the leaders' loop on REVLib's own simulation
(:class:`IdealLeader`) with exact sensors read at once.
"""

from __future__ import annotations

import math
import random

import rev
import wpilib
import wpimath.system.plant as plant
from wpilib.simulation import SimDeviceSim

import constants
from sim.chassis import Chassis
from sim.gyro import PARTS, analog_sink, imu_sink
from sim.sensors import DelayLine, RevVelocityFilter, StatusFrame
from sim.settings import SimSettings
from sim.wirings import Devices, GyroSink
from subsystems.drivetrain.sparkmax import SparkMaxIO

#: The firmware's loop period.
LOOP_S = 0.001
#: REVLib's simulated device's "Control Mode" values.
DUTY_CYCLE, VELOCITY, VOLTAGE, POSITION = 0, 1, 2, 3
_RAD_PER_S_TO_RPM = 60.0 / math.tau


class SparkMaxFirmware:
    """One SPARK MAX: its own loop (a leader), or its leader's output (a follower)."""

    def __init__(
        self,
        spark: rev.SparkMax,
        motor: plant.DCMotor,
        *,
        leader: SparkMaxFirmware | None,
        polarity: int,
        velocity_delay_s: float,
        rng: random.Random,
    ) -> None:
        self.spark = spark
        self.motor = motor
        # The motor's constants, read once (each read is a call into WPILib's model).
        self._kv, self._ohms = motor.Kv, motor.R
        self._free_rpm = motor.freeSpeed * _RAD_PER_S_TO_RPM
        self.polarity = polarity  # -1: its motor's leads are swapped
        self.sim = rev.SparkMaxSim(spark, motor)
        self.encoder_sim = self.sim.getRelativeEncoderSim()
        self.controller = spark.getClosedLoopController()
        device = SimDeviceSim(f"SPARK MAX [{spark.getDeviceId()}]")
        self._control_mode = device.getInt("Control Mode")
        self._setpoint_value = device.getDouble("Setpoint")
        self._arbff = device.getDouble("Arbitrary Feedforward")
        self._arbff_units = device.getInt("ArbFF Units")
        config = spark.configAccessor
        self.inverted = -1 if config.getInverted() else 1
        # A follower drives what its leader drives, inverted or not; anything else is its own.
        following = (
            leader is not None
            and spark.isFollower()
            and config.getFollowerModeLeaderId() == leader.spark.getDeviceId()
        )
        self.leader = leader if following else None
        self.follow_sign = -1 if config.getFollowerModeInverted() else 1
        self.brake = config.getIdleMode() == rev.SparkBaseConfig.IdleMode.kBrake
        brushless = spark.getMotorType() == rev.SparkLowLevel.MotorType.kBrushless
        if brushless:  # the smart limit: brushless only (REVLib's docs)
            self.stall_limit_a = float(config.getSmartCurrentLimit())
            free = float(config.getSmartCurrentFreeLimit())
            self.free_limit_a = free if free > 0 else self.stall_limit_a
            self.limit_rpm = float(config.getSmartCurrentRPMLimit())
        else:  # the secondary limit, if set (0: none)
            secondary = float(config.getSecondaryCurrentLimit())
            self.stall_limit_a = self.free_limit_a = secondary if secondary > 0 else math.inf
            self.limit_rpm = math.inf
        loop = config.closedLoop
        self.kp, self.ki, self.kd = loop.getP(), loop.getI(), loop.getD()
        self.izone, self.imax = loop.getIZone(), loop.getMaxIAccumulation()
        self.min_out, self.max_out = loop.getMinOutput(), loop.getMaxOutput()
        ff = loop.feedForward
        self.ks_v, self.kv_v = ff.getkS(), ff.getkV()
        encoder = config.encoder
        if brushless:  # the NEO's hall sensor: 42 counts per revolution
            self.filter = RevVelocityFilter(
                42, encoder.getUvwMeasurementPeriod(), encoder.getUvwAverageDepth()
            )
            sensor_sign = 1
        else:
            self.filter = RevVelocityFilter(
                encoder.getCountsPerRevolution(),
                encoder.getQuadratureMeasurementPeriod(),
                encoder.getQuadratureAverageDepth(),
            )
            sensor_sign = -1 if encoder.getInverted() else 1
        #: From the motor's rotation to the controller's measurement (its own sense).
        self.sensor_sign = self.inverted * sensor_sign
        self.position_factor = encoder.getPositionConversionFactor()
        self.velocity_factor = encoder.getVelocityConversionFactor()
        # Position and velocity travel together in periodic status frame 2, at the shorter of
        # their configured periods, on the controller's own clock.
        signals = config.signals
        period_ms = min(
            signals.getPrimaryEncoderVelocityPeriodMs(), signals.getPrimaryEncoderPositionPeriodMs()
        )
        self.frame = StatusFrame(period_ms / 1000, rng.uniform(0.0, period_ms / 1000))
        self._frame_position = 0.0
        self.delay = DelayLine(velocity_delay_s, LOOP_S)
        self.i_state = 0.0
        self._i_written = 0.0
        self._last_error = 0.0
        self.duty = 0.0  # the output in the controller's own sense
        self.motor_duty = 0.0  # in the motor's sense, before the leads
        self.neutral = True  # no output: the idle mode holds the motor
        self.current_a = 0.0
        self.velocity = 0.0  # the firmware's measurement, native units
        self.position = 0.0
        # This tick's command, read from REVLib's device once per robot tick.
        self._mode = DUTY_CYCLE
        self._setpoint = 0.0
        self._arb_volts = 0.0
        self._arb_duty = 0.0
        self._neutral = True

    # -- once per robot tick ------------------------------------------------------------------

    def take_command(self) -> None:
        """What the robot's code asked for since the last tick."""
        self._mode = mode = self._control_mode.get()
        self._setpoint = setpoint = self._setpoint_value.get()
        arbff = self._arbff.get()
        if self._arbff_units.get() == 0:  # kVoltage
            self._arb_volts, self._arb_duty = arbff, 0.0
        else:
            self._arb_volts, self._arb_duty = 0.0, arbff
        self._neutral = mode == DUTY_CYCLE and setpoint == 0.0 and arbff == 0.0
        controller = self.controller
        written = controller.getIAccum()
        if abs(written - self._i_written) > 1e-6:  # the code set it (a stop clears it)
            self.i_state = written
            self._last_error = 0.0

    def report(self, vbus: float) -> None:
        """What the roboRIO reads back: the last status frames, the applied output."""
        sim = self.sim
        sim.setAppliedOutput(self.duty)
        sim.setBusVoltage(vbus)
        sim.setMotorCurrent(abs(self.current_a))
        self.encoder_sim.setVelocity(self.frame.value)
        self.encoder_sim.setPosition(self._frame_position)
        self.controller.setIAccum(self.i_state)
        self._i_written = self.controller.getIAccum()

    # -- every 1 ms ------------------------------------------------------------------------------

    def measure(self, motor_rotations: float, now_s: float) -> None:
        """The encoder sampled: the motor has turned ``motor_rotations`` (its own sense)."""
        rotations = motor_rotations * self.sensor_sign
        self.position = rotations * self.position_factor
        self.velocity = self.delay(self.filter.sample(rotations) * self.velocity_factor)
        if self.frame.due(now_s):
            self.frame.send(now_s, self.velocity)
            self._frame_position = self.position

    def control(self, vbus: float, enabled: bool) -> None:
        """One firmware loop: this controller's duty cycle (its own sense)."""
        leader = self.leader
        if leader is not None:
            self.duty = leader.duty * leader.inverted * self.inverted * self.follow_sign
            self.motor_duty = leader.motor_duty * self.follow_sign
            self.neutral = leader.neutral
            return
        self.neutral = not enabled or self._neutral
        if self.neutral:
            self.duty = self.motor_duty = 0.0
            return
        mode = self._mode
        setpoint = self._setpoint
        if mode in (VELOCITY, POSITION):
            error = setpoint - (self.velocity if mode == VELOCITY else self.position)
            if self.izone > 0.0 and abs(error) > self.izone:
                self.i_state = 0.0
            else:
                i_state = self.i_state + error * self.ki
                imax = self.imax
                if imax > 0.0:
                    i_state = max(-imax, min(imax, i_state))
                self.i_state = i_state
            out = self.kp * error + self.i_state + self.kd * (error - self._last_error)
            self._last_error = error
            if setpoint and mode == VELOCITY:
                out += (math.copysign(self.ks_v, setpoint) + self.kv_v * setpoint) / vbus
            out = max(self.min_out, min(self.max_out, out))
        elif mode == VOLTAGE:
            out = setpoint / vbus
        else:  # duty cycle
            out = setpoint
        out += self._arb_volts / vbus + self._arb_duty
        self.duty = duty = max(-1.0, min(1.0, out))
        self.motor_duty = duty * self.inverted

    def terminal_volts(self, vbus: float, back_emf: float) -> float:
        """The motor's terminal voltage (the motor's own sense): the duty on the bus through
        its leads, within the current limit; when neutral, shorted (brake) or open (coast)."""
        if self.neutral:
            self.current_a = 0.0
            return 0.0 if self.brake else back_emf
        volts = self.motor_duty * vbus * self.polarity
        ohms = self._ohms
        rpm = abs(back_emf * self._kv) * _RAD_PER_S_TO_RPM
        limit = self.stall_limit_a
        free_rpm = self._free_rpm
        if rpm > self.limit_rpm and free_rpm > self.limit_rpm:  # toward the free limit at free speed
            share = min(1.0, (rpm - self.limit_rpm) / (free_rpm - self.limit_rpm))
            limit += (self.free_limit_a - self.stall_limit_a) * share

        current = (volts - back_emf) / ohms
        if current > limit:
            volts = back_emf + limit * ohms
        elif current < -limit:
            volts = back_emf - limit * ohms
        self.current_a = (volts - back_emf) / ohms
        return volts


class IdealLeader(SparkMaxFirmware):
    """A leader as REVLib's own simulation runs it (``SparkMaxSim.iterate``), on the motor's exact
    speed and position, read at once (but for the velocity-delay fault)."""

    def take_command(self) -> None:
        """REVLib's simulation reads the command itself."""

    def control(self, vbus: float, enabled: bool) -> None:
        self.sim.iterate(self.velocity, vbus, LOOP_S)
        self.neutral = not enabled
        self.duty = self.sim.getAppliedOutput() if enabled else 0.0
        self.motor_duty = self.duty * self.inverted

    def measure_exact(self, motor_rotations: float, motor_rad_s: float) -> None:
        sign = self.sensor_sign
        self.position = motor_rotations * sign * self.position_factor
        self.velocity = self.delay(motor_rad_s * _RAD_PER_S_TO_RPM * sign * self.velocity_factor)

    def report(self, vbus: float) -> None:
        self.encoder_sim.setPosition(self.position)
        self.encoder_sim.setVelocity(self.velocity)


def drive_motor() -> plant.DCMotor:
    """One drive motor: a CIM, or a NEO with ``SPARKMAX_BRUSHLESS``."""
    return plant.DCMotor.NEO(1) if constants.SPARKMAX_BRUSHLESS else plant.DCMotor.CIM(1)


def _gyro(gyro: wpilib.AnalogGyro | wpilib.ADIS16470_IMU | None) -> GyroSink | None:
    if isinstance(gyro, wpilib.AnalogGyro):
        return analog_sink(gyro)
    if isinstance(gyro, wpilib.ADIS16470_IMU):
        return imu_sink(gyro)
    return None


class SparkMaxDevices(Devices):
    """Four SPARK MAX as their firmware runs: a leader and a follower per side, each driving one
    motor."""

    step_s = LOOP_S
    leader_class: type[SparkMaxFirmware] = SparkMaxFirmware

    def __init__(self, io: SparkMaxIO, settings: SimSettings, rng: random.Random) -> None:
        faults = settings.faults
        # REVLib's simulation keeps a reference to the motor model: it must outlive it.
        self.motor = motor = drive_motor()
        right_polarity = -1 if faults.right_reversed else 1
        delay = faults.velocity_delay_s

        def firmware(
            spark: rev.SparkMax, leader: SparkMaxFirmware | None, polarity: int, kind: type[SparkMaxFirmware]
        ) -> SparkMaxFirmware:
            return kind(spark, motor, leader=leader, polarity=polarity, velocity_delay_s=delay, rng=rng)

        left_leader, left_follower, right_leader, right_follower = io.controllers
        left = firmware(left_leader, None, 1, self.leader_class)
        right = firmware(right_leader, None, right_polarity, self.leader_class)
        self.leaders = (left, right)
        self.sides = (
            (left, firmware(left_follower, left, 1, SparkMaxFirmware)),
            (right, firmware(right_follower, right, right_polarity, SparkMaxFirmware)),
        )
        self.controllers = tuple(c for side in self.sides for c in side)
        self._enabled = True
        self.gyro_sink = _gyro(io.gyro)
        self.gyro_part = PARTS["analog" if isinstance(io.gyro, wpilib.AnalogGyro) else "adis16470"]

    def begin(self, enabled: bool) -> None:
        self._enabled = enabled
        for leader in self.leaders:
            leader.take_command()

    def volts(self, chassis: Chassis, vbus: float) -> tuple[list[float], list[float]]:
        enabled = self._enabled
        out: list[list[float]] = []
        for side, controllers in enumerate(self.sides):
            back_emf = chassis.back_emf(side)
            for controller in controllers:
                controller.control(vbus, enabled)
            out.append([c.terminal_volts(vbus, back_emf) for c in controllers])
        return out[0], out[1]

    def sense(self, chassis: Chassis, now_s: float) -> None:
        for side, leader in enumerate(self.leaders):
            leader.measure(chassis.motor_rotations(side), now_s)

    def report(self, chassis: Chassis, vbus: float) -> None:
        for controller in self.controllers:
            if controller.leader is not None:  # a follower: what it drives, for the code to read
                controller.sim.setAppliedOutput(controller.duty)
                controller.sim.setBusVoltage(vbus)
                controller.sim.setMotorCurrent(abs(controller.current_a))
        for leader in self.leaders:
            leader.report(vbus)


class IdealSparkMaxDevices(SparkMaxDevices):
    """The leaders' loop as REVLib's own simulation runs it, on exact sensors; an exact gyro."""

    leader_class = IdealLeader

    def __init__(self, io: SparkMaxIO, settings: SimSettings, rng: random.Random) -> None:
        super().__init__(io, settings, rng)
        self.gyro_part = None
        self.ideal_leaders = [leader for leader in self.leaders if isinstance(leader, IdealLeader)]

    def sense(self, chassis: Chassis, now_s: float) -> None:
        for side, leader in enumerate(self.ideal_leaders):
            leader.measure_exact(chassis.motor_rotations(side), chassis.motor_speed(side))


def build(io: SparkMaxIO, settings: SimSettings, rng: random.Random) -> SparkMaxDevices:
    return (SparkMaxDevices if settings.documented else IdealSparkMaxDevices)(io, settings, rng)
