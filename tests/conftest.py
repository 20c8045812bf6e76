"""Shared fixtures: schemas loaded from the repository; pyfrc's robot fixtures; the two tiers.

``robotpy test`` registers pyfrc's pytest plugin itself; under plain
``python -m pytest`` it is registered here, so both commands have the
``robot`` and ``control`` fixtures.

Two tiers. ``robotpy test``, which ``robotpy deploy`` runs before every upload to a
robot (in a pit, between matches), runs the deploy tier: the modules in
``DEPLOY_TIER`` (the robot program in every mode and both wirings, pyfrc's stock
robot tests, the protocol core, the allowlist), property tests with a 25th of their
examples (``support.examples``), and without the heaviest cases (``full_suite``: packets of
65,535 messages, floods): seconds, not minutes. ``python run.py test`` (plain
pytest: the README's test command, CI's) runs every test in full. ``BCNP_TEST_ALL=1``
makes ``robotpy test`` run everything too.
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
from support import TIER_ENV

import bcnp

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

# pytest imports each test module through its assertion rewriting, about 3 s of CPU a process
# for this suite (every xdist worker and every nested ``robotpy test`` collects all of it), and
# keeps the result in __pycache__ unless writing bytecode is off (PYTHONDONTWRITEBYTECODE, set in
# many CI and container images): then every process of every run pays it again.
sys.dont_write_bytecode = False

#: The deploy tier's modules (``robotpy test``, so ``robotpy deploy``).
DEPLOY_TIER = (
    "test_robot.py",
    "test_pyfrc_stock.py",
    "test_wire.py",
    "test_parser.py",
    "test_queue.py",
    "test_connection.py",
    "test_dispatcher.py",
    "test_allowed_peers.py",
)
ALL_ENV = "BCNP_TEST_ALL"
#: The modules that take longest, longest first (seconds each in a parallel run here,
#: 2026-11-25: simulator processes, replays on the wall clock, g++, hypothesis). ``python
#: run.py test`` hands out whole modules to its xdist workers in collection order (``--dist
#: loadfile --no-loadscope-reorder``): longest first, so that the run ends with short ones on
#: every worker instead of one long module finishing alone. The rest follow as collected.
LONGEST_FIRST = (
    "test_field.py",  # 40
    "test_examples.py",  # 33
    "test_field_restart.py",  # 19
    "test_properties.py",  # 12
    "test_on_target.py",  # 12
    "test_interlocks.py",  # 12
    "test_autonomous.py",  # 11
    "test_robot.py",  # 9
    "test_client.py",  # 8
    "test_codegen_cpp.py",  # 8
    "test_host_tools.py",  # 7
    "test_planners.py",  # 7
    "test_faults.py",  # 7
    "test_sysid.py",  # 7
    "test_preflight.py",  # 6
    "test_modes.py",  # 6
    "test_cli.py",  # 6
    "test_transport_tcp.py",  # 6
    "test_queue.py",  # 6
    "test_wire.py",  # 5
    "test_parser.py",  # 5
    "test_sim.py",  # 4
    "test_pyfrc_stock.py",  # 4
    "test_doc_examples.py",  # 4
)

# Robots built by tests listen on free ports, never on 5800 (a sim may be running).
os.environ.setdefault("BCNP_PORT", "0")
# Their data logs go to a temporary folder, removed at the end, never into the project.
# One folder per process: the data log is the process's (see the robot fixture), and a
# process that inherited the folder this file made in its parent (an xdist worker, from the
# controller; a pytest run by a test) makes its own. A BCNP_LOG_DIR set outside is used as is.
_LOG_DIR_MADE = "BCNP_TEST_LOG_DIR"
_inherited = os.environ.get("BCNP_LOG_DIR")
_LOG_DIR = None
if not _inherited or _inherited == os.environ.get(_LOG_DIR_MADE):
    _LOG_DIR = tempfile.mkdtemp(prefix="bcnp-test-logs-")
    os.environ["BCNP_LOG_DIR"] = os.environ[_LOG_DIR_MADE] = _LOG_DIR


def pytest_configure(config: pytest.Config) -> None:
    try:
        from pyfrc.test_support.pytest_plugin import PyFrcPlugin
    except ImportError:  # robotpy not installed: the protocol tests still run
        return
    if any(
        type(p).__name__ in ("PyFrcPlugin", "IsolatedTestsPlugin") for p in config.pluginmanager.get_plugins()
    ):
        # Started by `robotpy test` (so by `robotpy deploy`): the deploy tier, unless asked for all.
        if os.environ.get(ALL_ENV, "").strip() != "1":
            os.environ[TIER_ENV] = "deploy"
            _load_deploy_profile()
        return
    if os.environ.get(TIER_ENV) == "deploy":
        # An xdist worker of `robotpy test -- -n N`: pyfrc's plugin stays with the controller,
        # the tier comes through the environment; the worker registers the plugin below.
        _load_deploy_profile()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    # The same arguments `robotpy test --no-isolation` passes; pyfrc internals,
    # so an upgrade that changes them fails here, loudly, before any test runs.
    import robot

    config.pluginmanager.register(
        PyFrcPlugin(robot.BcnpRobot, ROOT / "robot.py", isolated=False, init_timeout=10.0), "pyfrc"
    )


def _load_deploy_profile() -> None:
    from hypothesis import settings

    settings.register_profile("deploy", max_examples=5)
    settings.load_profile("deploy")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The deploy tier does not even import the other test modules (the planners' and the
    plotting libraries' imports alone take seconds)."""
    if os.environ.get(TIER_ENV) != "deploy" or not collection_path.name.startswith("test_"):
        return None
    if collection_path.suffix != ".py":
        return None
    return collection_path.name not in DEPLOY_TIER or None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (``python run.py test``): two workers for each CPU this process may use.
    Most of the suite's wall time is waiting, not computing (simulator processes driven on the
    wall clock, replays, sockets, subprocesses): with one worker more than the CPUs, the two
    cores here were busy 63-69 % of a run (88-98 s); with two per CPU, 80-85 % (77-78 s).
    At most 8: the longest module (a simulated field, about 40 s) sets the floor long before."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(2 * cpus, 8)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))  # stable: the rest as collected
    if os.environ.get(TIER_ENV) == "deploy":
        # The deploy tier leaves the heaviest cases of its modules to the full suite.
        heavy = [item for item in items if item.get_closest_marker("full_suite") is not None]
        if heavy:
            config.hook.pytest_deselected(items=heavy)
            items[:] = [item for item in items if item.get_closest_marker("full_suite") is None]


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
