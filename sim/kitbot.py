"""The kitbot's devices: PWM motor controllers and the roboRIO's quadrature encoders.

* A PWM SPARK MAX reads the pulse WPILib sends (1000-2000 us, neutral at 1500) with a
  neutral deadband around 1500 us, and drives proportionally beyond it; no pulse (a
  disabled or browned-out roboRIO) is neutral. Neutral idles the motor in brake (leads
  shorted) or, with ``BCNP_SIM_PWM_COAST=1`` (the controller's button set to coast), in
  coast (open: it rolls on).
* Each encoder sits on its gearbox's output; the right gearbox is mirrored, so the right
  encoder counts backward for the robot driving forward unless the code reverses it
  (``Encoder.setReverseDirection``; the HAL's simulated encoder ignores that setting, so it
  is applied here). Its rate is the FPGA's, period-based (:class:`sim.sensors.FpgaEncoderRate`).

The pulse is read after WPILib's inversion, so a wrong ``setInverted`` drives the wrong way
here as on the robot.
"""

from __future__ import annotations

import wpilib
import wpilib.simulation as wsim

from sim.sensors import DelayLine, FpgaEncoderRate

#: The SPARK MAX's PWM input: neutral and full scale (us), and its neutral deadband (+-us).
PWM_NEUTRAL_US = 1500.0
PWM_FULL_US = 500.0
PWM_DEADBAND_US = 25.0
#: What WPILib's PWMSparkMax sends for full output: 1500 +- 503 us (its bounds: 2003 and 999).
WPILIB_FULL_SCALE_US = 503.0
#: The FPGA's stopped detection when the code sets none (WPILib's Encoder: 0.5 s).
DEFAULT_MAX_PERIOD_S = 0.5
#: How each side's encoder counts the wheel forward: the right gearbox is mirrored.
ENCODER_MOUNT = (1, -1)


class PwmController:
    """A PWM motor controller: the duty cycle it drives from the pulse it receives."""

    def __init__(self, channel: int, *, brake: bool, polarity: int) -> None:
        self.pwm = wsim.PWMSim(channel)
        self.brake = brake
        self.polarity = polarity
        self.duty = 0.0

    def read(self, enabled: bool) -> None:
        pulse = self.pwm.getPulseMicrosecond() if enabled else 0
        offset = pulse - PWM_NEUTRAL_US
        if pulse <= 0 or abs(offset) <= PWM_DEADBAND_US:
            self.duty = 0.0
        else:
            span = PWM_FULL_US - PWM_DEADBAND_US
            duty = (abs(offset) - PWM_DEADBAND_US) / span
            self.duty = min(1.0, duty) if offset > 0 else -min(1.0, duty)

    def terminal_volts(self, vbus: float, back_emf: float) -> float:
        duty = self.duty
        if not duty:
            return 0.0 if self.brake else back_emf
        return duty * vbus * self.polarity


class FpgaEncoder:
    """One DIO quadrature encoder as the robot reads it."""

    def __init__(self, encoder: wpilib.Encoder, mount: int, velocity_delay_s: float, step_s: float) -> None:
        self.sim = wsim.EncoderSim(encoder)
        self.mount = mount
        self.sign = -mount if self.sim.getReverseDirection() else mount
        self.distance_per_pulse = encoder.getDistancePerPulse()
        max_period = self.sim.getMaxPeriod() or DEFAULT_MAX_PERIOD_S
        self.rate = FpgaEncoderRate(self.distance_per_pulse, max_period)
        self.delay = DelayLine(velocity_delay_s, step_s)
        self._rate = 0.0
        self._distance = 0.0

    def sample(self, wheel_m: float, now_s: float) -> None:
        """The wheel has rolled ``wheel_m`` (forward positive) by ``now_s``."""
        distance = wheel_m * self.sign
        self._distance = distance
        self._rate = self.delay(self.rate.sample(distance, now_s))

    def sample_exact(self, wheel_m: float, wheel_mps: float) -> None:
        """The ideal encoder: the wheel's distance and speed as they are (the speed through the
        velocity-delay fault)."""
        self._distance = wheel_m * self.sign
        self._rate = self.delay(wheel_mps * self.sign)

    def report(self) -> None:
        dpp = self.distance_per_pulse
        self.sim.setCount(int(self._distance // dpp) if dpp > 0 else 0)
        self.sim.setRate(self._rate)
