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

``test`` runs pytest with a few workers (pytest-xdist: ``-n auto``), each taking whole
test modules, the longest first: how long a module is comes from what its tests took in
the last run (kept in pytest's cache, ``.pytest_cache/``), or in a fresh clone from what
they use (tests/conftest.py). PYTEST ARGS go after the task's own: ``-n 0`` runs serially,
a path or ``-k`` picks tests. It writes bytecode even with ``PYTHONDONTWRITEBYTECODE`` set
(:func:`test_environment`).

Outside a virtual environment, everything goes into ``.venv/`` in this folder
(created on first use; ``robotpy deploy`` skips dot-folders). Inside one
(activated, or run with its python), that environment is used. Before a task,
run.py checks in that environment's python that every requirement of the task's
extras in ``pyproject.toml`` is installed at a version it allows (their own
requirements too), and that this project is installed editable from this folder
with pyproject.toml's version and entry points (a few tenths of a second; a stamp
in the environment skips it while neither pyproject.toml nor the environment's
folders changed). All there: nothing is installed or printed. Otherwise one line
says what pip installs and why, and pip installs only that.

Stopping. Ctrl-C, ``kill`` (SIGTERM) and a closed terminal (SIGHUP) stop the
task's command too, also when sent to run.py alone (``kill PID``, an IDE's stop
button, a script's ``kill -INT $!``): run.py passes each on once and exits
128 + the signal's number (130 for Ctrl-C), so a stopped ``run.py sim`` never
leaves a simulated robot holding its ports. The simulated robot ignores
Ctrl-C itself (RobotPy would print a traceback) and is stopped by run.py; the
other tasks get Ctrl-C as usual. A second signal kills the command at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
#: In the environment: what the last check found complete (:func:`install`), a cache.
STAMP = ".bcnp-installed.json"
#: Where setuptools builds (setup.cfg: ``build/`` and the ``.egg-info``), out of deploy's way.
BUILD = ".build"
LAYOUT = ".sim-layout"  # the shipped sim GUI layout (simgui*.json)
SIM_DIR = ".sim"  # where the sim runs: the GUI reads and saves its layout in its working directory

TASKS = {
    # task: (extras to install, command after "python -m")
    "sim": ("sim,host", ["robotpy", "sim"]),
    # Every test, in parallel (pytest-xdist): tests/conftest.py says how many workers "auto" is.
    # A module's tests stay in one worker (module-scoped fixtures: a simulator process, C++
    # builds), handed out in collection order, which tests/conftest.py makes longest first by
    # what each test took in the last run (pytest's cache); `-n 0` after `test` runs serially.
    "test": ("test", ["pytest", "-n", "auto", "--dist", "loadfile", "--no-loadscope-reorder"]),
    "bcnp": ("host", ["bcnp"]),
    # `robotpy deploy` runs `robotpy test` (the deploy tier) before every upload: its libraries too.
    "robotpy": ("deploy-tests", ["robotpy"]),
}

#: What stops a task: Ctrl-C, ``kill``, a closed terminal (SIGHUP: not on Windows).
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
#: RobotPy's own distribution: when it is missing, pip downloads RobotPy (a minute or two).
ROBOTPY = "robotpy"


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


# -- what is installed --------------------------------------------------------------------------


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(pyproject: dict[str, Any], extras: str) -> list[str]:
    """The requirements of this project with ``extras`` (comma-separated), in pyproject.toml's
    order; the project's own extras named in them (``bcnp-robot[sim,host]``) expanded."""
    project = pyproject["project"]
    own = canonical(project["name"])
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    found: list[str] = []
    expanded: set[str] = set()

    def add(entries: list[str]) -> None:
        for entry in entries:
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", entry)
            if match and canonical(match[1]) == own:
                for extra in (match[2] or "").split(","):
                    expand(extra.strip())
            elif entry not in found:
                found.append(entry)

    def expand(extra: str) -> None:
        if extra and extra not in expanded:
            expanded.add(extra)
            add(optional.get(extra, []))

    add(project.get("dependencies", []))
    for extra in extras.split(","):
        expand(extra.strip())
    return found


