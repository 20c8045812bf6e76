"""``python -m bcnp`` where only this project's wheel is installed, no extras (a coprocessor):
each command, and each mode of one, that needs an optional library (the ``host`` extra's:
pyntcore, matplotlib, robotpy-wpimath, the planners' libraries) says so in one ``error:``
line on stderr and exits 1, with the command that installs the extra there: the wheel
file the environment was installed from, with ``[host]`` (that file gone: the extra's
requirements). The commands that need no extra run, and every ``--help`` works.

One wheel and one environment for the module (``support.build_wheel``,
``support.wheel_only_venv``). The commands run at once, each a ``python -m bcnp`` process
of that environment, outside the project; those that talk to a robot get their own, a
real TCP server served in this process.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import ServedRobot, build_wheel, child_env, serve_robot, wheel_only_venv

from bcnp.host.cli import SUBCOMMANDS
from bcnp.host.sessions.recorder import COMMAND_COLUMNS, TELEMETRY_COLUMNS, TIME_COLUMN
from bcnp.transport import TcpServer
from benchmarks.harness import ROOT
from messages import SCHEMA

PATHS = ROOT / "paths"
#: Each child's bound: a command that waits on nothing ends in a second on an idle machine.
CHILD_TIMEOUT_S = 120
#: The host extra's requirements, as pyproject.toml lists them.
HOST_REQUIREMENTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][
    "host"
]


@dataclass(frozen=True)
class Missing:
    """A command that needs ``module`` (of ``distribution``), named ``what`` in its error line."""

    args: tuple[str, ...]
    what: str
    distribution: str
    module: str


PATH_FILE = str(PATHS / "s_curve.path")
TRAJ_FILE = str(PATHS / "j_turn.traj")
#: Each command and mode that needs an optional library; ``{run}`` is a telemetry CSV, ``{port}``
#: a robot's port (the follower's library is missing before it would connect).
MISSING = {
    "monitor --once": Missing(("monitor", "--once"), "monitor", "pyntcore", "ntcore"),
    "monitor (live)": Missing(("monitor",), "monitor", "pyntcore", "ntcore"),
    "plot": Missing(("plot", "{run}"), "plot", "matplotlib", "matplotlib"),
    "replay .path": Missing(
        ("replay", PATH_FILE), f"replay of {PATH_FILE}", "robotpy-pathplannerlib", "pathplannerlib"
    ),
    "replay .traj": Missing(
        ("replay", TRAJ_FILE), f"replay of {TRAJ_FILE}", "sleipnirgroup-choreolib", "choreo"
    ),
    "replay --follow": Missing(
        ("replay", str(PATHS / "square.csv"), "--follow", "--port", "{port}"),
        "replay --follow",
        "robotpy-wpimath",
        "wpimath",
    ),
}
#: The commands that need no extra, and what their output holds.
RUNS = {
    "info": (("info",), f"0x{SCHEMA.hash:08X}"),
    "send": (("send", "--no-wait", "0.2", "0", "40", "--port", "{port}"), "sent: 1 DriveCmd"),
    "replay .csv": (("replay", "{csv}", "--port", "{port}"), "done: 1 commands"),
    "proxy": (("proxy", "--listen", "127.0.0.1:0", "--duration", "0.2s", "--seed", "1"), "counters:"),
}


def test_every_subcommand_is_run_here() -> None:
    covered = {m.args[0] for m in MISSING.values()} | {args[0] for args, _ in RUNS.values()}
    assert covered == set(SUBCOMMANDS)


@dataclass
class Installed:
    python: Path
    wheel: Path  # the file the environment was installed from
    cwd: Path  # a folder outside the project, where the commands run


@dataclass
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    wheel = build_wheel(ROOT, tmp_path_factory.mktemp("wheel"))
    python = wheel_only_venv(wheel, tmp_path_factory.mktemp("wheel-only"))
    return Installed(python, wheel, tmp_path_factory.mktemp("elsewhere"))


def start(installed: Installed, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(installed.python), "-m", "bcnp", *args],
        cwd=installed.cwd,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> Ran:
    try:
        out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return Ran(proc.returncode, out, err)


@dataclass
class Results:
    ran: dict[str, Ran]
    robots: dict[str, ServedRobot]


def telemetry_csv(path: Path) -> Path:
    """A run as ``replay --telemetry`` writes it: two samples 40 ms apart, standing still."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow([TIME_COLUMN, *TELEMETRY_COLUMNS, *COMMAND_COLUMNS])
        for i in range(2):
            out.writerow([i * 0.04, i * 40, 0, 0, 0, 0, 0, 0])
    return path


