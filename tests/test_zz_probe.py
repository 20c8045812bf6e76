import math, os
import pytest
from test_robot import Sim, Physics, cmd, sim, truth, wiring  # noqa
from wpilib.simulation import DriverStationSim, stepTiming

@pytest.mark.parametrize("wiring", [os.environ.get("PW", "sparkmax")], indirect=True)
def test_probe(sim, truth):
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, 0.0, ms=2000)], clear_queue=True)
        for i in range(60):
            sim.run(0.02, host)
            d = truth.drivesim
            if i % 3 == 0:
                print(i, round(d.getLeftVelocity(),3), round(d.getRightVelocity(),3), sim.motors(), sim.drivetrain.commanded)
