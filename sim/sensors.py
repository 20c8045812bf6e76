"""How the robot's sensors measure speed, as their makers document them.

* :class:`RevVelocityFilter`: a SPARK MAX's velocity from its encoder. Every 1 ms the
  firmware takes the count change over its measurement period, then averages the last
  ``depth`` of those (REVLib ``EncoderConfig.quadratureMeasurementPeriod`` /
  ``quadratureAverageDepth`` for a data-port encoder: 100 ms and 64 by default;
  ``uvwMeasurementPeriod`` / ``uvwAverageDepth`` for a NEO's hall sensor: 32 ms and 8).
  Its delay, as WPILib SysId counts it: half the period plus (depth - 1) / 2 samples
  (100 ms, 64: 81.5 ms).
* :class:`StatusFrame`: what the roboRIO reads of a CAN device: the value the device sent
  in its last periodic status frame, every ``period`` on the device's own clock, out of
  step with the robot's loop.
* :class:`FpgaEncoderRate`: the roboRIO FPGA's quadrature encoder rate: distance per pulse
  over the period of the last whole pulse, held until no pulse came for the encoder's
  max period (then 0: stopped).
* :class:`DelayLine`: a measurement read a fixed time later still (a fault to rehearse).

Sources (URLs and figures) are in docs/robot.md, "Device models".
"""

from __future__ import annotations

import math
from collections import deque


class DelayLine:
    """A value ``delay`` seconds late, sampled every ``step`` seconds (0: no delay)."""

    def __init__(self, delay_s: float, step_s: float) -> None:
        self.length = round(delay_s / step_s)
        self._values: deque[float] = deque([0.0] * self.length)

    def __call__(self, value: float) -> float:
        if not self.length:
            return value
        values = self._values
        values.append(value)
        return values.popleft()


class RevVelocityFilter:
    """A SPARK MAX's velocity measurement: counts sampled every 1 ms, the change over
    ``period_ms`` samples, averaged over the last ``depth`` of them. ``sample(position)``
    takes the sensor's position in rotations and returns rotations per minute."""

    def __init__(self, counts_per_rev: float, period_ms: int, depth: int) -> None:
        self.counts_per_rev = counts_per_rev
        self.period_ms = max(1, period_ms)
        self.depth = max(1, depth)
        self._counts: deque[int] = deque(maxlen=self.period_ms + 1)
        self._windows: deque[float] = deque(maxlen=self.depth)
        self._sum = 0.0
        self._rpm_per_count = 60_000.0 / (self.period_ms * counts_per_rev)

    @property
    def delay_s(self) -> float:
        """The filter's delay as SysId counts it: period / 2 + (depth - 1) / 2 ms."""
        return (self.period_ms / 2 + (self.depth - 1) / 2) / 1000

    def sample(self, rotations: float) -> float:
        counts = self._counts
        count = math.floor(rotations * self.counts_per_rev)
        if not counts:  # the first sample: at rest
            counts.extend([count] * (self.period_ms + 1))
        counts.append(count)
        window = (count - counts[0]) * self._rpm_per_count
        windows = self._windows
        if len(windows) == self.depth:
            self._sum -= windows[0]
        windows.append(window)
        self._sum += window
        return self._sum / len(windows)


class StatusFrame:
    """The last value a CAN device sent in its periodic status frame: every ``period_s`` on
    the device's clock, starting ``phase_s`` into the simulation."""

    def __init__(self, period_s: float, phase_s: float) -> None:
        self.period_s = period_s
        self._next = phase_s
        self.value = 0.0

    def due(self, now_s: float) -> bool:
        """Whether a frame goes out at ``now_s``; call :meth:`send` then."""
        return now_s >= self._next - 1e-9

    def send(self, now_s: float, value: float) -> None:
        self.value = value
        while self._next <= now_s + 1e-9:
            self._next += self.period_s


class FpgaEncoderRate:
    """The roboRIO FPGA's rate of a quadrature encoder: the FPGA times each whole pulse (one
    count of the 1x decoding); the rate is distance per pulse over the last pulse's period,
    held while no pulse comes, 0 once no pulse came for ``max_period_s``. Sampled at the
    simulation's step, each edge's time is interpolated within the step, as the FPGA's
    timer resolves it."""

    def __init__(self, distance_per_pulse: float, max_period_s: float) -> None:
        self.distance_per_pulse = distance_per_pulse
        self.max_period_s = max_period_s
        self._pulse: int | None = None
        self._distance = 0.0
        self._time = 0.0
        self._last_edge_s = 0.0
        self.rate = 0.0

    def sample(self, distance: float, now_s: float) -> float:
        dpp = self.distance_per_pulse
        pulse = math.floor(distance / dpp)
        if self._pulse is None:
            self._pulse = pulse
            self._last_edge_s = now_s
        elif pulse != self._pulse and now_s > self._time:
            d0, t0 = self._distance, self._time
            velocity = (distance - d0) / (now_s - t0)
            edge = (pulse if distance > d0 else pulse + 1) * dpp  # the last edge crossed
            edge_s = t0 + (edge - d0) / velocity
            period = dpp / abs(velocity) if abs(pulse - self._pulse) >= 2 else edge_s - self._last_edge_s
            if period > 0.0:
                self.rate = math.copysign(dpp / period, velocity)
            self._pulse = pulse
            self._last_edge_s = edge_s
        elif now_s - self._last_edge_s > self.max_period_s:
            self.rate = 0.0
        self._distance, self._time = distance, now_s
        return self.rate
