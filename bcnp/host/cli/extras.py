"""What a command needs beyond the standard library, and the command that installs it here.

``monitor``, ``plot``, ``replay`` of PathPlanner and Choreo files and ``replay --follow``
import the ``host`` extra's libraries only when they run. Without one, the command
says so in one line (a :class:`~.common.UserError`) with the install command that
works where it runs (:func:`install_command`):

* a source checkout (this package's folder beside a ``pyproject.toml``: an editable
  install, or ``python -m bcnp`` run in the checkout): ``pip install -e ".[host]"``;
* an installed wheel: the wheel file pip recorded installing it from
  (``direct_url.json``) with ``[host]``, while that file is still there; else the
  extra's requirements as the installed metadata lists them.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

from .common import UserError

#: The extra that holds the host tools' optional libraries.
EXTRA = "host"

#: Each optional module the host tools import, and the distribution (in :data:`EXTRA`) that has it.
DISTRIBUTIONS = {
    "ntcore": "pyntcore",
    "matplotlib": "matplotlib",
    "rich": "rich",
    "wpimath": "robotpy-wpimath",
    "pathplannerlib": "robotpy-pathplannerlib",
    "choreo": "sleipnirgroup-choreolib",
}

#: This package's folder (``bcnp/``), in a checkout or where a wheel installed it.
PACKAGE = Path(__file__).resolve().parents[2]

_EXTRA_MARKER = re.compile(rf"""\s*extra\s*==\s*["']{EXTRA}["']\s*""")


def require(what: str, *modules: str) -> None:
    """Import each of ``modules`` (keys of :data:`DISTRIBUTIONS`); the first that does not
    import is a :class:`UserError` saying that ``what`` needs it and how to install it."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise missing(what, exc, module) from None


def missing(what: str, exc: ImportError, module: str | None = None) -> UserError:
    """The one line for ``exc``, raised importing ``module`` (default: the one it names)
    for ``what`` (a command, as the user typed it)."""
    name = (exc.name or "").partition(".")[0]
    module = module or name
    absent = isinstance(exc, ModuleNotFoundError) and name == module
    if module in DISTRIBUTIONS:
        needs = f"{DISTRIBUTIONS[module]} (module {module})"
    else:
        needs = f"module {module}" if module else "a library"
    state = "which is not installed in this environment" if absent else f"which fails to import ({exc})"
    return UserError(f"{what} needs {needs}, {state}; install the {EXTRA} extra: {install_command(module)}")


def optional_module_missing(what: str, exc: ImportError) -> UserError | None:
    """:func:`missing` when ``exc`` is one of :data:`DISTRIBUTIONS`' modules not installed;
    ``None`` for any other import error (a fault of the program, to be shown as one)."""
    name = (exc.name or "").partition(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or name not in DISTRIBUTIONS:
        return None
    return missing(what, exc)


def install_command(module: str | None = None) -> str:
    """The command that installs :data:`EXTRA` for this package where it runs (see the module's
    docstring); ``module``: the one to name when neither a checkout nor metadata is found."""
    pip = f"{python_command()} -m pip install"
    checkout = source_checkout()
    if checkout is not None:
        where = "." if checkout == Path.cwd().resolve() else str(checkout)
        return f'{pip} -e "{where}[{EXTRA}]"'
    dist = installed_distribution()
    if dist is not None:
        wheel = recorded_archive(dist)
        if wheel is not None:
            return f'{pip} "{wheel}[{EXTRA}]"'
        requirements = extra_requirements(dist)
        if requirements:
            return pip + "".join(f' "{r}"' for r in requirements)
    names = [DISTRIBUTIONS.get(module, module)] if module else list(DISTRIBUTIONS.values())
    return f"{pip} {' '.join(names)}"


def source_checkout() -> Path | None:
    """The project folder when this package runs from its source (not from an installed wheel)."""
    root = PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() else None


def installed_distribution() -> metadata.Distribution | None:
    """The installed distribution this package's files belong to."""
    here = PACKAGE / "__init__.py"
    for name in metadata.packages_distributions().get(PACKAGE.name, []):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if Path(str(dist.locate_file(f"{PACKAGE.name}/__init__.py"))).resolve() == here:
            return dist
    return None


def recorded_archive(dist: metadata.Distribution) -> Path | None:
    """The local wheel (or sdist) file pip installed ``dist`` from, if it is still there."""
    from urllib.parse import urlparse  # here: urllib.request takes as long to import as the CLI
    from urllib.request import url2pathname

    try:
        recorded = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    if not isinstance(recorded, dict) or "archive_info" not in recorded:
        return None
    url = urlparse(str(recorded.get("url", "")))
    if url.scheme != "file":
        return None
    path = Path(url2pathname(url.path))
    return path if path.is_file() else None


def extra_requirements(dist: metadata.Distribution) -> list[str]:
    """The requirements ``dist`` lists for :data:`EXTRA`, without their marker."""
    found = []
    for requirement in dist.requires or []:
        spec, _, marker = requirement.partition(";")
        if _EXTRA_MARKER.fullmatch(marker):
            found.append(spec.strip())
    return found


def python_command() -> str:
    """This interpreter as the user can type it: ``python`` (or ``python3``) when that is the
    one found on PATH, else its full path."""
    exe = sys.executable or "python"
    mine = os.path.normcase(os.path.abspath(exe))
    for name in ("python", "python3"):
        found = shutil.which(name)
        if found is not None and os.path.normcase(os.path.abspath(found)) == mine:
            return name
    return f'"{exe}"' if " " in exe else exe