def project_facts(pyproject: dict[str, Any], root: Path) -> dict[str, Any]:
    """What an up-to-date install of this project has: name, version, entry points, and the
    folder it is installed (editable) from."""
    project = pyproject["project"]
    points = [
        [group, name, value]
        for group, table in project.get("entry-points", {}).items()
        for name, value in table.items()
    ]
    for key, group in (("scripts", "console_scripts"), ("gui-scripts", "gui_scripts")):
        points += [[group, name, value] for name, value in project.get(key, {}).items()]
    return {"name": project["name"], "version": project["version"], "entry_points": points, "root": str(root)}


def check_installed(wanted: list[str], project: dict[str, Any]) -> dict[str, Any]:
    """In the python that runs the task: which of ``wanted`` (requirement strings) are not
    installed as they say, their own requirements included, each with why; and why this
    project needs installing (``None``: it is current). ``{"error": ...}`` when this python
    cannot tell (neither pip nor packaging to read requirements with).

    Distributions are looked up where this python imports from, the project folder left
    out (a stale ``*.egg-info`` there is not an install)."""
    import importlib
    from importlib import metadata

    for package in ("pip._vendor.packaging", "packaging"):  # pip's own first: it installs
        try:
            Requirement = importlib.import_module(f"{package}.requirements").Requirement
            canonicalize_name = importlib.import_module(f"{package}.utils").canonicalize_name
            break
        except ImportError:
            continue
    else:
        return {"error": "this python has neither pip nor packaging"}
    from urllib.parse import unquote, urlparse
    from urllib.request import url2pathname

    root = os.path.normcase(os.path.realpath(project["root"]))
    paths = [p for p in sys.path if p and os.path.normcase(os.path.realpath(p)) != root]
    sites = folder_times(paths)  # before looking: a change while we look is a change
    found: dict[str, tuple[str, list[str], metadata.Distribution] | None] = {}

    def lookup(name: str) -> tuple[str, list[str], metadata.Distribution] | None:
        key = canonicalize_name(name)
        if key not in found:
            dist = next(iter(metadata.distributions(name=key, path=paths)), None)
            if dist is None:
                found[key] = None
            else:
                meta = dist.metadata
                found[key] = (meta["Version"] or "", meta.get_all("Requires-Dist") or [], dist)
        return found[key]

    def problem(requirement: Any) -> str | None:
        """Why ``requirement`` is not met, its own requirements included; None: it is."""
        expanded: set[tuple[str, frozenset[str]]] = set()
        pending = [requirement]
        while pending:
            wanted_now = pending.pop()
            prefix = "" if wanted_now is requirement else f"needs {wanted_now}: "
            entry = lookup(wanted_now.name)
            if entry is None:
                return f"{prefix}not installed"
            version, requires, _ = entry
            try:
                fits = wanted_now.specifier.contains(version, prereleases=True)
            except ValueError:
                fits = False
            if not fits:
                return f"{prefix}{version} installed"
            key = (canonicalize_name(wanted_now.name), frozenset(wanted_now.extras))
            if key in expanded:
                continue
            expanded.add(key)
            extras = sorted(wanted_now.extras) or [""]
            for text in requires:
                sub = Requirement(text)
                if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                    pending.append(sub)
        return None

    missing = []
    for text in wanted:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        why = problem(requirement)
        if why is not None:
            missing.append([text, why])

    def project_problem() -> str | None:
        entry = lookup(project["name"])
        if entry is None:
            return "not installed"
        version, _, dist = entry
        if version != project["version"]:
            return f"{version} installed, pyproject.toml says {project['version']}"
        try:
            origin = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            origin = {}
        url = str(origin.get("url", ""))
        where = url2pathname(unquote(urlparse(url).path)) if url.startswith("file:") else url
        if not where:
            return "not installed from this folder"
        if os.path.normcase(os.path.realpath(where)) != root:
            return f"installed from {where}, not this folder"
        if not origin.get("dir_info", {}).get("editable"):
            return "installed as a copy, not editable"
        points = {(p.group, p.name, p.value.replace(" ", "")) for p in dist.entry_points}
        if points != {(g, n, v.replace(" ", "")) for g, n, v in project["entry_points"]}:
            return "its entry points changed in pyproject.toml"
        return None

    return {"missing": missing, "project": project_problem(), "sites": sites}


def folder_times(paths: list[str]) -> dict[str, int]:
    """The modification time (ns) of each folder in ``paths``: installing or removing a
    distribution changes its folder's."""
    times = {}
    for path in paths:
        try:
            times[path] = os.stat(path).st_mtime_ns
        except OSError:
            continue
    return times


