"""Autonomous modes, picked on SmartDashboard ("Autonomous Mode") before a match.

robotpy-wpilib-utilities' ``AutonomousModeSelector`` (robot.py) imports every
module here when the robot starts and makes one instance, given the robot's
:class:`~subsystems.link.bcnp_link.BcnpLink`, of each class with a ``MODE_NAME``;
``DEFAULT = True`` marks the one selected unless the dashboard picks another.
Each tick of autonomous, before the queue advances, the selector calls the
chosen mode's ``on_iteration``; ``on_enable`` and ``on_disable`` bracket the
period. A mode feeds the queue (a path played on the robot) and says, by
``runs_queue``, whether the robot runs the queue's command or stands still. So
every command, a host's or a path's, passes the same clamp, acceleration limits
and stop rules.

A mode that must drive the motors itself (SysId's open-loop voltages,
``sysid.py``; the pre-flight check, ``preflight.py``) does it in ``actuate``,
through the drivetrain's own calls; robot.py calls it each tick of autonomous,
after the queue advanced, and it says whether it drove. ``record`` follows once
the drivetrain has acted. Neither is called outside autonomous, so the stop
rules hold as for the queue: robot.py stops the drivetrain in the very tick the
robot is disabled or autonomous ends, and the drivetrain keeps the motor
watchdog fed while a mode drives it.

Only mode classes may carry ``MODE_NAME``, and each is defined in one module:
a mode class imported into another module would be found twice.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import wpilib

import constants
from bcnp.paths import DriveLimits, is_planned, load_path
from subsystems.link.local_path import LocalPath

if TYPE_CHECKING:
    from subsystems.drivetrain.drivetrain import Drivetrain
    from subsystems.link.bcnp_link import BcnpLink

log = logging.getLogger("autonomous")


class Mode:
    """What the selector calls; by default nothing happens and the queue's command runs."""

    MODE_NAME: ClassVar[str]  # declared, not set: the selector skips classes without one
    #: True: the robot runs the queue's active command (a host's, or a path's played here);
    #: False: it stands still (the queue keeps running and reporting).
    runs_queue = True

    def __init__(self, link: BcnpLink) -> None:
        self.link = link

    def prepare(self) -> None:
        """Selected while the robot is disabled: get ready to run (robot.py calls it each
        disabled tick; a mode with nothing to prepare does nothing)."""

    def on_enable(self) -> None:
        pass

    def on_iteration(self, time_elapsed: float) -> None:
        pass

    def on_disable(self) -> None:
        pass

    def actuate(self, drivetrain: Drivetrain, now: float) -> bool:
        """Drive ``drivetrain`` this tick, or not: True when it did (robot.py then neither runs
        the queue's command nor stops). Called each tick of autonomous after the queue advanced,
        ``now`` the tick's FPGA time; by default the mode leaves the wheels to the queue."""
        return False

    def record(self, drivetrain: Drivetrain, now: float) -> None:
        """Each tick of autonomous once the drivetrain has acted: its sensors read at the tick's
        start and what it was told this tick go together (SysId's log)."""


class FieldGuard:
    """Keeps a drive test (SysId, the pre-flight check) off a competition field: while the
    driver station is attached to a field's FMS the test must not drive, and says so once
    per enable (``refuses``: an error ``Alert``, a log line; the caller shows it on its key).
    A match's autonomous period is the field's, and a test left selected would drive
    open loop, blind to everything around it."""

    REASON = "the field (FMS) is connected: drive tests run only off the field"

    def __init__(self, name: str) -> None:
        self.name = name
        self.alert = wpilib.Alert(
            "Autonomous", f"{name} refused: {self.REASON}", wpilib.Alert.AlertType.kError
        )
        self._said = False

    def reset(self) -> None:
        """A new enable: the refusal is said again if it still holds."""
        self._said = False
        self.alert.set(False)

    def refuses(self) -> bool:
        if not wpilib.DriverStation.isFMSAttached():
            return False
        if not self._said:
            self._said = True
            self.alert.set(True)
            log.error("autonomous mode %r refuses to drive: %s", self.name, self.REASON)
        return True


class PathMode(Mode):
    """A mode that plays a path file on the robot. A file that cannot be played is an
    error logged when the robot starts; the mode then refuses to play it."""

    path: LocalPath | None
    error: str | None

    def _load(self, file: Path) -> None:
        self.path, self.error = None, None
        try:
            # A planner file is planned with this robot's drivetrain.
            limits = DriveLimits.from_constants(constants) if is_planned(file) else None
            commands = load_path(file, limits)
            self.path = LocalPath(self.link, file.name, commands, lead=constants.AUTO_PATH_LEAD_S)
        except (ValueError, OSError) as exc:  # PathError is a ValueError; so is a value DriveCmd refuses
            self.error = str(exc)
            log.error("autonomous mode %r cannot play its path: %s", self.MODE_NAME, exc)

    def _refuse(self) -> None:
        log.error("autonomous mode %r refuses to run: %s", self.MODE_NAME, self.error)

    def on_disable(self) -> None:
        if self.path is not None:
            self.path.stop()
