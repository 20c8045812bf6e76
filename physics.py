"""Simulation physics (pyfrc): the kit-of-parts drivetrain driven by the robot's motor outputs.

Each step: motor outputs times battery voltage → ``DifferentialDrivetrainSim`` →
encoder and gyro sims (what the robot code reads back) and the Field2d pose
(``/SmartDashboard/Field/Robot`` on NetworkTables, the sim GUI's Field view).
The robot starts in open floor at ``START_POSE``; the Field view also shows
the last minute of where it drove (``/SmartDashboard/Field/Trail``, drawn as
a line by the shipped ``simgui.json``).

With ``BCNP_SIM_AUTONOMOUS=1`` the simulated driver station starts in
autonomous, enabled, so a headless ``robotpy sim --nogui`` can be driven by a
host straight away.
"""

from __future__ import annotations

import contextlib
import os
import typing
from collections import deque
from pathlib import Path

import ntcore
import wpilib
import wpilib.simulation as sim
from pyfrc.physics.core import PhysicsInterface
from wpimath.geometry import Pose2d, Rotation2d

import constants

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


class PhysicsEngine:
    def __init__(self, physics_controller: PhysicsInterface, robot: BcnpRobot) -> None:
        self.physics_controller = physics_controller
        drivetrain = robot.drivetrain
        # PWMMotorController.get() is the output before inversion: forward is
        # positive on both sides, which is what the drivetrain sim expects.
        self.left_motor = drivetrain.left_motor
        self.right_motor = drivetrain.right_motor
        self.left_encoder = sim.EncoderSim(drivetrain.left_encoder)
        self.right_encoder = sim.EncoderSim(drivetrain.right_encoder)
        self.gyro = sim.AnalogGyroSim(drivetrain.gyro)
        kitbot = sim.DifferentialDrivetrainSim
        self.drivesim = kitbot.createKitbotSim(
            kitbot.KitbotMotor.DualCIMPerSide,
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

        _move_nt_persistence_out_of_the_project()

        if os.environ.get(constants.SIM_AUTONOMOUS_ENV) == "1":
            sim.DriverStationSim.setDsAttached(True)
            sim.DriverStationSim.setAutonomous(True)
            sim.DriverStationSim.setEnabled(True)
            sim.DriverStationSim.notifyNewData()

    def update_sim(self, now: float, tm_diff: float) -> None:
        volts = wpilib.RobotController.getInputVoltage()
        self.drivesim.setInputs(self.left_motor.get() * volts, self.right_motor.get() * volts)
        self.drivesim.update(tm_diff)

        self.left_encoder.setDistance(self.drivesim.getLeftPosition())
        self.left_encoder.setRate(self.drivesim.getLeftVelocity())
        # The HAL encoder sim ignores setReverseDirection(): write forward-positive.
        self.right_encoder.setDistance(self.drivesim.getRightPosition())
        self.right_encoder.setRate(self.drivesim.getRightVelocity())
        # AnalogGyro counts clockwise; the sim's heading is counter-clockwise.
        self.gyro.setAngle(-self.drivesim.getHeading().degrees())

        # Battery sag under the drive current.
        sim.RoboRioSim.setVInVoltage(sim.BatterySim.calculate([self.drivesim.getCurrentDraw()]))

        pose = self.drivesim.getPose()
        self.field.setRobotPose(pose)
        self.steps += 1
        if self.steps % TRAIL_EVERY == 0:
            self.trail.append(pose)
            self.trail_object.setPoses(list(self.trail))