def what_is_missing(python: Path, wanted: list[str], project: dict[str, Any]) -> dict[str, Any]:
    """:func:`check_installed` run by ``python``: here when it is this python, else in it."""
    if Path(python) == Path(sys.executable):
        return check_installed(wanted, project)
    code = "import json, sys; sys.path.insert(0, sys.argv[1]); import run; "
    code += "print(json.dumps(run.check_installed(*json.loads(sys.argv[2]))))"
    payload = json.dumps([wanted, project])
    result = subprocess.run(
        [str(python), "-c", code, str(ROOT), payload], capture_output=True, text=True, cwd=ROOT
    )
    try:
        answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        return {"error": tail}
    return answer


def install(python: Path, prefix: Path, extras: str, supervisor: Supervisor) -> None:
    """Installs what the task's extras need that ``python``'s environment does not have yet
    (with pip, saying what and why in one line); nothing, silently, when it has everything."""
    text = (ROOT / "pyproject.toml").read_bytes()
    digest = hashlib.sha256(text).hexdigest()
    stamp = prefix / STAMP
    try:
        done = json.loads(stamp.read_text(encoding="utf-8"))
        sites = done["sites"]
        current = done["pyproject"] == digest and sites and folder_times(list(sites)) == sites
    except (OSError, ValueError, KeyError, TypeError):
        done, current = {}, False
    if current and extras in done.get("extras", []):
        return  # checked before, and nothing installed or removed since
    pyproject = tomllib.loads(text.decode("utf-8"))
    facts = project_facts(pyproject, ROOT)
    answer = what_is_missing(python, requirements(pyproject, extras), facts)
    missing: list[list[str]] = answer.get("missing", [])
    stale: str | None = answer.get("project")
    if "error" in answer:
        stale = f"cannot tell what is installed ({answer['error']})"
    elif not missing and stale is None:
        checked = [*done.get("extras", []), extras] if current else [extras]
        with contextlib.suppress(OSError):  # a cache: without it the next start checks again
            stamp.write_text(json.dumps({"pyproject": digest, "extras": checked, "sites": answer["sites"]}))
        return
    reasons = [f"{requirement}: {why}" for requirement, why in missing]
    if stale is not None:
        reasons.insert(0, f"{facts['name']}: {stale}")
        targets = ["-e", f".[{extras}]"]  # the project, and with it whatever its extras lack
        what = f"{facts['name']}[{extras}]"
    else:
        targets = [requirement for requirement, _ in missing]
        what = ", ".join(targets) if len(targets) <= 2 else f"{targets[0]} and {len(targets) - 1} more"
    why = "; ".join(reasons[:2]) + (f"; and {len(reasons) - 2} more" if len(reasons) > 2 else "")
    slow = any(canonical(re.split(r"[^A-Za-z0-9._-]", r, maxsplit=1)[0]) == ROBOTPY for r, _ in missing)
    try:
        place = prefix.relative_to(ROOT)
    except ValueError:
        place = prefix
    eta = ", downloading RobotPy (a minute or two)" if slow else ""
    print(f"run.py: installing {what} into {place}{eta}: {why}", flush=True)
    (ROOT / BUILD).mkdir(exist_ok=True)  # setup.cfg's egg_base: setuptools wants it to exist
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    result = supervisor.run([*pip, *targets], ROOT, dict(os.environ))
    if supervisor.stopped_by is not None:
        raise SystemExit(128 + supervisor.stopped_by)
    if result != 0:
        raise SystemExit(fail(f"pip install failed (exit {result}); the output above says why"))


# -- the task -----------------------------------------------------------------------------------


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


