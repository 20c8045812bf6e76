"""The layout's rules, checked on the source so they hold after whoever edits it next.

* The core (schema, wire, parser, dispatcher, queue, telemetry, the link
  object, defaults, timebase, codegen) and the host's link state machine are
  sans-I/O: no sockets, threads, clocks or robot libraries.
* No module of the library imports WPILib; only the host monitor talks
  NetworkTables, and only the planners (PathPlanner, Choreo) and the
  closed-loop follower use WPILib's math (wpimath), inside the functions that
  need it, so importing them loads none of it.
* The library is generic over any schema: outside ``bcnp/host`` no module
  names this robot's messages or their fields.
* The robot never imports the host tools that need sockets or the ``host``
  extra; it reads path files with ``bcnp.host.paths`` (standard library only).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "bcnp"
CORE = sorted(
    [p for p in LIBRARY.glob("*.py") if p.name not in ("__main__.py",)]
    + list((LIBRARY / "codegen").glob("*.py"))
    + [LIBRARY / "host" / "linkstate.py"]
)
IO_MODULES = {"socket", "selectors", "threading", "time", "asyncio", "wpilib", "ntcore", "hal"}
ROBOT_LIBRARIES = {"wpilib", "ntcore", "hal", "commands2", "wpimath", "pathplannerlib", "choreo"}
#: Host modules allowed a robot library, and which: the monitor is an NT4 client; the planners
#: and the follower compute with WPILib's geometry, controllers and the planners' own libraries.
ALLOWED = {
    "bcnp/host/monitor.py": {"ntcore"},
    "bcnp/host/planners.py": {"wpimath", "pathplannerlib", "choreo"},
    "bcnp/host/follow.py": {"wpimath"},
}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _imports(path: Path) -> set[str]:
    """Top-level names of every absolute import in ``path``, wherever it appears."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", CORE, ids=_rel)
def test_the_core_imports_no_io(path: Path) -> None:
    used = _imports(path) & IO_MODULES
    assert not used, f"{_rel(path)} imports {sorted(used)}: the core takes bytes and now, never I/O"


def test_the_core_list_covers_the_modules_the_issue_names() -> None:
    names = {p.name for p in CORE}
    wanted = {
        "schema.py",
        "wire.py",
        "parser.py",
        "dispatcher.py",
        "queue.py",
        "telemetry.py",
        "connection.py",
    }
    assert wanted <= names


@pytest.mark.parametrize("path", sorted(LIBRARY.rglob("*.py")), ids=_rel)
def test_no_library_module_imports_wpilib(path: Path) -> None:
    """Transports and the client run in receive threads and on hosts: no robot library,
    but for the host modules in ``ALLOWED``."""
    allowed = ALLOWED.get(_rel(path), set())
    used = _imports(path) & (ROBOT_LIBRARIES - allowed)
    assert not used, f"{_rel(path)} imports {sorted(used)}"


def _robot_names() -> set[str]:
    """This robot's message names and field names, from schema/messages.json.

    ``durationMs`` is left out: the spec names it as the field every queued
    command runs for, and the queue's configuration defaults to it."""
    doc = json.loads((ROOT / "schema" / "messages.json").read_text())
    names = {m["name"] for m in doc["messages"]} | {f["name"] for m in doc["messages"] for f in m["fields"]}
    return names - {"durationMs"}


@pytest.mark.parametrize(
    "path", sorted(p for p in LIBRARY.rglob("*.py") if "host" not in p.relative_to(LIBRARY).parts), ids=_rel
)
def test_the_library_names_none_of_this_robots_messages(path: Path) -> None:
    names = _robot_names()
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name | ast.arg):
            text = node.id if isinstance(node, ast.Name) else node.arg
            words = {text}
        elif isinstance(node, ast.Attribute):
            words = {node.attr}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = set(
                node.value.replace("(", " ").replace("=", " ").replace(".", " ").replace(",", " ").split()
            )
        else:
            continue
        found += sorted(words & names)
    assert not found, f"{_rel(path)} names this robot's messages or fields: {sorted(set(found))}"


#: Host modules the robot must never import: sockets (the client and what uses it), or the
#: ``host`` extra (matplotlib, rich), which is not installed on a roboRIO.
HOST_ONLY = ("bcnp.host.client", "bcnp.host.cli", "bcnp.host.replay", "bcnp.host.plot", "bcnp.host.monitor")
HOST_EXTRA = ("matplotlib", "rich")


def test_the_robot_never_imports_the_host_tools() -> None:
    """The robot program, its simulation and every autonomous mode (the selector imports them
    all at robot start) load ``bcnp.host.paths`` and nothing else of the host tools."""
    modes = sorted(p.stem for p in (ROOT / "autonomous").glob("*.py") if p.stem != "__init__")
    assert modes, "no autonomous modes found"
    code = (
        "import importlib, json, sys, robot, physics; "
        f"[importlib.import_module('autonomous.' + m) for m in {modes!r}]; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('bcnp.host') "
        "or m.split('.')[0] in ('matplotlib', 'rich'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    forbidden = [m for m in loaded if m.startswith(HOST_ONLY) or m.split(".")[0] in HOST_EXTRA]
    assert not forbidden, f"the robot imports host-only modules: {forbidden}"
    assert "bcnp.host.paths" in loaded  # the path-file modes read their files with it


@pytest.mark.parametrize("module", ["bcnp.host.planners", "bcnp.host.follow", "bcnp.host.paths"])
def test_the_planners_and_the_follower_load_wpimath_only_when_used(module: str) -> None:
    """A robot that plays only CSV paths never pays for WPILib's math or the planner libraries
    in its start-up; they are imported when a .path or .traj is read or the follower runs."""
    code = (
        f"import sys, {module}; "
        "print(sorted(m for m in ('wpimath', 'pathplannerlib', 'choreo') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_importing_the_path_reader_loads_no_client() -> None:
    """``bcnp.host`` imports its client lazily: ``import bcnp.host.paths`` stays socket-free,
    while ``from bcnp.host import Client`` still works."""
    code = (
        "import sys, bcnp.host.paths; "
        "print('socket' in sys.modules, 'bcnp.host.client' in sys.modules); "
        "from bcnp.host import Client; print(Client.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False", "bcnp.host.client"]
