"""One command per task, the same on Windows, macOS and Linux (Python >= 3.11 and pip only).

    python run.py sim [--nogui]          install what the simulator needs, then start it
    python run.py test [PYTEST ARGS]     install the project and test tools, then run every test (in parallel)
    python run.py bcnp COMMAND ...       the host tools (python -m bcnp ...), e.g. replay paths/figure8.csv
    python run.py robotpy COMMAND ...    RobotPy's tools, e.g. robotpy deploy --team 1234

``sim --nogui`` starts the robot in autonomous, enabled (a headless sim has no
button to press; ``BCNP_SIM_AUTONOMOUS=0`` keeps it disabled); the GUI sim
starts disabled. ``sim`` runs ``robotpy sim`` in ``.sim/`` (a dot-folder: ``robotpy deploy``
skips it) with the shipped GUI layout from ``.sim-layout/`` copied there on
first use: the Field and NetworkTables windows open, the keyboard as
joystick 0. The GUI saves window changes to ``.sim/``, never to the project.

Outside a virtual environment, everything goes into ``.venv/`` in this folder
(created on first use; ``robotpy deploy`` skips dot-folders). Inside one
(activated, or run with its python), that environment is used. Installing
happens only when ``pyproject.toml`` changed or a new extra is needed, so the
second run starts at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = ".bcnp-installed.json"
LAYOUT = ".sim-layout"  # the shipped sim GUI layout (simgui*.json)
SIM_DIR = ".sim"  # where the sim runs: the GUI reads and saves its layout in its working directory

TASKS = {
    # task: (extras to install, command after "python -m")
    "sim": ("sim,host", ["robotpy", "sim"]),
    # Every test, in parallel (pytest-xdist): tests/conftest.py says how many workers "auto" is.
    # A module's tests stay in one worker (module-scoped fixtures: a simulator process, C++
    # builds), handed out in collection order, longest first; `-n 0` after `test` runs serially.
    "test": ("test", ["pytest", "-n", "auto", "--dist", "loadfile", "--no-loadscope-reorder"]),
    "bcnp": ("host", ["bcnp"]),
    "robotpy": ("sim", ["robotpy"]),
}


def fail(message: str) -> int:
    print(f"run.py: {message}", file=sys.stderr)
    return 1


def environment() -> tuple[Path, Path]:
    """(python to use, its environment's prefix); creates .venv when not in a venv."""
    if sys.prefix != sys.base_prefix:
        return Path(sys.executable), Path(sys.prefix)
    python = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not python.exists():
        print(f"creating a virtual environment in {VENV} ...", flush=True)
        import venv

        try:
            venv.create(VENV, with_pip=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            linux = sys.platform.startswith("linux")
            hint = " (on Debian/Ubuntu: sudo apt install python3-venv)" if linux else ""
            raise SystemExit(fail(f"cannot create {VENV}: {exc}{hint}")) from None
    return python, VENV


def install(python: Path, prefix: Path, extras: str) -> None:
    """pip install -e .[extras], unless this environment already has them for this pyproject.toml."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    stamp = prefix / STAMP
    try:
        done = json.loads(stamp.read_text())
    except (OSError, ValueError):
        done = {}
    if done.get("pyproject") != digest:
        done = {"pyproject": digest, "extras": []}
    if extras in done["extras"]:
        return
    print(f"installing bcnp-robot[{extras}] (the first time downloads RobotPy: a minute or two)", flush=True)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    result = subprocess.call([*pip, "-e", f".[{extras}]"])
    if result != 0:
        raise SystemExit(fail(f"pip install failed (exit {result}); the output above says why"))
    done["extras"].append(extras)
    stamp.write_text(json.dumps(done))


def sim_command(project: Path, python: str, args: list[str]) -> tuple[Path, list[str]]:
    """(working directory, command) for ``robotpy sim`` of ``project`` with the shipped
    GUI layout: ``project/.sim/``, seeded with ``.sim-layout/*.json`` it does not have yet."""
    workdir = project / SIM_DIR
    workdir.mkdir(exist_ok=True)
    for source in sorted((project / LAYOUT).glob("simgui*.json")):
        target = workdir / source.name
        if not target.exists():
            target.write_bytes(source.read_bytes())
    return workdir, [python, "-m", "robotpy", "--main", str(project / "robot.py"), "sim", *args]


def sim_environment(args: list[str], env: dict[str, str]) -> dict[str, str]:
    """The sim's environment: headless (``--nogui``), it starts in autonomous, enabled,
    unless the caller's environment says otherwise."""
    from sim.settings import AUTONOMOUS  # stdlib only: importable before any install

    env = dict(env)
    if "--nogui" in args:
        env.setdefault(AUTONOMOUS, "1")
    return env


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 - say so plainly on an old Python
        return fail(f"needs Python 3.11 or newer, this is {sys.version.split()[0]}")
    if not argv or argv[0] not in TASKS:
        print(__doc__.strip().split("\n\n")[1] if __doc__ else "", file=sys.stderr)
        return 2
    task, rest = argv[0], argv[1:]
    extras, command = TASKS[task]
    os.chdir(ROOT)
    python, prefix = environment()
    install(python, prefix, extras)
    cwd, args, env = ROOT, [str(python), "-m", *command, *rest], dict(os.environ)
    if task == "sim":
        cwd, args = sim_command(ROOT, str(python), rest)
        env = sim_environment(rest, env)
    return run_child(args, cwd, env)


def run_child(args: list[str], cwd: Path, env: dict[str, str]) -> int:
    """Run the task's command and return its exit status. Ctrl-C reaches it with us (one
    process group); a SIGTERM or SIGHUP sent to this process alone is passed on, so a
    stopped ``run.py sim`` never leaves a simulated robot running, holding its ports."""
    children: list[subprocess.Popen[bytes]] = []
    caught: list[int] = []

    def pass_on(signum: int, frame: object) -> None:
        if children:
            children[0].send_signal(signum)
        else:
            caught.append(signum)  # arrived while the child was being started

    # Before the child starts, so that no signal finds the default action (exit) meanwhile.
    for name in ("SIGTERM", "SIGHUP"):  # SIGHUP: not on Windows
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), pass_on)
    child = subprocess.Popen(args, cwd=cwd, env=env)
    children.append(child)
    for signum in caught:
        child.send_signal(signum)
    while True:
        try:
            status = child.wait()
        except KeyboardInterrupt:
            continue  # the child got the same Ctrl-C: let it stop the robot and exit on its own
        return 128 - status if status < 0 else status  # killed by signal N: 128 + N, as a shell says


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
