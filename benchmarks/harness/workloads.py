"""The codec benchmarks' workloads: random DriveCmds of this robot's schema, and a stream cut
in chunks as a socket hands it over (throughput, codec_instructions, tcp_sender)."""

from __future__ import annotations

import random
from typing import Any

from benchmarks.harness import ROOT

SCHEMA_PATH = ROOT / "schema" / "messages.json"
#: The chunk a stream is fed to the parser in.
CHUNK = 4096


def chunks(stream: bytes, size: int = CHUNK) -> list[bytes]:
    return [stream[i : i + size] for i in range(0, len(stream), size)]


def random_commands(spec: Any, count: int, rng: random.Random) -> list[Any]:
    """``count`` DriveCmds (``spec``: the schema's) of random speeds and durations."""
    return [
        spec(vx=rng.uniform(-1.5, 1.5), omega=rng.uniform(-2.5, 2.5), durationMs=rng.randint(1, 100))
        for _ in range(count)
    ]
