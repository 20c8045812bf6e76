"""Shared fixtures: schemas loaded from the repository; pyfrc's robot fixtures; the two tiers;
the order in which the full suite hands out its modules.

``robotpy test`` registers pyfrc's pytest plugin itself; under plain
``python -m pytest`` it is registered here, so both commands have the
``robot`` and ``control`` fixtures.

Two tiers. ``robotpy test``, which ``robotpy deploy`` runs before every upload to a
robot (in a pit, between matches), runs the deploy tier: the modules in ``tests/deploy/``
(the robot program in every mode and both wirings, pyfrc's stock robot tests, the
protocol core, the allowlist), property tests with a 25th of their examples
(``support.examples``), and without the heaviest cases (``full_suite``: packets of
65,535 messages, floods), on a pytest-xdist worker a CPU (:func:`pytest_cmdline_main`):
seconds, not minutes. A module belongs to the tier by its folder. ``python run.py test``
(plain pytest: the README's test command, CI's) runs every test in full, the longest
modules first (see "the order of the full suite" below).
``BCNP_TEST_ALL=1`` makes ``robotpy test`` run everything too.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import TIER_ENV

import bcnp
from benchmarks.harness import ROOT
from benchmarks.harness.sim import SimRobot

DATA = Path(__file__).resolve().parent / "data"

# pytest imports each test module through its assertion rewriting, about 3 s of CPU a process
# for this suite (every xdist worker and every nested ``robotpy test`` collects all of it), and
# keeps the result in __pycache__ unless writing bytecode is off (PYTHONDONTWRITEBYTECODE, set in
# many CI and container images): then every process of every run pays it again.
sys.dont_write_bytecode = False

#: The deploy tier (``robotpy test``, so ``robotpy deploy``): every test module in this folder.
DEPLOY = Path(__file__).resolve().parent / "deploy"
ALL_ENV = "BCNP_TEST_ALL"

# The modules beside this file take the robot's test helpers (Sim, cmd, the wiring fixture) from
# deploy/test_robot.py by its module name, as pytest imports it: with its folder on the path, a
# module run alone (``python run.py test tests/test_sim.py``) finds it too, not only a run that
# collected tests/deploy/ first.
if str(DEPLOY) not in sys.path:
    sys.path.insert(0, str(DEPLOY))

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
    config.pluginmanager.register(Timings(config), "bcnp-timings")
    try:
        from pyfrc.test_support.pytest_plugin import PyFrcPlugin
    except ImportError:  # robotpy not installed: the protocol tests still run
        return
    if started_by_robotpy_test(config):
        # Started by `robotpy test` (so by `robotpy deploy`): the deploy tier, unless asked for all.
        if not all_asked():
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


def started_by_robotpy_test(config: pytest.Config, *plugins: str) -> bool:
    """Whether ``robotpy test`` started this pytest: pyfrc's plugin is registered (``plugins``:
    which of its two; both by default)."""
    names = plugins or ("PyFrcPlugin", "IsolatedTestsPlugin")
    return any(type(p).__name__ in names for p in config.pluginmanager.get_plugins())


def all_asked() -> bool:
    return os.environ.get(ALL_ENV, "").strip() == "1"


def usable_cpus() -> int:
    """The CPUs this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


#: The deploy tier's workers at most (``robotpy test`` where pytest-xdist is installed).
DEPLOY_WORKERS = 4


def deploy_workers(cpus: int) -> int:
    """How many workers ``robotpy test`` runs the deploy tier on with ``cpus`` CPUs: one a CPU
    (its tests compute; none waits on the clock), at most :data:`DEPLOY_WORKERS` (each collects
    the tier: about 1.5 s of CPU); 0, in this process, with one CPU."""
    return min(cpus, DEPLOY_WORKERS) if cpus > 1 else 0


def under_coverage() -> bool:
    """Whether coverage.py measures this process (``robotpy coverage test``): it would not
    measure workers."""
    coverage = sys.modules.get("coverage")
    current = getattr(getattr(coverage, "Coverage", None), "current", None)
    return callable(current) and current() is not None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``robotpy test`` (so ``robotpy deploy``) runs the deploy tier in parallel where
    pytest-xdist is installed (the deploy-tests extra installs it): :func:`deploy_workers`, whole modules
    each (``--dist loadfile``), the longest first, as the full suite hands them out. Here (two
    CPUs) 10.5-11.5 s instead of 14-17 s in this process. Not when the run names its own
    workers (``robotpy test -- -n 0`` runs in this process), only collects, runs everything
    (``BCNP_TEST_ALL=1``), runs each test in a robot process of its own (``--isolated``) or
    runs under coverage.py (``robotpy coverage test``: it measures this process alone).
    Before xdist reads ``-n``; each worker registers pyfrc's plugin itself (pytest_configure)."""
    option = config.option
    if (
        getattr(option, "numprocesses", "no xdist") is None
        and not hasattr(config, "workerinput")
        and started_by_robotpy_test(config, "PyFrcPlugin")
        and not all_asked()
        and not config.getoption("collectonly")
        and not under_coverage()
    ):
        workers = deploy_workers(usable_cpus())
        if workers:
            option.numprocesses = workers
            option.dist = "loadfile"
            option.loadscopereorder = False  # the order pytest_collection_modifyitems gives


