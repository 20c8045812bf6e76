"""The documentation against the code: the key table, documented knobs and constants, links.

* The ``Network/*`` keys the robot really publishes (the robot run in the pyfrc
  simulator, keys and types read back from NetworkTables) equal the key table in
  docs/robot.md, name for name and type for type; the README points there and has
  no key table of its own.
* Every field of ``TransportConfig`` and ``MessageQueueConfig`` is named in
  docs/transports.md or docs/protocol.md, and every top-level UPPER_CASE name
  of constants.py appears in README.md or docs/.
* README.md stays a front door: at most 200 lines.
* Every environment variable the robot, its simulator and run.py read (found in
  the source: ``os.environ``, ``os.getenv``, ``sim/settings.py``'s ``VARIABLES``)
  is named in the README's table, and the table names no other.
* The figures the docs quote about the build are this build's: the schema hash
  (in the form the robot shows it, which the install check prints), the wheel's
  file name, the build backend's version.
* Relative links and pictures in README.md and docs/*.md point at files (and
  headings) that exist.

Each failure lists every difference at once, naming the key, field or link.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

import bcnp
from bcnp.transport import TransportConfig
from benchmarks.harness import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200
#: The page that holds the ``Network/*`` key table, and its anchor (the README links there).
KEY_TABLE_PAGE = DOCS / "robot.md"
KEY_TABLE_ANCHOR = "network-keys"
#: The key table's header row: the table that starts here and runs to the first line not a row.
KEY_TABLE_HEADER = "| Key | Type |"

#: NetworkTables type strings as the key table names them (SmartDashboard
#: numbers are NT doubles).
NT_TYPE_NAMES = {"double": "number", "float": "number", "int": "integer"}


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


# -- (a) the Network/* key table --------------------------------------------------------------


def key_table(text: str, where: str = "docs/robot.md") -> tuple[dict[str, str], list[str]]:
    """``{"Network/Name": type}`` from the rows of the table headed ``| Key | Type |`` in
    ``text`` (the page ``where``): each row's first cell names one or more ``Network/*`` keys
    in backticks, its second cell their type; and any problems found."""
    keys: dict[str, str] = {}
    problems: list[str] = []
    lines = text.splitlines()
    headers = [number for number, line in enumerate(lines, 1) if line.startswith(KEY_TABLE_HEADER)]
    if len(headers) != 1:
        return keys, [f"{where}: {len(headers)} tables headed `{KEY_TABLE_HEADER}`, not one"]
    for number, line in enumerate(lines[headers[0] :], headers[0] + 1):
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if re.fullmatch(r":?-+:?", cells[0]):
            continue  # the delimiter row
        names = re.findall(r"`(Network/[^`]+)`", cells[0])
        if not names:
            problems.append(f"{where}:{number}: a row that names no `Network/...` key")
            continue
        kind = cells[1].strip("` ") if len(cells) > 1 else ""
        if not kind:
            problems.append(f"{where}:{number}: {', '.join(names)}: no type in the second column")
        for name in names:
            if name in keys:
                problems.append(f"{where}:{number}: {name} is listed twice")
            keys[name] = kind
    return keys, problems


def published_network_keys() -> dict[str, str]:
    """``{"Network/Name": type}`` of everything under SmartDashboard/Network (sub-tables included)."""
    import ntcore

    found: dict[str, str] = {}

    def walk(table: ntcore.NetworkTable, prefix: str) -> None:
        for key in table.getKeys():
            nt_type = table.getTopic(key).getTypeString()
            found[f"{prefix}/{key}"] = NT_TYPE_NAMES.get(nt_type, nt_type)
        for sub in table.getSubTables():
            walk(table.getSubTable(sub), f"{prefix}/{sub}")

    walk(
        ntcore.NetworkTableInstance.getDefault().getTable("SmartDashboard").getSubTable("Network"), "Network"
    )
    return found


def key_table_differences(published: dict[str, str], documented: dict[str, str]) -> list[str]:
    problems = []
    for name in sorted(published.keys() - documented.keys()):
        problems.append(f"{name}: published by the robot ({published[name]}) but missing from the key table")
    for name in sorted(documented.keys() - published.keys()):
        problems.append(f"{name}: in the key table ({documented[name]}) but not published by the robot")
    for name in sorted(published.keys() & documented.keys()):
        if published[name] != documented[name]:
            problems.append(
                f"{name}: the key table says {documented[name]!r}, the robot publishes {published[name]!r}"
            )
    return problems


def test_the_key_table_matches_the_keys_the_robot_publishes(request: pytest.FixtureRequest) -> None:
    pytest.importorskip("pyfrc", reason="the robot needs RobotPy (python run.py test installs it)")
    documented, problems = key_table(_read(KEY_TABLE_PAGE))
    assert not problems, "key table:\n  " + "\n  ".join(problems)
    assert documented, "docs/robot.md's key table has no rows naming `Network/...` keys"

    control = request.getfixturevalue("control")
    request.getfixturevalue("robot")
    with control.run_robot():
        # Disabled, then autonomous with no controller: every key is written each tick.
        control.step_timing(seconds=0.2, autonomous=False, enabled=False)
        control.step_timing(seconds=0.5, autonomous=True, enabled=True)
        published = published_network_keys()

    assert published, "the robot published no Network/* keys"
    differences = key_table_differences(published, documented)
    assert not differences, (
        "docs/robot.md's Network/* key table differs from what the robot publishes "
        "(types as NetworkTables reports them; double is 'number'):\n  " + "\n  ".join(differences)
    )


def test_the_key_table_comparison_names_each_difference() -> None:
    documented, problems = key_table(
        "| `Network/Mode` | `Network/Enabled` | another table |\n\n"
        "| Key | Type | Meaning |\n|---|---|---|\n"
        "| `Network/A` | number | a |\n| `Network/B`, `Network/C` | string | b, c |\n"
        "\n| `Network/E` | string | after the table |\n"
    )
    assert not problems and documented == {
        "Network/A": "number",
        "Network/B": "string",
        "Network/C": "string",
    }
    differences = key_table_differences(
        {"Network/A": "boolean", "Network/B": "string", "Network/D": "number"}, documented
    )
    assert differences == [
        "Network/D: published by the robot (number) but missing from the key table",
        "Network/C: in the key table (string) but not published by the robot",
        "Network/A: the key table says 'number', the robot publishes 'boolean'",
    ]
    assert key_table("| Key | Type |\n|---|---|\n| `Network/A` | |\n| plain | number |\n", "p.md")[1] == [
        "p.md:3: Network/A: no type in the second column",
        "p.md:4: a row that names no `Network/...` key",
    ]
    assert key_table("no table here", "p.md") == ({}, ["p.md: 0 tables headed `| Key | Type |`, not one"])


def test_the_readme_points_to_the_key_table_and_has_none_of_its_own() -> None:
    text = _read(README)
    assert KEY_TABLE_HEADER not in text, "README.md has a key table: the keys are listed in docs/robot.md"
    assert f"docs/robot.md#{KEY_TABLE_ANCHOR}" in text, "README.md does not link to the key table"
    assert KEY_TABLE_ANCHOR in _anchors(KEY_TABLE_PAGE), f"docs/robot.md has no heading #{KEY_TABLE_ANCHOR}"


# -- (b) knobs and constants -----------------------------------------------------------------------


@pytest.mark.parametrize("config", [TransportConfig, bcnp.MessageQueueConfig], ids=lambda c: c.__name__)
def test_every_config_field_is_documented(config: type) -> None:
    text = "\n".join(
        _read(DOCS / name) for name in ("transports.md", "protocol.md") if (DOCS / name).exists()
    )
    missing = [
        field.name
        for field in dataclasses.fields(config)
        if not re.search(rf"`(?:\w+\.)?{re.escape(field.name)}`", text)
    ]
    assert not missing, (
        f"{config.__name__} fields not named (as `name`) in docs/transports.md or docs/protocol.md: "
        + ", ".join(missing)
    )


def _constants_module() -> types.ModuleType:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import constants

    return constants


def test_every_constant_is_documented() -> None:
    constants = _constants_module()
    names = sorted(
        name
        for name, value in vars(constants).items()
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and not isinstance(value, types.ModuleType)
    )
    assert names, "constants.py defines no UPPER_CASE names"
    text = "\n".join(_read(path) for path in [README, *_doc_pages()])
    missing = [name for name in names if not re.search(rf"(?<![A-Za-z0-9_]){name}(?![A-Za-z0-9_])", text)]
    assert not missing, "constants.py names found in neither README.md nor docs/*.md: " + ", ".join(missing)


# -- (c) the README stays short ----------------------------------------------------------------------


def test_readme_has_at_most_200_lines() -> None:
    lines = len(_read(README).splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move detail to docs/"
    )


# -- (d) environment variables -----------------------------------------------------------------------

#: The robot program, its simulator, run.py and the library they import: every environment
#: variable read here is one a user can set.
ENV_SOURCES = (
    "robot.py",
    "physics.py",
    "constants.py",
    "messages.py",
    "run.py",
    "subsystems",
    "autonomous",
    "sim",
    "bcnp",
)
ENV_NAME = re.compile(r"`(BCNP_[A-Z0-9_]*[A-Z0-9])(?:=[^`]*)?`")


def _env_source_files() -> list[Path]:
    files: list[Path] = []
    for name in ENV_SOURCES:
        path = ROOT / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """The module's top-level ``NAME = "text"`` bindings."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                for target in targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = value.value
    return found


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def environment_reads(sources: dict[str, str]) -> tuple[set[str], list[str]]:
    """The environment variables the Python ``sources`` (``{where: text}``) read, and what could
    not be resolved (``where:line``). A read is a key given to ``os.environ[...]``,
    ``os.environ.get/pop/setdefault(...)``, ``... in os.environ`` or ``os.getenv(...)``, or a
    name in a top-level ``VARIABLES`` tuple (the simulator's settings, read through a mapping);
    a key is a string, or a name bound to one at the top of its module or, imported
    (``from m import NAME``, ``m.NAME``), at the top of exactly one of the ``sources``."""
    trees = {where: ast.parse(text, filename=where) for where, text in sources.items()}
    local = {where: _string_constants(tree) for where, tree in trees.items()}
    everywhere: dict[str, set[str]] = {}
    for constants in local.values():
        for name, value in constants.items():
            everywhere.setdefault(name, set()).add(value)
    names: set[str] = set()
    problems: list[str] = []

    def resolve(key: ast.expr, where: str) -> None:
        value: str | None = None
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            value = key.value
        elif isinstance(key, ast.Name | ast.Attribute):
            name = key.id if isinstance(key, ast.Name) else key.attr
            if isinstance(key, ast.Name) and name in local[where]:
                value = local[where][name]
            elif len(everywhere.get(name, ())) == 1:
                [value] = everywhere[name]
        if value is None:
            problems.append(f"{where}:{key.lineno}: cannot tell which variable {ast.unparse(key)} names")
        else:
            names.add(value)

    for where, tree in trees.items():
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "VARIABLES" for t in node.targets)
                and isinstance(node.value, ast.Tuple | ast.List)
            ):
                for element in node.value.elts:
                    resolve(element, where)
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
                resolve(node.slice, where)
            elif isinstance(node, ast.Call) and node.args:
                func = node.func
                environ_method = (
                    isinstance(func, ast.Attribute)
                    and func.attr in ("get", "pop", "setdefault")
                    and _is_environ(func.value)
                )
                getenv = (isinstance(func, ast.Attribute) and func.attr == "getenv") or (
                    isinstance(func, ast.Name) and func.id == "getenv"
                )
                if environ_method or getenv:
                    resolve(node.args[0], where)
            elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
                resolve(node.left, where)
    return names, problems


