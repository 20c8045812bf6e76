"""The layout's rules, checked on the source so they hold after whoever edits it next.

* The core (schema, wire, parser, dispatcher, queue, telemetry, the connection
  object, defaults, timebase, codegen) and every module in a host job's ``core/``
  folder (the link's state machine and errors, the sessions' cores, the proxy's
  fault model and delivery schedule) are sans-I/O: no sockets, threads or
  clocks, and no robot library but WPILib's math for the follower.
* The host's jobs (link, sessions, nt, proxy, cli) import each other one way
  (``HOST_JOBS``), and a core imports no host module that is not a core.
* No module of the library imports WPILib; only the NetworkTables side
  (``bcnp/host/nt/``) talks NetworkTables, and only the planners' readers (PathPlanner,
  Choreo) and the closed-loop follower use WPILib's math (wpimath), inside the
  functions that need it, so importing them loads none of it.
* The library's imports form no cycle and never run back up: the core imports
  nothing above it, ``bcnp.paths`` and ``bcnp.transport`` only the core, the
  host anything below it; nothing in ``bcnp/`` imports the robot project.
* The library is generic over any schema: outside ``bcnp/host`` and
  ``bcnp/paths`` (drive commands by nature: vx, omega, durationMs) no module
  names this robot's messages or their fields.
* The robot never imports the host tools; it reads path files with
  ``bcnp.paths`` (standard library only, the planners' libraries on demand).
* The benchmarks, the checks (``checks/``: pass or fail) and the system tests share one
  harness (``benchmarks/harness/``, where the project's root is worked out once): none
  imports another benchmark's names.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import run
from benchmarks.harness import ROOT

LIBRARY = ROOT / "bcnp"
#: The host's sans-I/O modules, found by place: each job's ``core/`` folder (``bcnp/host/*/core/``):
#: the link's state machine and errors, the sessions' cores, the proxy's fault model and delivery.
SANS_IO_HOST = sorted(p for p in LIBRARY.glob("host/*/core/*.py") if p.name != "__init__.py")
CORE = sorted(
    [p for p in LIBRARY.glob("*.py") if p.name not in ("__main__.py",)]
    + list((LIBRARY / "codegen").glob("*.py"))
    + SANS_IO_HOST
)
IO_MODULES = {"socket", "selectors", "threading", "time", "asyncio", "wpilib", "ntcore", "hal"}
ROBOT_LIBRARIES = {"wpilib", "ntcore", "hal", "commands2", "wpimath", "pathplannerlib", "choreo"}
#: Host modules allowed a robot library, and which: the NetworkTables side (``bcnp/host/nt/``, by
#: place) talks NT4; the planners and the follower compute with WPILib's geometry, controllers
#: and the planners' own libraries.
ALLOWED = {
    **{f"bcnp/host/nt/{p.name}": {"ntcore"} for p in (LIBRARY / "host" / "nt").glob("*.py")},
    "bcnp/paths/pathplanner.py": {"wpimath", "pathplannerlib"},
    "bcnp/paths/choreo.py": {"choreo"},
    "bcnp/host/sessions/core/follow.py": {"wpimath"},
}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@functools.cache
def _tree(path: Path) -> ast.Module:
    """``path`` parsed, once for the whole module: most rules walk the same files."""
    return ast.parse(path.read_text())


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s tree (``ast.walk``), once for the whole module."""
    return tuple(ast.walk(_tree(path)))


def _imports(path: Path) -> set[str]:
    """Top-level names of every absolute import in ``path``, wherever it appears."""
    names: set[str] = set()
    for node in _nodes(path):
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
        "fields.py",
        "message.py",
        "schema_rules.py",
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
    "path",
    sorted(p for p in LIBRARY.rglob("*.py") if not {"host", "paths"} & set(p.relative_to(LIBRARY).parts)),
    ids=_rel,
)
def test_the_library_names_none_of_this_robots_messages(path: Path) -> None:
    names = _robot_names()
    found = []
    for node in _nodes(path):
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


