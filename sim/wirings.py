"""The simulation side of each wiring in ``subsystems/drivetrain/io.py``: its devices between
the robot's code and the chassis.

Each robot tick: :meth:`begin` takes what the code commanded; then for each step of the
physics, :meth:`volts` gives each motor's terminal voltage and :meth:`sense` samples the
sensors; :meth:`report` writes what the code reads next tick. ``documented`` picks the
devices as their makers document them (the default) or the ideal ones (``BCNP_SIM_DEVICE=ideal``:
REVLib's own closed-loop simulation, exact sensors read at once, brake at neutral, no
deadband). The mounting (:mod:`sim.chassis`) and the faults apply to both.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

import wpimath.system.plant as plant

from sim.chassis import Chassis
from sim.kitbot import ENCODER_MOUNT, FpgaEncoder, PwmController
from sim.settings import SimSettings
from subsystems.drivetrain.io import DrivetrainIO, KitbotIO, SparkMaxIO

if TYPE_CHECKING:
    import rev

    from sim.sparkmax import SparkMaxFirmware


RPM_PER_RAD_S = 60.0 / math.tau


class KitbotDevices:
    """Two PWM controllers (one per side, its two motors on a Y cable) and two DIO encoders."""

    #: The physics' step: the PWM outputs hold through the tick.
    step_s = 0.005

    def __init__(self, io: KitbotIO, settings: SimSettings) -> None:
        faults = settings.faults
        self.documented = settings.documented
        brake = not faults.pwm_coast
        right_polarity = -1 if faults.right_reversed else 1
        self.controllers = (
            PwmController(io.left_motor.getChannel(), brake=brake, polarity=1),
            PwmController(io.right_motor.getChannel(), brake=brake, polarity=right_polarity),
        )
        self.encoders = (
            FpgaEncoder(io.left_encoder, ENCODER_MOUNT[0], faults.velocity_delay_s, self.step_s),
            FpgaEncoder(io.right_encoder, ENCODER_MOUNT[1], faults.velocity_delay_s, self.step_s),
        )

    def begin(self, enabled: bool) -> None:
        for controller in self.controllers:
            if self.documented:
                controller.read(enabled)
            else:
                controller.duty = controller.pwm.getSpeed() if enabled else 0.0

    def volts(self, chassis: Chassis, vbus: float) -> tuple[list[float], list[float]]:
        left, right = self.controllers
        left_v = left.terminal_volts(vbus, chassis.back_emf(0))
        right_v = right.terminal_volts(vbus, chassis.back_emf(1))
        return [left_v], [right_v]

    def sense(self, chassis: Chassis, now_s: float) -> None:
        for side, encoder in enumerate(self.encoders):
            if self.documented:
                encoder.sample(chassis.wheel_position(side), now_s)
            else:
                encoder.sample_exact(chassis.wheel_position(side), chassis.wheel_velocity(side))

    def report(self, chassis: Chassis, vbus: float) -> None:
        for encoder in self.encoders:
            encoder.report()


class SparkMaxDevices:
    """Four SPARK MAX: a leader and a follower per side, each driving one motor."""

    step_s = 0.001

    def __init__(
        self, io: SparkMaxIO, motor: plant.DCMotor, settings: SimSettings, rng: random.Random
    ) -> None:
        from sim.sparkmax import SparkMaxFirmware

        faults = settings.faults
        self.documented = settings.documented
        right_polarity = -1 if faults.right_reversed else 1
        delay = faults.velocity_delay_s

        def firmware(spark: rev.SparkMax, leader: SparkMaxFirmware | None, polarity: int) -> SparkMaxFirmware:
            return SparkMaxFirmware(
                spark, motor, leader=leader, polarity=polarity, velocity_delay_s=delay, rng=rng
            )

        left = firmware(io.left_leader, None, 1)
        right = firmware(io.right_leader, None, right_polarity)
        self.leaders = (left, right)
        self.sides = (
            (left, firmware(io.left_follower, left, 1)),
            (right, firmware(io.right_follower, right, right_polarity)),
        )
        self.controllers = tuple(c for side in self.sides for c in side)
        self._enabled = True

    def begin(self, enabled: bool) -> None:
        self._enabled = enabled
        if self.documented:
            for leader in self.leaders:
                leader.take_command()

    def volts(self, chassis: Chassis, vbus: float) -> tuple[list[float], list[float]]:
        enabled = self._enabled
        out: list[list[float]] = []
        for side, controllers in enumerate(self.sides):
            back_emf = chassis.back_emf(side)
            if self.documented:
                for controller in controllers:
                    controller.control(vbus, enabled)
            else:
                self._ideal(controllers[0], chassis, side, vbus, enabled)
                controllers[1].control(vbus, enabled)
            out.append([c.terminal_volts(vbus, back_emf) for c in controllers])
        return out[0], out[1]

    def _ideal(
        self, leader: SparkMaxFirmware, chassis: Chassis, side: int, vbus: float, enabled: bool
    ) -> None:
        """REVLib's own simulation of the leader's loop, on the exact wheel speed."""
        leader.sim.iterate(leader.velocity, vbus, self.step_s)
        leader.neutral = not enabled
        leader.duty = leader.sim.getAppliedOutput() if enabled else 0.0
        leader.motor_duty = leader.duty * leader.inverted

    def sense(self, chassis: Chassis, now_s: float) -> None:
        for side, leader in enumerate(self.leaders):
            if self.documented:
                leader.measure(chassis.motor_rotations(side), now_s)
            else:  # exact, and at once (but for the velocity-delay fault)
                rotations = chassis.motor_rotations(side) * leader.sensor_sign
                rpm = chassis.motor_speed(side) * RPM_PER_RAD_S * leader.sensor_sign
                leader.position = rotations * leader.position_factor
                leader.velocity = leader.delay(rpm * leader.velocity_factor)

    def report(self, chassis: Chassis, vbus: float) -> None:
        for controller in self.controllers:
            if controller.leader is not None:  # a follower: what it drives, for the code to read
                controller.sim.setAppliedOutput(controller.duty)
                controller.sim.setBusVoltage(vbus)
                controller.sim.setMotorCurrent(abs(controller.current_a))
        for leader in self.leaders:
            if self.documented:
                leader.report(vbus)
            else:
                leader.encoder_sim.setPosition(leader.position)
                leader.encoder_sim.setVelocity(leader.velocity)


def wiring_devices(
    io: DrivetrainIO, motor: plant.DCMotor, settings: SimSettings, rng: random.Random
) -> KitbotDevices | SparkMaxDevices:
    if isinstance(io, KitbotIO):
        return KitbotDevices(io, settings)
    if isinstance(io, SparkMaxIO):
        return SparkMaxDevices(io, motor, settings, rng)
    raise TypeError(f"no simulation for the {type(io).__name__} wiring")