def _load_deploy_profile() -> None:
    from hypothesis import settings

    settings.register_profile("deploy", max_examples=5)
    settings.load_profile("deploy")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The deploy tier collects tests/deploy/ alone: it does not even import the other test
    modules (the planners' and the plotting libraries' imports alone take seconds)."""
    if os.environ.get(TIER_ENV) != "deploy" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return DEPLOY not in collection_path.resolve().parents or None


# -- the order of the full suite ----------------------------------------------------------------
#
# ``python run.py test`` hands whole modules to its xdist workers (``--dist loadfile``: a module's
# fixtures, a simulator process or a g++ build, start once), in collection order
# (``--no-loadscope-reorder``); a worker gets its next module as it nears the end of its current
# one. Longest first: the run then ends with short modules on every worker instead of one long
# module running alone while the others wait. A module's length is what its tests took the last
# time they ran, kept in pytest's cache; a test no run has measured (a fresh clone, as CI's) is
# guessed from what it uses.

#: pytest's cache entry (``.pytest_cache/``): each test's seconds (setup, call and teardown) the
#: last time it ran, the deploy tier's fewer examples aside.
DURATIONS = "bcnp/durations"


class Timings:
    """Each test's seconds, measured or guessed. Read from pytest's cache before the run by the
    process that reports the tests (pytest itself, or the xdist controller, which hands its
    reading to every worker: the workers must order their collections alike, which they could not
    if each read a cache another run rewrote meanwhile); that process records this run's and
    writes them back at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        self.worker = workerinput is not None
        self.measured: dict[str, float] = (
            workerinput.get(DURATIONS, {}) if workerinput is not None else self.read()
        )
        self.now: dict[str, float] = {}

    def read(self) -> dict[str, float]:
        cache = getattr(self.config, "cache", None)  # None with -p no:cacheprovider
        found = cache.get(DURATIONS, {}) if cache is not None else {}
        return found if isinstance(found, dict) else {}

    def seconds(self, item: pytest.Item) -> float:
        measured = self.measured.get(item.nodeid)
        return float(measured) if isinstance(measured, int | float) else guess(item)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[DURATIONS] = self.measured

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.now[report.nodeid] = self.now.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(self.config, "cache", None)
        if self.worker or cache is None or not self.now or os.environ.get(TIER_ENV) == "deploy":
            return
        root = self.config.rootpath
        kept = {
            test: seconds
            for test, seconds in self.read().items()
            if (root / test.split("::")[0]).is_file()  # a module removed or renamed: its tests go
        }
        cache.set(DURATIONS, {**kept, **{test: round(s, 3) for test, s in self.now.items()}})


#: What a test no run has measured yet is guessed to take, in seconds, by the costliest thing it
#: uses: the robot program in a simulator process, driven on the wall clock; another program; the
#: robot program on pyfrc's simulator, in this process; a property test's examples; anything else.
#: Roughly what a test of each kind took in a parallel run here; for the last kind its median, not
#: its mean: most take milliseconds, and a module of a hundred of them is short. The modules that
#: wait on the wall clock and those on pyfrc's simulator then start first, side by side: pyfrc's
#: tests (two threads handing each tick back and forth) took twice the CPU when they ran later,
#: among six workers that all computed.
GUESSES = {"simulator process": 7.0, "program": 0.5, "pyfrc": 1.0, "property": 1.5, "": 0.01}


def guess(item: pytest.Item) -> float:
    """A test's seconds before any run here measured it: :data:`GUESSES` by what it uses."""
    functions = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for definitions in getattr(info, "name2fixturedefs", {}).values():
        functions += [getattr(definition, "func", None) for definition in definitions]
    starts = set().union(*(_starts(inspect.unwrap(f)) for f in functions if callable(f)))
    if "simulator process" in starts:
        return GUESSES["simulator process"]
    if "program" in starts:
        return GUESSES["program"]
    if "control" in getattr(item, "fixturenames", ()):
        return GUESSES["pyfrc"]
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        return GUESSES["property"]
    return GUESSES[""]


_started: dict[object, frozenset[str]] = {}


