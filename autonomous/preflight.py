"""The pre-flight check: what a team runs before the robot's first drive, to find a wiring
or configuration fault while the robot can do no harm.

It drives the left side alone, the right side alone, then both, each at ``PREFLIGHT_VOLTS``
open loop (``Drivetrain.drive_volts``, as the SysId modes do) for at most ``PREFLIGHT_STEP_S``
and never past ``PREFLIGHT_MAX_STEP_M`` of either wheel, stopping for ``PREFLIGHT_PAUSE_S``
after each, and judges:

* ``LeftEncoder``, ``RightEncoder``: the side's encoder counts forward when the side is driven
  forward (alone and with both); one that counts forward while the gyro says the chassis turned
  against the wheels in that side's step alone fails too: its motor turns backward with its own
  sensor (a TalonFX's built-in one, a SPARK MAX's following its motor's inversion);
* ``Gyro``: the gyro turns the way the wheels say the chassis turned when one side drives
  (on the floor). Only the steps of a side whose encoder passed are judged: a wrong encoder
  says nothing of how the chassis turned. A gyro that saw only noise while the wheels turned
  is on blocks: its own result, never a pass; one whose reading stayed exactly the same over
  a whole step in which the wheels turned the chassis is frozen (a live gyro always moves then);
* ``Followers``: each follower's applied output has its leader's sign and size, as its
  configuration relates them (the drivetrain's inputs); the kitbot has none;
* ``Config``: every CAN controller took its configuration (the inputs' ``config_results``);
* ``VelocityLag``: how late each wheel's speed reading is against the speed its position gives
  (positions reach the roboRIO without the velocity measurement's filter), over every step a
  side drove and its pause: the lag that best fits, 0 to 250 ms, beside the delay the wiring's
  configured filter gives (``DrivetrainIO.velocity_filter``). More than
  ``PREFLIGHT_LAG_MARGIN_S`` beyond it fails: the configuration did not take, or a status frame
  comes slowly. The wheel loops hold the distance with a late speed, less tightly (docs/robot.md,
  "A late velocity").

Each item is ``PASS``, ``FAIL``, ``N/A``, ``ON BLOCKS`` or ``NOT JUDGED``, with a short why,
on SmartDashboard (``Preflight/<item>``, and ``Preflight/Result``) and in the data log (the
entries of the same names); each failure raises a WPILib ``Alert``. The motors stop between
the steps and at the end, at once when autonomous ends (robot.py stops the drivetrain), and
the check refuses to drive while the field's FMS is connected.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import wpilib
from wpiutil.log import StringLogEntry

import constants
from autonomous import FieldGuard, Mode

if TYPE_CHECKING:
    from subsystems.drivetrain.drivetrain import Drivetrain
    from subsystems.drivetrain.io import ConfigResult, VelocityFilter
    from subsystems.link.bcnp_link import BcnpLink

PREFIX = "Preflight/"
#: The items, in the order they are reported; then the overall ``Result``.
ITEMS = ("LeftEncoder", "RightEncoder", "Gyro", "Followers", "Config", "VelocityLag")
RESULT = "Result"
PASS, FAIL, NA, ON_BLOCKS, NOT_JUDGED = "PASS", "FAIL", "N/A", "ON BLOCKS", "NOT JUDGED"
RUNNING = "RUNNING"
#: The follower's output is sampled this far into a step: the leader has taken the command
#: and reported its output once.
FOLLOWER_SETTLE_S = 0.04
#: The velocity lags tried (s): every LAG_STEP_S up to LAG_MAX_S.
LAG_STEP_S = 0.005
LAG_MAX_S = 0.25
#: A lag is judged only where the speed the positions give changed by at least this (m/s).
LAG_MIN_SPEED_CHANGE_MPS = 0.2

log = logging.getLogger("autonomous")

Verdict = tuple[str, str]  # (PASS, FAIL, ...; why)


@dataclass
class Step:
    """One step of the check and what it measured, from its start to the end of its pause."""

    name: str
    volts: tuple[float, float]
    #: False: the check ended before this step (the drivetrain's interlock stopped it).
    ran: bool = False
    #: How far each wheel's encoder counted (m, forward positive).
    left_m: float = 0.0
    right_m: float = 0.0
    #: The gyro's heading change (rad, counter-clockwise); None without a gyro.
    gyro_rad: float | None = None
    #: True while every gyro reading of the step was exactly the first one.
    gyro_still: bool = True
    #: (side, leader's applied output, follower's, the follower's configured relation: +1 the
    #: same output, -1 the opposite), the last reading of each side while it drove, wirings with
    #: followers only.
    followers: dict[str, tuple[str, float, float, int]] = field(default_factory=dict)
    #: Each driven side's (time, position, velocity) every tick, driving and pausing.
    speeds: dict[int, list[tuple[float, float, float]]] = field(default_factory=dict)

    def travel(self, side: int) -> float:
        return self.left_m if side == 0 else self.right_m


def steps() -> list[Step]:
    volts = constants.PREFLIGHT_VOLTS
    return [
        Step("left side", (volts, 0.0)),
        Step("right side", (0.0, volts)),
        Step("both sides", (volts, volts)),
    ]


# -- judging: what the steps measured, item by item -----------------------------------------------


def judge_encoder(side: int, measured: list[Step]) -> Verdict:
    """The side's encoder against its own step and the step of both sides (when it ran)."""
    if not measured[side].ran:
        return NOT_JUDGED, "the check ended before this side drove"
    alone = measured[side].travel(side)
    volts = measured[side].volts[side]
    counts = [alone]
    counted = f"counted {alone:+.2f} m alone"
    if measured[2].ran:
        counts.append(measured[2].travel(side))
        counted += f" and {counts[1]:+.2f} m with both"
    counted += f" for {volts:+g} V"
    least = constants.PREFLIGHT_MIN_TRAVEL_M
    if all(count >= least for count in counts):
        return PASS, counted
    if any(count <= -least for count in counts):
        fix = "flip RIGHT_ENCODER_REVERSED" if side == 1 else "reverse the left encoder"
        return FAIL, (
            f"{counted}: counts backward. If the wheel turned backward the motor is reversed "
            f"(its leads or inversion); if forward, the encoder is ({fix})"
        )
    return FAIL, (
        f"{counted}: no count. The motor did not turn (wiring, channel or CAN id, breaker) "
        "or the encoder is unplugged or on the wrong channels"
    )


