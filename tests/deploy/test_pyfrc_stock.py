"""pyfrc's stock robot tests, as a new RobotPy project has them: autonomous, disabled,
operator control and a practice match run the robot program without an exception."""

from pyfrc.tests import *  # noqa: F403
