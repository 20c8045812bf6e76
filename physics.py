"""Simulation physics (pyfrc): the drivetrain driven by the robot's motor outputs, for every wiring.

Each step: the wiring's motor outputs times battery voltage →
``DifferentialDrivetrainSim`` (one model, the kit-of-parts chassis with the
wiring's motors) → the wiring's sensor sims, so the robot code reads back what
the physics did, and the Field2d pose (``/SmartDashboard/Field/Robot`` on
NetworkTables, the sim GUI's Field view). Each wiring of
``subsystems/drivetrain_io.py`` has its counterpart here: :class:`KitbotSim`
(PWM outputs, HAL encoder and analog gyro sims) and :class:`SparkMaxSim`
(REVLib's SPARK MAX simulation, which runs the controllers' own velocity
loop, and the ADIS16470 IMU's sim). Both wirings drive the same chassis: two
motors per side (CIMs, or NEOs with ``SPARKMAX_BRUSHLESS``) through
``GEAR_RATIO`` to ``WHEEL_DIAMETER_M`` wheels, WPILib's kitbot mass and
moment of inertia. The robot starts in open floor at ``START_POSE``; the Field
view also shows the last minute of where it drove
(``/SmartDashboard/Field/Trail``, drawn as a line by the shipped ``simgui.json``).

A headless ``robotpy sim --nogui`` (no button to press) starts its simulated
driver station in autonomous, enabled, so a host can drive it straight away;
``BCNP_SIM_AUTONOMOUS=0`` keeps it disabled, ``=1`` enables the GUI sim too.

A real drivetrain is never the model. :class:`Disturbances` makes this one
differ, each from an environment variable (``ENV``), to rehearse the robot's
loops against: a weak side, scrub, battery sag, more mass, rolling friction, a
gyro that stops answering. The sensors report what the simulated chassis
really does (the encoders its wheels, the gyro its heading), never what was
commanded.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import typing
from collections import deque
from pathlib import Path
from typing import NamedTuple

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
#: The longest step of the drivetrain model's integration (seconds; the SPARK MAX's is 1 ms).
PHYSICS_STEP_S = 0.005


def _env_number(name: str, default: float, low: float, high: float, *, low_open: bool = False) -> float:
    """A number from the environment variable ``name`` (``default`` when unset or empty), within
    [low, high] ((low, high] with ``low_open``); anything else is a ValueError naming the variable."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    bounds = f"{'(' if low_open else '['}{low:g}, {high:g}]"
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a number in {bounds}") from None
    if not (low < value if low_open else low <= value) or not value <= high:
        raise ValueError(f"{name}={text!r}: expected a number in {bounds}")
    return value


#: Each disturbance's environment variable.
DISTURBANCE_ENV = {
    "right_scale": "BCNP_SIM_RIGHT_SCALE",
    "scrub": "BCNP_SIM_SCRUB",
    "battery_v": "BCNP_SIM_BATTERY_V",
    "battery_ohms": "BCNP_SIM_BATTERY_OHMS",
    "mass_scale": "BCNP_SIM_MASS",
    "friction_v": "BCNP_SIM_FRICTION_V",
    "gyro_fail_s": "BCNP_SIM_GYRO_FAIL_S",
}


