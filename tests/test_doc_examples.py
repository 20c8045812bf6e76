"""Every Python block in README.md and docs/ runs as written.

Each ```python block is run whole, in a fresh interpreter, from the project folder,
as a reader would paste it. A block that talks to a robot (it makes a ``Client``)
finds one where the docs say it is: the real robot program in a headless simulator
(benchmarks/harness/sim.py) on 127.0.0.1:5800, its NetworkTables on 5810, in autonomous,
enabled. A block must end
by itself within ``BOUND_S`` and exit 0: one that never ends, lacks an import or uses
a name that changed fails here, naming its file and line.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from benchmarks.harness import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Seconds a block may take (the longest reads 1 s of telemetry).
BOUND_S = 30.0
#: Where the docs' examples find the robot: BCNP, NetworkTables (the robot's pose).
DOCS_PORT = 5800
DOCS_NT_PORT = 5810

_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


class Block(NamedTuple):
    where: str  # "docs/page.md:LINE"
    code: str

    @property
    def needs_robot(self) -> bool:
        return "Client(" in self.code


def python_blocks() -> list[Block]:
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            blocks.append(Block(f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


BLOCKS = python_blocks()


def test_the_docs_have_the_examples_this_module_runs() -> None:
    """Not vacuous: the client, the core and the servers are shown, and some talk to a robot."""
    pages = {block.where.split(":")[0] for block in BLOCKS}
    assert {"docs/host-tools.md", "docs/protocol.md", "docs/transports.md"} <= pages, pages
    assert sum(block.needs_robot for block in BLOCKS) >= 2


@pytest.fixture(scope="module")
def docs_robot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The robot where the docs say it is: 127.0.0.1:5800, NetworkTables on 5810, started on
    first need. A user's sim holds both ports: then it cannot start, and says so."""
    from benchmarks.harness.sim import SimRobot

    with socket.socket() as probe:  # the robot's NT server would only log that it cannot listen
        if probe.connect_ex(("127.0.0.1", DOCS_NT_PORT)) == 0:
            pytest.fail(f"the docs' robot needs port {DOCS_NT_PORT}, which another program holds (a sim?)")
    robot = SimRobot(tmp_path_factory.mktemp("docs-robot"), DOCS_PORT, nt_port=DOCS_NT_PORT)
    try:
        robot.start()
    except (RuntimeError, OSError) as exc:
        pytest.fail(f"the docs' robot cannot start on port {DOCS_PORT} (is another sim running?): {exc}")
    try:
        robot.wait_ticking()
        yield
    finally:
        robot.close()


@pytest.mark.parametrize("block", BLOCKS, ids=[block.where for block in BLOCKS])
def test_a_python_block_runs_as_written(block: Block, request: pytest.FixtureRequest) -> None:
    if block.needs_robot:
        request.getfixturevalue("docs_robot")
    started = time.monotonic()
    try:
        result = subprocess.run(
            [sys.executable, "-c", block.code], cwd=ROOT, capture_output=True, text=True, timeout=BOUND_S
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: still running after {BOUND_S:g} s (an example must end by itself)")
    took = time.monotonic() - started
    assert result.returncode == 0, (
        f"{block.where} failed (exit {result.returncode}):\n{result.stderr[-3000:]}"
    )
    assert took < BOUND_S
