"""The drivetrain's hardware seam: one interface, one module per wiring.

:class:`~subsystems.drivetrain.drivetrain.Drivetrain` decides (kinematics, limits, stop
rules, the turn-rate loop, odometry); a :class:`DrivetrainIO` carries out what it decided
and, once a tick, writes everything the decisions read from the hardware into one
:class:`DrivetrainInputs` record: wheel positions and speeds, the gyro's heading, rate and
health, the battery, the followers' outputs, each controller's answer to its configuration,
active device faults and motor currents. Nothing outside a wiring's own module reaches into
its classes (``tests/test_architecture.py`` checks it): the drivetrain, the interlocks, the
pre-flight check, SysId and the keys read the record and call this interface.

Each wiring owns its motor controllers, sensors and wheel-speed loop, wherever that loop
runs:

* ``kitbot`` (:mod:`subsystems.drivetrain.kitbot`): two PWM controllers, two DIO encoders,
  an analog gyro; the wheel-speed loop (WPILib's feedforward plus a PI controller, in volts)
  runs on the roboRIO.
* ``sparkmax`` (:mod:`subsystems.drivetrain.sparkmax`): four SPARK MAX on CAN, the
  feedback (P and I) in the controllers' own loop, the roboRIO's feedforward sent with every
  setpoint as an arbitrary feedforward in volts.
* ``talonfx`` (:mod:`subsystems.drivetrain.talonfx`): four TalonFX (Kraken X60 or Falcon
  500) and a Pigeon 2 on CAN, the whole wheel-speed loop (kS, kV, kA, kP, kI) on the
  controllers (Phoenix 6's ``VelocityVoltage``).

The drivetrain hands each side two speeds a tick: where the wheel should be now and where at
the next tick. The feedforward drives from one to the other; the feedback corrects the wheel
toward where it should be, and its integral holds the wheel's speed (so its distance) against
a weak side, a sagging battery or more mass.

``constants.DRIVETRAIN`` picks one (``BCNP_DRIVETRAIN`` overrides it): :func:`make_io`
imports only that wiring's module, so a kitbot never loads REVLib or Phoenix 6. The
simulator's side of each wiring is ``sim/<wiring>.py``.
"""

from __future__ import annotations

import abc
import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import wpilib
from wpimath.controller import SimpleMotorFeedforwardMeters
from wpimath.geometry import Rotation2d

import constants

__all__ = [
    "ClosedLoopIO",
    "ConfigResult",
    "DrivetrainIO",
    "DrivetrainInputs",
    "MotorWatchdog",
    "WIRINGS",
    "make_io",
    "wheel_feedforward",
    "wheel_heading",
]


class Stoppable(Protocol):
    """A motor controller as motor safety stops it (WPILib's, REVLib's and Phoenix 6's all are)."""

    def stopMotor(self) -> None: ...


class ConfigResult(NamedTuple):
    """One controller's answer to the configuration the wiring applied at start."""

    #: Which controller, as a team finds it: "SPARK MAX 4", "TalonFX 2".
    device: str
    #: The vendor library's status, by its own name ("kOk", "kTimeout"; "OK", "TX_FAILED").
    status: str
    ok: bool


class VelocityFilter(NamedTuple):
    """How a wiring measures its wheels' speed, as it configured it."""

    #: What measures it, as a team finds it in its vendor's tool ("SPARK MAX: 16 ms, 4 samples").
    what: str
    #: The delay that measurement adds to the speed against the position (s), as WPILib's SysId
    #: counts it; what the pre-flight check measures is judged against it.
    delay_s: float


@dataclass
class DrivetrainInputs:
    """Everything the robot's decisions read from the drivetrain's hardware, read once per tick.

    Metres and m/s, forward positive on both sides; radians counter-clockwise."""

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
    #: The roboRIO's input voltage: what the loops drive from and the brownout is judged on.
    battery_v: float = 12.0
    #: Each side's leader's and follower's applied outputs (-1..1), read together; ``None`` for a
    #: wiring without followers.
    followers: tuple[tuple[float, float], tuple[float, float]] | None = None
    #: How each follower's output relates to its leader's, as configured: +1 the same, -1 opposite.
    follower_relations: tuple[int, int] = (1, 1)
    #: Each controller's answer to its configuration at start; ``None``: the wiring configures none.
    config_results: tuple[ConfigResult, ...] | None = None
    #: The controllers' active faults, "device: fault" (empty when none, or none reported).
    faults: tuple[str, ...] = ()
    #: Each side's motor current (A, the leader's and its follower's), ``None`` where not measured.
    currents_a: tuple[float, float] | None = None


class DrivetrainIO(abc.ABC):
    """One wiring of a differential drivetrain."""

    #: The name ``constants.DRIVETRAIN`` and ``BCNP_DRIVETRAIN`` use for it.
    wiring = ""

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
        """Read the hardware into ``inputs``."""

    @abc.abstractmethod
    def outputs(self) -> tuple[float, float]:
        """What the left and right leaders are driven at now, as a fraction of full output (-1..1)."""

    def applied_volts(self) -> tuple[float, float]:
        """The voltage the left and right leaders apply now: their output times the battery, unless
        the controller measures it itself."""
        battery = wpilib.RobotController.getBatteryVoltage()
        left, right = self.outputs()
        return left * battery, right * battery

    @abc.abstractmethod
    def velocity_filter(self) -> VelocityFilter:
        """How the wheels' speed is measured, as configured."""

    @abc.abstractmethod
    def watchdogs(self) -> Sequence[wpilib.MotorSafety]:
        """The motor-safety watchdogs: each stops its motors when not fed for 100 ms."""

    def close(self) -> None:  # noqa: B027 (most wirings' devices need nothing at the end)
        """The robot program ends: release what must be released before the process exits."""