class Disturbances(NamedTuple):
    """How the simulated drivetrain differs from the model the robot's constants describe.
    The defaults are the model itself; :meth:`from_env` reads each from its variable
    (``DISTURBANCE_ENV``). (A NamedTuple: pyfrc loads this file outside ``sys.modules``,
    where a dataclass cannot be made.)"""

    #: The right side's share of the voltage its wiring applies (a dragging gearbox, a tired motor).
    right_scale: float = 1.0
    #: The chassis turns as if its track were this much wider (wheels scrubbing on carpet): the
    #: wheel speeds for a turn rate give less than it.
    scrub: float = 1.0
    #: A battery held at this many volts whatever the load; None: WPILib's BatterySim (12 V
    #: nominal) sags under the drive's current through ``battery_ohms``.
    battery_v: float | None = None
    #: The battery's internal resistance (WPILib's BatterySim uses 0.02 ohm; a tired one 0.05-0.1).
    battery_ohms: float = 0.02
    #: Mass and moment of inertia times this (bumpers, a mechanism, a game piece).
    mass_scale: float = 1.0
    #: Rolling friction per side as a voltage the motors must overcome (a drivetrain's kS).
    friction_v: float = 0.0
    #: The gyro stops answering (its reading freezes) this many seconds of simulated time
    #: after the simulation starts; None: never.
    gyro_fail_s: float | None = None

    @classmethod
    def from_env(cls) -> Disturbances:
        env = DISTURBANCE_ENV
        battery = _env_number(env["battery_v"], math.nan, 4.5, 13.0)
        gyro_fail = _env_number(env["gyro_fail_s"], math.nan, 0.0, 1e6)
        return cls(
            right_scale=_env_number(env["right_scale"], 1.0, 0.0, 1.0, low_open=True),
            scrub=_env_number(env["scrub"], 1.0, 1.0, 2.0),
            battery_v=None if math.isnan(battery) else battery,
            battery_ohms=_env_number(env["battery_ohms"], 0.02, 0.0, 1.0),
            mass_scale=_env_number(env["mass_scale"], 1.0, 0.5, 4.0),
            friction_v=_env_number(env["friction_v"], 0.0, 0.0, 3.0),
            gyro_fail_s=None if math.isnan(gyro_fail) else gyro_fail,
        )


#: The environment variable of the weak side (kept for the tools that name it).
RIGHT_SCALE_ENV = DISTURBANCE_ENV["right_scale"]


def right_scale() -> float:
    """The weak right side's factor from ``BCNP_SIM_RIGHT_SCALE`` (0 < f <= 1; default 1)."""
    return Disturbances.from_env().right_scale


#: WPILib's kit-of-parts chassis (DifferentialDrivetrainSim.createKitbotSim): 60 lb, and a
#: moment of inertia of the battery (12.5 lb at 10 in) and the gearboxes (2 x 4.8 lb at half
#: the 26 in track) about the centre.
_LB, _INCH = 0.45359237, 0.0254
KITBOT_MASS_KG = 60 * _LB
KITBOT_MOI_KG_M2 = 12.5 * _LB * (10 * _INCH) ** 2 + (2.8 + 2.0) * _LB * 2 * (26 * _INCH / 2) ** 2
#: Below this wheel speed (m/s) a side is at rest for the friction model: friction holds it
#: against up to ``friction_v``.
_AT_REST_MPS = 0.02


def drive_motors() -> DCMotor:
    """One side's motors: two CIMs (or NEOs with ``SPARKMAX_BRUSHLESS`` on the SPARK MAX wiring)."""
    if constants.drivetrain_wiring() == "sparkmax" and constants.SPARKMAX_BRUSHLESS:
        return DCMotor.NEO(2)
    return DCMotor.CIM(2)


