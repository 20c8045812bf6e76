"""What a robot project hands the host tools: its schema and its drivetrain's limits.

The library never imports a robot project. A project says where its schema and
limits are, and ``python -m bcnp`` finds them in this order:

1. flags: ``--schema FILE``;
2. the ``[tool.bcnp]`` table of the nearest ``pyproject.toml`` (the working
   folder or one above it), paths relative to that file::

       [tool.bcnp]
       schema = "schema/messages.json"
       limits = "constants.py"   # a Python file of UPPER_CASE constants, run on its own

3. for the schema only: what installed packages offer in the ``bcnp.schemas``
   entry point group (this robot's wheel offers its generated ``messages``
   module's), so a coprocessor with only that wheel needs no file.

A schema found nowhere is a :class:`ProjectError` saying what to pass; limits
found nowhere are the kit chassis' (:class:`~bcnp.paths.DriveLimits` defaults).
"""

from __future__ import annotations

import runpy
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ...paths import DriveLimits
from ...schema import Schema, SchemaError, load_schema

__all__ = ["ENTRY_POINTS", "Project", "ProjectError", "find_project", "installed_schemas"]

#: The entry point group a package offers a :class:`~bcnp.schema.Schema` in.
ENTRY_POINTS = "bcnp.schemas"


class ProjectError(Exception):
    """A schema or limits that cannot be had: the message says what to pass instead."""


@dataclass(frozen=True)
class Project:
    """A ``pyproject.toml`` with a ``[tool.bcnp]`` table (``root``: its folder)."""

    root: Path
    schema_file: Path | None = None
    limits_file: Path | None = None


def find_project(start: Path | None = None) -> Project | None:
    """The nearest ``pyproject.toml`` at or above ``start`` (the working folder) that has a
    ``[tool.bcnp]`` table; ``None`` when there is none."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        file = candidate / "pyproject.toml"
        if not file.is_file():
            continue
        try:
            table = tomllib.loads(file.read_text(encoding="utf-8")).get("tool", {}).get("bcnp")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ProjectError(f"{file}: cannot read it: {exc}") from None
        if not isinstance(table, dict):
            continue
        unknown = sorted(set(table) - {"schema", "limits"})
        if unknown:
            raise ProjectError(f"{file}: [tool.bcnp] has unknown keys {unknown} (known: schema, limits)")

        def path(key: str, file: Path = file, table: dict[str, Any] = table) -> Path | None:
            value = table.get(key)
            if value is None:
                return None
            if not isinstance(value, str) or not value:
                raise ProjectError(f"{file}: [tool.bcnp] {key} must be a file name")
            return file.parent / value

        return Project(candidate, path("schema"), path("limits"))
    return None


Offer = tuple[str, Callable[[], Any]]


def installed_schemas() -> list[Offer]:
    """``(name, load)`` for each schema installed packages offer (:data:`ENTRY_POINTS`)."""
    return [(f"{ep.name} ({ep.value})", ep.load) for ep in metadata.entry_points(group=ENTRY_POINTS)]


def _read_schema(file: Path) -> Schema:
    if not file.is_file():
        raise ProjectError(f"{file}: no such schema file")
    try:
        return load_schema(file)
    except SchemaError as exc:  # names the file and every problem
        raise ProjectError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise ProjectError(f"{file}: {exc}") from None


def schema(
    flag: str | None, project: Project | None, offers: Callable[[], Sequence[Offer]] = installed_schemas
) -> Schema:
    """The schema: ``--schema``, else the project's, else the one an installed package offers."""
    if flag is not None:
        return _read_schema(Path(flag))
    if project is not None and project.schema_file is not None:
        return _read_schema(project.schema_file)
    found = list(offers())
    if len(found) == 1:
        name, load = found[0]
        try:
            offered = load()
        except Exception as exc:  # a broken package: say which
            raise ProjectError(f"the schema {name} offers cannot be loaded: {exc}") from None
        if not isinstance(offered, Schema):
            raise ProjectError(f"{name} offers a {type(offered).__name__}, not a bcnp Schema")
        return offered
    if found:
        names = ", ".join(name for name, _ in found)
        raise ProjectError(
            f"several installed packages offer a schema ({names}): pick one with --schema FILE"
        )
    raise ProjectError(
        "no schema: give --schema FILE, run in a robot project whose pyproject.toml has "
        "[tool.bcnp] schema = FILE, or install the robot's package (it offers its schema)"
    )


def limits(project: Project | None) -> DriveLimits:
    """The drivetrain's limits from the project's ``limits`` file, else the kit chassis'."""
    if project is None or project.limits_file is None:
        return DriveLimits()
    file = project.limits_file
    if not file.is_file():
        raise ProjectError(f"{file}: no such limits file ([tool.bcnp] limits)")
    try:
        names = runpy.run_path(str(file))
    except Exception as exc:  # the project's own file: say which and why
        raise ProjectError(f"{file}: cannot run it for its limits: {exc}") from None
    return DriveLimits.from_constants(names)
