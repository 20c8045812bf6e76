"""Writes ``paths/j_turn.traj``, the shipped Choreo example, for this robot.

    python docs/make_choreo_example.py

Choreo (a desktop program) is not part of this project's tool chain, so the
example is planned with WPILib's trajectory generator under this robot's limits
(1.2 m/s, 1.5 m/s², the wheels at most 1.4 m/s, 1.2 m/s² sideways) and written
in Choreo's trajectory format, version 3, as a differential trajectory: one
sample every 50 ms whose pose follows from the one before by Choreo's own model
(wheel speeds and accelerations held over the interval), so choreolib's
interpolation between samples stays on the path.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from wpimath.geometry import Pose2d, Rotation2d, Translation2d
from wpimath.kinematics import DifferentialDriveKinematics
from wpimath.trajectory import TrajectoryConfig, TrajectoryGenerator
from wpimath.trajectory.constraint import (
    CentripetalAccelerationConstraint,
    DifferentialDriveKinematicsConstraint,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import constants  # noqa: E402

OUT = ROOT / "paths" / "j_turn.traj"
DT = 0.05
START = Pose2d(6.0, 4.0, Rotation2d())
VIA = [Translation2d(7.6, 4.2)]
END = Pose2d(8.6, 2.6, Rotation2d.fromDegrees(-90))


def _integrate(
    state: list[float], al: float, ar: float, alpha: float, tau: float, steps: int = 50
) -> list[float]:
    """Choreo's differential model (x, y, heading, vl, vr, omega under constant al, ar, alpha), RK4."""

    def f(s: list[float]) -> list[float]:
        v = (s[3] + s[4]) / 2
        return [v * math.cos(s[2]), v * math.sin(s[2]), s[5], al, ar, alpha]

    steps = 50
    h = tau / steps
    for _ in range(steps):
        k1 = f(state)
        k2 = f([a + h / 2 * b for a, b in zip(state, k1, strict=True)])
        k3 = f([a + h / 2 * b for a, b in zip(state, k2, strict=True)])
        k4 = f([a + h * b for a, b in zip(state, k3, strict=True)])
        state = [
            a + h / 6 * (b + 2 * c + 2 * d + e) for a, b, c, d, e in zip(state, k1, k2, k3, k4, strict=True)
        ]
    return state


def main() -> None:
    width = constants.TRACK_WIDTH_M
    kinematics = DifferentialDriveKinematics(width)
    config = TrajectoryConfig(1.2, 1.5)
    config.setKinematics(kinematics)
    config.addConstraint(DifferentialDriveKinematicsConstraint(kinematics, 1.4))
    config.addConstraint(CentripetalAccelerationConstraint(1.2))
    planned = TrajectoryGenerator.generateTrajectory(START, VIA, END, config)
    total = planned.totalTime()
    n = math.ceil(total / DT)
    times = [min(k * DT, total) for k in range(n + 1)]

    def wheels(t: float) -> tuple[float, float, float]:
        s = planned.sample(t)
        omega = s.velocity * s.curvature
        return s.velocity - omega * width / 2, s.velocity + omega * width / 2, omega

    state = [START.X(), START.Y(), START.rotation().radians(), 0.0, 0.0, 0.0]
    samples = []
    for k, t in enumerate(times):
        vl, vr, omega = state[3], state[4], state[5]
        if k + 1 < len(times):
            tau = times[k + 1] - t
            nl, nr, nomega = wheels(times[k + 1]) if k + 1 < n else (0.0, 0.0, 0.0)
            al, ar, alpha = (nl - vl) / tau, (nr - vr) / tau, (nomega - omega) / tau
        else:
            tau, al, ar, alpha = 0.0, 0.0, 0.0, 0.0
        samples.append(
            {
                "t": round(t, 5),
                "x": round(state[0], 6),
                "y": round(state[1], 6),
                "heading": round(state[2], 6),
                "vl": round(vl, 6),
                "vr": round(vr, 6),
                "omega": round(omega, 6),
                "al": round(al, 6),
                "ar": round(ar, 6),
                "alpha": round(alpha, 6),
                "fl": 0.0,
                "fr": 0.0,
            }
        )
        if tau > 0:
            state = _integrate(state, al, ar, alpha, tau)
            state[3], state[4], state[5] = (nl, nr, nomega) if k + 1 < n else (0.0, 0.0, 0.0)

    def waypoint(p: Pose2d) -> dict[str, object]:
        return {
            "x": p.X(),
            "y": p.Y(),
            "heading": p.rotation().radians(),
            "intervals": 40,
            "split": False,
            "fixTranslation": True,
            "fixHeading": True,
            "overrideIntervals": False,
        }

    doc = {
        "name": OUT.stem,
        "version": 3,
        "snapshot": {"waypoints": [waypoint(START), waypoint(END)], "constraints": []},
        "params": {"waypoints": [waypoint(START), waypoint(END)], "constraints": []},
        "trajectory": {
            "config": {
                "mass": 50.0,
                "inertia": 5.0,
                "gearing": constants.GEAR_RATIO,
                "radius": constants.WHEEL_DIAMETER_M / 2,
                "differentialTrackWidth": width,
            },
            "sampleType": "Differential",
            "waypoints": [0.0, round(total, 5)],
            "samples": samples,
            "splits": [0],
            "forcesAvailable": False,
        },
        "events": [],
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(samples)} samples, {total:.2f} s")


if __name__ == "__main__":
    main()
