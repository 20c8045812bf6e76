"""Simulation physics (pyfrc): the robot's devices and its chassis, stepped each tick.

The models live in ``sim/`` (docs/robot.md, "The simulator" and "Device models"): the
chassis with its motors mounted as on the robot (``sim.chassis``), each wiring's devices as
their makers run or document them (``sim/<wiring>.py`` behind ``sim.wirings``: PWM
controllers and FPGA encoders, SPARK MAX firmware on REVLib's device I/O, or CTRE's own
TalonFX and Pigeon 2 firmware), the gyro (``sim.gyro``), the battery and brownout
(``sim.battery``). Every ``BCNP_SIM_*`` variable is read once, by ``sim.settings``.

Each tick: what the code commanded is taken, the chassis is stepped in short steps (the
devices' own period: the SPARK MAX's 1 ms loop, else 5 ms) with the devices between, then the
sensors are written for the code to read next tick, the bus voltage under the drive's current is set, and the
Field2d pose (``/SmartDashboard/Field/Robot``) and its trail (``/SmartDashboard/Field/Trail``)
move. A headless ``robotpy sim --nogui`` starts its simulated driver station in autonomous,
enabled (``BCNP_SIM_AUTONOMOUS``).
"""

from __future__ import annotations

import math
import random
import sys
import typing
from collections import deque
from pathlib import Path

import wpilib
import wpilib.simulation as wsim
from pyfrc.physics.core import PhysicsInterface
from wpimath.geometry import Pose2d, Rotation2d
from wpimath.system.plant import DCMotor

import constants
from sim import nt
from sim.battery import Battery
from sim.chassis import Chassis
from sim.gyro import GyroModel
from sim.settings import SimSettings, read
from sim.wirings import Devices, wiring_devices
from sim.wirings import drive_motor as wiring_motor

if typing.TYPE_CHECKING:
    from robot import BcnpRobot

# pyfrc loads this file without __file__; constants.py sits beside it.
PROJECT_DIR = Path(constants.__file__).resolve().parent
SIM_DIR = PROJECT_DIR / ".sim"  # a dot-folder: `robotpy deploy` never uploads it

#: Where the simulated robot starts on the field (metres, facing +x): open floor,
#: room for a 2 m x 4 m figure-8 around it.
START_POSE = Pose2d(6.0, 4.0, Rotation2d())
#: The Field view's trail: one pose every TRAIL_EVERY ticks (0.1 s), the last minute.
TRAIL_EVERY = 5
TRAIL_LENGTH = 600

#: Under ``robotpy sim``, NetworkTables serves from here on, on its own port, before the robot
#: is built (its constructor would start one on 5810).
SERVING_EARLY = nt.serve_before_the_robot(read().nt_port, SIM_DIR, sys.argv)


def drive_motor() -> DCMotor:
    """One drive motor of the wiring the robot is built with (a CIM on the kitbot)."""
    return wiring_motor(constants.drivetrain_wiring())


def make_chassis(settings: SimSettings, motor: DCMotor | None = None) -> Chassis:
    return Chassis(
        motor if motor is not None else drive_motor(),
        2,
        constants.GEAR_RATIO,
        constants.WHEEL_DIAMETER_M / 2,
        constants.TRACK_WIDTH_M,
        settings.disturbances,
    )


class PhysicsEngine:
    def __init__(self, physics_controller: PhysicsInterface, robot: BcnpRobot) -> None:
        self.settings = settings = read()
        rng = random.Random(settings.seed)
        self.devices: Devices = wiring_devices(robot.drivetrain.io, settings, rng)
        self.chassis = make_chassis(settings, self.devices.motor)
        self.drivesim = self.chassis.model
        self.drivesim.setPose(START_POSE)
        faults = settings.faults
        self.gyro = GyroModel(
            self.devices.gyro_sink,
            self.devices.gyro_part,
            sign=faults.gyro_sign,
            fail_s=faults.gyro_fail_s,
            rng=rng,
        )
        self.battery = Battery(settings.disturbances, brownout=settings.documented)
        self.trail: deque[Pose2d] = deque([START_POSE], maxlen=TRAIL_LENGTH)
        field = physics_controller.field
        assert field is not None  # pyfrc makes the Field2d before the engine
        self.field = field
        self.trail_object = field.getObject("Trail")
        self.ticks = 0
        self.elapsed = 0.0
        self._pending = 0.0  # simulated time not yet stepped (less than one device step)

        self._auto_mode = nt.select_autonomous_mode(settings.auto_mode)
        if settings.starts_autonomous(sys.argv):
            wsim.DriverStationSim.setDsAttached(True)
            wsim.DriverStationSim.setAutonomous(True)
            wsim.DriverStationSim.setEnabled(True)
            wsim.DriverStationSim.notifyNewData()

    def update_sim(self, now: float, tm_diff: float) -> None:
        chassis, devices, battery = self.chassis, self.devices, self.battery
        vbus = battery.volts
        devices.begin(wpilib.DriverStation.isEnabled() and not battery.browned_out)
        # Whole steps of the devices' own period (the SPARK MAX's 1 ms loop): a tick a little
        # longer or shorter than 20 ms in real time leaves the rest for the next.
        step = devices.step_s
        self._pending += tm_diff
        steps = int(self._pending / step + 1e-6)
        self._pending -= steps * step
        t = self.elapsed
        for _ in range(steps):
            left, right = devices.volts(chassis, vbus)
            chassis.step(left, right, step)
            t += step
            devices.sense(chassis, t)
        self.elapsed = t
        devices.report(chassis, vbus)
        model = chassis.model
        rate = math.degrees((model.getRightVelocity() - model.getLeftVelocity()) / chassis.track_m)
        self.gyro.sense(model.getHeading().degrees(), rate, self.elapsed, steps * step)
        battery.update(chassis.supply_current(vbus))
        devices.end()

        pose = model.getPose()
        self.field.setRobotPose(pose)
        self.ticks += 1
        if self.ticks % TRAIL_EVERY == 0:
            self.trail.append(pose)
            self.trail_object.setPoses(list(self.trail))