def judge_gyro(measured: list[Step], encoders: tuple[Verdict, Verdict], track_width_m: float) -> Verdict:
    """The gyro's turn in each one-side step against the wheels' (only sides whose encoder passed)."""
    if measured[0].gyro_rad is None:
        return NA, "no gyro: the wheels give the heading"
    least = constants.PREFLIGHT_MIN_TURN_RAD
    for step in measured:
        # Only where the wheels turned the chassis: driving straight, a gyro may well read the same.
        turning = abs(step.right_m - step.left_m) / track_width_m > least
        if step.ran and step.gyro_still and turning:
            return FAIL, (
                f"frozen: read exactly the same through the {step.name} step while the wheels turned "
                "the chassis. The gyro does not answer (unplugged, wrong port, or not calibrated at start)"
            )
    judged = [measured[side] for side in (0, 1) if encoders[side][0] == PASS and measured[side].ran]
    if not judged:
        return NOT_JUDGED, "no encoder counts forward to compare it with"
    said = []
    wrong = turned = 0
    for step in judged:
        wheels = (step.right_m - step.left_m) / track_width_m
        gyro = step.gyro_rad or 0.0
        said.append(
            f"{step.name}: gyro {math.degrees(gyro):+.1f} deg, wheels {math.degrees(wheels):+.1f} deg"
        )
        if abs(gyro) > least:
            turned += 1
            wrong += (gyro > 0) != (wheels > 0)
    detail = "; ".join(said)
    if wrong:
        return FAIL, f"turns against the wheels ({detail}): mounted upside down, or its sign is wrong in code"
    if not turned:
        return ON_BLOCKS, f"only noise ({detail}): on blocks? Run the check on the floor to judge the gyro"
    if turned < len(judged):
        return FAIL, f"turned in some steps only ({detail})"
    return PASS, detail


