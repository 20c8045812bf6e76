"""The turn-rate loop: the chassis turns at the commanded rate as the gyro measures it.

Wheels scrub on carpet, so a skid-steer chassis turns less than its wheel speeds say;
:class:`TurnRateLoop` adds a bounded correction to the commanded turn rate from how far the
gyro's heading is behind the commanded turn rates summed. Numbers in, numbers out:
:class:`~subsystems.drivetrain.drivetrain.Drivetrain` feeds it each tick.
"""

from __future__ import annotations

import math
from collections import deque

import constants

_TAU = math.tau


def _clamp(value: float, limit: float) -> float:
    return value if -limit < value < limit else math.copysign(limit, value)


class TurnRateLoop:
    """The turn rate the chassis really delivers, held to the commanded one by the gyro.

    The commanded turn rates, summed over the ticks, give the heading the robot should
    have; each tick the loop adds a correction to the commanded rate from how far the
    gyro's heading is behind (P and I: a chassis that turns at a fixed share of what its
    wheels say, as a scrubbing one does, is made up in full). The error is bounded, so a
    robot pushed round is not spun back hard, and so is the correction."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.kp = constants.TURN_KP_RADPS_PER_RAD
        self.ki = constants.TURN_KI_RADPS_PER_RAD_S
        self.max_error = constants.TURN_MAX_ERROR_RAD
        self.max_correction = constants.TURN_MAX_CORRECTION_RADPS
        #: How fast a correction fades when the gyro stops answering (rad/s per s).
        self.fade = (constants.MAX_ALPHA_RADPS2 or 6.0) * period
        self.correction = 0.0
        self._target: float | None = None  # the heading the robot should have, rad
        self._integral = 0.0
        self._last_omega = 0.0
        #: The turn each of the last ticks' corrections added (rad): what a gyro found wrong
        #: made the robot turn before it was found (the drivetrain sets the length).
        self.recent: deque[float] = deque(maxlen=1)
        self._owed = 0.0  # turn still to give back (rad)

    def reset(self) -> None:
        """Start again from wherever the robot points: no error, no integral, no correction."""
        self._target = None
        self._integral = 0.0
        self._last_omega = 0.0
        self.correction = 0.0
        self.recent.clear()
        self._owed = 0.0

    def update(self, omega: float, heading: float) -> float:
        """The correction (rad/s) to add to this tick's commanded ``omega``, from the gyro's
        ``heading`` (rad, counter-clockwise) read at the start of the tick."""
        target = self._target
        if target is None:
            target = heading
        error = math.remainder(target - heading, _TAU)
        max_error = self.max_error
        if not -max_error <= error <= max_error:
            error = math.copysign(max_error, error)
            target = heading + error  # the rest is given up
        period = self.period
        correction = self.kp * error + self.ki * (self._integral + error * period)
        limit = self.max_correction
        if -limit < correction < limit:
            self._integral += error * period  # no wind-up while the correction is at its bound
        else:
            correction = math.copysign(limit, correction)
        # The wheels move from last tick's rate to this one's over the coming tick.
        self._target = target + (self._last_omega + omega) * 0.5 * period
        self._last_omega = omega
        self.correction = correction
        self.recent.append(correction * period)
        return correction

    def give_back(self) -> None:
        """The gyro was wrong for the last ticks: what their corrections turned the robot is to
        be turned back (by :meth:`fade_out`), so the wheels end where the commands alone put them."""
        self._owed = -sum(self.recent)
        self.recent.clear()

    def hold(self) -> None:
        """The outputs are off for a while (a brownout): the integral stays; the heading to hold
        starts again from wherever the robot points when they return."""
        self._target = None
        self._last_omega = 0.0

    def fade_out(self) -> float:
        """No gyro to trust: the correction steps toward 0 (or toward giving back what
        :meth:`give_back` owes) by at most the acceleration limit."""
        self._target = None
        self._integral = 0.0
        self._last_omega = 0.0
        correction = self.correction
        fade = self.fade
        owed = self._owed
        want = _clamp(self.kp * owed, self.max_correction) if owed else 0.0
        step = want - correction
        correction = want if -fade <= step <= fade else correction + math.copysign(fade, step)
        if owed:
            owed -= correction * self.period
            if abs(owed) < 1e-4 or owed * self._owed <= 0.0:
                owed = 0.0  # given back
            self._owed = owed
        self.correction = correction
        return correction

    @property
    def fading(self) -> bool:
        return bool(self.correction or self._owed)
