"""The two tiers: ``robotpy test`` (so ``robotpy deploy``, before every upload) runs the
deploy tier; the README's ``python run.py test`` runs everything (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

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


def collected(*extra: str, env: dict[str, str] | None = None) -> set[str]:
    """The test modules ``robotpy test`` collects."""
    return {test.split("::")[0] for test in collected_ids(*extra, env=env)}


def test_robotpy_test_runs_the_deploy_tier_and_all_of_it_when_asked() -> None:
    env = {name: "" for name in ("BCNP_TEST_TIER", ALL_ENV)}
    assert collected(env=env) == set(DEPLOY_TIER)
    everything = collected(env={**env, ALL_ENV: "1"})
    assert set(DEPLOY_TIER) < everything and "test_on_target.py" in everything


def test_the_deploy_tier_leaves_the_heaviest_cases_to_the_full_suite() -> None:
    env = {name: "" for name in ("BCNP_TEST_TIER", ALL_ENV)}
    heavy = "test_wire.py::test_max_packet_size_and_round_trip"
    deploy = collected_ids(env=env)
    assert heavy not in deploy and "test_wire.py::test_drivecmd_packet_bytes_match_reference" in deploy
    assert heavy in collected_ids(env={**env, ALL_ENV: "1"})
