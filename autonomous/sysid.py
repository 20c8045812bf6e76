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

"SysId: all four tests" (:class:`AllFourTests`) runs the four in one enable, the robot
standing still ``REST_S`` between them, so that one data log holds everything SysId fits
from: the one way to get there where nothing re-enables autonomous between tests (a headless
simulator, ``BCNP_SIM_AUTO_MODE``), and one selection instead of four in a pit.

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
    from subsystems.drivetrain.drivetrain import Drivetrain
    from subsystems.link.bcnp_link import BcnpLink

#: The routine's name in the data log: its state is the entry "sysid-test-state-drivetrain".
LOG_NAME = "drivetrain"
#: The motors as SysId lists them, left then right (the drivetrain's order).
MOTORS = ("drive-left", "drive-right")
#: SmartDashboard key: the last test's name and what it is doing, or why it ended.
STATUS_KEY = "SysId/Status"
#: "SysId: all four tests": how long the robot stands still between two tests (s). Braked from
#: the dynamic step's 2.2 m/s, the kit chassis is at rest within a second.
REST_S = 1.5

log = logging.getLogger("autonomous")


class SysIdTest(Mode):
    """One SysId test: ``STATE`` names it in the log; quasistatic (a ramp) or dynamic (a step),
    in ``DIRECTION`` (+1 forward, -1 reverse)."""

    STATE: ClassVar[State]
    QUASISTATIC: ClassVar[bool]
    DIRECTION: ClassVar[float]
    runs_queue = False

    def __init__(self, link: BcnpLink, guard: FieldGuard | None = None) -> None:
        super().__init__(link)
        self.log = SysIdRoutineLog(LOG_NAME)
        #: Its own, or that of the mode that runs it (:class:`AllFourTests`).
        self.guard = guard if guard is not None else FieldGuard(self.MODE_NAME)
        self._start: float | None = None  # when the test's first tick ran
        self._from: tuple[float, float] = (0.0, 0.0)  # the wheels' positions then
        self._running = False
        self._drove = False  # this tick
        #: The field's FMS was connected: the test refused to drive (this enable).
        self.refused = False

    def volts(self, elapsed: float) -> float:
        """The voltage ``elapsed`` seconds into the test."""
        if self.QUASISTATIC:
            return self.DIRECTION * constants.SYSID_RAMP_V_PER_S * elapsed
        return self.DIRECTION * constants.SYSID_STEP_V

    def on_enable(self) -> None:
        self._start = None
        self._running = True
        self.refused = False
        self.guard.reset()

    def actuate(self, drivetrain: Drivetrain, now: float) -> bool:
        self._drove = False
        if not self._running:
            return False
        if self.guard.refuses():
            self._running = False
            self.refused = True
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
        log = self.log
        for name, volts, position, velocity in zip(
            MOTORS,
            drivetrain.io.applied_volts(),
            drivetrain.wheel_positions(),
            drivetrain.wheel_velocities(),
            strict=True,
        ):
            log.motor(name).voltage(volts).position(position).velocity(velocity)
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
        _status(self.MODE_NAME, text)


def _status(mode: str, text: str) -> None:
    text = f"{mode}: {text}"
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


class AllFourTests(Mode):
    """Quasistatic forward and reverse, then dynamic forward and reverse, in one enable; the
    robot stands still ``REST_S`` after each. Every test runs as its own mode does (its
    voltages, timeout, distance cap, log entries and ``STATUS_KEY`` lines); forward then
    reverse brings the robot back near where it began. A refusal (the field's FMS) ends the
    run; so does the end of autonomous, and the next enable starts again from the first test."""

    MODE_NAME = "SysId: all four tests"
    runs_queue = False

    def __init__(self, link: BcnpLink) -> None:
        super().__init__(link)
        self.guard = FieldGuard(self.MODE_NAME)
        order = (QuasistaticForward, QuasistaticReverse, DynamicForward, DynamicReverse)
        self.tests: tuple[SysIdTest, ...] = tuple(test(link, self.guard) for test in order)
        self._index = 0  # the test running, or the next one while resting
        self._rest_from: float | None = None  # when the last test ended (resting)
        self._running = False

    def on_enable(self) -> None:
        self._index = 0
        self._rest_from = None
        self._running = True
        self.tests[0].on_enable()

    def actuate(self, drivetrain: Drivetrain, now: float) -> bool:
        if not self._running:
            return False
        test = self.tests[self._index]
        if self._rest_from is not None:
            if now - self._rest_from < REST_S - 1e-9:
                return False  # robot.py stops the drivetrain
            self._rest_from = None
            test.on_enable()
        if test.actuate(drivetrain, now):
            return True
        # It ended this tick (robot.py stops the drivetrain), or refused to start.
        self._index += 1
        if test.refused:
            self._running = False
        elif self._index == len(self.tests):
            self._running = False
            _status(self.MODE_NAME, "done: the four tests ran")
        else:
            self._rest_from = now
        return False

    def record(self, drivetrain: Drivetrain, now: float) -> None:
        if self._running:
            self.tests[self._index].record(drivetrain, now)

    def on_disable(self) -> None:
        if not self._running:
            return
        self._running = False
        if self._rest_from is None:
            self.tests[self._index].on_disable()  # says why it stopped
        else:
            _status(self.MODE_NAME, f"stopped: autonomous ended after {self._index} of the four tests")
