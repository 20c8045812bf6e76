"""The simulator's NetworkTables plumbing: where its server keeps its file and listens, and
the autonomous mode picked before the first tick."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import ntcore
import wpilib


def serve_before_the_robot(port: int | None, sim_dir: Path, argv: Sequence[str]) -> bool:
    """Starts the simulator's NetworkTables server on ``port`` (5810 when None, NT3's 1735
    closed), its file under ``sim_dir``, before the robot is built; True if it did.

    ``robotpy sim`` loads physics.py before it builds the robot, and the robot's constructor
    (WPILib's RobotBase) starts a server on 5810 with ``networktables.json`` in the current
    directory, which deploy would upload. A server already started makes that call do
    nothing, so a sim on a port of its own never holds 5810, even for a moment, and leaves no
    file behind. Only under ``robotpy sim``: pyfrc's tests load physics.py too, then run
    NetworkTables locally, with no server."""
    if "sim" not in argv[1:]:
        return False
    inst = ntcore.NetworkTableInstance.getDefault()
    if inst.getNetworkMode() != ntcore.NetworkTableInstance.NetworkMode.kNetModeNone:
        return False
    sim_dir.mkdir(exist_ok=True)
    port4 = port or ntcore.NetworkTableInstance.kDefaultPort4
    inst.startServer(str(sim_dir / "networktables.json"), "", 0, port4)
    return True


def select_autonomous_mode(name: str) -> ntcore.StringPublisher | None:
    """Picks ``name`` on the "Autonomous Mode" chooser, as a dashboard does, before the first
    tick; the publisher is kept, so the choice stays."""
    if not name:
        return None
    topic = ntcore.NetworkTableInstance.getDefault().getStringTopic(
        "/SmartDashboard/Autonomous Mode/selected"
    )
    publisher = topic.publish()
    publisher.set(name)
    wpilib.SmartDashboard.updateValues()  # the chooser takes it now, before autonomous starts
    return publisher
