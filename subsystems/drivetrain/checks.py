"""Interlocks against wrong wiring and failing sensors: numbers in, decisions out.

Nothing here touches hardware or WPILib; :class:`~subsystems.drivetrain.drivetrain.Drivetrain`
feeds each check what it read this tick and acts on the answer.

* :class:`GyroAgreement`: whether the gyro's turn agrees with the wheels'. A gyro
  mounted upside down, on the wrong axis, or reporting a turn that is not there
  makes the turn-rate loop drive the robot round (a reversed gyro is positive
  feedback); the wheels, for all their scrub, always turn the same way as the
  chassis and by no less than it does.
* :class:`SideCheck`: whether a side's measured speed runs against what it is
  driven toward (a motor turning backward, an encoder counting backward). The
  wheel-speed loop then drives that side ever harder the wrong way.
* :class:`SpinCheck`: whether the chassis spins where the wheels say it goes straight (a
  side driven backward with its encoder, as a wrong SPARK MAX inversion does).
* :func:`config_failures`: which controllers refused their configuration.
* :class:`GyroState`: what the drivetrain makes of its gyro.
* :class:`GyroWatch`: whether the gyro answers at all (it says so, reads NaN, or its
  reading stops while the wheels turn the chassis).
"""

from __future__ import annotations

import enum
import math
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

import constants

if TYPE_CHECKING:
    from subsystems.drivetrain.io import ConfigResult


def _ticks(seconds: float, period: float) -> int:
    return max(1, round(seconds / period))


