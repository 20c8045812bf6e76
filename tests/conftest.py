"""Shared fixtures: schemas loaded from the repository; pyfrc's robot fixtures.

``robotpy test`` registers pyfrc's pytest plugin itself; under plain
``python -m pytest`` it is registered here, so both commands run the same
suite with the ``robot`` and ``control`` fixtures available.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bcnp

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

# Robots built by tests listen on free ports, never on 5800 (a sim may be running).
os.environ.setdefault("BCNP_PORT", "0")
# Their data logs go to a temporary folder, removed at the end, never into the project.
_LOG_DIR = None if os.environ.get("BCNP_LOG_DIR") else tempfile.mkdtemp(prefix="bcnp-test-logs-")
if _LOG_DIR is not None:
    os.environ["BCNP_LOG_DIR"] = _LOG_DIR


def pytest_configure(config: pytest.Config) -> None:
    try:
        from pyfrc.test_support.pytest_plugin import PyFrcPlugin
    except ImportError:  # robotpy not installed: the protocol tests still run
        return
    if any(
        type(p).__name__ in ("PyFrcPlugin", "IsolatedTestsPlugin") for p in config.pluginmanager.get_plugins()
    ):
        return  # started by `robotpy test`
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    # The same arguments `robotpy test --no-isolation` passes; pyfrc internals,
    # so an upgrade that changes them fails here, loudly, before any test runs.
    import robot

    config.pluginmanager.register(
        PyFrcPlugin(robot.BcnpRobot, ROOT / "robot.py", isolated=False, init_timeout=10.0), "pyfrc"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Once a failure is reported, its traceback's frames let go of their locals. A failed
    robot test's locals (a SPARK MAX, a drivetrain IO) would otherwise outlive its robot, and
    the next test's robot could not take the same CAN ids: one failure would fail the next."""
    yield
    if call.excinfo is not None:
        tb = call.excinfo.tb
        traceback.clear_frames(tb)
        while tb is not None:  # the locals' snapshot the report took goes too (read again: emptied)
            tb.tb_frame.f_locals  # noqa: B018
            tb = tb.tb_next


def pytest_unconfigure(config: pytest.Config) -> None:
    if _LOG_DIR is not None:
        # A robot started the data log here: its writer thread must not reopen a file in a
        # removed folder. None did: stop() would start one, in ./logs.
        if any(Path(_LOG_DIR).iterdir()):
            import wpilib

            wpilib.DataLogManager.stop()
        shutil.rmtree(_LOG_DIR, ignore_errors=True)


def _pyfrc_plugin(config: pytest.Config) -> Any:
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "PyFrcPlugin":
            return plugin
    return None


@pytest.fixture
def robot(robot: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """pyfrc's robot, with the WPILib objects that outlive it dropped while NetworkTables
    still knows their handles.

    pyfrc resets NetworkTables, then clears SmartDashboard, and its physics interface
    keeps the last ``Field2d`` it put there until the next robot's ``_simulationInit``
    replaces it. A Field2d destroyed after the reset releases its old handles, whose
    numbers by then belong to the next test's topics and entries: an entry a test had
    just made, racing the robot thread's start, read nothing ever after. Here (after
    the test's ``run_robot`` has ended, before pyfrc's cleanup) both are let go of, so
    every such object dies with its own NetworkTables instance.

    The data log is the process's, and its NetworkTables logger is tied to the instance
    pyfrc resets: it is stopped here, so the next robot's ``start_recording`` starts it on
    the new instance, as a robot program's first start does."""
    yield robot
    plugin = _pyfrc_plugin(request.config)
    physics = getattr(plugin, "_physics", None)
    if physics is not None:
        physics.field = None
    import wpilib

    wpilib._wpilib._clearSmartDashboardData()
    log_dir = os.environ.get("BCNP_LOG_DIR", "")
    if log_dir and any(Path(log_dir).glob("*.wpilog")):  # started (else this would start it)
        wpilib.DataLogManager.logNetworkTables(False)


@pytest.fixture(scope="session")
def schema() -> bcnp.Schema:
    """The default schema (the reference robot's: DriveCmd, DrivetrainTelemetry)."""
    return bcnp.load_schema(ROOT / "schema" / "messages.json")


@pytest.fixture(scope="session")
def test_schema() -> bcnp.Schema:
    """The reference unit-test schema (TestCmd, DrivetrainState, EncoderData, ProximityAlert)."""
    return bcnp.load_schema(DATA / "test_schema.json")
