"""What ``robotpy deploy`` uploads runs on what a roboRIO has.

The upload set is built by RobotPy's own deploy code (its skip rules: dot-folders,
``__pycache__``, ``venv``, ``.pyc``, ``.wpilog``, ...) into a temporary folder. An
environment with only ``robotpy`` and the ``[tool.robotpy]`` requirements of
pyproject.toml (as ``robotpy sync`` installs on a roboRIO; plus RobotPy's simulator,
to run it here) runs the robot from that copy: no host, test or dev extra, and no
installed ``bcnp``: the library comes from the upload, as on the robot. The robot
starts, plays a path mode (``Path: square.csv`` picked on the chooser) and serves a
BCNP host that then takes over; its ``.wpilog`` says both ran.

The environment takes about half a minute to install from pip's cache the first
time; it is kept under the system's temporary folder, keyed by Python version and
requirements, and reused while complete.

Deploy reads no ``.gitignore`` and has no exclusion setting, so what the README's
commands leave in the folder must land where it skips (docs/robot.md, "Deploying"): in
a copy of the repository's files the install (setuptools' hooks as pip calls them, for
``pip install -e .`` and ``pip wheel .``), a test run, the sim's folder and the README's
host commands (its telemetry file, the real ``plot``) leave their files, and the upload
set must still be repository files only.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest
from support import LOG_POLL_S, wait_until

from bcnp.host import Client, ReconnectPolicy
from benchmarks.harness import ROOT
from messages import SCHEMA, DriveCmd

PATH_MODE = "Path: square.csv"
#: What the path and the host drive (m/s): paths/square.csv's legs, and the host's command.
PATH_VX, HOST_VX = 0.75, 0.3
#: A robot-only environment must not have these: the host, test and dev extras, and this
#: package installed (pytest is there: RobotPy's simulator, pyfrc, needs it).
NOT_ON_A_ROBOT = ("hypothesis", "matplotlib", "rich", "ruff", "mypy", "jsonschema", "bcnp", "messages")


def robot_requirements() -> list[str]:
    """``robotpy`` (with its simulator, to run here) and ``[tool.robotpy] requires``."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["robotpy"]
    extras = sorted({"sim", *table.get("components", [])})
    return [f"robotpy[{','.join(extras)}]=={table['robotpy_version']}", *table.get("requires", [])]


def upload_set(target: Path, project: Path = ROOT, dry_run: bool = False) -> list[str]:
    """The files ``robotpy deploy`` would upload from ``project`` (paths relative to it, with
    ``/``), copied into ``target`` by its own code unless ``dry_run`` (RobotPy internals: an
    upgrade that moves them fails here, loudly)."""
    from robotpy_installer.cli_deploy import Deploy

    files: list[str] = Deploy._copy_to_tmpdir(None, target, project, dry_run)  # type: ignore[arg-type]
    return sorted(Path(f).relative_to(project).as_posix() for f in files)


