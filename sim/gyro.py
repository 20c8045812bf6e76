"""The robot's gyro as its datasheet describes it, mounted as the robot has it.

Each tick the gyro integrates the chassis' true turn rate plus its own errors, as a MEMS
rate gyro does: white rate noise (the datasheet's rate noise density over the bandwidth the
robot reads it at), angular random walk in the integrated angle, and a bias that wanders
(in-run bias stability) after the start-up calibration left a residual. Figures per part in
:data:`PARTS`, sources in docs/robot.md ("Device models"). With ``sign`` -1 (``BCNP_SIM_GYRO_SIGN``)
it is mounted upside down; from ``fail_s`` on it stops answering (its reading freezes).

The noise is drawn from a seeded generator (``BCNP_SIM_SEED``): the same seed, the same run.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import NamedTuple

import wpilib
import wpilib.simulation as wsim


class GyroPart(NamedTuple):
    #: Rate noise, deg/s rms, at the rate the robot reads it (noise density x sqrt(bandwidth)).
    rate_noise_dps: float
    #: Angular random walk, deg/sqrt(s).
    arw_deg_per_sqrt_s: float
    #: Bias left after the start-up calibration, deg/s (one draw per run, within +-).
    residual_bias_dps: float
    #: In-run bias stability, deg/s: how far the bias wanders.
    bias_stability_dps: float


#: ADIS16470 datasheet (Rev. C, Table 1): rate noise density 0.008 deg/s/sqrt(Hz), in-run
#: bias stability 8 deg/h; its angular random walk taken as the noise density / sqrt(2)
#: (0.34 deg/sqrt(h)). The kit's analog gyro: no datasheet figures were at hand; taken six
#: times noisier (0.05 deg/s/sqrt(Hz)), with the bias a 5 s calibration leaves at 0.03 deg/s.
#: Both read by the robot at 50 Hz (the bandwidth the noise is taken over).
PARTS = {
    "adis16470": GyroPart(0.008 * math.sqrt(50), 0.34 / 60, 0.005, 8 / 3600),
    "analog": GyroPart(0.05 * math.sqrt(50), 0.05 / math.sqrt(2), 0.03, 0.01),
}


class GyroModel:
    """Writes the robot's gyro reading each tick: the chassis' heading and turn rate, plus the
    part's errors when ``part`` is given (None: exact), through ``sink`` (none: no gyro)."""

    def __init__(
        self,
        sink: Callable[[float, float], None] | None,
        part: GyroPart | None,
        *,
        sign: int,
        fail_s: float | None,
        rng: random.Random,
    ) -> None:
        self.sink = sink
        self.sign = sign
        self.fail_s = fail_s
        self.part = part
        self._rng = rng
        self._bias = rng.uniform(-part.residual_bias_dps, part.residual_bias_dps) if part is not None else 0.0
        self._error_deg = 0.0  # the integrated angle's error

    def sense(self, heading_deg: float, rate_dps: float, elapsed_s: float, dt: float) -> None:
        """The chassis turned to ``heading_deg`` at ``rate_dps`` (counter-clockwise) ``elapsed_s``
        into the run, ``dt`` since the last call."""
        sink = self.sink
        if sink is None:
            return
        if self.fail_s is not None and elapsed_s >= self.fail_s:
            return  # not answering: the last reading stays
        part = self.part
        rate = rate_dps
        if part is not None and dt > 0.0:
            rng = self._rng
            # The bias wanders as a random walk that reaches its stability figure in about 100 s.
            self._bias += rng.gauss(0.0, part.bias_stability_dps * math.sqrt(dt / 100.0))
            self._error_deg += self._bias * dt + rng.gauss(0.0, part.arw_deg_per_sqrt_s * math.sqrt(dt))
            rate += self._bias + rng.gauss(0.0, part.rate_noise_dps)
        sink((heading_deg + self._error_deg) * self.sign, rate * self.sign)


def analog_sink(gyro: wpilib.AnalogGyro) -> Callable[[float, float], None]:
    """Where an analog gyro's reading goes: it counts clockwise."""
    sim = wsim.AnalogGyroSim(gyro)

    def write(angle: float, rate: float) -> None:
        sim.setAngle(-angle)
        sim.setRate(-rate)

    return write


def imu_sink(imu: wpilib.ADIS16470_IMU) -> Callable[[float, float], None]:
    """Where the ADIS16470's yaw goes: it counts counter-clockwise."""
    sim = wsim.ADIS16470_IMUSim(imu)

    def write(angle: float, rate: float) -> None:
        sim.setGyroAngleZ(angle)
        sim.setGyroRateZ(rate)

    return write
