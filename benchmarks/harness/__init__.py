"""The one harness of the benchmarks and the system tests: every benchmark and every test that
runs the robot program in a simulator, drives it through a host or judges what it did uses
these, and nothing of another benchmark.

* :mod:`.sim`: the launcher, :class:`~.sim.SimRobot` (the robot program, or another robot
  program, headless in a process of its own, its own BCNP and NetworkTables ports);
* :mod:`.robotlog`: the robot's data log on the wall clock: each command it started;
* :mod:`.judge`: which command of which host plan each start is, and whether it started late
  or early (tags that make commands tell which they are);
* :mod:`.rig`: the fault proxy in front of a robot, the hosts through it, and driving a path
  open or closed loop;
* :mod:`.sender`: the periodic sender (a host thread that sends on a period or at full rate);
* :mod:`.truth`: the simulator's true pose, a drive watched through it, and path geometry.
"""