@pytest.fixture(scope="module")
def robot_python() -> Path:
    """A virtual environment with the robot's requirements only; its python."""
    requirements = robot_requirements()
    key = hashlib.sha256(repr((sys.version, requirements)).encode()).hexdigest()[:12]
    env = Path(tempfile.gettempdir()) / f"bcnp-robot-env-{key}"
    python = env / "bin" / "python"
    done = env / ".complete"
    if not done.exists():
        shutil.rmtree(env, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
        pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
        result = subprocess.run([*pip, *requirements], capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, f"cannot install {requirements}:\n{result.stderr[-3000:]}"
        done.write_text("\n".join(requirements))
    return python


def test_the_upload_set_is_the_robot_and_nothing_of_the_workspace(tmp_path: Path) -> None:
    files = upload_set(tmp_path / "upload")
    for wanted in (
        "robot.py",
        "physics.py",
        "constants.py",
        "messages.py",
        "bcnp/paths/__init__.py",
        "paths/square.csv",
    ):
        assert wanted in files, wanted
    assert any(f.startswith("autonomous/") for f in files) and any(f.startswith("subsystems/") for f in files)
    for f in files:
        parts = Path(f).parts
        assert not any(p.startswith(".") or p == "__pycache__" for p in parts), f
        assert not f.endswith((".pyc", ".wpilog")), f


#: The calls pip makes to the build backend, in a process of their own in the project, for
#: ``pip install -e .`` (build isolation: the README's install, run.py's) and ``pip wheel .``
#: (docs/coprocessor.md): where setuptools writes its build/ and *.egg-info.
PIP_BUILDS = """\
import tempfile
import setuptools.build_meta as backend
for kind in ("editable", "wheel"):
    getattr(backend, "get_requires_for_build_" + kind)()
    metadata = tempfile.mkdtemp()
    name = getattr(backend, "prepare_metadata_for_build_" + kind)(metadata)
    getattr(backend, "build_" + kind)(tempfile.mkdtemp(), None, metadata + "/" + name)
"""


def repository_files() -> list[str]:
    """The files of this checkout that git tracks or would (new, not ignored): a clean
    clone's, once committed."""
    if shutil.which("git") is None:
        pytest.skip("needs git, to list the repository's files")
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    result = subprocess.run(listing, cwd=ROOT, capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"not a git checkout: {result.stderr.decode(errors='replace').strip()}")
    return sorted(f for f in set(result.stdout.decode().split("\0")) if f and (ROOT / f).is_file())


def readme_host_commands() -> list[list[str]]:
    """The README's host commands (``python run.py bcnp ...``, its "Driving the sim" block):
    the arguments after ``bcnp``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Driving the sim", 1)[1].split("```", 2)[1]
    prefix = "python run.py bcnp "
    return [shlex.split(line.split(" #", 1)[0])[3:] for line in block.splitlines() if line.startswith(prefix)]


def all_files(folder: Path) -> set[str]:
    return {(Path(d) / f).relative_to(folder).as_posix() for d, _, files in os.walk(folder) for f in files}


def test_after_the_readmes_commands_deploy_uploads_only_repository_files(tmp_path: Path) -> None:
    """What the install, a test run, the sim and the README's host commands make in a copy
    of the repository: some of each kind, and none of it in the upload set."""
    import run
    from bcnp.host.cli.plotting import REQUIRED

    pytest.importorskip("setuptools", minversion="77")  # what pyproject.toml builds with
    project = tmp_path / "project"
    repository = repository_files()
    for name in repository:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, project / name)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def command(*args: str) -> None:
        result = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, (
            f"{args}: exit {result.returncode}\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
        )

    command(sys.executable, "-c", PIP_BUILDS)  # the install, and the coprocessor's wheel
    command(sys.executable, "-m", "pytest", "-q", "tests/test_run.py", "-k", "shipped_layout")
    run.sim_command(project, sys.executable, [])  # the sim's folder, as run.py sim makes it
    hosts = readme_host_commands()
    telemetry = [args[args.index("--telemetry") + 1] for args in hosts if "--telemetry" in args]
    plots = [args for args in hosts if args[0] == "plot"]
    assert telemetry and plots, hosts
    for name in telemetry:  # what replay --telemetry writes: a header, a row per sample
        rows = [",".join(REQUIRED), *(",".join(["0"] * len(REQUIRED)) for _ in range(3))]
        (project / name).write_text("\n".join(rows) + "\n")
    for args in plots:
        command(sys.executable, "-m", "bcnp", *args)

    made = all_files(project) - set(repository)
    for kind in (".egg-info/PKG-INFO", "lib/bcnp/__init__.py", ".png", "CACHEDIR.TAG"):
        assert any(name.endswith(kind) for name in made), f"nothing made ends with {kind}: {sorted(made)}"
    for name in telemetry:
        assert name in made
    uploaded = upload_set(tmp_path / "upload", project, dry_run=True)
    assert set(uploaded) <= set(repository), sorted(set(uploaded) - set(repository))


def test_the_robot_runs_from_its_upload_set_with_only_its_requirements(
    tmp_path: Path, robot_python: Path
) -> None:
    from benchmarks.harness.sim import SimRobot

    upload = tmp_path / "upload"
    upload_set(upload)
    missing = subprocess.run(
        [
            str(robot_python),
            "-c",
            f"import importlib.util as u; print([m for m in {NOT_ON_A_ROBOT!r} if u.find_spec(m)])",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        check=True,
    )
    assert missing.stdout.strip() == "[]", f"the robot environment has {missing.stdout.strip()}"

    logs = tmp_path / "logs"
    robot = SimRobot(
        logs,
        python=str(robot_python),
        project=upload,
        env={
            "BCNP_SIM_AUTO_MODE": PATH_MODE,
            "PYTHONPATH": None,
            "VIRTUAL_ENV": None,
        },
    )
    with robot:
        robot.start(timeout=120.0)
        time.sleep(1.0)  # the path's first leg runs: no host yet
        policy = ReconnectPolicy(enabled=False)
        with Client(SCHEMA, "127.0.0.1", robot.port, reconnect=policy) as host:
            host.send([DriveCmd(vx=HOST_VX, omega=0.0, durationMs=500)], clear_queue=True)
            telemetry = [host.receive(5.0) for _ in range(10)]
            assert all(packet is not None for packet in telemetry), robot.output()
            host.stop()

        def logged() -> list[float]:
            return command_vx(logs)

        wait_until(
            lambda: HOST_VX in logged(),
            timeout=10.0,
            what="the host's command in the robot's log",
            first_poll=LOG_POLL_S,
        )
    output = robot.output(200)
    assert f"Enabling '{PATH_MODE}'" in output, output
    assert "Traceback" not in output and "cannot play its path" not in output, output
    vx = command_vx(logs)
    assert vx[0] == PATH_VX and HOST_VX in vx, vx  # the path ran first, then the host drove


def command_vx(log_dir: Path) -> list[float]:
    """``BCNP/Command/Vx`` of every ``.wpilog`` in ``log_dir``: each command as it became active."""
    from wpiutil.log import DataLogReader

    values: list[float] = []
    for path in sorted(log_dir.glob("*.wpilog")):
        reader = DataLogReader(str(path))
        if not reader.isValid():
            continue
        entry = None
        for record in reader:
            if record.isStart():
                start = record.getStartData()
                if start.name == "BCNP/Command/Vx":
                    entry = start.entry
            elif not record.isControl() and record.getEntry() == entry:
                values.append(round(record.getDouble(), 4))
    return values