@pytest.fixture(scope="module")
def results(installed: Installed) -> Iterator[Results]:
    """Every case of MISSING and RUNS, each in its own process, all at once (each robot
    serves one); the robots stay up for the tests to ask what they received."""
    robots: dict[str, ServedRobot] = {}
    procs: dict[str, subprocess.Popen[str]] = {}
    short = installed.cwd / "short.csv"
    short.write_text("0.2,0,40\n")
    values = {"run": str(telemetry_csv(installed.cwd / "run.csv")), "csv": str(short)}
    try:
        cases = {k: m.args for k, m in MISSING.items()} | {k: args for k, (args, _) in RUNS.items()}
        for case, args in cases.items():
            if "{port}" in args:
                robots[case] = serve_robot(SCHEMA, TcpServer)
                values["port"] = str(robots[case].server.port)
            procs[case] = start(installed, *(a.format(**values) for a in args))
        yield Results({case: finish(proc) for case, proc in procs.items()}, robots)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for robot in robots.values():
            robot.server.close()


def one_error_line(ran: Ran) -> str:
    """The run's one line on stderr, checked: exit 1, ``error:``, no traceback."""
    assert "Traceback" not in ran.err, ran.err
    assert ran.code == 1, (ran.code, ran.out, ran.err)
    assert ran.err.endswith("\n") and ran.err.count("\n") == 1, ran.err
    assert ran.err.startswith("error: "), ran.err
    return ran.err.rstrip("\n")


@pytest.mark.parametrize("case", MISSING)
def test_a_command_without_its_library_says_so_in_one_line_with_the_install_command(
    case: str, installed: Installed, results: Results
) -> None:
    ran, missing = results.ran[case], MISSING[case]
    line = one_error_line(ran)
    print(f"{case}: {line}")
    install = f'{installed.python} -m pip install "{installed.wheel}[host]"'
    assert line == (
        f"error: {missing.what} needs {missing.distribution} (module {missing.module}), "
        f"which is not installed in this environment; install the host extra: {install}"
    )
    assert ran.out == ""  # said before doing anything
    if case in results.robots:  # the follower's library is missing before it connects
        assert results.robots[case].packets == []


@pytest.mark.parametrize("case", RUNS)
def test_a_command_that_needs_no_extra_runs(case: str, results: Results) -> None:
    ran = results.ran[case]
    print(f"{case}: exit {ran.code}\n{ran.out}{ran.err}")
    assert ran.code == 0 and "Traceback" not in ran.err, ran.out + ran.err
    assert RUNS[case][1] in ran.out
    if case in results.robots:
        assert results.robots[case].packets, "the robot received nothing"


def test_every_help_works(installed: Installed) -> None:
    """``--help`` of the tool and of each subcommand (its examples at the end), one process."""
    probe = (
        "import sys\nfrom bcnp.host.cli import main\n"
        f"for argv in [['--help']] + [[c, '--help'] for c in {list(SUBCOMMANDS)!r}]:\n"
        "    try:\n        main(argv)\n    except SystemExit as exc:\n"
        "        print('exit', argv[0], exc.code, file=sys.stderr)\n"
    )
    ran = subprocess.run(
        [str(installed.python), "-c", probe],
        cwd=installed.cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr
    assert ran.stderr.splitlines() == ["exit --help 0", *(f"exit {c} 0" for c in SUBCOMMANDS)]
    assert ran.stdout.count("usage: python -m bcnp") == 1 + len(SUBCOMMANDS)
    assert ran.stdout.count("example") >= len(SUBCOMMANDS)


def test_the_install_command_installs_the_host_extra_from_the_wheel(installed: Installed) -> None:
    """The hint's target, given to pip as the hint gives it (this environment has no pip of its
    own: the test's pip installs into it): a dry run with no index gets as far as one of the
    extra's requirements, which it cannot find. No configuration or index is read."""
    env = {k: v for k, v in child_env().items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    pip = [sys.executable, "-m", "pip", "--python", str(installed.python), "--disable-pip-version-check"]
    ran = subprocess.run(
        [*pip, "install", "--dry-run", "--no-index", f"{installed.wheel}[host]"],
        cwd=installed.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    # pip names the requirement it could not find with the extra's marker or without it,
    # by version: "pyntcore==2026.2.2 (from ...)" or "pyntcore==2026.2.2; extra == "host" (from ...)".
    wanted = [
        re.compile(re.escape(r) + r'(; extra == "host")? \(from bcnp-robot\[host\]\)')
        for r in HOST_REQUIREMENTS
    ]
    assert ran.returncode == 1 and any(w.search(ran.stderr) for w in wanted), ran.stdout + ran.stderr


def test_without_the_wheel_file_the_install_command_lists_the_extras_requirements(
    installed: Installed,
) -> None:
    moved = installed.wheel.with_name("moved.bin")
    installed.wheel.rename(moved)
    try:
        ran = finish(start(installed, "monitor", "--once"))
    finally:
        moved.rename(installed.wheel)
    line = one_error_line(ran)
    print(line)
    requirements = " ".join(f'"{r}"' for r in HOST_REQUIREMENTS)
    assert line.endswith(f"install the host extra: {installed.python} -m pip install {requirements}")
    assert line.startswith("error: monitor needs pyntcore (module ntcore), which is not installed")
