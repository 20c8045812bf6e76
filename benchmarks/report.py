"""What the benchmarks share to report their figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(report: dict[str, Any], destination: str) -> None:
    """``report`` as indented JSON to ``destination``: a file, or stdout for ``-``."""
    text = json.dumps(report, indent=2)
    if destination == "-":
        print(text)
    else:
        Path(destination).write_text(text + "\n", encoding="utf-8")