def readme_environment_table(text: str) -> set[str]:
    """The variables named (in backticks) in the first column of README's table headed
    ``| Environment variable |``."""
    names: set[str] = set()
    in_table = False
    for line in text.splitlines():
        if line.startswith("| Environment variable |"):
            in_table = True
            continue
        if in_table:
            if not line.startswith("|"):
                break
            first = line.strip("|").split("|")[0]
            names.update(ENV_NAME.findall(first))
    return names


def test_every_environment_variable_the_code_reads_is_in_the_readme_table() -> None:
    sources = {str(path.relative_to(ROOT)): _read(path) for path in _env_source_files()}
    read, problems = environment_reads(sources)
    assert not problems, "environment reads the test cannot resolve:\n  " + "\n  ".join(problems)
    # The scan finds what is known to be there (the robot's, the recorder's, the simulator's).
    assert {
        "BCNP_PORT",
        "BCNP_DRIVETRAIN",
        "BCNP_LOG_DIR",
        "BCNP_SIM_AUTO_MODE",
        "BCNP_SIM_PWM_COAST",
    } <= read
    documented = readme_environment_table(_read(README))
    assert documented, "README.md has no `| Environment variable |` table"
    assert sorted(read - documented) == [], "read by the code, missing from the README's environment table"
    assert sorted(documented - read) == [], "in the README's environment table, read by no code"


