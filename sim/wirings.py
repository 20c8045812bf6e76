"""The simulation side of each wiring: its devices between the robot's code and the chassis,
behind one interface.

Each wiring's devices are one module (``sim/kitbot.py``, ``sim/sparkmax.py``,
``sim/talonfx.py``) with a ``build(io, settings, rng)`` that returns its :class:`Devices`:
the devices as their makers run or document them (the default), or the ideal ones
(``BCNP_SIM_DEVICE=ideal``: exact sensors read at once, brake at neutral, no deadband), two
implementations of the same interface. A wiring's module is the only place that knows its IO
class; :func:`wiring_devices` finds it by the wiring's name.

Each robot tick: :meth:`Devices.begin` takes what the code commanded; then for each step of
the physics, :meth:`Devices.volts` gives each motor's terminal voltage and
:meth:`Devices.sense` samples the sensors; :meth:`Devices.report` writes what the code reads
next tick, and :meth:`Devices.end` closes the tick. The mounting (:mod:`sim.chassis`) and the
faults apply to every implementation.
"""

from __future__ import annotations

import abc
import importlib
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

import wpimath.system.plant as plant

from sim.settings import SimSettings

if TYPE_CHECKING:
    from sim.chassis import Chassis
    from sim.gyro import GyroPart
    from subsystems.drivetrain.io import DrivetrainIO

#: Where the gyro model writes a reading: (angle, rate), degrees and deg/s counter-clockwise.
GyroSink = Callable[[float, float], None]


class Devices(abc.ABC):
    """One wiring's simulated devices."""

    #: The physics' step (s): the devices' own loop period, or how long their outputs hold.
    step_s: float
    #: One drive motor (each side has two, one per controller or both on one).
    motor: plant.DCMotor
    #: Where the robot's gyro reading goes, and the part's error figures (None: exact); no sink
    #: without a gyro.
    gyro_sink: GyroSink | None = None
    gyro_part: GyroPart | None = None

    @abc.abstractmethod
    def begin(self, enabled: bool) -> None:
        """A robot tick's physics starts: take what the code commanded (outputs off while
        ``enabled`` is False: disabled or browned out)."""

    @abc.abstractmethod
    def volts(self, chassis: Chassis, vbus: float) -> tuple[list[float], list[float]]:
        """Each motor's terminal voltage for the next step, left side then right (its own sense)."""

    @abc.abstractmethod
    def sense(self, chassis: Chassis, now_s: float) -> None:
        """The sensors sample the chassis after a step, ``now_s`` into the run."""

    @abc.abstractmethod
    def report(self, chassis: Chassis, vbus: float) -> None:
        """Write what the robot's code reads next tick."""

    @property
    def holds(self) -> int:
        """Times the machine held or starved this process while devices that run on the wall clock
        were stepped: their firmware saw wall time the simulated chassis did not (none for devices
        that run on the simulated clock)."""
        return 0

    def end(self) -> None:  # noqa: B027 (a hook: most devices run on the simulated clock alone)
        """The tick's physics is done (a device that runs on its own clock waits for it here)."""


#: Each wiring's simulated side: the module whose ``build`` makes its :class:`Devices`.
MODULES = {"kitbot": "sim.kitbot", "sparkmax": "sim.sparkmax", "talonfx": "sim.talonfx"}


def _module(wiring: str):  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module(MODULES[wiring])
    except KeyError:
        raise TypeError(f"no simulation for the {wiring!r} wiring") from None


def wiring_devices(io: DrivetrainIO, settings: SimSettings, rng: random.Random) -> Devices:
    """The simulated devices of the wiring ``io`` drives."""
    devices: Devices = _module(io.wiring).build(io, settings, rng)
    return devices


def drive_motor(wiring: str) -> plant.DCMotor:
    """One drive motor of ``wiring`` as the chassis model takes it."""
    motor: plant.DCMotor = _module(wiring).drive_motor()
    return motor
