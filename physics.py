"""Simulation physics (pyfrc): the drivetrain driven by the robot's motor outputs, for every wiring.

Each step: the wiring's motor outputs times battery voltage →
``DifferentialDrivetrainSim`` (one model, the kit-of-parts chassis with the
wiring's motors) → the wiring's sensor sims, so the robot code reads back what
the physics did, and the Field2d pose (``/SmartDashboard/Field/Robot`` on
NetworkTables, the sim GUI's Field view). Each wiring of
``subsystems/drivetrain_io.py`` has its counterpart here: :class:`KitbotSim`
(PWM outputs, HAL encoder and gyro sims) and :class:`SparkMaxSim` (REVLib's
SPARK MAX simulation, which runs the controllers' own velocity loop).
The robot starts in open floor at ``START_POSE``; the Field view also shows
the last minute of where it drove (``/SmartDashboard/Field/Trail``, drawn as
a line by the shipped ``simgui.json``).

With ``BCNP_SIM_AUTONOMOUS=1`` the simulated driver station starts in
autonomous, enabled, so a headless ``robotpy sim --nogui`` can be driven by a
host straight away.

``BCNP_SIM_RIGHT_SCALE=0.9`` makes the right side weak, a disturbance to test
path following against: its motors get that fraction of the voltage the
wiring applies (a dragging gearbox, a tired motor). The encoders see what the
wheels really do, so the robot's telemetry shows it; its own wheel-speed loop
makes up part of it (with the kitbot's gains, at 1 m/s: 0.9 delivers 94 % of
the commanded speed, 0.85 about 90 %).
"""

from __future__ import annotations

import contextlib
import math
import os
import typing
from collections import deque
from pathlib import Path

import ntcore
import wpilib
import wpilib.simulation as sim
from pyfrc.physics.core import PhysicsInterface
from wpimath.geometry import Pose2d, Rotation2d
from wpimath.system.plant import DCMotor

import constants
from subsystems.drivetrain_io import DrivetrainIO, KitbotIO, SparkMaxIO

if typing.TYPE_CHECKING:
    from robot import BcnpRobot


# pyfrc loads this file without __file__; constants.py sits beside it.
PROJECT_DIR = Path(constants.__file__).resolve().parent
SIM_DIR = PROJECT_DIR / ".sim"  # a dot-folder: `robotpy deploy` never uploads it

#: Where the simulated robot starts on the field (metres, facing +x): open floor,
#: room for a 2 m x 4 m figure-8 around it.
START_POSE = Pose2d(6.0, 4.0, Rotation2d())
#: The Field view's trail: one pose every TRAIL_EVERY steps (0.1 s), the last minute.
TRAIL_EVERY = 5
#: The longest step of the drivetrain model's integration (seconds).
PHYSICS_STEP_S = 0.005
#: Environment variable: the right side's share of the voltage its wiring applies (default 1).
RIGHT_SCALE_ENV = "BCNP_SIM_RIGHT_SCALE"


def right_scale() -> float:
    """The weak right side's factor from ``BCNP_SIM_RIGHT_SCALE`` (0 < f <= 1; default 1)."""
    text = os.environ.get(RIGHT_SCALE_ENV, "").strip()
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{RIGHT_SCALE_ENV}={text!r}: expected a number in (0, 1]") from None
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{RIGHT_SCALE_ENV}={text!r}: expected a number in (0, 1]")
    return value


TRAIL_LENGTH = 600


def _move_nt_persistence_out_of_the_project() -> None:
    """``robotpy sim`` starts its NetworkTables server with an empty
    ``networktables.json`` in the current directory, which deploy would upload to
    the robot. Restart the server with its file under ``.sim/`` and remove the
    empty file. Anything else (a file with content, a server started elsewhere,
    pyfrc's local mode) is left alone."""
    inst = ntcore.NetworkTableInstance.getDefault()
    stray = Path.cwd() / "networktables.json"
    if Path.cwd().resolve() == SIM_DIR.resolve():
        return  # run.py sim already runs in .sim/
    if not inst.getNetworkMode() & ntcore.NetworkTableInstance.NetworkMode.kNetModeServer:
        return
    try:
        if stray.read_text().strip() != "[]":
            return
    except OSError:
        return
    SIM_DIR.mkdir(exist_ok=True)
    inst.stopServer()
    inst.startServer(str(SIM_DIR / "networktables.json"))
    with contextlib.suppress(OSError):
        stray.unlink()


class KitbotSim:
    """The kitbot's PWM outputs in, its HAL encoder and gyro sims out."""

    motors = DCMotor.CIM(2)  # two CIMs per side, as the kit of parts ships it

    def __init__(self, io: KitbotIO) -> None:
        # PWMMotorController.get() is the output before inversion: forward is
        # positive on both sides, which is what the drivetrain sim expects.
        self.left_motor = io.left_motor
        self.right_motor = io.right_motor
        self.left_encoder = sim.EncoderSim(io.left_encoder)
        self.right_encoder = sim.EncoderSim(io.right_encoder)
        self.gyro = sim.AnalogGyroSim(io.gyro)

    def volts(self, drivesim: sim.DifferentialDrivetrainSim, vbus: float, dt: float) -> tuple[float, float]:
        return self.left_motor.get() * vbus, self.right_motor.get() * vbus

    def sense(self, drivesim: sim.DifferentialDrivetrainSim) -> None:
        self.left_encoder.setDistance(drivesim.getLeftPosition())
        self.left_encoder.setRate(drivesim.getLeftVelocity())
        # The HAL encoder sim ignores setReverseDirection(): write forward-positive.
        self.right_encoder.setDistance(drivesim.getRightPosition())
        self.right_encoder.setRate(drivesim.getRightVelocity())
        # AnalogGyro counts clockwise; the sim's heading is counter-clockwise.
        self.gyro.setAngle(-drivesim.getHeading().degrees())


