"""What the robot project hands the host tools (bcnp/host/cli/project.py): its schema and its limits.

The library never imports the project: ``python -m bcnp`` takes ``--schema``, else the
``[tool.bcnp]`` table of the nearest pyproject.toml, else the schema an installed
package offers (entry point group ``bcnp.schemas``). Checked on the functions, and on
the real command run in this project, in a folder outside it, and in another project.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bcnp
import constants
from bcnp.host.cli import project
from bcnp.paths import DriveLimits
from benchmarks.harness import ROOT
from messages import SCHEMA

DATA = ROOT / "tests" / "data"


def bcnp_info(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bcnp", "info", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_this_project_hands_over_its_schema_and_its_drivetrain() -> None:
    found = project.find_project(ROOT / "paths")  # from a folder inside the project too
    assert found is not None and found.root == ROOT
    assert project.schema(None, found, offers=list).hash == SCHEMA.hash
    assert project.limits(found) == DriveLimits.from_constants(constants)
    assert project.limits(found).max_vx_mps == constants.MAX_VX_MPS


def test_the_flag_comes_first_then_the_project_then_an_installed_schema(tmp_path: Path) -> None:
    test_schema = DATA / "test_schema.json"
    (tmp_path / "pyproject.toml").write_text('[tool.bcnp]\nschema = "s.json"\n')
    shutil.copy(test_schema, tmp_path / "s.json")
    here = project.find_project(tmp_path)
    assert here is not None and here.schema_file == tmp_path / "s.json" and here.limits_file is None
    theirs = bcnp.load_schema(test_schema).hash
    offered = [("robot (messages:SCHEMA)", lambda: SCHEMA)]
    assert project.schema(None, here, offers=lambda: offered).hash == theirs
    assert project.schema(str(ROOT / "schema" / "messages.json"), here).hash == SCHEMA.hash
    assert project.schema(None, None, offers=lambda: offered) is SCHEMA
    assert project.limits(here) == DriveLimits()  # no limits named: the kit chassis


def test_no_schema_anywhere_or_several_say_what_to_pass() -> None:
    with pytest.raises(project.ProjectError, match=r"no schema: give --schema FILE"):
        project.schema(None, None, offers=list)
    two = [("a (x:A)", lambda: SCHEMA), ("b (y:B)", lambda: SCHEMA)]
    with pytest.raises(
        project.ProjectError, match=r"several installed packages offer a schema \(a \(x:A\), b"
    ):
        project.schema(None, None, offers=lambda: two)
    with pytest.raises(project.ProjectError, match="offers a str, not a bcnp Schema"):
        project.schema(None, None, offers=lambda: [("c (z:C)", lambda: "nope")])


@pytest.mark.parametrize(
    ("toml", "error"),
    [
        ('[tool.bcnp]\nschema = "missing.json"\n', "missing.json: no such schema file"),
        ("[tool.bcnp]\nschema = 3\n", "schema must be a file name"),
        ('[tool.bcnp]\nschemas = "x"\n', r"unknown keys \['schemas'\]"),
        ("[tool.bcnp\n", "cannot read it"),
    ],
)
def test_a_bad_table_is_one_clear_error(tmp_path: Path, toml: str, error: str) -> None:
    (tmp_path / "pyproject.toml").write_text(toml)
    with pytest.raises(project.ProjectError, match=error):
        project.schema(None, project.find_project(tmp_path), offers=list)


def test_limits_from_a_broken_or_missing_file_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.bcnp]\nlimits = "c.py"\n')
    with pytest.raises(project.ProjectError, match="no such limits file"):
        project.limits(project.find_project(tmp_path))
    (tmp_path / "c.py").write_text("MAX_VX_MPS = 1 / 0\n")
    with pytest.raises(project.ProjectError, match="cannot run it for its limits: division by zero"):
        project.limits(project.find_project(tmp_path))
    (tmp_path / "c.py").write_text("MAX_VX_MPS = 2.5\nTRACK_WIDTH_M = 0.7\n")
    limits = project.limits(project.find_project(tmp_path))
    assert (limits.max_vx_mps, limits.track_width_m) == (2.5, 0.7)


def test_python_m_bcnp_in_the_project_outside_it_and_in_another_project(tmp_path: Path) -> None:
    ours = f"0x{SCHEMA.hash:08X}"
    inside = bcnp_info(ROOT)
    assert inside.returncode == 0 and ours in inside.stdout, inside.stderr
    # Outside any project: the schema this project's installed package offers.
    outside = bcnp_info(tmp_path)
    assert outside.returncode == 0 and ours in outside.stdout, outside.stderr
    # From flags alone.
    theirs = f"0x{bcnp.load_schema(DATA / 'test_schema.json').hash:08X}"
    flagged = bcnp_info(tmp_path, str(DATA / "test_schema.json"))
    assert flagged.returncode == 0 and theirs in flagged.stdout
    # Another project's table.
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text('[tool.bcnp]\nschema = "schema.json"\n')
    shutil.copy(DATA / "test_schema.json", other / "schema.json")
    in_other = bcnp_info(other)
    assert in_other.returncode == 0 and theirs in in_other.stdout, in_other.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text('[tool.bcnp]\nschema = "none.json"\n')
    failed = bcnp_info(broken)
    assert failed.returncode == 1 and failed.stderr.startswith("error: ") and "none.json" in failed.stderr
