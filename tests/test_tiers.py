"""The two tiers: ``robotpy test`` (so ``robotpy deploy``, before every upload) runs the
deploy tier; the README's ``python run.py test`` runs everything (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ALL_ENV, DEPLOY_TIER, ROOT


def test_every_module_of_the_deploy_tier_exists() -> None:
    assert len(set(DEPLOY_TIER)) == len(DEPLOY_TIER)
    assert [name for name in DEPLOY_TIER if not (ROOT / "tests" / name).is_file()] == []


def collected_ids(*extra: str, env: dict[str, str] | None = None) -> set[str]:
    """The tests ``robotpy test`` collects (``module.py::name``), as robotpy deploy runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "robotpy", "test", "--", "--collect-only", "-q", *extra],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return {line.removeprefix("tests/") for line in result.stdout.splitlines() if "::" in line}


@pytest.fixture(scope="module")
def tiers() -> tuple[set[str], set[str]]:
    """What ``robotpy test`` collects: the deploy tier, and everything (``BCNP_TEST_ALL=1``)."""
    env = {name: "" for name in ("BCNP_TEST_TIER", ALL_ENV)}
    return collected_ids(env=env), collected_ids(env={**env, ALL_ENV: "1"})


def modules(ids: set[str]) -> set[str]:
    return {test.split("::")[0] for test in ids}


def test_robotpy_test_runs_the_deploy_tier_and_all_of_it_when_asked(tiers: tuple[set[str], set[str]]) -> None:
    deploy, everything = tiers
    assert modules(deploy) == set(DEPLOY_TIER)
    assert set(DEPLOY_TIER) < modules(everything) and "test_on_target.py" in modules(everything)


def test_the_deploy_tier_leaves_the_heaviest_cases_to_the_full_suite(
    tiers: tuple[set[str], set[str]],
) -> None:
    deploy, everything = tiers
    heavy = "test_wire.py::test_max_packet_size_and_round_trip"
    assert heavy not in deploy and "test_wire.py::test_drivecmd_packet_bytes_match_reference" in deploy
    assert heavy in everything