def _starts(function: Callable[..., object]) -> frozenset[str]:
    """What ``function`` starts, by the globals it names and those that the project's functions
    it names name in turn: the robot program in a simulator process (SimRobot), another program
    (subprocess)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return frozenset()
    if code in _started:
        return _started[code]
    _started[code] = frozenset()  # a function that calls itself, directly or not
    found: set[str] = set()
    names = getattr(function, "__globals__", {})
    for name in _names(code):
        thing = names.get(name)
        if thing is SimRobot:
            found.add("simulator process")
        elif thing is subprocess or getattr(thing, "__module__", None) == "subprocess":
            found.add("program")
        elif isinstance(thing, types.FunctionType) and thing.__code__.co_filename.startswith(_PROJECT):
            found |= _starts(thing)
    _started[code] = frozenset(found)
    return _started[code]


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names(constant)
    return names


#: Where this project's own functions are defined (its virtual environment's are not: a dot-folder).
_PROJECT = tuple(
    str(path) + os.sep for path in ROOT.iterdir() if path.is_dir() and not path.name.startswith(".")
)


def longest_first(items: list[pytest.Item], timings: Timings) -> list[pytest.Item]:
    """``items`` by module (as ``--dist loadfile`` groups them), the longest module first; the
    tests of a module, and modules of equal length, in the order they came."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    length = {module: sum(timings.seconds(item) for item in tests) for module, tests in modules.items()}
    return [item for module in sorted(modules, key=lambda m: -length[m]) for item in modules[module]]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The xdist controller rewrites the test modules' asserts before it starts its workers. In a
    fresh clone (CI's) each worker would otherwise rewrite and compile every test module itself,
    all of them at once as they start: about 4 s of CPU each, which made the start of six workers
    on the two cores here 7-8 s longer. The controller does it once (4 s); the workers load what
    it wrote."""
    config = session.config
    if config.pluginmanager.hasplugin("dsession") and not sys.dont_write_bytecode:
        rewrite_test_modules(config, modules_to_collect(config))


def modules_to_collect(config: pytest.Config) -> list[Path]:
    """The test modules under the paths the run was given (``tests/``, a folder, a module, a
    test's id), in the deploy tier those in its folder."""
    found: set[Path] = set()
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if path.is_dir():
            found.update(path.rglob("test_*.py"))
        elif path.name.startswith("test_") and path.suffix == ".py":
            found.add(path)
    if os.environ.get(TIER_ENV) == "deploy":
        found = {path for path in found if DEPLOY in path.parents}
    return sorted(found)


def rewrite_test_modules(config: pytest.Config, modules: list[Path]) -> None:
    """What pytest's assertion rewriting would cache for each of ``modules`` on importing it (its
    internals: when an upgrade moves them, the workers rewrite the modules themselves, as before)."""
    try:
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
        )

        state = config.stash[assertstate_key]  # absent with --assert=plain
    except (ImportError, KeyError):
        return
    for module in modules:
        pyc = get_cache_dir(module) / (module.name[:-3] + PYC_TAIL)
        try:
            if _read_pyc(module, pyc) is not None:
                continue
            source_hash, code = _rewrite_test(module, config)
            pyc.parent.mkdir(parents=True, exist_ok=True)
            _write_pyc(state, code, source_hash, pyc)
        except SyntaxError:  # the worker that imports it reports it, as a collection error
            continue
        except (OSError, TypeError, ValueError):  # read-only, or internals changed: as before
            return


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (``python run.py test``): three workers for each CPU this process may use.
    The longest modules (a simulated field, the coprocessor example, the robot restarts: 30-45 s
    each) mostly wait on the wall clock, and they start first: with two workers per CPU the two
    cores here were busy 84 % of a run (119 s), with three 92-94 % (100-105 s), though the
    workers' start (each collects the suite: 3 s of CPU) then takes 11 s, not 7.5 s.
    At most 8: each worker more costs its start, and the longest module (45 s) sets a floor."""
    return min(3 * usable_cpus(), 8)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(TIER_ENV) == "deploy":
        # The deploy tier leaves the heaviest cases of its modules to the full suite.
        heavy = [item for item in items if item.get_closest_marker("full_suite") is not None]
        if heavy:
            config.hook.pytest_deselected(items=heavy)
            items[:] = [item for item in items if item.get_closest_marker("full_suite") is None]
    items[:] = longest_first(items, config.pluginmanager.get_plugin("bcnp-timings"))


class HeldMachine(Exception):
    """A test of devices that run on the wall clock (CTRE's firmware) failed after the machine
    held or starved its process (a paced read late, a tick's frames not sent in time): the
    firmware saw wall time the simulated chassis did not, and what failed may be the hold's. A
    test module that judges such devices reruns on it (``flaky``'s ``only_rerun``); a failure on
    a run never held fails at once."""


def _holds(item: pytest.Item) -> int:
    """How many times the machine held the simulated devices of ``item``'s robot (0 without one)."""
    truth = getattr(item, "funcargs", {}).get("truth")
    try:
        return int(truth.engine.devices.holds) if truth is not None else 0
    except (AssertionError, RuntimeError, AttributeError):  # no robot, or no physics yet
        return 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    except AssertionError as failure:
        holds = _holds(item)
        if holds:
            raise HeldMachine(
                f"the machine held or starved this test's process {holds} time(s) while its devices "
                f"ran on the wall clock: {failure}"
            ) from failure
        raise


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
