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


def collected(*extra: str, env: dict[str, str] | None = None) -> set[str]:
    """The test modules ``robotpy test`` collects, as robotpy deploy runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "robotpy", "test", "--", "--collect-only", "-q", *extra],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return {line.split("::")[0].removeprefix("tests/") for line in result.stdout.splitlines() if "::" in line}


def test_robotpy_test_runs_the_deploy_tier_and_all_of_it_when_asked() -> None:
    env = {name: "" for name in ("BCNP_TEST_TIER", ALL_ENV)}
    assert collected(env=env) == set(DEPLOY_TIER)
    everything = collected(env={**env, ALL_ENV: "1"})
    assert set(DEPLOY_TIER) < everything and "test_on_target.py" in everything