#: The ``host`` extra (matplotlib, rich), which is not installed on a roboRIO.
HOST_EXTRA = ("matplotlib", "rich")


def test_the_robot_never_imports_the_host_tools() -> None:
    """The robot program, its simulation and every autonomous mode (the selector imports them
    all at robot start) load ``bcnp.paths`` and nothing else of the host tools."""
    modes = sorted(p.stem for p in (ROOT / "autonomous").glob("*.py") if p.stem != "__init__")
    assert modes, "no autonomous modes found"
    code = (
        "import importlib, json, sys, robot, physics; "
        f"[importlib.import_module('autonomous.' + m) for m in {modes!r}]; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('bcnp.host', 'bcnp.paths')) "
        "or m.split('.')[0] in ('matplotlib', 'rich'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    forbidden = [m for m in loaded if m.startswith("bcnp.host") or m.split(".")[0] in HOST_EXTRA]
    assert not forbidden, f"the robot imports host-only modules: {forbidden}"
    assert "bcnp.paths" in loaded  # the path-file modes read their files with it


@pytest.mark.parametrize(
    "module", ["bcnp.paths", "bcnp.paths.pathplanner", "bcnp.paths.choreo", "bcnp.host.sessions.follow"]
)
def test_the_planners_and_the_follower_load_wpimath_only_when_used(module: str) -> None:
    """A robot that plays only CSV paths never pays for WPILib's math or the planner libraries
    in its start-up; they are imported when a .path or .traj is read or the follower runs."""
    code = (
        f"import sys, {module}; "
        "print(sorted(m for m in ('wpimath', 'pathplannerlib', 'choreo') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_importing_the_path_reader_loads_no_socket() -> None:
    """``import bcnp.paths`` (what the robot does) stays socket-free."""
    code = "import sys, bcnp.paths; print('socket' in sys.modules, 'bcnp.host' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]


# -- the import graph ----------------------------------------------------------------------------

#: The robot project's own modules and folders, and the project's tools: never imported by the library.
PROJECT = {
    "robot",
    "physics",
    "sim",
    "constants",
    "messages",
    "run",
    "subsystems",
    "autonomous",
    "benchmarks",
    "checks",
    "tests",
    "support",
    "conftest",
}
#: Each part of the library and what it may import of the library: lower layers only.
LAYERS = {
    "bcnp": set(),  # the core: bcnp/*.py
    "bcnp.codegen": {"bcnp"},
    "bcnp.transport": {"bcnp"},
    "bcnp.paths": {"bcnp"},
    "bcnp.host": {"bcnp", "bcnp.transport", "bcnp.paths", "bcnp.codegen"},
    "bcnp.__main__": {"bcnp.host"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _library_imports(path: Path, modules: set[str]) -> set[str]:
    """The library modules ``path`` imports (anywhere in it, lazily too), relative imports resolved;
    and every other absolute import's top-level name."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            # the longest library module the target names (a name imported from a module is not one)
            while target and target not in modules and target.split(".")[0] == "bcnp":
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@functools.cache
def _graph() -> dict[str, set[str]]:
    paths = sorted(LIBRARY.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _library_imports(p, modules) for p in paths}


def _layer(module: str) -> str:
    if module == "bcnp.__main__":
        return module
    parts = module.split(".")
    return (
        "bcnp"
        if len(parts) == 1 or (len(parts) == 2 and f"bcnp.{parts[1]}" not in LAYERS)
        else ".".join(parts[:2])
    )


def test_nothing_in_the_library_imports_the_robot_project() -> None:
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in _graph().items()
        for target in targets
        if target.split(".")[0] in PROJECT
    )
    assert not upward, upward


def test_no_library_import_runs_back_up_a_layer() -> None:
    wrong = []
    for module, targets in _graph().items():
        mine = _layer(module)
        for target in targets:
            if not target.startswith("bcnp"):
                continue
            theirs = _layer(target)
            if theirs != mine and theirs not in LAYERS[mine]:
                wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert not wrong, wrong


def test_the_library_imports_form_no_cycle() -> None:
    """Tarjan's strongly connected components over every import, lazy ones included."""
    graph = {m: {t for t in targets if t.startswith("bcnp")} for m, targets in _graph().items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"


#: The host's jobs (``bcnp/host/<job>/``) and which others each may import: the link needs none;
#: the sessions drive a link; the NetworkTables side hands the sessions the robot's pose; the
#: proxy stands alone; the CLI puts them all together.
HOST_JOBS = {
    "link": set(),
    "sessions": {"link"},
    "nt": {"sessions"},
    "proxy": set(),
    "cli": {"link", "sessions", "nt", "proxy"},
}


def _job(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["bcnp", "host"] else None


def test_the_host_jobs_import_each_other_one_way_and_their_cores_only_cores() -> None:
    """Folders that show the layers: a job imports only the jobs below it, and a sans-I/O core
    (``core/``) imports nothing of the host but other cores."""
    jobs = {p.name for p in (LIBRARY / "host").iterdir() if (p / "__init__.py").is_file()}
    assert jobs == set(HOST_JOBS), "a new folder of the host: give it its place in HOST_JOBS"
    wrong = []
    for module, targets in _graph().items():
        mine = _job(module)
        if mine is None:
            continue
        for target in targets:
            theirs = _job(target)
            if theirs is not None and theirs != mine and theirs not in HOST_JOBS[mine]:
                wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
            if ".core." in f"{module}." and target.startswith("bcnp.host") and ".core" not in target:
                wrong.append(f"the core {module} imports {target}, which is not a core")
    assert not wrong, wrong


def test_the_import_checks_see_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The walk itself: relative and lazy imports are edges."""
    modules = {"bcnp.paths.a", "bcnp.paths.b", "bcnp.host.c"}
    a = tmp_path / "a.py"
    a.write_text("def f():\n    from .b import x\n    from ..host import c\n    import constants\n")
    global ROOT
    saved = ROOT
    try:
        ROOT = tmp_path.parent
        fake = tmp_path.parent / "bcnp" / "paths" / "a.py"
        fake.parent.mkdir(parents=True, exist_ok=True)
        fake.write_text(a.read_text())
        assert _library_imports(fake, modules) == {"bcnp.paths.b", "bcnp.host.c", "constants"}
    finally:
        ROOT = saved
    assert _layer("bcnp.paths.b") == "bcnp.paths" and _layer("bcnp.wire") == "bcnp"
    assert _layer("bcnp.host.c") not in LAYERS["bcnp.paths"]


# -- the benchmarks, the checks and the system tests ----------------------------------------------

#: What a benchmark, a check or a test may import of ``benchmarks`` and ``checks``: the one harness
#: and the report helpers (``--json PATH``); the harness itself, only the harness.
SHARED_BENCHMARK_MODULES = ("benchmarks.harness", "benchmarks.report")
#: The lab beside the product: figures (``benchmarks``) and what passes or fails (``checks``).
LAB = ("benchmarks", "checks")
#: The one module that works out the project's folder from where it lies: ``ROOT``. (run.py keeps
#: its own: it runs before anything is installed.)
ROOT_HOME = "benchmarks/harness/__init__.py"


def _lab_files() -> list[Path]:
    return sorted(p for folder in (*LAB, "tests") for p in (ROOT / folder).rglob("*.py"))


def _benchmark_imports(path: Path) -> set[str]:
    """The ``benchmarks.*`` and ``checks.*`` modules ``path`` imports, anywhere in it (lazily too)."""
    found = set()
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] in LAB}


def test_benchmarks_and_tests_share_only_the_harness() -> None:
    """No benchmark or check imports another's names, and neither do the tests: what they share
    (the simulator launcher, free ports, the proxy-and-host rig, the periodic sender, the judge of
    command starts, ...) is in ``benchmarks/harness/``, which imports nothing else of them, and
    how they report is ``benchmarks/report.py``."""
    wrong = []
    for path in _lab_files():
        module = _module_name(path)
        harness = module.startswith("benchmarks.harness")
        allowed = ("benchmarks.harness",) if harness else SHARED_BENCHMARK_MODULES
        for name in _benchmark_imports(path):
            if not any(name == a or name.startswith(f"{a}.") for a in allowed):
                wrong.append(f"{module} imports {name}")
    assert not wrong, wrong


def _climbs(node: ast.AST) -> bool:
    """``X.parent.parent``, ``X.parents[...]`` or ``dirname(dirname(X))``: a folder above X's own."""
    if isinstance(node, ast.Attribute):
        return node.attr == "parents" or node.attr == getattr(node.value, "attr", "") == "parent"
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("dirname"):
        return any(isinstance(a, ast.Call) and ast.unparse(a.func).endswith("dirname") for a in node.args)
    return False


def _works_out_the_root(source: str | Path) -> list[str]:
    """Where ``source`` (a module's text, or its file) defines a ``ROOT`` of its own, or climbs
    from its own file to a folder above its own."""
    tree = _tree(source) if isinstance(source, Path) else ast.parse(source)
    found = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "ROOT" for t in targets):
            found.append(f"line {node.lineno}: ROOT =")
    for node in ast.walk(tree):
        if _climbs(node) and any(isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(node)):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_project_folder_is_worked_out_once() -> None:
    """``ROOT`` is defined in ``benchmarks/harness/__init__.py`` and imported everywhere else: no
    benchmark, check or test defines its own or climbs from its own file to the project."""
    wrong = [
        f"{_rel(path)} {where}"
        for path in _lab_files()
        if _rel(path) != ROOT_HOME
        for where in _works_out_the_root(path)
    ]
    assert wrong == []
    assert _works_out_the_root("from pathlib import Path\nROOT: Path = Path('.')\n") == ["line 2: ROOT ="]
    assert _works_out_the_root("import os\nD = os.path.dirname(os.path.dirname(__file__))\n")
    assert _works_out_the_root("from pathlib import Path\nD = Path(__file__).resolve().parents[1]\n")
    assert _works_out_the_root("from pathlib import Path\nDATA = Path(__file__).parent / 'data'\n") == []


def test_a_free_port_is_below_the_ephemeral_range_and_free_for_both() -> None:
    """The ports the suite gives its simulators are never ones the kernel hands to outgoing
    connections meanwhile (a simulator's NetworkTables server once found its port so taken)."""
    import socket

    from benchmarks.harness.ports import LOWEST, ephemeral_start, free_port

    ports = {free_port() for _ in range(20)}
    assert all(LOWEST <= port < ephemeral_start() for port in ports), ports
    for port in ports:
        with (
            socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp,
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
        ):
            tcp.bind(("", port))
            udp.bind(("", port))


def test_the_harness_root_loads_nothing_heavy() -> None:
    """The deploy tier (``robotpy test``, before every upload) takes ``ROOT`` and ``free_port`` from
    the harness: importing them loads nothing but the standard library."""
    code = (
        "import sys; before = set(sys.modules)\n"
        "import benchmarks.harness, benchmarks.harness.ports\n"
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    assert "benchmarks.harness.ports" in loaded
    assert {m.split(".")[0] for m in loaded} - sys.stdlib_module_names == {"benchmarks"}


def test_the_robot_never_imports_the_simulator() -> None:
    """The device models (sim/) are the simulator's: the robot's code runs the same on a roboRIO,
    where physics.py and sim/ are never loaded. (run.py reads one name of sim.settings.)"""
    robot_code = [ROOT / "robot.py", ROOT / "constants.py"]
    robot_code += [*(ROOT / "subsystems").rglob("*.py"), *(ROOT / "autonomous").rglob("*.py")]
    offenders = []
    for path in robot_code:
        for node in _nodes(path):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("sim", "physics")]
    assert offenders == []


def test_robotpy_deploy_installs_what_its_tests_import() -> None:
    """`python run.py robotpy deploy` installs what `robotpy test` (which deploy runs first) needs
    for the deploy tier: every third-party module its test files, their helpers and
    tests/conftest.py import (and pytest-xdist, its workers), with the robot's own."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras, command = run.TASKS["robotpy"]
    assert command == ["robotpy"]
    installed = {re.split(r"[<>=\[ ;]", r)[0].lower() for r in run.requirements(pyproject, extras)}
    tests = ROOT / "tests"
    tier = [*(tests / "deploy").glob("*.py"), tests / "conftest.py", tests / "support.py"]
    imported = set().union(*(_imports(path) for path in tier))
    own = {p.stem for p in ROOT.glob("*.py")} | {
        p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()
    }
    local = own | {p.stem for p in tests.rglob("*.py")}
    third_party = {m for m in imported - local if m not in sys.stdlib_module_names}
    # What provides each module the tier imports (robotpy[sim] brings WPILib's, pyfrc and pytest).
    provider = {"hypothesis": "hypothesis", "pytest": "pytest", "_pytest": "pytest", "xdist": "pytest-xdist"}
    robotpy = {"wpilib", "wpimath", "ntcore", "hal", "pyfrc", "rev", "commands2", "robotpy_ext", "wpiutil"}
    unknown = sorted(third_party - robotpy - set(provider))
    assert not unknown, f"the deploy tier imports {unknown}: say which requirement provides each"
    needed = {provider[m] for m in third_party & set(provider)} | {"pytest-xdist"}
    assert needed <= installed, sorted(needed - installed)


# -- the drivetrain's seam ------------------------------------------------------------------------

#: The drivetrain's wirings: each one IO module (``subsystems/drivetrain/<wiring>.py``) and one
#: simulated side (``sim/<wiring>.py``), and the libraries only they may import.
WIRING_MODULES = {"kitbot": set(), "sparkmax": {"rev"}, "talonfx": {"phoenix6"}}
#: What the robot's decisions may use of a wiring: the interface (``DrivetrainIO``), nothing else.
SEAM = ROOT / "subsystems" / "drivetrain" / "io.py"


def _interface() -> set[str]:
    """The names ``DrivetrainIO`` defines: its methods and class attributes."""
    for node in _tree(SEAM).body:
        if isinstance(node, ast.ClassDef) and node.name == "DrivetrainIO":
            names = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            names |= {
                t.id
                for n in node.body
                if isinstance(n, ast.Assign)
                for t in n.targets
                if isinstance(t, ast.Name)
            }
            names |= {
                n.target.id
                for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            }
            return names
    raise AssertionError("no DrivetrainIO in subsystems/drivetrain/io.py")


def _decisions() -> list[Path]:
    """The robot's code but the wirings themselves: the drivetrain's decisions, the interlocks, the
    autonomous modes (the pre-flight check, SysId), the keys and the recorder, robot.py."""
    wirings = {ROOT / "subsystems" / "drivetrain" / f"{name}.py" for name in WIRING_MODULES}
    code = [ROOT / "robot.py", *(ROOT / "subsystems").rglob("*.py"), *(ROOT / "autonomous").rglob("*.py")]
    return sorted(set(code) - wirings - {SEAM})


def _seam_breaches(tree: ast.AST, interface: set[str]) -> list[str]:
    """Where ``tree`` reaches past the interface into a wiring: an import of a wiring's module or
    library, an ``isinstance``/``getattr``/``hasattr`` on the IO, an attribute of the IO (``x.io.y``,
    or a name ``io`` bound to it) that the interface does not define."""
    libraries = set().union(*WIRING_MODULES.values())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            modules = []
        wiring = [m for m in modules if _names_a_wiring(m.split("."), libraries)]
        if wiring:
            found.append(f"line {node.lineno}: imports {wiring[0]}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "getattr", "hasattr")
            and node.args
            and _is_io(node.args[0])
        ):
            found.append(f"line {node.lineno}: {node.func.id}() on the IO")
        if isinstance(node, ast.Attribute) and _is_io(node.value) and node.attr not in interface:
            found.append(f"line {node.lineno}: .io.{node.attr} is not DrivetrainIO's")
    return found


def _names_a_wiring(parts: list[str], libraries: set[str]) -> bool:
    if parts[0] in libraries:
        return True
    return parts[:2] == ["subsystems", "drivetrain"] and len(parts) > 2 and parts[2] in WIRING_MODULES


def _is_io(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "io") or (
        isinstance(node, ast.Name) and node.id == "io"
    )


@pytest.mark.parametrize("path", _decisions(), ids=_rel)
def test_the_decisions_read_the_inputs_record_and_call_the_interface_only(path: Path) -> None:
    """Whatever a wiring knows reaches the drivetrain, the interlocks, the pre-flight check and the
    keys through its inputs record (``DrivetrainInputs``) and the ``DrivetrainIO`` interface: a new
    wiring is one IO module and one simulated side, and replay one more implementation."""
    assert _seam_breaches(_tree(path), _interface()) == []


def test_the_seam_check_sees_each_way_round_the_interface() -> None:
    breaches = _seam_breaches(
        ast.parse(
            "from subsystems.drivetrain.sparkmax import SparkMaxIO\n"
            "import phoenix6\n"
            "isinstance(drivetrain.io, SparkMaxIO)\n"
            "getattr(self.io, 'config_errors', None)\n"
            "io = drivetrain.io\n"
            "io.left_leader.getAppliedOutput()\n"
            "drivetrain.io.outputs()\n"
        ),
        _interface(),
    )
    assert [b.split(":")[0] for b in breaches] == ["line 1", "line 2", "line 3", "line 4", "line 6"], breaches


def test_each_wiring_is_one_io_module_and_one_simulated_side() -> None:
    """A wiring's module and library are imported by its own simulated side and nowhere else in the
    robot or the simulator; the IO finds each by name (``WIRINGS``), the simulator too (``MODULES``)."""
    from sim.wirings import MODULES
    from subsystems.drivetrain.io import WIRINGS

    assert set(WIRINGS) == set(MODULES) == set(WIRING_MODULES)
    for name, libraries in WIRING_MODULES.items():
        assert (ROOT / "subsystems" / "drivetrain" / f"{name}.py").exists()
        assert (ROOT / "sim" / f"{name}.py").exists()
        assert WIRINGS[name].startswith(f"subsystems.drivetrain.{name}:") and MODULES[name] == f"sim.{name}"
        own = {ROOT / "subsystems" / "drivetrain" / f"{name}.py", ROOT / "sim" / f"{name}.py"}
        others = [ROOT / "physics.py", *(ROOT / "sim").glob("*.py"), *_decisions()]
        for path in sorted(set(others) - own):
            imported = _imports(path)
            assert not imported & libraries, f"{_rel(path)} imports {name}'s library"
            for node in _nodes(path):
                if isinstance(node, ast.ImportFrom) and node.module == f"subsystems.drivetrain.{name}":
                    raise AssertionError(f"{_rel(path)} imports the {name} wiring's module")


def test_a_kitbot_loads_neither_revlib_nor_phoenix6() -> None:
    """Each wiring's library is imported when that wiring is built, never for another: a kitbot's
    start on a roboRIO pays for neither (REVLib alone is about 8 ms of imports here)."""
    code = (
        "import sys\n"
        "from subsystems.drivetrain.drivetrain import Drivetrain\n"
        "from subsystems.drivetrain.io import make_io\n"
        "io = make_io('kitbot')\n"
        "print(sorted(m for m in ('rev', 'phoenix6') if m in sys.modules), flush=True)\n"
        "import os; os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
