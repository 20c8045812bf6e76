"""Every ``BCNP_SIM_*`` environment variable, read once, here.

:func:`read` returns one :class:`SimSettings` from the environment; the
simulator's models take what they need from it and never read the
environment themselves. ``docs/robot.md`` lists each variable in one table
(``tests/test_sim.py`` checks the table against :data:`VARIABLES`).

Standard library only: ``run.py`` imports the names before anything is
installed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

AUTONOMOUS = "BCNP_SIM_AUTONOMOUS"
AUTO_MODE = "BCNP_SIM_AUTO_MODE"
NT_PORT = "BCNP_SIM_NT_PORT"
DEVICE = "BCNP_SIM_DEVICE"
SEED = "BCNP_SIM_SEED"
RIGHT_SCALE = "BCNP_SIM_RIGHT_SCALE"
SCRUB = "BCNP_SIM_SCRUB"
BATTERY_V = "BCNP_SIM_BATTERY_V"
BATTERY_OHMS = "BCNP_SIM_BATTERY_OHMS"
MASS = "BCNP_SIM_MASS"
FRICTION_V = "BCNP_SIM_FRICTION_V"
GYRO_FAIL_S = "BCNP_SIM_GYRO_FAIL_S"
GYRO_SIGN = "BCNP_SIM_GYRO_SIGN"
RIGHT_REVERSED = "BCNP_SIM_RIGHT_REVERSED"
VELOCITY_DELAY_MS = "BCNP_SIM_VELOCITY_DELAY_MS"
PWM_COAST = "BCNP_SIM_PWM_COAST"

#: Every variable, in the order of docs/robot.md's table.
VARIABLES = (
    AUTONOMOUS,
    AUTO_MODE,
    NT_PORT,
    DEVICE,
    SEED,
    RIGHT_SCALE,
    SCRUB,
    BATTERY_V,
    BATTERY_OHMS,
    MASS,
    FRICTION_V,
    GYRO_FAIL_S,
    GYRO_SIGN,
    RIGHT_REVERSED,
    VELOCITY_DELAY_MS,
    PWM_COAST,
)

#: The device models: "documented" (as their makers document them, the default) or "ideal"
#: (instant, exact sensors, REVLib's own simulation of the SPARK MAX loop, no brownout).
DEVICE_MODES = ("documented", "ideal")


def _number(env: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    """``name`` from ``env`` as a number in [low, high]; ``default`` when unset or empty; anything
    else is a ValueError naming the variable."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not low <= value <= high:
        raise ValueError(f"{name}={text!r}: expected a number in [{low:g}, {high:g}]")
    return value


def _choice(env: Mapping[str, str], name: str, choices: Sequence[str], default: str) -> str:
    text = env.get(name, "").strip().lower() or default
    if text not in choices:
        raise ValueError(f"{name}={text!r}: expected one of {', '.join(choices)}")
    return text


@dataclass(frozen=True)
class Disturbances:
    """How the simulated chassis differs from the model the robot's constants describe. The
    defaults are the model itself."""

    #: The right side's share of the voltage its wiring applies (a dragging gearbox, a tired motor).
    right_scale: float = 1.0
    #: The chassis turns as if its track were this much wider (wheels scrubbing on carpet).
    scrub: float = 1.0
    #: A battery held at this many volts whatever the load; None: it sags through ``battery_ohms``.
    battery_v: float | None = None
    #: The battery's internal resistance (WPILib's BatterySim uses 0.02 ohm; a tired one 0.05-0.1).
    battery_ohms: float = 0.02
    #: Mass and moment of inertia times this (bumpers, a mechanism, a game piece).
    mass_scale: float = 1.0
    #: Rolling friction per side as a voltage the motors must overcome (a drivetrain's kS).
    friction_v: float = 0.0