class GyroAgreement:
    """The gyro's heading change against the wheels' (from the encoder positions, not their
    velocity filters) over the last ``GYRO_CHECK_WINDOW_S``.

    Scrub makes a skid-steer chassis turn less than its wheels say, never more nor the other
    way, so a healthy gyro turns between ``GYRO_CHECK_MIN_SHARE`` and ``GYRO_CHECK_MAX_SHARE``
    of the wheels' turn, give or take ``GYRO_CHECK_TOLERANCE_RAD`` (counts, noise) and the
    lag between the two sensors (``GYRO_CHECK_LAG_S`` times how much the wheels' turn rate
    changed over the window: a CAN encoder's position arrives up to a status frame late).
    Outside that band for ``GYRO_DISAGREE_S`` it is distrusted; it is trusted again after
    agreeing, without a break, through ``GYRO_AGREE_AGAIN_S`` of turning clearly enough
    that a reversed or dead gyro could not agree (a robot spun by a collision recovers its
    gyro; an upside-down one never does)."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.window = _ticks(constants.GYRO_CHECK_WINDOW_S, period)
        self.ok = True
        #: Why it was last distrusted ("" while it never was).
        self.reason = ""
        self._gyro: deque[float] = deque(maxlen=self.window)
        self._wheels: deque[float] = deque(maxlen=self.window)
        self._turned = self._wheel_turn = 0.0  # the windows' sums
        self._disagree = 0.0
        self._agree = 0.0
        # Read once: the check runs every tick.
        self._tolerance = constants.GYRO_CHECK_TOLERANCE_RAD
        self._lag_per_rate = constants.GYRO_CHECK_LAG_S / (2 * period)
        self._min_share = constants.GYRO_CHECK_MIN_SHARE
        self._max_share = constants.GYRO_CHECK_MAX_SHARE

    def reset(self) -> None:
        """Forget the window (the gyro was not answering, or the readings jumped)."""
        self._gyro.clear()
        self._wheels.clear()
        self._turned = self._wheel_turn = 0.0
        self._disagree = 0.0
        self._agree = 0.0

    def update(self, gyro_delta: float, wheel_delta: float) -> bool:
        """This tick's heading change by the gyro and by the wheels (rad, counter-clockwise);
        whether the gyro is trusted."""
        gyro, wheels = self._gyro, self._wheels
        full = len(wheels) == self.window
        if full:  # the oldest leaves the sums as the newest comes in
            self._turned -= gyro[0]
            self._wheel_turn -= wheels[0]
        gyro.append(gyro_delta)
        wheels.append(wheel_delta)
        self._turned = turned = self._turned + gyro_delta
        self._wheel_turn = wheel_turn = self._wheel_turn + wheel_delta
        if not full and len(wheels) < self.window:
            return self.ok
        # The wheels' turn rate at the window's end less at its start, each over two ticks
        # (one tick's change is a count or two of the encoders).
        change = wheels[-1] + wheels[-2] - wheels[0] - wheels[1]
        tolerance = self._tolerance + self._lag_per_rate * (change if change >= 0.0 else -change)
        a = wheel_turn * self._min_share
        b = wheel_turn * self._max_share
        low, high = (a, b) if a <= b else (b, a)
        period = self.period
        if low - tolerance <= turned <= high + tolerance:
            self._disagree = 0.0
            # Agreement means something only when 0 is outside the band.
            if low - tolerance > 0.0 or high + tolerance < 0.0:
                self._agree += period
                if not self.ok and self._agree >= constants.GYRO_AGREE_AGAIN_S - 1e-9:
                    self.ok = True
            return self.ok
        self._agree = 0.0
        self._disagree += period
        if self.ok and self._disagree >= constants.GYRO_DISAGREE_S - 1e-9:
            self.ok = False
            seconds = self.window * period
            self.reason = (
                f"the gyro turned {turned:+.3f} rad in {seconds:.2f} s"
                f" where the wheels turned {wheel_turn:+.3f} rad"
            )
        return self.ok


class SideCheck:
    """One side's measured speed against the speed it is driven toward.

    It runs against it when the command is clearly one way (beyond
    ``DRIVE_CHECK_MIN_COMMAND_MPS``), the wheel clearly the other (beyond
    ``DRIVE_CHECK_MIN_AGAINST_MPS``), and the wheel is not closing on the command: in a
    direction reversal or a stop followed by the other way, a healthy wheel still runs the
    old way for a moment, but it slows toward the command, by more than
    ``DRIVE_CHECK_CLOSING_MPS`` over ``DRIVE_CHECK_CLOSING_S``. A wheel running against its
    command for ``DRIVE_AGAINST_S`` is a fault."""

    def __init__(self, name: str, period: float) -> None:
        self.name = name
        self.period = period
        self._speeds: deque[float] = deque(maxlen=_ticks(constants.DRIVE_CHECK_CLOSING_S, period) + 1)
        self._against = 0.0
        self._min_command = constants.DRIVE_CHECK_MIN_COMMAND_MPS
        self._min_against = constants.DRIVE_CHECK_MIN_AGAINST_MPS
        self._closing = constants.DRIVE_CHECK_CLOSING_MPS
        #: Why it tripped ("" while it has not).
        self.fault = ""

    def reset(self) -> None:
        self._speeds.clear()
        self._against = 0.0
        self.fault = ""

    def update(self, command: float, measured: float) -> str:
        """The speed the side should run at now and the one it reads (m/s, forward positive);
        why it is a fault ("" while it is not)."""
        speeds = self._speeds
        speeds.append(measured)
        if self.fault:
            return self.fault
        if not math.isfinite(measured):
            self._against = 0.0
            return ""
        direction = 1.0 if command > 0.0 else -1.0
        against = (
            (command > self._min_command or command < -self._min_command)
            and measured * direction < -self._min_against
            and (measured - speeds[0]) * direction <= self._closing
        )
        if not against:
            self._against = 0.0
            return ""
        self._against += self.period
        if self._against >= constants.DRIVE_AGAINST_S - 1e-9:
            self.fault = (
                f"{self.name} side runs against its command ({measured:+.2f} m/s driven toward"
                f" {command:+.2f} m/s): a motor turning backward or an encoder counting backward"
            )
        return self.fault


class SpinCheck:
    """The chassis turning hard where the wheels say it goes nearly straight.

    A side driven backward with its own encoder turning with it (a SPARK MAX whose motor
    inversion is wrong: its encoder follows the motor) reads as driving forward while the
    chassis spins in place. To the sensors that is a gyro reporting a turn that is not there,
    which :class:`GyroAgreement` distrusts, and the wheel loops alone would then spin on. The
    gyro turning faster than ``SPIN_CHECK_MIN_RADPS`` with the wheels' rate under
    ``SPIN_CHECK_WHEEL_SHARE`` of it, the same way or none, for ``SPIN_CHECK_S`` while the
    drivetrain drives: whichever is wrong, the robot is not doing what it is told."""

    def __init__(self, period: float) -> None:
        self.period = period
        self._spinning = 0.0
        #: Why it tripped ("" while it has not).
        self.fault = ""
        self._min_rate = constants.SPIN_CHECK_MIN_RADPS
        self._share = constants.SPIN_CHECK_WHEEL_SHARE

    def reset(self) -> None:
        self._spinning = 0.0
        self.fault = ""

    def update(self, gyro_rate: float | None, wheel_rate: float) -> str:
        """The gyro's turn rate (None without a gyro) and the wheels' (rad/s, counter-clockwise);
        why it is a fault ("" while it is not)."""
        if self.fault:
            return self.fault
        # Slow turns first (nearly every tick); NaN compares false, so it never spins.
        if gyro_rate is None or not (gyro_rate > self._min_rate or gyro_rate < -self._min_rate):
            self._spinning = 0.0
            return ""
        bound = self._share * abs(gyro_rate)
        if not -bound < wheel_rate < bound:  # turning with the gyro (or against it: reversed)
            self._spinning = 0.0
            return ""
        self._spinning += self.period
        if self._spinning >= constants.SPIN_CHECK_S - 1e-9:
            self.fault = (
                f"the chassis turns at {gyro_rate:+.2f} rad/s by the gyro where the wheels say"
                f" {wheel_rate:+.2f}: a side turning backward with its encoder (a SPARK MAX's"
                " inversion?) or a gyro reporting a turn that is not there"
            )
        return self.fault


def volts_as_speed(volts: float) -> float:
    """The speed an open-loop voltage drives a side toward (the feedforward's steady state),
    m/s: what a side check compares the wheel with in SysId's tests."""
    magnitude = abs(volts) - constants.DRIVE_KS_V
    if magnitude <= 0.0:
        return 0.0
    return math.copysign(magnitude / constants.DRIVE_KV_V_PER_MPS, volts)


class GyroState(enum.StrEnum):
    """What the drivetrain makes of its gyro (``Network/Gyro`` shows the value)."""

    OK = "ok"
    NOT_ANSWERING = "not answering"
    DISAGREES = "disagrees with the wheels"
    #: No gyro: the wheels give the heading.
    NONE = "none"


def config_failures(results: Iterable[ConfigResult]) -> str:
    """Each controller's answer to its configuration: the failed ones as
    ``"SPARK MAX 4: kTimeout"``, joined by ``"; "`` ("" when every one took it)."""
    return "; ".join(f"{result.device}: {result.status}" for result in results if not result.ok)


class GyroWatch:
    """Whether the gyro answers. It has stopped when it says so itself (an IMU's own check),
    reads NaN, or reads exactly the same while the wheels turn the chassis (a real gyro's
    reading always moves then) for ``GYRO_SILENT_S``. It is trusted again once its reading
    has moved and it has answered for ``GYRO_TRUST_AGAIN_S``."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.ok = True
        #: Why it was last found not answering ("" while it never was).
        self.reason = ""
        self.changes = 0  # times ``ok`` changed (the recorder and the alert follow it)
        self._last: float | None = None
        self._silent = 0.0
        self._answering = 0.0
        self._moved = False

    def update(self, reading: float, connected: bool, wheel_turn_rate: float) -> bool:
        period = self.period
        if not connected:
            why = "the gyro reports its sensor lost"
        elif math.isnan(reading):
            why = "the gyro reads NaN"
        else:
            why = ""
            if reading == self._last:
                if not -constants.GYRO_STILL_RADPS <= wheel_turn_rate <= constants.GYRO_STILL_RADPS:
                    self._silent += period
                    if self._silent >= constants.GYRO_SILENT_S - 1e-9:
                        why = "the gyro's reading stopped while the wheels turn"
            else:
                self._silent = 0.0
                self._moved = self._last is not None
            self._last = reading
        if why:
            self._answering = 0.0
            self._moved = False
            if self.ok:
                self.ok = False
                self.reason = why
                self.changes += 1
        elif not self.ok:
            self._answering += period
            if self._moved and self._answering >= constants.GYRO_TRUST_AGAIN_S - 1e-9:
                self.ok = True
                self.changes += 1
        return self.ok
