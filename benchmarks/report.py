"""What the benchmarks share to report their figures."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def write_json(report: dict[str, Any], destination: str) -> None:
    """``report`` as indented JSON to ``destination``: a file, or stdout for ``-``."""
    text = json.dumps(report, indent=2)
    if destination == "-":
        print(text)
    else:
        Path(destination).write_text(text + "\n", encoding="utf-8")


def add_output_arguments(parser: argparse.ArgumentParser, image: Path) -> None:
    """``--json OUT``, ``--image PNG`` (default ``image``) and ``--no-image``."""
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON to OUT ('-': stdout)")
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
