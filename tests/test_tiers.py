"""The two tiers and the full suite's order (tests/conftest.py): ``robotpy test`` (so ``robotpy
deploy``, before every upload) runs the modules in tests/deploy/; the README's ``python run.py
test`` runs everything, handing its workers the longest modules first by what they took last time."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import (
    ALL_ENV,
    DEPLOY,
    DEPLOY_WORKERS,
    DURATIONS,
    GUESSES,
    ROOT,
    Timings,
    deploy_workers,
    guess,
    longest_first,
    modules_to_collect,
    rewrite_test_modules,
    under_coverage,
    usable_cpus,
)
from support import TIER_ENV

from benchmarks.harness.sim import SimRobot

TESTS = ROOT / "tests"


def modules_in(folder: Path) -> set[str]:
    """The test modules in ``folder`` and below, as pytest names them (``tests/deploy/test_wire.py``)."""
    return {path.relative_to(ROOT).as_posix() for path in folder.rglob("test_*.py")}


def collected_ids(*extra: str, env: dict[str, str]) -> list[str]:
    """The tests ``robotpy test`` collects (``tests/module.py::name``), in its order, as robotpy
    deploy runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "robotpy", "test", "--", "--collect-only", "-q", *extra],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return [line for line in result.stdout.splitlines() if "::" in line]


def modules(ids: list[str]) -> list[str]:
    """The modules of ``ids``, each once, in their order."""
    return list(dict.fromkeys(test.split("::")[0] for test in ids))


#: A deploy module of plain socket tests, which no guess puts first: one of its tests measured
#: long must.
MEASURED_MODULE = DEPLOY / "test_connection.py"


def a_plain_test(module: Path) -> str:
    """The id of the first test of ``module`` that is neither decorated nor takes a fixture a
    parameter could come from (its id is its name)."""
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        plain = isinstance(node, ast.FunctionDef) and not node.decorator_list
        if plain and node.name.startswith("test_") and [a.arg for a in node.args.args] in ([], ["schema"]):
            return f"{module.relative_to(ROOT).as_posix()}::{node.name}"
    raise AssertionError(f"{module} has no plain test")


@pytest.fixture(scope="module")
def tiers(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str]]:
    """What ``robotpy test`` collects: the deploy tier, with a cache that measured one test of
    :data:`MEASURED_MODULE` as long; and, with ``BCNP_TEST_ALL=1``, a module of the full suite
    and the deploy tier's heavy cases (asked for by path: a whole collection is seconds of CPU)."""
    env = {name: "" for name in (TIER_ENV, ALL_ENV)}
    cache = tmp_path_factory.mktemp("cache")
    entry = cache / "v" / DURATIONS
    entry.parent.mkdir(parents=True)
    entry.write_text(json.dumps({a_plain_test(MEASURED_MODULE): 1000.0}), encoding="utf-8")
    deploy = collected_ids("-o", f"cache_dir={cache}", env=env)
    return deploy, collected_ids(*ALL_PROBE, env={**env, ALL_ENV: "1"})


#: What the ``BCNP_TEST_ALL=1`` collection asks for: a module outside the deploy tier, and one in it.
ALL_PROBE = ("tests/test_tiers.py", "tests/deploy/test_wire.py")


def test_robotpy_test_runs_the_deploy_folder_and_everything_when_asked(
    tiers: tuple[list[str], list[str]],
) -> None:
    deploy, everything = tiers
    assert set(modules(deploy)) == modules_in(DEPLOY)
    assert set(modules(everything)) == set(ALL_PROBE)  # the full suite's module is no longer left out
    assert modules_in(DEPLOY) < modules_in(TESTS)


