"""Command files: a list of timed drive commands (vx m/s, omega rad/s, durationMs) in CSV or JSON.

CSV: one command per line, ``vx,omega,durationMs``. Blank lines and lines
starting with ``#`` are ignored; a first line of names (``vx,omega,durationMs``)
is allowed::

    # a 1 m square: 1 m at 0.5 m/s, then a quarter turn left
    vx,omega,durationMs
    0.5,0,2000
    0,1.5708,1000

JSON: a list of ``[vx, omega, durationMs]`` triples or of objects with those
three keys.

Every mistake is reported as :class:`PathError` naming the file, the line and
the reason.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "COMMAND_SUFFIXES",
    "MAX_DURATION_MS",
    "PathCommand",
    "PathError",
    "parse_path",
    "read_commands",
    "read_json",
]

#: ``durationMs`` is a uint16 on the wire.
MAX_DURATION_MS = 65_535
#: Largest |vx| or |omega| the wire can carry (float32 scaled by 10,000 into an int32).
_MAX_ABS_VALUE = (2**31 - 1) / 10_000

_NAMES = ("vx", "omega", "durationms")
#: The command files this module reads.
COMMAND_SUFFIXES = (".csv", ".json")


class PathError(ValueError):
    """A path file that cannot be replayed: ``file:line: reason``."""

    def __init__(self, file: str, line: int | None, reason: str) -> None:
        where = file if line is None else f"{file}:{line}"
        super().__init__(f"{where}: {reason}")
        self.file = file
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class PathCommand:
    vx: float
    omega: float
    duration_ms: int


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {json.dumps(value)}")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ValueError(f"{name} must be a number, got {value.strip()!r}") from None
    else:
        raise ValueError(f"{name} must be a number, got {json.dumps(value)}")
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {number}")
    if abs(number) > _MAX_ABS_VALUE:
        raise ValueError(f"{name} {number:g} is out of range (|{name}| <= {_MAX_ABS_VALUE:g})")
    return number


def _duration(value: Any) -> int:
    number = _number(value, "durationMs")
    if number != int(number):
        raise ValueError(f"durationMs must be a whole number of milliseconds, got {number:g}")
    ms = int(number)
    if not 1 <= ms <= MAX_DURATION_MS:
        raise ValueError(f"durationMs must be 1..{MAX_DURATION_MS}, got {ms}")
    return ms


def _command(values: Sequence[Any]) -> PathCommand:
    if len(values) != 3:
        raise ValueError(f"expected 3 values (vx, omega, durationMs), got {len(values)}")
    return PathCommand(_number(values[0], "vx"), _number(values[1], "omega"), _duration(values[2]))


def _from_csv(text: str, file: str) -> list[PathCommand]:
    commands: list[PathCommand] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        row = next(csv.reader(io.StringIO(stripped)))
        if not commands and tuple(cell.strip().lower() for cell in row) == _NAMES:
            continue  # the header line
        try:
            commands.append(_command(row))
        except ValueError as exc:
            raise PathError(file, number, str(exc)) from None
    return commands


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _from_json(text: str, file: str) -> list[PathCommand]:
    """Decodes the top-level list one element at a time, so errors carry line numbers."""
    decoder = json.JSONDecoder()
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PathError(file, exc.lineno, f"invalid JSON: {exc.msg}") from None
    if not isinstance(document, list):
        raise PathError(file, 1, "expected a JSON list of [vx, omega, durationMs] commands")
    commands: list[PathCommand] = []
    pos = text.index("[") + 1
    for i in range(len(document)):
        while text[pos] in " \t\r\n,":
            pos += 1
        element, end = decoder.raw_decode(text, pos)
        line = _line_of(text, pos)
        try:
            if isinstance(element, dict):
                missing = [k for k in ("vx", "omega", "durationMs") if k not in element]
                if missing:
                    raise ValueError(f"command {i + 1} lacks {', '.join(missing)}")
                extra = sorted(set(element) - {"vx", "omega", "durationMs"})
                if extra:
                    raise ValueError(f"command {i + 1} has unknown key(s) {', '.join(extra)}")
                commands.append(_command([element["vx"], element["omega"], element["durationMs"]]))
            elif isinstance(element, list):
                commands.append(_command(element))
            else:
                raise ValueError(
                    f"command {i + 1} must be [vx, omega, durationMs] or an object, got {json.dumps(element)}"
                )
        except ValueError as exc:
            raise PathError(file, line, str(exc)) from None
        pos = end
    return commands


def parse_path(text: str, file: str = "<path>", *, json_format: bool | None = None) -> list[PathCommand]:
    """Commands from the text of a path file (JSON when it starts with ``[``, unless told)."""
    if json_format is None:
        json_format = text.lstrip().startswith("[")
    commands = _from_json(text, file) if json_format else _from_csv(text, file)
    if not commands:
        raise PathError(file, None, "no commands in the file")
    return commands


def read_commands(path: str | Path) -> list[PathCommand]:
    """Commands from a CSV or JSON command file (JSON for ``.json``, or text starting with
    ``[``); raises :class:`PathError`."""
    file = str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise PathError(file, None, "no such file") from None
    except OSError as exc:
        raise PathError(file, None, exc.strerror or str(exc)) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PathError(file, raw.count(b"\n", 0, exc.start) + 1, "not UTF-8 text") from None
    suffix = Path(path).suffix.lower()
    return parse_path(text, file, json_format=True if suffix == ".json" else None)


def read_json(file: Path) -> tuple[str, Any]:
    """The text and the JSON document of a planner file; raises :class:`PathError`."""
    name = str(file)
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise PathError(name, None, "no such file") from None
    except OSError as exc:
        raise PathError(name, None, exc.strerror or str(exc)) from None
    except UnicodeDecodeError:
        raise PathError(name, None, "not UTF-8 text") from None
    try:
        return text, json.loads(text)
    except json.JSONDecodeError as exc:
        raise PathError(name, exc.lineno, f"invalid JSON: {exc.msg}") from None
