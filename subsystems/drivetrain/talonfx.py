"""The TalonFX wiring: four TalonFX (Kraken X60 or Falcon 500) and a Pigeon 2 on CAN, on CTRE's
Phoenix 6. ``sim/talonfx.py`` is its simulated side, which runs CTRE's own device firmware.

A leader and a follower a side; the whole wheel-speed loop runs on the leaders (Phoenix 6's
``VelocityVoltage`` on Slot 0: kS, kV, kA, kP, kI), in wheel rotations through the
``SensorToMechanismRatio``. Each tick a leader gets the speed mid-way between where the wheel
should be now and where next tick, and the acceleration between them; kA turns that into
volts. What the roboRIO reads (positions, velocities, the Pigeon 2's yaw and rate, outputs,
currents, faults) is refreshed together once a tick (``BaseStatusSignal.refresh_all``) at the
update frequencies ``constants.TALONFX_*_SIGNALS_HZ`` set, and read as the frames carry them, as
the SPARK MAX's are: Phoenix 6's latency compensation (the value moved on by its rate times its
age) measures the age on the wall clock, which a simulation stepped faster or slower than it does
not follow, and the loops are tuned and judged on what the simulator gives them; at 100 Hz a
reading is at most 10 ms old. Every configuration call is checked
and its status reported (``Network/ConfigErrors``, the pre-flight check). No Phoenix Pro
feature is used: ``enable_foc`` is off in every request (an unlicensed device refuses FOC).

Phoenix 6 (``phoenix6``) is imported when this module is: :func:`subsystems.drivetrain.io.make_io`
imports it only when this wiring is built, never for a kitbot.
"""

from __future__ import annotations

import math

import wpilib
from phoenix6 import BaseStatusSignal, CANBus, StatusCode, configs, controls, hardware, signals
from wpimath.geometry import Rotation2d

import constants
from subsystems.drivetrain.io import (
    ClosedLoopIO,
    ConfigResult,
    DrivetrainInputs,
    MotorWatchdog,
    VelocityFilter,
    wheel_feedback,
)

__all__ = ["TalonFXIO"]

_CIRCUMFERENCE = constants.WHEEL_CIRCUMFERENCE_M
#: The fault getters read by name when a device's fault field says it has one.
_FAULTS = (
    "hardware",
    "proc_temp",
    "device_temp",
    "undervoltage",
    "boot_during_enable",
    "unlicensed_feature_in_use",
    "bridge_brownout",
    "over_supply_v",
    "unstable_supply_v",
    "stator_curr_limit",
    "supply_curr_limit",
)


def _inverted(inverted: bool) -> signals.InvertedValue:
    return (
        signals.InvertedValue.CLOCKWISE_POSITIVE
        if inverted
        else signals.InvertedValue.COUNTER_CLOCKWISE_POSITIVE
    )


def motor_config(inverted: bool, motor: str) -> configs.TalonFXConfiguration:
    """One drive TalonFX's configuration: its direction, brake at neutral, CTRE's current limits,
    positions and velocities per wheel rotation, the wheel-speed gains for ``motor`` in Slot 0."""
    if motor not in constants.TALONFX_WHEEL_FEEDFORWARD:
        raise ValueError(f"unknown TALONFX_MOTOR {motor!r}: one of {', '.join(constants.TALONFX_MOTORS)}")
    config = configs.TalonFXConfiguration()  # type: ignore[no-untyped-call]
    output = config.motor_output
    output.inverted = _inverted(inverted)
    output.neutral_mode = signals.NeutralModeValue.BRAKE
    limits = config.current_limits
    limits.stator_current_limit = constants.TALONFX_STATOR_LIMIT_A
    limits.stator_current_limit_enable = True
    limits.supply_current_limit = constants.TALONFX_SUPPLY_LIMIT_A
    limits.supply_current_lower_limit = constants.TALONFX_SUPPLY_LOWER_LIMIT_A
    limits.supply_current_lower_time = constants.TALONFX_SUPPLY_LOWER_TIME_S
    limits.supply_current_limit_enable = True
    config.feedback.sensor_to_mechanism_ratio = constants.TALONFX_SENSOR_TO_MECHANISM
    ks, kv, ka = constants.TALONFX_WHEEL_FEEDFORWARD[motor]
    slot = config.slot0
    slot.k_s, slot.k_v, slot.k_a = ks, kv, ka
    slot.k_p = constants.TALONFX_WHEEL_KP_V_PER_RPS
    slot.k_i = 0.0  # the integral is on the distance, the roboRIO's (WheelFeedback)
    slot.k_d = 0.0
    return config