def test_robotpy_test_hands_the_deploy_tier_to_a_worker_a_cpu() -> None:
    """``robotpy test`` (so ``robotpy deploy``) runs the tier on one pytest-xdist worker a CPU,
    each with pyfrc's robot fixtures (a stock test of the robot program, asked for by path:
    a whole collection is seconds of CPU); one CPU: in its own process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update({TIER_ENV: "", ALL_ENV: ""})
    result = subprocess.run(
        [sys.executable, "-m", "robotpy", "test", "--", "tests/deploy/test_pyfrc_stock.py", "-k", "disabled"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    workers = deploy_workers(usable_cpus())
    if workers:
        assert f"created: {workers}/{workers} workers" in result.stdout, result.stdout[-2000:]
    assert "1 passed" in result.stdout, result.stdout[-2000:]
    assert [deploy_workers(n) for n in (1, 2, 3, 64)] == [0, 2, 3, DEPLOY_WORKERS]


def test_under_coverage_the_deploy_tier_stays_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """``robotpy coverage test`` runs ``robotpy test`` under coverage.py, which measures its own
    process: workers would go unmeasured. (coverage.py is not a requirement here: a stand-in with
    its API, ``Coverage.current()``, the measurement running or not.)"""

    class Coverage:
        running: object = None

        @classmethod
        def current(cls) -> object:
            return cls.running

    monkeypatch.delitem(sys.modules, "coverage", raising=False)
    assert not under_coverage()
    monkeypatch.setitem(sys.modules, "coverage", SimpleNamespace(Coverage=Coverage))
    assert not under_coverage()  # imported, not measuring
    Coverage.running = object()
    assert under_coverage()


def test_the_deploy_tier_leaves_the_heaviest_cases_to_the_full_suite(
    tiers: tuple[list[str], list[str]],
) -> None:
    deploy, everything = tiers
    heavy = "tests/deploy/test_wire.py::test_max_packet_size_and_round_trip"
    assert (
        heavy not in deploy
        and "tests/deploy/test_wire.py::test_drivecmd_packet_bytes_match_reference" in deploy
    )
    assert heavy in everything


def test_a_run_orders_modules_by_the_seconds_in_pytests_cache(tiers: tuple[list[str], list[str]]) -> None:
    deploy, everything = tiers
    assert modules(deploy)[0] == MEASURED_MODULE.relative_to(ROOT).as_posix()
    for ids in (deploy, everything):  # each module's tests together, as --dist loadfile hands them out
        starts = [
            test for i, test in enumerate(ids) if i == 0 or ids[i - 1].split("::")[0] != test.split("::")[0]
        ]
        assert len(starts) == len(modules(ids))


# -- the order, on made-up tests -------------------------------------------------------------------


def item(
    nodeid: str,
    *fixturenames: str,
    hypothesis: bool = False,
    function: Any = None,
    fixtures: list[Any] | None = None,
) -> Any:
    """A collected test as :func:`guess` sees it: its function, its fixtures' functions."""

    def test() -> None: ...

    test.is_hypothesis_test = hypothesis  # type: ignore[attr-defined]
    definitions = {f"fixture{i}": [SimpleNamespace(func=f)] for i, f in enumerate(fixtures or [])}
    return SimpleNamespace(
        nodeid=nodeid,
        fixturenames=list(fixturenames),
        obj=test,
        function=function or test,
        _fixtureinfo=SimpleNamespace(name2fixturedefs=definitions),
    )


class Cache:
    def __init__(self, entries: dict[str, Any]) -> None:
        self.entries = entries

    def get(self, key: str, default: Any) -> Any:
        return json.loads(json.dumps(self.entries.get(key, default)))

    def set(self, key: str, value: Any) -> None:
        self.entries[key] = value


def config(cache: Cache | None, **worker: Any) -> Any:
    extra = {"workerinput": worker} if worker else {}
    return SimpleNamespace(cache=cache, rootpath=ROOT, **extra)


def test_the_longest_module_goes_first_its_tests_kept_together_in_their_order() -> None:
    short, long_ = "tests/test_short.py", "tests/test_long.py"
    measured = {f"{short}::a": 2.0, f"{short}::b": 2.0, f"{long_}::c": 3.0, f"{long_}::d": 3.0}
    timings = Timings(config(Cache({DURATIONS: measured})))
    items = [item(f"{short}::a"), item(f"{long_}::c"), item(f"{short}::b"), item(f"{long_}::d")]
    assert [i.nodeid for i in longest_first(items, timings)] == [
        f"{long_}::c",
        f"{long_}::d",
        f"{short}::a",
        f"{short}::b",
    ]


def drives_a_simulated_robot() -> None:
    with SimRobot(ROOT):
        pass


def runs_a_program() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def calls_a_helper_that_runs_a_program() -> None:
    runs_a_program()


