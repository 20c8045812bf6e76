"""Shared fixtures: schemas loaded from the repository and packet builders."""

from __future__ import annotations

from pathlib import Path

import pytest

import bcnp

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def schema() -> bcnp.Schema:
    """The default schema (the reference robot's: DriveCmd, DrivetrainTelemetry)."""
    return bcnp.load_schema(ROOT / "schema" / "messages.json")


@pytest.fixture(scope="session")
def test_schema() -> bcnp.Schema:
    """The reference unit-test schema (TestCmd, DrivetrainState, EncoderData, ProximityAlert)."""
    return bcnp.load_schema(DATA / "test_schema.json")