def reversed_with_its_sensor(
    measured: list[Step], encoders: tuple[Verdict, Verdict], track_width_m: float
) -> tuple[Verdict, Verdict]:
    """The encoder items again, with the gyro's word on a side whose motor turns backward with its
    own sensor (a TalonFX's is built into the motor; a SPARK MAX's encoder follows its motor's
    inversion): its encoder counts forward for the wheels, yet in its step alone the gyro turned
    the chassis against what the wheels said, while in the other side's step it agreed. A gyro
    mounted upside down disagrees in both steps and is the gyro item's to judge."""
    least = constants.PREFLIGHT_MIN_TURN_RAD
    agrees: dict[int, bool] = {}
    for side in (0, 1):
        step = measured[side]
        if encoders[side][0] != PASS or not step.ran or step.gyro_rad is None or abs(step.gyro_rad) <= least:
            continue
        wheels = (step.right_m - step.left_m) / track_width_m
        agrees[side] = (step.gyro_rad > 0) == (wheels > 0)
    if len(agrees) < 2 or agrees[0] == agrees[1]:
        return encoders
    side = 0 if not agrees[0] else 1
    name = "right" if side else "left"
    fix = "TALONFX_RIGHT_INVERTED or SPARKMAX_RIGHT_INVERTED" if side else "the left side's inversion"
    verdict = (
        FAIL,
        f"{encoders[side][1]}, yet the chassis turned the other way in the {name} side's step (the "
        f"gyro agreed in the other side's): the {name} motor turns backward and its own sensor with "
        f"it. Flip {fix}, or the motor's wiring",
    )
    return (verdict, encoders[1]) if side == 0 else (encoders[0], verdict)


def judge_followers(samples: list[tuple[str, float, float, int]] | None) -> Verdict:
    """Each follower's applied output against its leader's times their configured relation,
    sampled while the side drove."""
    if samples is None:
        return NA, "this wiring has no followers"
    share = constants.PREFLIGHT_FOLLOWER_TOLERANCE
    worst: dict[str, tuple[float, float, float]] = {}  # side -> (miss, leader, follower)
    for side, leader, follower, relation in samples:
        if abs(leader) < 0.05:
            continue  # too little to judge by
        expected = leader * relation
        miss = abs(follower - expected) - (share * abs(expected) + 0.02)
        if (follower > 0) != (expected > 0):
            miss = max(miss, abs(follower) + 1.0)  # a wrong sign is a miss whatever its size
        if side not in worst or miss > worst[side][0]:
            worst[side] = (miss, leader, follower)
    if set(worst) != {"left", "right"}:
        return NOT_JUDGED, "a leader never drove enough to judge its follower by"
    said = "; ".join(
        f"{side} leader {lead:+.2f}, follower {follow:+.2f}" for side, (_, lead, follow) in worst.items()
    )
    if any(miss > 0 for miss, _, _ in worst.values()):
        return FAIL, (
            f"a follower does not follow ({said}): check its CAN id, that it follows the right "
            "leader, its inversion, its wiring"
        )
    return PASS, said


def judge_config(results: tuple[ConfigResult, ...] | None) -> Verdict:
    """Each controller's answer to its configuration at start."""
    if results is None:
        return NA, "this wiring has no configurable controllers"
    bad = [f"{result.device}: {result.status}" for result in results if not result.ok]
    if bad:
        return FAIL, (
            f"{', '.join(bad)}: the controller did not take its configuration (CAN id, wiring, "
            "firmware; REV Hardware Client, Phoenix Tuner X)"
        )
    return PASS, f"{len(results)} controllers took their configuration"


def velocity_lag(series: list[list[tuple[float, float, float]]]) -> float | None:
    """The lag (s) by which velocity readings best follow the speed their positions give, over
    ``series`` of (time, position, velocity) samples; None where the speed hardly changed.
    Each lag walks each series once (the samples and the speeds both in time order): it runs in
    the robot's loop, once, at the check's end."""
    fits = []
    for samples in series:
        speeds = [
            ((t0 + t1) / 2, (p1 - p0) / (t1 - t0))
            for (t0, p0, _), (t1, p1, _) in itertools.pairwise(samples)
            if t1 > t0
        ]
        if speeds and max(s for _, s in speeds) - min(s for _, s in speeds) >= LAG_MIN_SPEED_CHANGE_MPS:
            fits.append((samples, speeds))
    best: tuple[float, float] | None = None
    for step in range(round(LAG_MAX_S / LAG_STEP_S) + 1):
        lag = step * LAG_STEP_S
        error, count = 0.0, 0
        for samples, speeds in fits:
            last = len(speeds) - 1
            j = 0  # speeds[j] is the last at or before the sample's time less the lag
            for t, _, velocity in samples:
                at = t - lag
                if at < speeds[0][0]:
                    continue
                while j < last and speeds[j + 1][0] < at:
                    j += 1
                if j == last:
                    break
                (t0, s0), (t1, s1) = speeds[j], speeds[j + 1]
                error += (velocity - (s0 + (s1 - s0) * (at - t0) / (t1 - t0))) ** 2
                count += 1
        if count >= 10 and (best is None or error / count < best[1]):
            best = (lag, error / count)
    return None if best is None else best[0]