class TalonFXIO(ClosedLoopIO):
    """Four TalonFX, a leader and a follower a side, and a Pigeon 2 (``constants.TALONFX_GYRO``)."""

    wiring = "talonfx"

    def __init__(self) -> None:
        bus = CANBus(constants.TALONFX_CANBUS)
        self.left_leader = hardware.TalonFX(constants.TALONFX_LEFT_LEADER_CAN, bus)
        self.left_follower = hardware.TalonFX(constants.TALONFX_LEFT_FOLLOWER_CAN, bus)
        self.right_leader = hardware.TalonFX(constants.TALONFX_RIGHT_LEADER_CAN, bus)
        self.right_follower = hardware.TalonFX(constants.TALONFX_RIGHT_FOLLOWER_CAN, bus)
        #: Each side's leader then its follower, left side first: the order of every report.
        self.controllers = (self.left_leader, self.left_follower, self.right_leader, self.right_follower)
        self.pigeon = (
            hardware.Pigeon2(constants.TALONFX_PIGEON_CAN, bus)
            if constants.TALONFX_GYRO == "pigeon2"
            else None
        )
        if constants.TALONFX_GYRO not in ("pigeon2", None):
            raise ValueError(f"unknown TALONFX_GYRO {constants.TALONFX_GYRO!r}: 'pigeon2' or None")
        results = []
        for leader, follower, inverted in (
            (self.left_leader, self.left_follower, False),
            (self.right_leader, self.right_follower, constants.TALONFX_RIGHT_INVERTED),
        ):
            # The follower carries its leader's configuration too: its direction (so its outputs
            # read as its leader's), brake and current limits.
            config = motor_config(inverted, constants.TALONFX_MOTOR)
            results.append(self._apply(f"TalonFX {leader.device_id}", leader.configurator, config))
            results.append(self._apply(f"TalonFX {follower.device_id}", follower.configurator, config))
        if self.pigeon is not None:
            results.append(
                self._apply(
                    f"Pigeon 2 {self.pigeon.device_id}",
                    self.pigeon.configurator,
                    configs.Pigeon2Configuration(),  # type: ignore[no-untyped-call]
                )
            )
        self._config_results = tuple(results)
        for leader, follower in (
            (self.left_leader, self.left_follower),
            (self.right_leader, self.right_follower),
        ):
            follower.set_control(controls.Follower(leader.device_id, signals.MotorAlignmentValue.ALIGNED))

        # The signals, not refreshed here: no frame has come yet, and a refresh would print that
        # each signal's frame was not received (update_inputs refreshes them every tick).
        left, right = self.left_leader, self.right_leader
        self._positions = (left.get_position(False), right.get_position(False))
        self._velocities = (left.get_velocity(False), right.get_velocity(False))
        fast: list[BaseStatusSignal] = [*self._positions, *self._velocities]
        self._yaw = self._rate = None
        if self.pigeon is not None:
            self._yaw = self.pigeon.get_yaw(False)
            self._rate = self.pigeon.get_angular_velocity_z_world(False)
            fast += [self._yaw, self._rate]
        self._duty = tuple(talon.get_duty_cycle(False) for talon in self.controllers)
        self._motor_volts = (left.get_motor_voltage(False), right.get_motor_voltage(False))
        self._currents = tuple(talon.get_stator_current(False) for talon in self.controllers)
        self._fault_fields = tuple(talon.get_fault_field(False) for talon in self.controllers)
        slow: list[BaseStatusSignal] = [*self._duty, *self._motor_volts, *self._currents, *self._fault_fields]
        self._fast, self._slow = fast, slow
        BaseStatusSignal.set_update_frequency_for_all(constants.TALONFX_FAST_SIGNALS_HZ, *fast)
        BaseStatusSignal.set_update_frequency_for_all(constants.TALONFX_SLOW_SIGNALS_HZ, *slow)
        # Read once a tick; the leaders' motor voltages only when SysId asks (applied_volts).
        self._signals = (*fast, *self._duty, *self._currents, *self._fault_fields)

        self._velocity_requests = (
            controls.VelocityVoltage(0.0, enable_foc=False),
            controls.VelocityVoltage(0.0, enable_foc=False),
        )
        self._voltage_requests = (
            controls.VoltageOut(0.0, enable_foc=False),
            controls.VoltageOut(0.0, enable_foc=False),
        )
        self._neutral_request = controls.NeutralOut()
        # The distance term on the roboRIO, sent as the request's feedforward; the rest is Slot 0's.
        self.left_feedback = wheel_feedback(0.0)
        self.right_feedback = wheel_feedback(0.0)
        self._distances = (0.0, 0.0)  # the wheel distances last read (m)
        self.watchdog = MotorWatchdog((left, right), "TalonFX drivetrain", constants.MOTOR_SAFETY_TIMEOUT_S)
        self._driven = True  # the motors may be running: the next stop() sets them neutral

    @staticmethod
    def _apply(device: str, configurator: object, config: object) -> ConfigResult:
        """Apply ``config``, tried up to ``TALONFX_CONFIG_TRIES`` times; the last status."""
        status = StatusCode.OK
        for _ in range(constants.TALONFX_CONFIG_TRIES):
            status = configurator.apply(config, constants.TALONFX_CONFIG_TIMEOUT_S)  # type: ignore[attr-defined]
            if status.is_ok():
                break
        return ConfigResult(device, status.name, status.is_ok())

    # -- commands -------------------------------------------------------------------------------

    def set_wheel_speeds(
        self, left_mps: float, right_mps: float, left_next: float, right_next: float
    ) -> None:
        self._driven = True
        period = constants.LOOP_PERIOD_S
        left_m, right_m = self._distances
        for talon, request, feedback, now, then, position in (
            (self.left_leader, self._velocity_requests[0], self.left_feedback, left_mps, left_next, left_m),
            (
                self.right_leader,
                self._velocity_requests[1],
                self.right_feedback,
                right_mps,
                right_next,
                right_m,
            ),
        ):
            request.velocity = (now + then) / 2 / _CIRCUMFERENCE
            request.acceleration = (then - now) / period / _CIRCUMFERENCE
            request.feed_forward = feedback.calculate(now, then, 0.0, position)
            talon.set_control(request)
        self.watchdog.feed()

    def set_voltages(self, left_v: float, right_v: float) -> None:
        self._driven = True
        left, right = self._voltage_requests
        left.output, right.output = left_v, right_v
        self.left_leader.set_control(left)
        self.right_leader.set_control(right)
        self.watchdog.feed()

    # -- what the devices report -------------------------------------------------------------------

    def update_inputs(self, inputs: DrivetrainInputs) -> None:
        # Not reported to the console: a device that stopped answering would print every tick; the
        # status goes into the record's faults instead.
        status = BaseStatusSignal.refresh_all(*self._signals, report_error=False)
        left_pos, right_pos = self._positions
        left_vel, right_vel = self._velocities
        inputs.left_position_m = left_m = left_pos.value * _CIRCUMFERENCE
        inputs.right_position_m = right_m = right_pos.value * _CIRCUMFERENCE
        self._distances = (left_m, right_m)
        inputs.left_velocity_mps = left_vel.value * _CIRCUMFERENCE
        inputs.right_velocity_mps = right_vel.value * _CIRCUMFERENCE
        yaw, rate = self._yaw, self._rate
        if yaw is None or rate is None:
            inputs.heading = inputs.turn_rate_radps = None
        else:  # the Pigeon 2 counts counter-clockwise, in degrees
            inputs.heading = Rotation2d.fromDegrees(yaw.value)
            inputs.turn_rate_radps = math.radians(rate.value)
            inputs.gyro_connected = yaw.status.is_ok()
        inputs.battery_v = wpilib.RobotController.getBatteryVoltage()
        duty = self._duty
        inputs.followers = ((duty[0].value, duty[1].value), (duty[2].value, duty[3].value))
        inputs.follower_relations = (1, 1)  # aligned, and configured with their leader's direction
        inputs.config_results = self._config_results
        currents = self._currents
        inputs.currents_a = (currents[0].value + currents[1].value, currents[2].value + currents[3].value)
        faults: tuple[str, ...] = () if status.is_ok() else (f"TalonFX drivetrain signals: {status.name}",)
        for talon, field in zip(self.controllers, self._fault_fields, strict=True):
            if field.value:
                faults += _fault_names(talon)
        inputs.faults = faults

    def outputs(self) -> tuple[float, float]:
        left, right = self._duty[0], self._duty[2]
        BaseStatusSignal.refresh_all(left, right, report_error=False)
        return left.value, right.value

    def velocity_filter(self) -> VelocityFilter:
        # Phoenix 6 has no velocity filter to configure (CTRE dropped Phoenix 5's measurement
        # period and window): the rotor's own velocity, sent in the same frame as its position.
        return VelocityFilter("TalonFX rotor velocity (Phoenix 6: no filter to set)", 0.0)

    def applied_volts(self) -> tuple[float, float]:
        """The leaders' own measure of the voltage they apply (a duty cycle is of the TalonFX's own
        supply, not the roboRIO's battery reading)."""
        left, right = self._motor_volts
        BaseStatusSignal.refresh_all(left, right, report_error=False)
        return left.value, right.value

    def _neutral(self) -> None:
        self.left_leader.set_control(self._neutral_request)
        self.right_leader.set_control(self._neutral_request)

    def close(self) -> None:
        """Close every device: a Phoenix 6 device collected unclosed just before the process
        exits can abort it ("terminate called without an active exception")."""
        for talon in self.controllers:
            talon.close()  # type: ignore[no-untyped-call]
        if self.pigeon is not None:
            self.pigeon.close()  # type: ignore[no-untyped-call]


def _fault_names(talon: hardware.TalonFX) -> tuple[str, ...]:
    """A TalonFX's active faults by name (read only when its fault field has one)."""
    names = [name for name in _FAULTS if getattr(talon, f"get_fault_{name}")().value]
    return tuple(f"TalonFX {talon.device_id}: {name}" for name in names or ["other"])
