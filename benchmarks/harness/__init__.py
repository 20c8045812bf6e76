"""The one harness of the benchmarks, the checks and the system tests: every benchmark, check
and test that runs the robot program in a simulator, drives it through a host or judges what it
did uses these, and nothing of a benchmark or a check.

* :data:`ROOT`: the project's folder, the one place every benchmark, check and test takes its
  paths from (importing this package loads nothing else);
* :mod:`.ports`: a port free for TCP and UDP, for a robot, a proxy or a host of a run's own;
* :mod:`.sim`: the launcher, :class:`~.sim.SimRobot` (the robot program, or another robot
  program, headless in a process of its own, its own BCNP and NetworkTables ports);
* :mod:`.robotlog`: the robot's data log on the wall clock: each command it started;
* :mod:`.judge`: which command of which host plan each start is, and whether it started late
  or early (tags that make commands tell which they are);
* :mod:`.rig`: the fault proxy in front of a robot, the hosts through it, and driving a path
  open or closed loop;
* :mod:`.sender`: the periodic sender (a host thread that sends on a period or at full rate);
* :mod:`.truth`: the simulator's true pose, a drive watched through it, and path geometry;
* :mod:`.inprocess`: the robot program stepped tick by tick in this process (tick_cost,
  tick_instructions);
* :mod:`.callgrind`: Callgrind's client requests, for the instruction counts;
* :mod:`.workloads`: the codec benchmarks' random DriveCmds and chunked streams.

``benchmarks/report.py`` holds what the benchmarks and the checks share to report (``--json
PATH``, the image arguments, progress and failure lines); tests/test_architecture.py checks
that nothing else of a benchmark or a check is imported elsewhere, and that nobody but this
package works out the project's folder.
"""

from pathlib import Path

#: The project's folder: robot.py, bcnp/, paths/, schema/, tests/, benchmarks/, checks/.
ROOT = Path(__file__).resolve().parents[2]