def judge_velocity_lag(lag_s: float | None, configured: VelocityFilter) -> Verdict:
    """The measured lag against the configured filter's delay."""
    expected = f"its configured filter ({configured.what}) gives {configured.delay_s * 1000:.0f} ms"
    if lag_s is None:
        return NOT_JUDGED, f"the wheels' speed hardly changed: no lag to measure; {expected}"
    measured = f"the wheel speed reads {lag_s * 1000:.0f} ms behind the position"
    if lag_s <= configured.delay_s + constants.PREFLIGHT_LAG_MARGIN_S:
        return PASS, f"{measured}; {expected}"
    return FAIL, (
        f"{measured}, where {expected}: the configuration did not take (Network/ConfigErrors) or a "
        "status frame comes slowly. The loops hold the distance, less tightly (docs: A late velocity)"
    )


def overall(verdicts: dict[str, Verdict], interlock: str = "") -> Verdict:
    stopped = f"; the drivetrain's interlock stopped the check: {interlock}" if interlock else ""
    failed = [item for item, (result, _) in verdicts.items() if result == FAIL]
    if failed:
        return FAIL, ", ".join(failed) + stopped
    open_items = [f"{item} {result}" for item, (result, _) in verdicts.items() if result not in (PASS, NA)]
    if open_items or interlock:
        return "INCOMPLETE", ", ".join(open_items) + stopped
    return PASS, "every item"


# -- the mode -------------------------------------------------------------------------------------


