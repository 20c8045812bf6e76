"""SysId: the four tests from which WPILib's SysId tool fits the drivetrain's feedforward.

Each mode applies one voltage to both sides, open loop (``Drivetrain.drive_volts``), as
WPILib's ``SysIdRoutine`` does with its default configuration: the quasistatic tests ramp
it up from 0 at ``SYSID_RAMP_V_PER_S``, the dynamic tests step to ``SYSID_STEP_V``, forward
or reverse. A test stops after ``SYSID_TIMEOUT_S``, once either wheel has travelled more than
``SYSID_MAX_DISTANCE_M`` from where the test began (the dynamic step would otherwise run the
kit chassis about 20 m), or when autonomous ends (disabled, teleop), whichever comes first;
the robot then stands still until the next one. With the driver station attached to a
field's FMS a test refuses to drive at all (:class:`~autonomous.FieldGuard`). Why a test
ended, or why it never started, is on ``STATUS_KEY`` (so in the data log too).

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

import logging
from typing import TYPE_CHECKING, ClassVar

import wpilib
from wpilib.sysid import State, SysIdRoutineLog

import constants
from autonomous import FieldGuard, Mode

if TYPE_CHECKING:
    from subsystems.bcnp_link import BcnpLink
    from subsystems.drivetrain import Drivetrain

#: The routine's name in the data log: its state is the entry "sysid-test-state-drivetrain".
LOG_NAME = "drivetrain"
#: The motors as SysId lists them, left then right (the drivetrain's order).
MOTORS = ("drive-left", "drive-right")
#: SmartDashboard key: the last test's name and what it is doing, or why it ended.
STATUS_KEY = "SysId/Status"

log = logging.getLogger("autonomous")


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
        self.guard = FieldGuard(self.MODE_NAME)
        self._start: float | None = None  # when the test's first tick ran
        self._from: tuple[float, float] = (0.0, 0.0)  # the wheels' positions then
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
        self.guard.reset()

    def actuate(self, drivetrain: Drivetrain, now: float) -> bool:
        self._drove = False
        if not self._running:
            return False
        if self.guard.refuses():
            self._running = False
            self._status(f"refused: {FieldGuard.REASON}")
            return False
        positions = drivetrain.wheel_positions()
        if self._start is None:
            self._start, self._from = now, positions
            self._status("running")
        elapsed = now - self._start
        if elapsed >= constants.SYSID_TIMEOUT_S - 1e-9:
            self._end(f"ended after {constants.SYSID_TIMEOUT_S:g} s")
            return False
        # Either wheel: a side whose encoder reads nothing still has the other's.
        travelled = max(abs(now_m - from_m) for now_m, from_m in zip(positions, self._from, strict=True))
        if travelled > constants.SYSID_MAX_DISTANCE_M:
            self._end(
                f"ended at the distance cap: a wheel travelled {travelled:.2f} m "
                f"(SYSID_MAX_DISTANCE_M {constants.SYSID_MAX_DISTANCE_M:g}) in {elapsed:.2f} s"
            )
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
            self._end("stopped: autonomous ended" if self._start is not None else "not started")

    def _end(self, why: str) -> None:
        self._running = False
        self._drove = False
        self.log.recordState(State.kNone)
        self._status(why)

    def _status(self, text: str) -> None:
        text = f"{self.MODE_NAME}: {text}"
        wpilib.SmartDashboard.putString(STATUS_KEY, text)
        log.info("%s", text)


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
