"""The simulator's NetworkTables plumbing: where its server keeps its file and listens, and
the autonomous mode picked before the first tick."""

from __future__ import annotations

import contextlib
from pathlib import Path

import ntcore
import wpilib


def move_persistence_out_of(project: Path, sim_dir: Path) -> None:
    """``robotpy sim`` starts its NetworkTables server with an empty ``networktables.json`` in
    the current directory, which deploy would upload to the robot. Restart the server with its
    file under ``sim_dir`` and remove the empty file. Anything else (a file with content, a
    server started elsewhere, pyfrc's local mode) is left alone."""
    inst = ntcore.NetworkTableInstance.getDefault()
    stray = Path.cwd() / "networktables.json"
    if Path.cwd().resolve() == sim_dir.resolve():
        return  # run.py sim already runs in .sim/
    if not inst.getNetworkMode() & ntcore.NetworkTableInstance.NetworkMode.kNetModeServer:
        return
    try:
        if stray.read_text().strip() != "[]":
            return
    except OSError:
        return
    sim_dir.mkdir(exist_ok=True)
    inst.stopServer()
    inst.startServer(str(sim_dir / "networktables.json"))
    with contextlib.suppress(OSError):
        stray.unlink()


def move_server(port: int | None, sim_dir: Path) -> None:
    """Serve NetworkTables on ``port`` instead of 5810 (NT3's 1735 closed), so several
    simulated robots each serve their own keys."""
    if port is None:
        return
    inst = ntcore.NetworkTableInstance.getDefault()
    if not inst.getNetworkMode() & ntcore.NetworkTableInstance.NetworkMode.kNetModeServer:
        return  # pyfrc's local mode: no server to move
    inst.stopServer()
    inst.startServer(str(sim_dir / "networktables.json"), "", 0, port)


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