class WheelFeedback:
    """One side's feedback on the roboRIO, in volts: P on the speed error now (``kp``, V per m/s;
    0 where the controller runs it), and I on the distance (``ki``, V per metre): where the wheel
    should be, the speeds it was asked to hold summed tick by tick, against where its encoder
    says it is, the term bounded to ``limit_v``.

    Why on the distance: a position reaches the roboRIO without the velocity measurement's filter
    and delay (a SPARK MAX at REV's defaults reports its speed 81.5 ms late, a NEO's 112 ms). The
    integral of a late speed error turns the lateness into distance, the speed times the delay at
    each change of speed; the distance itself carries no such error, so the wheel ends where it
    should."""

    __slots__ = ("_anchored", "_target", "error_m", "kp", "ki", "limit_m", "period")

    def __init__(self, kp: float, ki: float, limit_v: float, period: float) -> None:
        self.kp, self.ki, self.period = kp, ki, period
        self.limit_m = limit_v / ki if ki else 0.0
        #: How far the wheel was behind where it should be at the last call (m; bounded).
        self.error_m = 0.0
        self._target = 0.0  # where the wheel should be now (m)
        self._anchored = False

    @property
    def integral_v(self) -> float:
        """The distance term's output at the last call (V)."""
        return self.ki * self.error_m

    def reset(self) -> None:
        """No integral: the next call starts where the wheel is."""
        self.error_m = 0.0
        self._anchored = False

    def hold(self) -> None:
        """The outputs are off for a while (a brownout): the next call starts where the wheel is
        then, as far behind it as the wheel was when they went off."""
        self._anchored = False

    def calculate(self, now_mps: float, next_mps: float, speed_mps: float, position_m: float) -> float:
        """The feedback (V) for a wheel that should run at ``now_mps`` now and ``next_mps`` a tick
        from now, read at ``speed_mps`` and ``position_m``."""
        if not self._anchored:
            self._anchored = True
            self._target = position_m + self.error_m
        error = self._target - position_m
        limit = self.limit_m
        if error > limit:  # bounded: a wheel held back is not owed more than the limit
            error = limit
            self._target = position_m + limit
        elif error < -limit:
            error = -limit
            self._target = position_m - limit
        self.error_m = error
        self._target += (now_mps + next_mps) * 0.5 * self.period
        return self.kp * (now_mps - speed_mps) + self.ki * error


def wheel_feedback(kp: float) -> WheelFeedback:
    """A side's :class:`WheelFeedback`: P ``kp`` (V per m/s), the distance term's
    ``WHEEL_KI_V_PER_M`` bounded to ``WHEEL_I_LIMIT_V``, at the loop's period."""
    return WheelFeedback(kp, constants.WHEEL_KI_V_PER_M, constants.WHEEL_I_LIMIT_V, constants.LOOP_PERIOD_S)


class ClosedLoopIO(DrivetrainIO):
    """A wiring whose wheel loops take the roboRIO's distance term (a :class:`WheelFeedback` a side)
    and whose motors one :class:`MotorWatchdog` stops: what a stop, a reset of the loops and a
    brownout's hold do is the same for every such wiring; each says how its motors go neutral."""

    watchdog: MotorWatchdog
    left_feedback: WheelFeedback
    right_feedback: WheelFeedback
    #: The motors may be running: the next stop() sets them neutral (a wiring sets it when it drives).
    _driven = True

    @abc.abstractmethod
    def _neutral(self) -> None:
        """Both sides' motors neutral now (their followers follow)."""

    def stop(self) -> None:
        # Fed while stopped too, or an idle robot reports "Output not updated often enough".
        self.watchdog.feed()
        if self._driven:  # otherwise stopped since: the outputs are still neutral
            self._neutral()
            self.reset_loops()
            self._driven = False

    def reset_loops(self) -> None:
        self.left_feedback.reset()
        self.right_feedback.reset()

    def hold(self) -> None:
        self.watchdog.feed()
        self.left_feedback.hold()
        self.right_feedback.hold()

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


class MotorWatchdog(wpilib.MotorSafety):
    """WPILib motor safety for motor controllers that are not watchdogs themselves:
    not fed for ``timeout`` seconds, it stops ``motors`` (checked by WPILib each time
    driver-station data arrives, every 20 ms). It holds the motors, never the wiring that
    owns it: WPILib keeps every watchdog, and a wiring it held would outlive its robot."""

    def __init__(self, motors: Sequence[Stoppable], description: str, timeout: float) -> None:
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


#: Each wiring's name and the class that implements it ("module:Class"), imported when built.
WIRINGS = {
    "kitbot": "subsystems.drivetrain.kitbot:KitbotIO",
    "sparkmax": "subsystems.drivetrain.sparkmax:SparkMaxIO",
    "talonfx": "subsystems.drivetrain.talonfx:TalonFXIO",
}


def make_io(wiring: str) -> DrivetrainIO:
    """The IO for ``wiring`` (a name in :data:`WIRINGS`), its module imported now."""
    try:
        where = WIRINGS[wiring]
    except KeyError:
        raise ValueError(f"unknown drivetrain wiring {wiring!r}: one of {', '.join(WIRINGS)}") from None
    module, name = where.split(":")
    io_class: type[DrivetrainIO] = getattr(importlib.import_module(module), name)
    return io_class()


def wheel_heading(left_m: float, right_m: float, track_width_m: float) -> Rotation2d:
    """The heading the wheels imply since they were zeroed: the right side ahead of the left turns left."""
    return Rotation2d((right_m - left_m) / track_width_m if math.isfinite(right_m - left_m) else 0.0)
