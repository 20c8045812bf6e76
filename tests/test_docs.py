"""The documentation against the code: README key table, documented knobs and constants, links.

* The ``Network/*`` keys the robot really publishes (the robot run in the pyfrc
  simulator, keys and types read back from NetworkTables) equal the README's
  key table, name for name and type for type.
* Every field of ``TransportConfig`` and ``MessageQueueConfig`` is named in
  docs/transports.md or docs/protocol.md, and every top-level UPPER_CASE name
  of constants.py appears in README.md or docs/.
* README.md stays a front door: at most 200 lines.
* Relative links and pictures in README.md and docs/*.md point at files (and
  headings) that exist.

Each failure lists every difference at once, naming the key, field or link.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
from pathlib import Path

import pytest

import bcnp
from bcnp.transport import TransportConfig

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200

#: NetworkTables type strings as the README's table names them (SmartDashboard
#: numbers are NT doubles).
NT_TYPE_NAMES = {"double": "number", "float": "number", "int": "integer"}


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


# -- (a) the Network/* key table --------------------------------------------------------------


def readme_key_table(text: str) -> tuple[dict[str, str], list[str]]:
    """``{"Network/Name": type}`` from the README's table rows whose first cell names
    ``Network/*`` keys in backticks (one or more per row), and any problems found."""
    keys: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.lstrip().startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        names = re.findall(r"`(Network/[^`]+)`", cells[0])
        if not names:
            continue
        kind = cells[1].strip("` ") if len(cells) > 1 else ""
        if not kind:
            problems.append(f"README.md:{number}: {', '.join(names)}: no type in the second column")
        for name in names:
            if name in keys:
                problems.append(f"README.md:{number}: {name} is listed twice")
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
        problems.append(
            f"{name}: published by the robot ({published[name]}) but missing from the README table"
        )
    for name in sorted(documented.keys() - published.keys()):
        problems.append(f"{name}: in the README table ({documented[name]}) but not published by the robot")
    for name in sorted(published.keys() & documented.keys()):
        if published[name] != documented[name]:
            problems.append(
                f"{name}: the README says {documented[name]!r}, the robot publishes {published[name]!r}"
            )
    return problems


def test_readme_key_table_matches_the_keys_the_robot_publishes(request: pytest.FixtureRequest) -> None:
    pytest.importorskip("pyfrc", reason="the robot needs RobotPy (python run.py test installs it)")
    documented, problems = readme_key_table(_read(README))
    assert not problems, "README key table:\n  " + "\n  ".join(problems)
    assert documented, "README.md has no table rows naming `Network/...` keys"

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
        "README.md's Network/* key table differs from what the robot publishes "
        "(types as NetworkTables reports them; double is 'number'):\n  " + "\n  ".join(differences)
    )


def test_the_key_table_comparison_names_each_difference() -> None:
    documented, problems = readme_key_table(
        "| Key | Type | Meaning |\n|---|---|---|\n"
        "| `Network/A` | number | a |\n| `Network/B`, `Network/C` | string | b, c |\n"
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
        "Network/D: published by the robot (number) but missing from the README table",
        "Network/C: in the README table (string) but not published by the robot",
        "Network/A: the README says 'number', the robot publishes 'boolean'",
    ]


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