def test_the_environment_scan_finds_each_kind_of_read() -> None:
    sources = {
        "a.py": (
            "import os\nfrom os import environ, getenv\nfrom b import IMPORTED\nLOCAL = 'BCNP_LOCAL'\n"
            "os.environ.get('BCNP_GET', '')\nos.environ['BCNP_ITEM']\nos.getenv(LOCAL)\n"
            "getenv(IMPORTED)\n'BCNP_IN' in environ\nos.environ.setdefault(b.OTHER, '1')\n"
            "os.environ['BCNP_WRITTEN'] = '1'\nos.environ.get(f'BCNP_{LOCAL}')\nenv = dict(os.environ)\n"
        ),
        "b.py": (
            "IMPORTED = 'BCNP_IMPORTED'\nOTHER = 'BCNP_OTHER'\nONE = 'BCNP_ONE'\n"
            "VARIABLES = (ONE, 'BCNP_TWO')\n"
        ),
    }
    names, problems = environment_reads(sources)
    assert names == {
        "BCNP_GET",
        "BCNP_ITEM",
        "BCNP_LOCAL",
        "BCNP_IMPORTED",
        "BCNP_IN",
        "BCNP_OTHER",
        "BCNP_ONE",
        "BCNP_TWO",
    }
    assert problems == ["a.py:12: cannot tell which variable f'BCNP_{LOCAL}' names"]
    table = (
        "| Environment variable | Effect |\n|---|---|\n| `BCNP_A`, `BCNP_B=1` | `BCNP_C` |\n\n| `BCNP_D` |\n"
    )
    assert readme_environment_table(table) == {"BCNP_A", "BCNP_B"}


