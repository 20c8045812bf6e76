"""Stand still for the whole period."""

from __future__ import annotations

from autonomous import Mode


class DoNothing(Mode):
    """The robot stays stopped; a host's commands are queued and reported but not run
    (as in teleop)."""

    MODE_NAME = "Do nothing"
    runs_queue = False