class PreflightCheck(Mode):
    MODE_NAME = "Pre-flight check"
    runs_queue = False  # a host's commands are queued and reported, never run

    def __init__(self, link: BcnpLink) -> None:
        super().__init__(link)
        self.guard = FieldGuard(self.MODE_NAME)
        self.alerts = {
            item: wpilib.Alert("Autonomous", f"Pre-flight {item}", wpilib.Alert.AlertType.kError)
            for item in ITEMS
        }
        self._entries: dict[str, StringLogEntry] = {}
        self.verdicts: dict[str, Verdict] = {}
        self._running = False
        self._steps: list[Step] = []
        self._index = 0
        self._driving = False
        self._phase_start = 0.0
        self._from: tuple[float, float] = (0.0, 0.0)  # the wheels at the step's start
        self._heading: float | None = None  # the gyro's reading at the step's start
        self._started = False
        self._interlock = ""  # why the drivetrain stopped itself during the check

    def on_enable(self) -> None:
        self.guard.reset()
        for alert in self.alerts.values():
            alert.set(False)
        self.verdicts = {}
        self._steps = steps()
        self._index = 0
        self._started = False
        self._interlock = ""
        self._running = True
        for item in ITEMS:
            self._publish(item, (RUNNING, "not judged yet"))
        self._publish(RESULT, (RUNNING, self._steps[0].name))

    def actuate(self, drivetrain: Drivetrain, now: float) -> bool:
        if not self._running:
            return False
        if self.guard.refuses():
            self._running = False
            self._publish(RESULT, ("REFUSED", FieldGuard.REASON))
            return False
        if not self._started:
            self._started = True
            self._begin(drivetrain, now)
        self._watch_gyro(drivetrain)
        step = self._steps[self._index]
        self._sample_speeds(drivetrain, step, now)
        elapsed = now - self._phase_start
        if self._driving:
            positions = drivetrain.wheel_positions()
            moved = max(abs(a - b) for a, b in zip(positions, self._from, strict=True))
            # The drivetrain stops itself (until the next enable) when a side runs against its
            # command: the check ends after this step's pause, with what it measured so far. On
            # the enable's first tick a fault is the last enable's: the drivetrain clears it.
            if elapsed > 0.0:
                self._interlock = self._interlock or drivetrain.drive_fault
            if (
                elapsed < constants.PREFLIGHT_STEP_S - 1e-9
                and moved < constants.PREFLIGHT_MAX_STEP_M
                and not self._interlock
            ):
                drivetrain.drive_volts(*step.volts)
                if elapsed >= FOLLOWER_SETTLE_S - 1e-9:
                    self._sample_followers(drivetrain, step)
                return True
            self._driving = False
            self._phase_start = now
            return False  # robot.py stops the motors this tick
        if elapsed < constants.PREFLIGHT_PAUSE_S - 1e-9:
            return False
        self._close(drivetrain, step)
        self._index += 1
        if self._index == len(self._steps) or self._interlock:
            self._finish(drivetrain)
            return False
        self._publish(RESULT, (RUNNING, self._steps[self._index].name))
        self._begin(drivetrain, now)
        return self.actuate(drivetrain, now)

    def on_disable(self) -> None:
        if self._running:
            self._running = False
            step = self._steps[self._index].name if self._index < len(self._steps) else "last"
            for item in ITEMS:
                self._publish(item, (NOT_JUDGED, "the check did not finish"))
            self._publish(RESULT, ("ABORTED", f"autonomous ended during the {step} step"))

    # -- measuring ------------------------------------------------------------------------------

    def _begin(self, drivetrain: Drivetrain, now: float) -> None:
        self._steps[self._index].ran = True
        self._driving = True
        self._phase_start = now
        self._from = drivetrain.wheel_positions()
        heading = drivetrain.inputs.heading
        self._heading = None if heading is None else heading.radians()

    def _watch_gyro(self, drivetrain: Drivetrain) -> None:
        heading = drivetrain.inputs.heading
        if heading is not None and heading.radians() != self._heading:
            self._steps[self._index].gyro_still = False

    @staticmethod
    def _sample_speeds(drivetrain: Drivetrain, step: Step, now: float) -> None:
        inputs = drivetrain.inputs
        for side, volts in enumerate(step.volts):
            if volts:
                position, velocity = (
                    (inputs.left_position_m, inputs.left_velocity_mps)
                    if side == 0
                    else (inputs.right_position_m, inputs.right_velocity_mps)
                )
                step.speeds.setdefault(side, []).append((now, position, velocity))

    def _close(self, drivetrain: Drivetrain, step: Step) -> None:
        left, right = drivetrain.wheel_positions()
        step.left_m, step.right_m = left - self._from[0], right - self._from[1]
        heading = drivetrain.inputs.heading
        if heading is None or self._heading is None:
            step.gyro_rad, step.gyro_still = None, False
        else:
            step.gyro_rad = math.remainder(heading.radians() - self._heading, math.tau)

    @staticmethod
    def _sample_followers(drivetrain: Drivetrain, step: Step) -> None:
        """Each driven side's leader and follower as the inputs read them together this tick; the
        step keeps the reading that came closest to following (a follower's report may trail its
        leader's by a status frame or two, more on a starved bus): one that does not follow never
        comes close."""
        inputs = drivetrain.inputs
        followers = inputs.followers
        if followers is None:
            return
        for index, side in enumerate(("left", "right")):
            if step.volts[index]:
                leader, follower = followers[index]
                relation = inputs.follower_relations[index]
                kept = step.followers.get(side)
                if kept is None or abs(follower - leader * relation) < abs(kept[2] - kept[1] * kept[3]):
                    step.followers[side] = (side, leader, follower, relation)

    # -- judging and reporting ----------------------------------------------------------------------

    def _finish(self, drivetrain: Drivetrain) -> None:
        self._running = False
        measured = self._steps
        inputs = drivetrain.inputs
        encoders = (judge_encoder(0, measured), judge_encoder(1, measured))
        encoders = reversed_with_its_sensor(measured, encoders, drivetrain.track_width)
        followers: list[tuple[str, float, float, int]] | None = None
        if inputs.followers is not None:
            followers = [sample for step in measured for sample in step.followers.values()]
        self.verdicts = {
            "LeftEncoder": encoders[0],
            "RightEncoder": encoders[1],
            "Gyro": judge_gyro(measured, encoders, drivetrain.track_width),
            "Followers": judge_followers(followers),
            "Config": judge_config(inputs.config_results),
            "VelocityLag": judge_velocity_lag(
                velocity_lag([samples for step in measured for samples in step.speeds.values()]),
                drivetrain.io.velocity_filter(),
            ),
        }
        for item, verdict in self.verdicts.items():
            self._publish(item, verdict)
            if verdict[0] == FAIL:
                alert = self.alerts[item]
                alert.setText(f"Pre-flight {item}: {verdict[1]}")
                alert.set(True)
        self._publish(RESULT, overall(self.verdicts, self._interlock))

    def _publish(self, key: str, verdict: Verdict) -> None:
        text = f"{verdict[0]}: {verdict[1]}"
        name = PREFIX + key
        wpilib.SmartDashboard.putString(name, text)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = StringLogEntry(wpilib.DataLogManager.getLog(), name)
        entry.append(text)
        if verdict[0] != RUNNING:
            level = logging.ERROR if verdict[0] in (FAIL, "REFUSED", "ABORTED") else logging.INFO
            log.log(level, "pre-flight %s: %s", key, text)