# -- (e) figures about the build ---------------------------------------------------------------------


def _schema_hash() -> str:
    """This robot's schema hash as the robot shows it (``Network/SchemaHash``) and ``bcnp info``."""
    _constants_module()  # the project on sys.path
    from messages import SCHEMA

    return f"0x{SCHEMA.hash:08X}"


def _doc_texts() -> dict[str, str]:
    return {str(path.relative_to(ROOT)): _read(path) for path in [README, *_doc_pages()]}


def test_every_schema_hash_the_docs_quote_is_this_robots_as_the_robot_shows_it() -> None:
    expected = _schema_hash()
    quoted = {
        f"{where}: {found}"
        for where, text in _doc_texts().items()
        for found in re.findall(r"0x[0-9A-Fa-f]{8}\b", text)
        if found != expected
    }
    assert not quoted, (
        f"schema hashes other than {expected} (upper case, as Network/SchemaHash): {sorted(quoted)}"
    )


def test_the_coprocessor_install_check_prints_the_hash_it_says() -> None:
    """docs/coprocessor.md's last install step, run as written (from the checkout here, where
    ``messages`` is the module the wheel installs), prints what its comment says: the hash."""
    text = _read(DOCS / "coprocessor.md")
    checks = re.findall(r'python -c "([^"]+)"\s+# (\S+)', text)
    assert len(checks) == 1, f'expected one `python -c "..."  # HASH` line, found {checks}'
    [(code, quoted)] = checks
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == quoted == _schema_hash()


def test_the_wheel_and_build_backend_the_docs_name_are_this_builds() -> None:
    project = tomllib.loads(_read(ROOT / "pyproject.toml"))
    name = re.sub(r"[-_.]+", "_", project["project"]["name"]).lower()
    wheel = f"{name}-{project['project']['version']}-py3-none-any.whl"
    [backend] = [r for r in project["build-system"]["requires"] if r.startswith("setuptools")]
    minimum = backend.removeprefix("setuptools>=")
    texts = _doc_texts()
    named = {
        (where, found)
        for where, text in texts.items()
        for found in re.findall(rf"{name}-[^\s`\"/\[]+\.whl", text)
    }
    assert named, f"no doc names the wheel ({wheel})"
    assert {found for _, found in named} == {wheel}, sorted(named)
    backends = {
        (where, found)
        for where, text in texts.items()
        for found in re.findall(r"setuptools (\d+) or newer", text)
    }
    assert backends and {found for _, found in backends} == {minimum}, (backend, sorted(backends))
    # Its size changes with every module added: the docs do not quote it.
    assert not re.search(r"\d\s*(?:kB|KB|KiB|MB|MiB)\b", texts["docs/coprocessor.md"])


# -- links and pictures ------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", _read(path), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, flags=re.M)}


@pytest.mark.parametrize(
    "page", [README, *_doc_pages()], ids=lambda p: str(p.relative_to(ROOT)).replace("\\", "/")
)
def test_relative_links_and_pictures_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", _read(page), flags=re.S)
    broken = []
    for target in re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # an absolute URL
        file_part, _, anchor = target.partition("#")
        path = (page.parent / file_part).resolve() if file_part else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}: no heading with anchor #{anchor} in {path.name}")
    assert not broken, f"{page.relative_to(ROOT)}: broken links:\n  " + "\n  ".join(broken)
