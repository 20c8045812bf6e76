"""run.py: the quick start's sim command and the shipped sim GUI layout."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import run

ROOT = Path(__file__).resolve().parent.parent


def test_the_shipped_layout_opens_the_field_and_the_network_keys() -> None:
    layout = ROOT / ".sim-layout"
    gui = json.loads((layout / "simgui.json").read_text())
    field = gui["NTProvider"]["windows"]["/SmartDashboard/Field"]
    assert gui["NTProvider"]["types"]["/SmartDashboard/Field"] == "Field2d" and field["window"]["visible"]
    assert field["Trail"]["style"] == "Line"
    assert gui["NetworkTables"]["transitory"]["SmartDashboard"]["Network"]["open"] is True
    ds = json.loads((layout / "simgui-ds.json").read_text())
    assert ds["robotJoysticks"] == [{"guid": "Keyboard0"}]
    windows = json.loads((layout / "simgui-window.json").read_text())["Window"]
    assert {"###/SmartDashboard/Field", "###NetworkTables"} <= set(windows)


def test_sim_runs_in_a_dot_folder_seeded_with_the_layout_without_overwriting(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / ".sim-layout", project / ".sim-layout")
    workdir, command = run.sim_command(project, sys.executable, ["--nogui"])
    assert workdir == project / ".sim"
    assert command == [sys.executable, "-m", "robotpy", "--main", str(project / "robot.py"), "sim", "--nogui"]
    seeded = sorted(p.name for p in workdir.iterdir())
    assert seeded == ["simgui-ds.json", "simgui-window.json", "simgui.json"]
    (workdir / "simgui.json").write_text("{}")  # the user's own window changes
    run.sim_command(project, sys.executable, [])
    assert (workdir / "simgui.json").read_text() == "{}"
