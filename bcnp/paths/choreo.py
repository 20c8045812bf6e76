"""Choreo ``.traj`` files (trajectory format version 3, what Choreo 2025 and 2026 write).

A differential trajectory is read with Choreo's own library (choreolib),
imported only when a file is read; a swerve trajectory is refused. Every
problem is one :class:`~bcnp.paths.commands.PathError` naming the file.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from .commands import PathError, read_json
from .trajectory import Trajectory, checked, sampled

__all__ = ["load_choreo"]


def load_choreo(path: str | Path) -> Trajectory:
    """A differential Choreo trajectory (format version 3)."""
    file = Path(path)
    name = str(file)
    text, doc = read_json(file)
    if not isinstance(doc, dict) or not isinstance(doc.get("trajectory"), dict):
        raise PathError(name, None, "not a Choreo trajectory (no 'trajectory' object)")
    version = doc.get("version")
    if version != 3:
        raise PathError(name, None, f"Choreo trajectory format {version!r}; this reads version 3")
    body = doc["trajectory"]
    samples = body.get("samples")
    kind = body.get("sampleType")
    if kind == "Swerve" or (
        isinstance(samples, list) and samples and isinstance(samples[0], dict) and "vy" in samples[0]
    ):
        raise PathError(
            name, None, "a swerve trajectory; this robot is a differential drive (Choreo: Differential)"
        )
    if not isinstance(samples, list) or not samples:
        raise PathError(name, None, "the trajectory has no samples (generate it in Choreo first)")

    import choreo

    if "name" not in doc:
        doc["name"] = file.stem
        text = json.dumps(doc)
    try:
        trajectory = choreo.load_differential_trajectory_string(text)
    except KeyError as exc:
        raise PathError(
            name, None, f"not a differential Choreo trajectory: a sample lacks {exc.args[0]!r}"
        ) from None
    except (TypeError, ValueError) as exc:
        raise PathError(name, None, f"bad Choreo trajectory: {exc}") from None
    times = [s.timestamp for s in trajectory.samples]
    if any(b < a for a, b in itertools.pairwise(times)):
        raise PathError(name, None, "the samples' times go backwards")

    def state_at(t: float) -> tuple[float, ...]:
        s = trajectory.sample_at(t)
        assert s is not None  # samples is not empty
        return float(s.x), float(s.y), float(s.heading), float(s.vl + s.vr) / 2, float(s.omega)

    return checked(
        name, sampled(file.stem, trajectory.get_total_time() - times[0], lambda t: state_at(t + times[0]))
    )
