#!/usr/bin/env python3
"""BCNP schema code generator.

    python schema/bcnp_codegen.py SCHEMA.json [--cpp DIR] [--python DIR] [--project] [--check]

Runs from a fresh clone without installing anything: the generator is the
project's own ``bcnp.codegen`` (the same schema loader and codec the robot uses).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bcnp.codegen.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