def test_environment(env: dict[str, str]) -> dict[str, str]:
    """The suite's environment: bytecode is written (``__pycache__/``: ignored by git, never
    uploaded by deploy) even where ``PYTHONDONTWRITEBYTECODE`` is set, or every worker, robot
    simulator and host tool the suite starts compiles the same sources again, and pytest
    rewrites every test module in each worker."""
    env = dict(env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 - say so plainly on an old Python
        return fail(f"needs Python 3.11 or newer, this is {sys.version.split()[0]}")
    if not argv or argv[0] not in TASKS:
        print(__doc__.strip().split("\n\n")[1] if __doc__ else "", file=sys.stderr)
        return 2
    supervisor = Supervisor.get()  # from here on a stop signal stops whatever runs
    task, rest = argv[0], argv[1:]
    extras, command = TASKS[task]
    os.chdir(ROOT)
    python, prefix = environment()
    install(python, prefix, extras, supervisor)
    cwd, args, env = ROOT, [str(python), "-m", *command, *rest], dict(os.environ)
    if task == "sim":
        cwd, args = sim_command(ROOT, str(python), rest)
        env = sim_environment(rest, env)
    if task == "test":
        env = test_environment(env)
    return supervisor.run(args, cwd, env, shield=task == "sim")


# -- stopping -----------------------------------------------------------------------------------


class Supervisor:
    """Runs run.py's commands one at a time and stops the running one when run.py is told to
    stop (:data:`STOP_SIGNALS`), wherever the signal was sent.

    * The first stop signal is passed on once: SIGTERM and SIGHUP as they are; SIGINT too,
      unless it is a terminal's Ctrl-C, which the command (in the same process group)
      got itself: run.py is in its terminal's foreground process group and was not
      started with SIGINT ignored (as a shell starts a background job), or on Windows.
      A ``shield``-ed command (the simulated robot) ignores SIGINT and gets SIGTERM
      instead, whatever the signal: it stops at once, without RobotPy's Ctrl-C traceback.
    * A second stop signal kills the command.
    * Outside a command (checking, between two) a stop signal ends run.py at once.

    run.py then exits 128 + the first signal's number (130: Ctrl-C), unless the command
    exited by itself with a status of its own.
    """

    _instance: Supervisor | None = None

    def __init__(self) -> None:
        #: The first stop signal received, if any.
        self.stopped_by: int | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._shield = False
        self._starting = False
        self._early: list[int] = []
        self._sigint_ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)

    @classmethod
    def get(cls) -> Supervisor:
        """The one supervisor of this process, its handlers installed (main thread only)."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def run(self, args: list[str], cwd: Path, env: dict[str, str], *, shield: bool = False) -> int:
        """Run ``args`` to its end; its exit status, 128 + N for a signal N as a shell says."""
        options: dict[str, Any] = {}
        if shield:
            if sys.platform == "win32":
                options["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # no console Ctrl-C
            else:
                options["preexec_fn"] = _ignore_sigint
        self._shield, self._starting = shield, True
        try:
            child = subprocess.Popen(args, cwd=cwd, env=env, **options)
        finally:
            self._starting = False
        self._child = child
        for signum in self._early:  # arrived while the command was being started
            self._stop(child, signum)
        self._early.clear()
        try:
            status = child.wait()
        finally:
            self._child = None
        if self.stopped_by is not None and (status < 0 or shield):
            return 128 + self.stopped_by  # stopped on our word: the signal we were sent
        return 128 - status if status < 0 else status  # killed by signal N: 128 + N

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        child = self._child
        if child is not None:
            self._stop(child, signum)
        elif self._starting:
            self._early.append(signum)
        else:
            self.stopped_by = self.stopped_by or signum
            raise SystemExit(128 + self.stopped_by)

    def _stop(self, child: subprocess.Popen[bytes], signum: int) -> None:
        if self.stopped_by is not None:
            child.kill()  # asked twice
            return
        self.stopped_by = signum
        if self._shield:
            child.terminate()
        elif signum != signal.SIGINT or not self._ctrl_c_reached_the_child():
            child.send_signal(signum)

    def _ctrl_c_reached_the_child(self) -> bool:
        """Whether a SIGINT received is, most likely, a terminal's Ctrl-C, which went to the
        whole foreground process group, the command included."""
        if os.name == "nt":
            return True  # a console's Ctrl-C goes to every process attached to it
        if self._sigint_ignored:
            return False  # a background job: Ctrl-C is not for it, so this was sent to us
        try:
            tty = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
        except OSError:
            return False  # no terminal: a script, an IDE, a service sent it
        try:
            return os.tcgetpgrp(tty) == os.getpgrp()
        except OSError:
            return False
        finally:
            os.close(tty)


def _ignore_sigint() -> None:  # pragma: no cover - runs in the child, before exec
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_child(args: list[str], cwd: Path, env: dict[str, str], *, shield: bool = False) -> int:
    """Run one command as run.py runs a task's (:class:`Supervisor`); its exit status."""
    return Supervisor.get().run(args, cwd, env, shield=shield)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
