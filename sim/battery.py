"""The battery and the roboRIO's brownout protection.

The bus voltage is WPILib's ``BatterySim``: 12 V behind an internal resistance
(``BCNP_SIM_BATTERY_OHMS``, 0.02 ohm by default) under the drive's current, or held where
``BCNP_SIM_BATTERY_V`` sets it. Brownout as the roboRIO does it (WPILib's "roboRIO
Brownout and Understanding Current Draw"): below the brownout voltage (roboRIO 2: 6.75 V by
default; roboRIO 1: 6.3 V) the outputs are disabled, PWM and CAN motor controllers alike,
until the voltage is back above 7.5 V. ``wpilib.RobotController.isBrownedOut()`` says so to
the robot's code.
"""

from __future__ import annotations

import wpilib.simulation as wsim

from sim.settings import Disturbances

#: The roboRIO 2's default brownout threshold and the voltage the outputs come back above.
BROWNOUT_V = 6.75
RECOVER_V = 7.5
NOMINAL_V = 12.0


class Battery:
    def __init__(self, disturbances: Disturbances, *, brownout: bool) -> None:
        self.held_v = disturbances.battery_v
        self.ohms = disturbances.battery_ohms
        self.brownout = brownout
        self.browned_out = False
        self.volts = self.held_v if self.held_v is not None else NOMINAL_V
        wsim.RoboRioSim.setBrownoutVoltage(BROWNOUT_V)
        self._publish()

    def update(self, current_a: float) -> float:
        """The bus voltage under ``current_a``; brownout decided on it."""
        if self.held_v is not None:
            self.volts = self.held_v
        else:
            self.volts = wsim.BatterySim.calculate(NOMINAL_V, self.ohms, [current_a])
        if self.brownout:
            if self.volts < BROWNOUT_V:
                self.browned_out = True
            elif self.volts > RECOVER_V:
                self.browned_out = False
        self._publish()
        return self.volts

    def _publish(self) -> None:
        wsim.RoboRioSim.setVInVoltage(self.volts)
