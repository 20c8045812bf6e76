"""SysId: the four tests from which WPILib's SysId tool fits the drivetrain's feedforward.

Each mode applies one voltage to both sides, open loop (``Drivetrain.drive_volts``), as
WPILib's ``SysIdRoutine`` does with its default configuration: the quasistatic tests ramp
it up from 0 at ``SYSID_RAMP_V_PER_S``, the dynamic tests step to ``SYSID_STEP_V``, forward
or reverse. A test stops after ``SYSID_TIMEOUT_S``, or when autonomous ends (disabled,
teleop), whichever comes first; the robot then stands still until the next one.

Each tick of a test the data log gets, through WPILib's ``SysIdRoutineLog`` (routine
``LOG_NAME``), the test's state and, for the motors "drive-left" and "drive-right", the
voltage the wiring drives them at (read back: its output times the battery's voltage, so
a sagging battery or a controller's current limit shows), the wheel's distance (m) and its
speed (m/s) as the drivetrain read them at the start of that tick; when the test ends,
the state "none". SysId opens the .wpilog as it is (docs/robot.md, "SysId").

The queue is left alone: a host's commands are queued and reported but never run, as in
"Do nothing".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import wpilib
from wpilib.sysid import State, SysIdRoutineLog

import constants
from autonomous import Mode

if TYPE_CHECKING:
    from subsystems.bcnp_link import BcnpLink
    from subsystems.drivetrain import Drivetrain

#: The routine's name in the data log: its state is the entry "sysid-test-state-drivetrain".
LOG_NAME = "drivetrain"
#: The motors as SysId lists them, left then right (the drivetrain's order).
MOTORS = ("drive-left", "drive-right")


class SysIdTest(Mode):
    """One SysId test: ``STATE`` names it in the log; quasistatic (a ramp) or dynamic (a step),
    in ``DIRECTION`` (+1 forward, -1 reverse)."""

    STATE: ClassVar[State]
    QUASISTATIC: ClassVar[bool]
    DIRECTION: ClassVar[float]
    runs_queue = False

    def __init__(self, link: BcnpLink) -> None:
        super().__init__(link)
        self.log = SysIdRoutineLog(LOG_NAME)
        self._start: float | None = None  # when the test's first tick ran
        self._running = False
        self._drove = False  # this tick

    def volts(self, elapsed: float) -> float:
        """The voltage ``elapsed`` seconds into the test."""
        if self.QUASISTATIC:
            return self.DIRECTION * constants.SYSID_RAMP_V_PER_S * elapsed
        return self.DIRECTION * constants.SYSID_STEP_V

    def on_enable(self) -> None:
        self._start = None
        self._running = True

    def actuate(self, drivetrain: Drivetrain, now: float) -> bool:
        self._drove = False
        if not self._running:
            return False
        if self._start is None:
            self._start = now
        elapsed = now - self._start
        if elapsed >= constants.SYSID_TIMEOUT_S - 1e-9:
            self._end()
            return False
        volts = self.volts(elapsed)
        drivetrain.drive_volts(volts, volts)
        self._drove = True
        return True

    def record(self, drivetrain: Drivetrain, now: float) -> None:
        if not self._drove:
            return
        battery = wpilib.RobotController.getBatteryVoltage()
        outputs = drivetrain.io.outputs()
        log = self.log
        for name, output, position, velocity in zip(
            MOTORS, outputs, drivetrain.wheel_positions(), drivetrain.wheel_velocities(), strict=True
        ):
            log.motor(name).voltage(output * battery).position(position).velocity(velocity)
        log.recordState(self.STATE)

    def on_disable(self) -> None:
        if self._running:
            self._end()

    def _end(self) -> None:
        self._running = False
        self._drove = False
        self.log.recordState(State.kNone)


class QuasistaticForward(SysIdTest):
    MODE_NAME = "SysId: quasistatic forward"
    STATE = State.kQuasistaticForward
    QUASISTATIC = True
    DIRECTION = 1.0


class QuasistaticReverse(SysIdTest):
    MODE_NAME = "SysId: quasistatic reverse"
    STATE = State.kQuasistaticReverse
    QUASISTATIC = True
    DIRECTION = -1.0


class DynamicForward(SysIdTest):
    MODE_NAME = "SysId: dynamic forward"
    STATE = State.kDynamicForward
    QUASISTATIC = False
    DIRECTION = 1.0


class DynamicReverse(SysIdTest):
    MODE_NAME = "SysId: dynamic reverse"
    STATE = State.kDynamicReverse
    QUASISTATIC = False
    DIRECTION = -1.0