class SparkMaxSim:
    """The SPARK MAX leaders through REVLib's simulation: each step they run their own
    velocity loop on the wheel speed the physics last gave them (their setpoint, P and
    feedforward as configured), and their applied output drives the physics; their
    encoders then read the physics' wheel positions and speeds. A follower only mirrors
    its leader: the drivetrain model has two motors per side."""

    #: Two motors per side as the controllers' feedforward describes them: full output
    #: drives the wheels at 1 / SPARKMAX_VELOCITY_FF_PER_MPS (the reference robot's 1.5 m/s
    #: through the 10.71:1 gearbox), with the torque per amp of the motor family (CIM,
    #: or NEO when brushless) scaled to that speed. A team that characterises its robot
    #: with SysId changes the feedforward, and this model follows.
    motors = (DCMotor.NEO(2) if constants.SPARKMAX_BRUSHLESS else DCMotor.CIM(2)).withReduction(
        (DCMotor.NEO(1) if constants.SPARKMAX_BRUSHLESS else DCMotor.CIM(1)).freeSpeed
        / (constants.GEAR_RATIO / constants.SPARKMAX_VELOCITY_FF_PER_MPS / (constants.WHEEL_DIAMETER_M / 2))
    )

    def __init__(self, io: SparkMaxIO) -> None:
        import rev  # REVLib: only a SPARK MAX robot loads it (a kitbot starts without it)

        self.left = rev.SparkMaxSim(io.left_leader, self.motors)
        self.right = rev.SparkMaxSim(io.right_leader, self.motors)
        self.left_encoder = self.left.getRelativeEncoderSim()
        self.right_encoder = self.right.getRelativeEncoderSim()
        self.gyro = sim.AnalogGyroSim(io.gyro) if io.gyro is not None else None

    def volts(self, drivesim: sim.DifferentialDrivetrainSim, vbus: float, dt: float) -> tuple[float, float]:
        # Speeds in the controllers' units (m/s after the conversion factor), forward positive:
        # the controllers' outputs are before their inversion, as the drivetrain sim wants.
        self.left.iterate(drivesim.getLeftVelocity(), vbus, dt)
        self.right.iterate(drivesim.getRightVelocity(), vbus, dt)
        return self.left.getAppliedOutput() * vbus, self.right.getAppliedOutput() * vbus

    def sense(self, drivesim: sim.DifferentialDrivetrainSim) -> None:
        self.left_encoder.setPosition(drivesim.getLeftPosition())
        self.left_encoder.setVelocity(drivesim.getLeftVelocity())
        self.right_encoder.setPosition(drivesim.getRightPosition())
        self.right_encoder.setVelocity(drivesim.getRightVelocity())
        if self.gyro is not None:
            self.gyro.setAngle(-drivesim.getHeading().degrees())


def wiring_sim(io: DrivetrainIO) -> KitbotSim | SparkMaxSim:
    """The simulation side of the robot's wiring."""
    if isinstance(io, KitbotIO):
        return KitbotSim(io)
    if isinstance(io, SparkMaxIO):
        return SparkMaxSim(io)
    raise TypeError(f"no simulation for the {type(io).__name__} wiring")


class PhysicsEngine:
    def __init__(self, physics_controller: PhysicsInterface, robot: BcnpRobot) -> None:
        self.physics_controller = physics_controller
        self.wiring = wiring_sim(robot.drivetrain.io)
        self.drivesim = sim.DifferentialDrivetrainSim.createKitbotSim(
            self.wiring.motors,
            constants.GEAR_RATIO,
            constants.WHEEL_DIAMETER_M,
        )
        self.drivesim.setPose(START_POSE)
        self.trail: deque[Pose2d] = deque([START_POSE], maxlen=TRAIL_LENGTH)
        field = physics_controller.field
        assert field is not None  # pyfrc makes the Field2d before the engine
        self.field = field
        self.trail_object = field.getObject("Trail")
        self.steps = 0
        self.right_scale = right_scale()

        _move_nt_persistence_out_of_the_project()

        if os.environ.get(constants.SIM_AUTONOMOUS_ENV) == "1":
            sim.DriverStationSim.setDsAttached(True)
            sim.DriverStationSim.setAutonomous(True)
            sim.DriverStationSim.setEnabled(True)
            sim.DriverStationSim.notifyNewData()

    def update_sim(self, now: float, tm_diff: float) -> None:
        vbus = wpilib.RobotController.getInputVoltage()
        left, right = self.wiring.volts(self.drivesim, vbus, tm_diff)
        self.drivesim.setInputs(left, right * self.right_scale)
        # Short steps: a drivetrain whose motors respond faster than a 20 ms tick (the SPARK
        # MAX model) makes one long integration step wrong by 15 % and more.
        steps = max(1, math.ceil(tm_diff / PHYSICS_STEP_S - 1e-9))
        for _ in range(steps):
            self.drivesim.update(tm_diff / steps)
        self.wiring.sense(self.drivesim)

        # Battery sag under the drive current.
        sim.RoboRioSim.setVInVoltage(sim.BatterySim.calculate([self.drivesim.getCurrentDraw()]))

        pose = self.drivesim.getPose()
        self.field.setRobotPose(pose)
        self.steps += 1
        if self.steps % TRAIL_EVERY == 0:
            self.trail.append(pose)
            self.trail_object.setPoses(list(self.trail))
