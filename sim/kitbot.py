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
here as on the robot. :class:`IdealKitbotDevices` (``BCNP_SIM_DEVICE=ideal``) drives what WPILib
asked for with no deadband and reads the wheels exactly.
"""

from __future__ import annotations

import random

import wpilib
import wpilib.simulation as wsim
import wpimath.system.plant as plant

from sim.chassis import Chassis
from sim.gyro import PARTS, analog_sink
from sim.sensors import DelayLine, FpgaEncoderRate
from sim.settings import SimSettings
from sim.wirings import Devices
from subsystems.drivetrain.kitbot import KitbotIO

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


def drive_motor() -> plant.DCMotor:
    """The kit chassis' drive motor: a CIM (two a side, on one gearbox)."""
    return plant.DCMotor.CIM(1)


class KitbotDevices(Devices):
    """Two PWM controllers (one per side, its two motors on a Y cable) and two DIO encoders,
    as their makers document them."""

    #: The physics' step: the PWM outputs hold through the tick.
    step_s = 0.005

    def __init__(self, io: KitbotIO, settings: SimSettings) -> None:
        faults = settings.faults
        self.motor = drive_motor()
        brake = not faults.pwm_coast
        right_polarity = -1 if faults.right_reversed else 1
        self.controllers = (
            PwmController(io.left_motor.getChannel(), brake=brake, polarity=1),
            PwmController(io.right_motor.getChannel(), brake=brake, polarity=right_polarity),
        )
        self.encoders = (
            FpgaEncoder(io.left_encoder, ENCODER_MOUNT[0], faults.velocity_delay_s, self.step_s),
            FpgaEncoder(io.right_encoder, ENCODER_MOUNT[1], faults.velocity_delay_s, self.step_s),
        )
        self.gyro_sink = analog_sink(io.gyro)
        self.gyro_part = PARTS["analog"]

    def begin(self, enabled: bool) -> None:
        for controller in self.controllers:
            controller.read(enabled)

    def volts(self, chassis: Chassis, vbus: float) -> tuple[list[float], list[float]]:
        left, right = self.controllers
        left_v = left.terminal_volts(vbus, chassis.back_emf(0))
        right_v = right.terminal_volts(vbus, chassis.back_emf(1))
        return [left_v], [right_v]

    def sense(self, chassis: Chassis, now_s: float) -> None:
        for side, encoder in enumerate(self.encoders):
            encoder.sample(chassis.wheel_position(side), now_s)

    def report(self, chassis: Chassis, vbus: float) -> None:
        for encoder in self.encoders:
            encoder.report()


class IdealKitbotDevices(KitbotDevices):
    """The kitbot's devices without their makers' limits: what WPILib asked for, no deadband;
    each wheel's distance and speed exactly, at once; an exact gyro."""

    def __init__(self, io: KitbotIO, settings: SimSettings) -> None:
        super().__init__(io, settings)
        self.gyro_part = None

    def begin(self, enabled: bool) -> None:
        for controller in self.controllers:
            controller.duty = controller.pwm.getSpeed() if enabled else 0.0

    def sense(self, chassis: Chassis, now_s: float) -> None:
        for side, encoder in enumerate(self.encoders):
            encoder.sample_exact(chassis.wheel_position(side), chassis.wheel_velocity(side))


def build(io: KitbotIO, settings: SimSettings, rng: random.Random) -> KitbotDevices:
    return (KitbotDevices if settings.documented else IdealKitbotDevices)(io, settings)
