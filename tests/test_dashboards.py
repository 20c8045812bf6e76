"""The field on SmartDashboard and the dashboard layouts shipped in ``dashboards/``.

The layouts are checked against what the robot really publishes: the robot
runs in the WPILib simulator, a host drives it over loopback, and every key a
layout names must be a NetworkTables topic of the robot's, of the type the
widget reads. Every ``Network/*`` key must be on the Elastic layout.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ntcore
import pytest
from test_robot import Sim, cmd
from wpimath.geometry import Pose2d, Rotation2d

from benchmarks.harness import ROOT
from subsystems.observe.field_view import PATH_HORIZON_S, commanded_path
from subsystems.observe.network_keys import KEYS, PREFIX

ELASTIC = ROOT / "dashboards" / "elastic-layout.json"
ADVANTAGESCOPE = ROOT / "dashboards" / "advantagescope-layout.json"

#: Elastic widgets that show a Sendable: the topic is a table whose ``.type`` says what it is.
ELASTIC_SENDABLES = {"Field": "Field2d", "ComboBox Chooser": "String Chooser"}
#: Elastic's ``data_type`` and AdvantageScope's ``logType`` -> the NetworkTables type.
ELASTIC_TYPES = {"boolean": "boolean", "double": "double", "string": "string", "double[]": "double[]"}
ADVANTAGESCOPE_TYPES = {
    "Number": "double",
    "Boolean": "boolean",
    "String": "string",
    "NumberArray": "double[]",
}
ADVANTAGESCOPE_PREFIX = "NT:"  # how AdvantageScope names NetworkTables topics, live and in a .wpilog


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _elastic_widgets() -> list[tuple[str, dict[str, Any]]]:
    layout = _load(ELASTIC)
    return [
        (tab["name"], widget)
        for tab in layout["tabs"]
        for group in (tab["grid_layout"]["containers"], tab["grid_layout"]["layouts"])
        for widget in group
    ]


def _advantagescope_keys() -> list[tuple[str, str | None]]:
    """(topic, expected NetworkTables type or None when the tab does not say) of every key."""
    layout = _load(ADVANTAGESCOPE)
    keys: list[tuple[str, str | None]] = []
    for hub in layout["hubs"]:
        for tab in hub["state"]["tabs"]["tabs"]:
            controller = tab["controller"]
            if controller is None:
                continue
            if isinstance(controller, list):  # a table: plain key names
                keys.extend((key, None) for key in controller)
                continue
            for group in ("sources", "leftSources", "rightSources", "discreteSources"):
                for source in controller.get(group, []):
                    keys.append((source["logKey"], ADVANTAGESCOPE_TYPES[source["logType"]]))
    for key, _ in keys:
        assert key.startswith(ADVANTAGESCOPE_PREFIX), key
    return [(key.removeprefix(ADVANTAGESCOPE_PREFIX), kind) for key, kind in keys]


# -- the layouts as files -------------------------------------------------------------------------


def test_the_elastic_layout_is_an_elastic_layout() -> None:
    layout = _load(ELASTIC)
    assert layout["version"] == 1.0 and layout["grid_size"] == 128
    for tab, widget in _elastic_widgets():
        where = f"{tab}/{widget['title']}"
        for name in ("x", "y", "width", "height"):
            assert widget[name] % layout["grid_size"] == 0, f"{where}: {name} off the grid"
        assert widget["properties"]["topic"].startswith("/"), where
        assert widget["properties"]["period"] > 0, where
    # No two widgets of a tab overlap.
    for name in {tab for tab, _ in _elastic_widgets()}:
        cells: dict[tuple[int, int], str] = {}
        for tab, widget in _elastic_widgets():
            if tab != name:
                continue
            g = layout["grid_size"]
            for col in range(int(widget["x"] // g), int((widget["x"] + widget["width"]) // g)):
                for row in range(int(widget["y"] // g), int((widget["y"] + widget["height"]) // g)):
                    assert (col, row) not in cells, f"{tab}: {widget['title']} overlaps {cells[(col, row)]}"
                    cells[(col, row)] = widget["title"]


def test_every_network_key_is_on_the_elastic_layout() -> None:
    shown = {widget["properties"]["topic"] for _, widget in _elastic_widgets()}
    missing = [key.name for key in KEYS if f"/SmartDashboard/{PREFIX}{key.name}" not in shown]
    assert missing == []


def test_the_advantagescope_layout_has_the_field_and_the_keys() -> None:
    layout = _load(ADVANTAGESCOPE)
    tabs = layout["hubs"][0]["state"]["tabs"]["tabs"]
    assert tabs[0]["type"] == 0  # AdvantageScope's own first tab (its documentation)
    field = next(tab for tab in tabs if tab["type"] == 2)  # a 2D field
    sources = {source["logKey"]: source for source in field["controller"]["sources"]}
    robot = sources["NT:/SmartDashboard/Odometry/Robot"]
    assert robot["type"] == "robotLegacy"
    assert robot["options"]["units"] == "degrees"  # Field2d publishes x, y, degrees
    assert sources["NT:/SmartDashboard/Odometry/CommandedPath"]["type"] == "trajectoryLegacy"
    graphed = {key for key, _ in _advantagescope_keys()}
    assert {f"/SmartDashboard/{PREFIX}{key.name}" for key in KEYS if key.type is not str} <= graphed


# -- the robot publishes what they name -------------------------------------------------------------


@pytest.fixture
def sim(control, robot, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sim]:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("BCNP_DRIVETRAIN", "kitbot")
    with control.run_robot():
        yield Sim(robot)


def _topics() -> dict[str, str]:
    return {
        topic.getName(): topic.getTypeString()
        for topic in ntcore.NetworkTableInstance.getDefault().getTopics()
    }


def _path_poses() -> list[tuple[float, float, float]]:
    entry = ntcore.NetworkTableInstance.getDefault().getEntry("/SmartDashboard/Odometry/CommandedPath")
    flat = entry.getDoubleArray([])
    return [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]


def test_every_key_a_layout_names_is_published_by_the_robot(sim: Sim) -> None:
    with sim.connect() as host:
        sim.deliver(host.send, [cmd(1.0, ms=2000)], clear_queue=True)
        sim.run(0.3, host)
        topics = _topics()
    table = ntcore.NetworkTableInstance.getDefault()
    for tab, widget in _elastic_widgets():
        topic = widget["properties"]["topic"]
        where = f"elastic-layout.json {tab}/{widget['title']}: {topic}"
        if widget["type"] in ELASTIC_SENDABLES:
            assert f"{topic}/.type" in topics, f"{where} is not published"
            assert table.getEntry(f"{topic}/.type").getString("") == ELASTIC_SENDABLES[widget["type"]], where
        else:
            assert topic in topics, f"{where} is not published"
            assert topics[topic] == ELASTIC_TYPES[widget["properties"]["data_type"]], where
    for topic, kind in _advantagescope_keys():
        where = f"advantagescope-layout.json: {topic}"
        assert topic in topics, f"{where} is not published"
        if kind is not None:
            assert topics[topic] == kind, where


# -- the field --------------------------------------------------------------------------------------


def test_the_field_shows_the_robot_and_the_path_its_queued_commands_drive(sim: Sim) -> None:
    table = ntcore.NetworkTableInstance.getDefault()
    robot = table.getEntry("/SmartDashboard/Odometry/Robot")
    with sim.connect() as host:
        # 1 m straight, then a quarter turn left on the spot at the robot's limit.
        sim.deliver(host.send, [cmd(1.0, ms=1000), cmd(0.0, math.pi / 2, ms=1000)], clear_queue=True)
        # The path is drawn every 5th tick: find that tick, and the robot's pose in it.
        for _ in range(6):
            sim.run(0.02, host)
            path = _path_poses()
            if path:
                break
        x0, y0, deg0 = robot.getDoubleArray([])
        assert path[0] == pytest.approx((x0, y0, deg0), abs=1e-9)  # drawn from where the robot is
        end = path[-1]
        # The metre and the turn, less what the running command has done already (it
        # started at most 5 ticks ago, at a standstill: a few centimetres).
        assert 0.85 < math.hypot(end[0] - x0, end[1] - y0) <= 1.0 + 1e-6
        limit = math.degrees(sim.link.max_omega)  # the turn is clamped like the command
        assert end[2] - deg0 == pytest.approx(min(90.0, limit), abs=0.01)  # omega on the wire: 1e-4 rad/s
        sim.run(2.5, host)  # both commands done: the queue is empty
        assert _path_poses() == []
        x, y, _ = robot.getDoubleArray([])
        assert (x, y) == pytest.approx((sim.drivetrain.pose().X(), sim.drivetrain.pose().Y()), abs=1e-6)
        assert x > 0.8  # the robot's pose moved with it


def test_commanded_path_is_a_unicycle_from_the_start_pose() -> None:
    start = Pose2d(1.0, 2.0, Rotation2d.fromDegrees(90))
    straight = commanded_path(start, [(1.0, 0.0, 1.5)])
    assert len(straight) == 16  # the start and one pose every 0.1 s
    assert (straight[-1].X(), straight[-1].Y()) == pytest.approx((1.0, 3.5))
    # A quarter circle of radius 1 m to the left ends 1 m ahead and 1 m to the left.
    arc = commanded_path(Pose2d(), [(math.pi / 2, math.pi / 2, 1.0)])
    assert (arc[-1].X(), arc[-1].Y(), arc[-1].rotation().degrees()) == pytest.approx((1.0, 1.0, 90.0))
    # Nothing beyond the horizon; zero-length segments add nothing.
    long = commanded_path(Pose2d(), [(1.0, 0.0, 0.0), (1.0, 0.0, 10.0)])
    assert long[-1].X() == pytest.approx(PATH_HORIZON_S)
