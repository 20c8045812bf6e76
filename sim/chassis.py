"""The chassis: WPILib's differential drivetrain model of the kit-of-parts robot, with the
motors mounted as they are on it and the disturbances that make it differ from the model.

Each side has two motors on one gearbox. What the simulator hands a side is each motor's
terminal voltage, in the motor's own sense of rotation; the mounting turns that into the
wheel's: the right gearbox is mirrored, so its motors turn backward for the robot to roll
forward (and a right-side encoder on the gearbox counts backward). The robot's code must
invert that side, as on the real robot: the mounting here is never read from
``constants.py``, so a wrong inversion constant does in the simulator what it does on the
robot.

Two motors on one gearbox turn at the same speed: their torques add, which is one motor
pair at the mean of their voltages (brake mode: a motor at 0 V is shorted and brakes). A
motor idling in coast has its leads open: no current, no torque, which is a terminal
voltage equal to its back-EMF (speed / Kv, WPILib's ``DCMotor``). The battery supplies what
the motors draw (terminal voltage times current), not their current: a controller at a
duty cycle d draws about d times its motor's current.
"""

from __future__ import annotations

import math

import wpimath.system.plant as plant
from wpilib.simulation import DifferentialDrivetrainSim

from sim.settings import Disturbances

#: WPILib's kit-of-parts chassis (DifferentialDrivetrainSim.createKitbotSim): 60 lb, and a
#: moment of inertia of the battery (12.5 lb at 10 in) and the gearboxes (2 x 4.8 lb at half
#: the 26 in track) about the centre.
_LB, _INCH = 0.45359237, 0.0254
KITBOT_MASS_KG = 60 * _LB
KITBOT_MOI_KG_M2 = 12.5 * _LB * (10 * _INCH) ** 2 + (2.8 + 2.0) * _LB * 2 * (26 * _INCH / 2) ** 2
#: Below this wheel speed (m/s) a side is at rest for the friction model.
_AT_REST_MPS = 0.02
#: How each side's motors turn the wheel forward: the right gearbox is mirrored.
MOTOR_MOUNT = (1, -1)


def gearbox(motor: plant.DCMotor, count: int) -> plant.DCMotor:
    """``count`` of ``motor`` on one gearbox, as WPILib's models take them."""
    return plant.DCMotor(
        motor.nominalVoltage, motor.stallTorque, motor.stallCurrent, motor.freeCurrent, motor.freeSpeed, count
    )


def after_friction(volts: float, velocity: float, friction_v: float) -> float:
    """The voltage left to move a side once rolling friction (``friction_v``) is overcome: a
    moving side loses ``friction_v`` against its motion; a side at rest stays there until its
    voltage exceeds it."""
    if friction_v <= 0.0:
        return volts
    if abs(velocity) > _AT_REST_MPS:
        return volts - math.copysign(friction_v, velocity)
    if abs(volts) <= friction_v:
        return 0.0
    return volts - math.copysign(friction_v, volts)


class Chassis:
    """The drivetrain model: per side, the terminal voltages of its motors in (each motor's own
    sense), the wheels' positions and speeds out (forward positive)."""

    def __init__(
        self,
        motor: plant.DCMotor,
        motors_per_side: int,
        gear_ratio: float,
        wheel_radius_m: float,
        track_width_m: float,
        disturbances: Disturbances,
    ) -> None:
        self.motor = motor  # one motor
        self.motors_per_side = motors_per_side
        self.power_w = 0.0
        self.gear_ratio = gear_ratio
        self.wheel_radius_m = wheel_radius_m
        self.disturbances = disturbances
        #: The track the chassis really turns on (wider with scrub).
        self.track_m = track_width_m * disturbances.scrub
        # WPILib's model keeps a reference to the motor pair: it must outlive it.
        self._pair = gearbox(motor, motors_per_side)
        self.model = DifferentialDrivetrainSim(
            self._pair,
            gear_ratio,
            KITBOT_MOI_KG_M2 * disturbances.mass_scale,
            KITBOT_MASS_KG * disturbances.mass_scale,
            wheel_radius_m,
            self.track_m,
        )
        self._rad_per_m = gear_ratio / wheel_radius_m  # motor rad per metre of wheel travel
        self._kv = motor.Kv
        self._resistance = motor.R
        self._read()

    def _read(self) -> None:
        """The model's wheel positions and speeds, and what follows from them, read once after
        each step: the devices, the friction and the motors' power all ask for them within it."""
        model, rad_per_m, kv = self.model, self._rad_per_m, self._kv
        left_mps, right_mps = model.getLeftVelocity(), model.getRightVelocity()
        left_m, right_m = model.getLeftPosition(), model.getRightPosition()
        self._wheel_mps = (left_mps, right_mps)
        self._wheel_m = (left_m, right_m)
        self._motor_rad_s = motor = (
            left_mps * rad_per_m * MOTOR_MOUNT[0],
            right_mps * rad_per_m * MOTOR_MOUNT[1],
        )
        self._motor_rotations = (
            left_m * rad_per_m * MOTOR_MOUNT[0] / math.tau,
            right_m * rad_per_m * MOTOR_MOUNT[1] / math.tau,
        )
        self._back_emf = (motor[0] / kv, motor[1] / kv)

    def motor_speed(self, side: int) -> float:
        """A side's motor speed (rad/s, in the motors' own sense)."""
        return self._motor_rad_s[side]

    def motor_rotations(self, side: int) -> float:
        """How far a side's motors have turned since the start (rotations, their own sense)."""
        return self._motor_rotations[side]

    def wheel_position(self, side: int) -> float:
        return self._wheel_m[side]

    def wheel_velocity(self, side: int) -> float:
        return self._wheel_mps[side]

    def back_emf(self, side: int) -> float:
        """The voltage a side's motors generate turning at their speed (their own sense)."""
        return self._back_emf[side]

    def step(self, left: list[float], right: list[float], dt: float) -> None:
        """Integrate ``dt`` seconds with each motor's terminal voltage (its own sense): each list
        is a side's controllers, each driving an equal share of the side's motors."""
        model = self.model
        d = self.disturbances
        resistance = self._resistance
        back_emf = self._back_emf
        power = 0.0
        inputs = []
        for side, volts in enumerate((left, right)):
            emf = back_emf[side]
            scale = d.right_scale if side == 1 else 1.0
            share = self.motors_per_side / len(volts)
            total = 0.0
            for v in volts:
                if v != emf:  # a weak side gets less of what is driven (a coasting motor: nothing)
                    v *= scale
                power += v * (v - emf) / resistance * share  # what the motors draw, W
                total += v
            inputs.append(total / len(volts) * MOTOR_MOUNT[side])
        self.power_w = power
        wheel_mps = self._wheel_mps
        model.setInputs(
            after_friction(inputs[0], wheel_mps[0], d.friction_v),
            after_friction(inputs[1], wheel_mps[1], d.friction_v),
        )
        model.update(dt)
        self._read()

    def supply_current(self, vbus: float) -> float:
        """The current the drive draws from the battery (A) at the last step: the power the
        motors take over the bus voltage (a braking, shorted motor draws none)."""
        return max(0.0, self.power_w / vbus) if vbus > 0.0 else 0.0