def make_drivesim(motors: DCMotor, disturbances: Disturbances) -> sim.DifferentialDrivetrainSim:
    """The chassis as simulated: the kit-of-parts drivetrain, heavier by ``mass_scale``, turning
    as if its track were ``scrub`` times wider."""
    return sim.DifferentialDrivetrainSim(
        motors,
        constants.GEAR_RATIO,
        KITBOT_MOI_KG_M2 * disturbances.mass_scale,
        KITBOT_MASS_KG * disturbances.mass_scale,
        constants.WHEEL_DIAMETER_M / 2,
        constants.TRACK_WIDTH_M * disturbances.scrub,
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


#: The simulator's NetworkTables server listens on this port instead of 5810 (NT3's 1735 is
#: closed then), so several simulated robots each serve their own keys.
NT_PORT_ENV = "BCNP_SIM_NT_PORT"


def _move_nt_server(port: str) -> None:
    if not port.strip():
        return
    inst = ntcore.NetworkTableInstance.getDefault()
    if not inst.getNetworkMode() & ntcore.NetworkTableInstance.NetworkMode.kNetModeServer:
        return  # pyfrc's local mode: no server to move
    inst.stopServer()
    inst.startServer(str(SIM_DIR / "networktables.json"), "", 0, int(port))


#: The simulator starts with this autonomous mode chosen (its name on the dashboard's chooser,
#: "Path: square.csv"), as a driver would pick it before a match; unset: the default mode.
AUTO_MODE_ENV = "BCNP_SIM_AUTO_MODE"


def _select_autonomous_mode(name: str) -> ntcore.StringPublisher | None:
    """Picks ``name`` on the "Autonomous Mode" chooser, as a dashboard does, before the first
    tick; the publisher is kept, so the choice stays."""
    if not name.strip():
        return None
    topic = ntcore.NetworkTableInstance.getDefault().getStringTopic(
        "/SmartDashboard/Autonomous Mode/selected"
    )
    publisher = topic.publish()
    publisher.set(name.strip())
    wpilib.SmartDashboard.updateValues()  # the chooser takes it now, before autonomous starts
    return publisher


class GyroSim:
    """The robot's gyro as the physics turns it: an analog gyro counts clockwise in degrees, the
    ADIS16470 IMU counter-clockwise. From ``fail_s`` seconds of simulated time on (None: never),
    it stops answering: its reading freezes where it was."""

    def __init__(self, gyro: object, fail_s: float | None, track_m: float) -> None:
        self.fail_s = fail_s
        self.track_m = track_m
        self._analog: sim.AnalogGyroSim | None = None
        self._imu: sim.ADIS16470_IMUSim | None = None
        if isinstance(gyro, wpilib.AnalogGyro):
            self._analog = sim.AnalogGyroSim(gyro)
        elif isinstance(gyro, wpilib.ADIS16470_IMU):
            self._imu = sim.ADIS16470_IMUSim(gyro)
        elif gyro is not None:
            raise TypeError(f"no simulation for a {type(gyro).__name__} gyro")

    def sense(self, drivesim: sim.DifferentialDrivetrainSim, elapsed: float) -> None:
        if self.fail_s is not None and elapsed >= self.fail_s:
            return  # not answering: the last reading stays
        degrees = drivesim.getHeading().degrees()
        # The chassis' turn rate: the wheels' difference over the track it really turns on.
        rate = math.degrees((drivesim.getRightVelocity() - drivesim.getLeftVelocity()) / self.track_m)
        if self._analog is not None:
            self._analog.setAngle(-degrees)
            self._analog.setRate(-rate)
        elif self._imu is not None:
            self._imu.setGyroAngleZ(degrees)
            self._imu.setGyroRateZ(rate)


class KitbotSim:
    """The kitbot's PWM outputs in, its HAL encoder sims out (the gyro: :class:`GyroSim`)."""

    #: The physics' step: the PWM outputs hold through the tick.
    step_s = PHYSICS_STEP_S

    def __init__(self, io: KitbotIO) -> None:
        # PWMMotorController.get() is the output before inversion: forward is
        # positive on both sides, which is what the drivetrain sim expects.
        self.left_motor = io.left_motor
        self.right_motor = io.right_motor
        self.left_encoder = sim.EncoderSim(io.left_encoder)
        self.right_encoder = sim.EncoderSim(io.right_encoder)

    def volts(self, drivesim: sim.DifferentialDrivetrainSim, vbus: float, dt: float) -> tuple[float, float]:
        return self.left_motor.get() * vbus, self.right_motor.get() * vbus

    def sense(self, drivesim: sim.DifferentialDrivetrainSim) -> None:
        self.left_encoder.setDistance(drivesim.getLeftPosition())
        self.left_encoder.setRate(drivesim.getLeftVelocity())
        # The HAL encoder sim ignores setReverseDirection(): write forward-positive.
        self.right_encoder.setDistance(drivesim.getRightPosition())
        self.right_encoder.setRate(drivesim.getRightVelocity())


class SparkMaxSim:
    """The SPARK MAX leaders through REVLib's simulation: each step they run their own
    velocity loop on the wheel speed the physics last gave them (their setpoint, gains and
    the roboRIO's feedforward as configured), and their applied output drives the physics;
    their encoders then read the physics' wheel positions and speeds. A follower only
    mirrors its leader: the drivetrain model has two motors per side."""

    #: The controllers' loop period: REVLib's simulation runs their loop once per ``iterate``.
    step_s = 0.001

    def __init__(self, io: SparkMaxIO, motors: DCMotor) -> None:
        import rev  # REVLib: only a SPARK MAX robot loads it (a kitbot starts without it)

        # REVLib's simulation keeps a reference to the motor model, not a copy: it must outlive them.
        self.motors = motors
        self.left = rev.SparkMaxSim(io.left_leader, motors)
        self.right = rev.SparkMaxSim(io.right_leader, motors)
        self.left_encoder = self.left.getRelativeEncoderSim()
        self.right_encoder = self.right.getRelativeEncoderSim()

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


def wiring_sim(io: DrivetrainIO, motors: DCMotor) -> KitbotSim | SparkMaxSim:
    """The simulation side of the robot's wiring."""
    if isinstance(io, KitbotIO):
        return KitbotSim(io)
    if isinstance(io, SparkMaxIO):
        return SparkMaxSim(io, motors)
    raise TypeError(f"no simulation for the {type(io).__name__} wiring")


class PhysicsEngine:
    def __init__(self, physics_controller: PhysicsInterface, robot: BcnpRobot) -> None:
        self.physics_controller = physics_controller
        self.disturbances = Disturbances.from_env()
        motors = drive_motors()
        self.wiring = wiring_sim(robot.drivetrain.io, motors)
        self.gyro = GyroSim(
            robot.drivetrain.io.gyro,
            self.disturbances.gyro_fail_s,
            constants.TRACK_WIDTH_M * self.disturbances.scrub,
        )
        self.drivesim = make_drivesim(motors, self.disturbances)
        self.drivesim.setPose(START_POSE)
        self.trail: deque[Pose2d] = deque([START_POSE], maxlen=TRAIL_LENGTH)
        field = physics_controller.field
        assert field is not None  # pyfrc makes the Field2d before the engine
        self.field = field
        self.trail_object = field.getObject("Trail")
        self.steps = 0
        self.elapsed = 0.0
        self.right_scale = self.disturbances.right_scale

        _move_nt_persistence_out_of_the_project()
        _move_nt_server(os.environ.get(NT_PORT_ENV, ""))

        self._auto_mode = _select_autonomous_mode(os.environ.get(AUTO_MODE_ENV, ""))
        if constants.sim_starts_autonomous(os.environ, sys.argv):
            sim.DriverStationSim.setDsAttached(True)
            sim.DriverStationSim.setAutonomous(True)
            sim.DriverStationSim.setEnabled(True)
            sim.DriverStationSim.notifyNewData()

    def update_sim(self, now: float, tm_diff: float) -> None:
        disturbances = self.disturbances
        vbus = wpilib.RobotController.getInputVoltage()
        friction = disturbances.friction_v
        # Short steps: a drivetrain whose motors respond faster than a 20 ms tick makes one long
        # integration step wrong by 15 % and more; the SPARK MAX runs its loop every millisecond.
        step = self.wiring.step_s
        steps = max(1, math.ceil(tm_diff / step - 1e-9))
        dt = tm_diff / steps
        drivesim = self.drivesim
        wiring = self.wiring
        for _ in range(steps):
            left, right = wiring.volts(drivesim, vbus, dt)
            drivesim.setInputs(
                after_friction(left, drivesim.getLeftVelocity(), friction),
                after_friction(right * disturbances.right_scale, drivesim.getRightVelocity(), friction),
            )
            drivesim.update(dt)
        self.elapsed += tm_diff
        self.wiring.sense(drivesim)
        self.gyro.sense(drivesim, self.elapsed)

        # The bus voltage: held where a disturbance sets it, else sagging under the drive current.
        if disturbances.battery_v is not None:
            sim.RoboRioSim.setVInVoltage(disturbances.battery_v)
        else:
            sim.RoboRioSim.setVInVoltage(
                sim.BatterySim.calculate(12.0, disturbances.battery_ohms, [drivesim.getCurrentDraw()])
            )

        pose = drivesim.getPose()
        self.field.setRobotPose(pose)
        self.steps += 1
        if self.steps % TRAIL_EVERY == 0:
            self.trail.append(pose)
            self.trail_object.setPoses(list(self.trail))