def test_a_test_no_run_measured_is_guessed_from_what_it_uses() -> None:
    by_kind = {
        "simulator process": item("tests/a.py::t", function=drives_a_simulated_robot),
        "program": item("tests/b.py::t", function=calls_a_helper_that_runs_a_program),
        "pyfrc": item("tests/c.py::t", "control"),
        "property": item("tests/d.py::t", hypothesis=True),
        "": item("tests/e.py::t"),
    }
    assert {kind: guess(i) for kind, i in by_kind.items()} == GUESSES
    fixture = item("tests/f.py::t", function=lambda: None, fixtures=[drives_a_simulated_robot])
    assert guess(fixture) == GUESSES["simulator process"]
    timings = Timings(config(None))  # -p no:cacheprovider: nothing measured
    plain, robot, prop = (
        item("tests/a.py::t"),
        item("tests/b.py::t", "control"),
        item("tests/c.py::t", hypothesis=True),
    )
    assert [timings.seconds(i) for i in (plain, robot, prop)] == [guess(plain), guess(robot), guess(prop)]
    assert guess(plain) < guess(robot) and guess(plain) < guess(prop)
    measured = Timings(config(Cache({DURATIONS: {"tests/b.py::t": 0.01}})))
    assert measured.seconds(robot) == 0.01


def test_workers_order_by_the_controllers_reading_which_writes_this_runs_seconds_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TIER_ENV, raising=False)
    here = "tests/test_tiers.py"
    cache = Cache({DURATIONS: {f"{here}::old": 1.0, f"{here}::kept": 2.0, "tests/test_removed.py::t": 9.0}})
    controller = Timings(config(cache))
    node = SimpleNamespace(workerinput={})
    controller.pytest_configure_node(node)
    cache.entries[DURATIONS] = {}  # another run rewrote the cache meanwhile
    worker = Timings(config(cache, **node.workerinput))
    assert worker.seconds(item(f"{here}::kept")) == 2.0

    for when, seconds in (("setup", 0.5), ("call", 1.0), ("teardown", 0.25)):
        report = SimpleNamespace(nodeid=f"{here}::old", when=when, duration=seconds)
        controller.pytest_runtest_logreport(report)  # type: ignore[arg-type]
        worker.pytest_runtest_logreport(report)  # type: ignore[arg-type]
    cache.entries[DURATIONS] = {f"{here}::kept": 2.0, "tests/test_removed.py::t": 9.0}
    worker.pytest_sessionfinish(None)  # type: ignore[arg-type]
    assert cache.entries[DURATIONS] == {f"{here}::kept": 2.0, "tests/test_removed.py::t": 9.0}
    controller.pytest_sessionfinish(None)  # type: ignore[arg-type]
    assert cache.entries[DURATIONS] == {f"{here}::kept": 2.0, f"{here}::old": 1.75}


def test_the_deploy_tier_writes_no_seconds_its_fewer_examples_would_understate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TIER_ENV, "deploy")
    cache = Cache({})
    timings = Timings(config(cache))
    timings.pytest_runtest_logreport(SimpleNamespace(nodeid="tests/deploy/test_wire.py::t", duration=1.0))  # type: ignore[arg-type]
    timings.pytest_sessionfinish(None)  # type: ignore[arg-type]
    assert cache.entries == {}


# -- the test modules rewritten once, before the workers start -------------------------------------


def test_the_modules_to_rewrite_are_those_the_run_collects(monkeypatch: pytest.MonkeyPatch) -> None:
    def given(*args: str) -> Any:
        return SimpleNamespace(args=list(args), invocation_params=SimpleNamespace(dir=ROOT))

    monkeypatch.delenv(TIER_ENV, raising=False)
    everything = set(modules_to_collect(given("tests")))
    assert everything == {ROOT / path for path in modules_in(TESTS)}
    assert set(modules_to_collect(given("tests/deploy/test_wire.py::test_x", "tests/test_tiers.py"))) == {
        DEPLOY / "test_wire.py",
        TESTS / "test_tiers.py",
    }
    monkeypatch.setenv(TIER_ENV, "deploy")
    assert set(modules_to_collect(given("tests"))) == {ROOT / path for path in modules_in(DEPLOY)}


def test_a_rewritten_module_is_what_pytest_loads_instead_of_rewriting_it(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, get_cache_dir

    module = tmp_path / "test_sample.py"
    module.write_text("def test_sum() -> None:\n    assert 1 + 1 == 2\n", encoding="utf-8")
    pyc = get_cache_dir(module) / (module.name[:-3] + PYC_TAIL)
    rewrite_test_modules(pytestconfig, [module])
    code = _read_pyc(module, pyc)
    assert code is not None
    (test,) = [c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == "test_sum"]
    assert any(name.startswith("@py_assert") for name in test.co_varnames)  # rewritten, not plain