@dataclass(frozen=True)
class Faults:
    """Wrong wiring and failing sensors, as a team meets them on a first enable."""

    #: The gyro's reading times this: -1 is a gyro mounted upside down.
    gyro_sign: int = 1
    #: The gyro stops answering (its reading freezes) this many seconds of simulated time after
    #: the start; None: never.
    gyro_fail_s: float | None = None
    #: The right side's motors turn backward for what the code drives forward (leads swapped).
    right_reversed: bool = False
    #: Every velocity measurement arrives this much later still, on top of the filters (s).
    velocity_delay_s: float = 0.0
    #: The kitbot's PWM controllers idle in coast (their button) instead of brake.
    pwm_coast: bool = False


@dataclass(frozen=True)
class SimSettings:
    """What the simulator was asked for, from the ``BCNP_SIM_*`` variables."""

    #: "1": start in autonomous, enabled; "0": disabled; "": enabled when headless.
    autonomous: str = ""
    #: The autonomous mode picked on the chooser before the first tick ("" the default).
    auto_mode: str = ""
    #: NetworkTables on this port instead of 5810; None: 5810.
    nt_port: int | None = None
    #: "documented" or "ideal" (:data:`DEVICE_MODES`).
    device: str = "documented"
    #: The seed of the sensors' noise: the same seed, the same run.
    seed: int = 0
    disturbances: Disturbances = field(default_factory=Disturbances)
    faults: Faults = field(default_factory=Faults)

    @property
    def documented(self) -> bool:
        return self.device == "documented"

    def starts_autonomous(self, argv: Sequence[str]) -> bool:
        """Whether the simulated driver station starts in autonomous, enabled."""
        if self.autonomous in ("0", "1"):
            return self.autonomous == "1"
        return "--nogui" in argv


def read(env: Mapping[str, str] | None = None) -> SimSettings:
    """The settings from ``env`` (the process's environment by default). A value out of range is
    a ValueError that names its variable."""
    env = os.environ if env is None else env
    battery = _number(env, BATTERY_V, math.nan, 4.5, 13.0) if env.get(BATTERY_V, "").strip() else None
    gyro_fail = _number(env, GYRO_FAIL_S, 0.0, 0.0, 1e6) if env.get(GYRO_FAIL_S, "").strip() else None
    right_scale = _number(env, RIGHT_SCALE, 1.0, 0.0, 1.0)
    if right_scale <= 0.0:
        raise ValueError(f"{RIGHT_SCALE}={env[RIGHT_SCALE].strip()!r}: expected a number in (0, 1]")
    port_text = env.get(NT_PORT, "").strip()
    nt_port = None
    if port_text:
        nt_port = int(_number(env, NT_PORT, 0, 1, 65535))
    gyro_sign = _number(env, GYRO_SIGN, 1.0, -1.0, 1.0)
    if gyro_sign not in (-1.0, 1.0):
        raise ValueError(f"{GYRO_SIGN}={env[GYRO_SIGN].strip()!r}: expected 1 or -1")
    return SimSettings(
        autonomous=env.get(AUTONOMOUS, "").strip(),
        auto_mode=env.get(AUTO_MODE, "").strip(),
        nt_port=nt_port,
        device=_choice(env, DEVICE, DEVICE_MODES, "documented"),
        seed=int(_number(env, SEED, 0, 0, 2**31 - 1)),
        disturbances=Disturbances(
            right_scale=right_scale,
            scrub=_number(env, SCRUB, 1.0, 1.0, 2.0),
            battery_v=battery,
            battery_ohms=_number(env, BATTERY_OHMS, 0.02, 0.0, 1.0),
            mass_scale=_number(env, MASS, 1.0, 0.5, 4.0),
            friction_v=_number(env, FRICTION_V, 0.0, 0.0, 3.0),
        ),
        faults=Faults(
            gyro_sign=int(gyro_sign),
            gyro_fail_s=gyro_fail,
            right_reversed=_flag(env, RIGHT_REVERSED),
            velocity_delay_s=_number(env, VELOCITY_DELAY_MS, 0.0, 0.0, 1000.0) / 1000.0,
            pwm_coast=_flag(env, PWM_COAST),
        ),
    )


def _flag(env: Mapping[str, str], name: str) -> bool:
    text = env.get(name, "").strip()
    if text not in ("", "0", "1"):
        raise ValueError(f"{name}={text!r}: expected 0 or 1")
    return text == "1"
