"""The robot program stepped tick by tick in this process (no simulator process, no notifier
thread), for the benchmarks that time or count what one tick costs (tick_cost,
tick_instructions): the robot class with physics attached, an empty TimedRobot, one tick."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchmarks.harness import ROOT

TICK_S = 0.02


def robot_classes() -> tuple[type, type]:
    """The robot with physics attached (as pyfrc attaches it) and an empty TimedRobot."""
    import wpilib
    from pyfrc.physics.core import PhysicsInterface

    import robot as robot_module

    _, with_physics = PhysicsInterface._create_and_attach(robot_module.BcnpRobot, ROOT)

    class EmptyRobot(wpilib.TimedRobot):
        def robotPeriodic(self) -> None:
            pass

    return with_physics, EmptyRobot


def step(
    robot: Any,
    *,
    autonomous: bool,
    enabled: bool,
    before: Callable[[], None] | None = None,
    pace: float = 0.0,
) -> int:
    """One tick: driver-station data, 20 ms of simulated time, WPILib's loop; ``pace`` s of
    wall time waited first. Returns the loop's ns."""
    from wpilib.simulation import DriverStationSim, stepTimingAsync

    if pace:
        time.sleep(pace)
    DriverStationSim.setDsAttached(True)
    DriverStationSim.setAutonomous(autonomous)
    DriverStationSim.setEnabled(enabled)
    DriverStationSim.notifyNewData()
    stepTimingAsync(TICK_S)  # no notifier thread runs the loop here: do not wait for one
    if before is not None:
        before()
    start = time.perf_counter_ns()
    robot._loopFunc()
    return time.perf_counter_ns() - start
