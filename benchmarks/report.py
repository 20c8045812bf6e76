"""What the benchmarks and the checks share to report: their one machine-readable output,
``--json PATH``, beside the printout people read; the image arguments; progress and failure lines.

Every benchmark or check that offers JSON takes ``--json PATH`` (:func:`add_json_argument`) and
writes it with :func:`write_json`, after printing its figures as it always does: a script reads
the file, a person the printout, from the same run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT


def add_json_argument(parser: argparse.ArgumentParser, what: str = "figures") -> None:
    """``--json PATH``: also write ``what`` as JSON to PATH (``-``: stdout, after the printout)."""
    parser.add_argument(
        "--json", metavar="PATH", help=f"also write the {what} as JSON to PATH ('-': stdout, after the text)"
    )


def write_json(report: dict[str, Any], destination: str | None) -> None:
    """``report`` as indented JSON to ``destination`` (``--json``'s value): a file, or stdout for
    ``-``; nothing when it is ``None`` (no ``--json``)."""
    if destination is None:
        return
    text = json.dumps(report, indent=2)
    if destination == "-":
        print(text)
    else:
        Path(destination).write_text(text + "\n", encoding="utf-8")


def add_output_arguments(parser: argparse.ArgumentParser, image: Path) -> None:
    """``--json PATH`` (:func:`add_json_argument`), ``--image PNG`` (default ``image``) and
    ``--no-image``."""
    add_json_argument(parser)
    parser.add_argument(
        "--image", type=Path, default=image, help=f"the figure (default {image.relative_to(ROOT)})"
    )
    parser.add_argument("--no-image", action="store_true", help="do not draw the figure")


def log(message: str) -> None:
    """Progress, to stderr (the figures go to stdout)."""
    print(message, file=sys.stderr, flush=True)


def failed(failures: list[str]) -> int:
    """Each failure as a ``FAIL:`` line; the exit status: 1 when there is one."""
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0
