"""The closed-loop follower's sans-I/O core (:class:`FollowSession`): the robot's
telemetry and, when the robot offers it, its own pose (:class:`StampedPose`) in, each
with the moment it arrived; at each step, the plan to send. No sockets, threads or
clocks: :class:`~bcnp.host.sessions.follow.Follower` drives it on a client and says how it
works. WPILib's math (odometry, the unicycle controller) is imported inside the
methods that need it."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ....paths import DriveLimits, Trajectory
from ....schema import Message, MessageSpec
from ....wire import PacketView
from .session import Outage, Send, StampedPose

if TYPE_CHECKING:
    from wpimath.geometry import Pose2d

__all__ = ["FollowResult", "FollowSession", "StampedPose"]

#: The robot acts on a command at its next tick: on average half a tick after it arrives.
HALF_TICK_S = 0.01
TICK_S = 0.02
#: Seconds of the plan sent on each telemetry packet (CLEAR_QUEUE): what runs at most when the
#: host goes quiet, under the robot's 200 ms link timeout ...
HORIZON_S = 0.2
#: ... of which the correction's share, then the reference's own speeds.
CORRECT_FOR_S = 0.04
#: At the end: the most seconds spent driving for the end point, and how near is there (m).
SETTLE_S = 2.0
TOLERANCE_M = 0.02
#: At rest: the robot's reported speeds below these.
REST_MPS = 0.03
REST_RADPS = 0.1
#: After the path, the approach to its end: top speed, and gains on distance and bearing.
APPROACH_MPS = 0.5
APPROACH_GAIN = 2.0
APPROACH_TURN_GAIN = 3.0
#: The robot at rest this long (its own clock) while the reference moves faster than
#: these: it is not running our commands, and the reference waits.
STALL_S = 0.1
STALL_REF_MPS = 0.2
STALL_REF_RADPS = 0.4
#: After an outage the robot may have run on past where it was last heard (its queued plan,
#: up to the link timeout, then its stop): the reference moves on to where the robot is, when
#: that is this far ahead, looking this far along the path.
REALIGN_M = 0.05
REALIGN_S = 0.6
#: Back from an outage the robot sets off from rest where the reference moves on: until the
#: robot is up to this share of the reference's speed (or this long has passed), the reference
#: is where the robot is along the path, not where the clock would have it, so the robot does
#: not lag it by its acceleration and overshoot catching up.
RESUME_DONE = 0.95
RESUME_MAX_S = 1.0
#: Wheel odometry kept per telemetry stamp, to place the robot's poses (2 s of ticks); robot
#: poses kept until the telemetry sample of their tick arrives, at most.
HISTORY = 100
POSES_PENDING = 50


@dataclass
class FollowResult:
    elapsed: float
    #: Reference time reached (the trajectory's length once finished).
    reference_time: float
    packets: int
    #: Distance from the estimated pose to the trajectory's end when the follower stopped.
    final_error: float
    #: Largest distance between the estimated pose and the reference at the same reference time.
    max_error: float
    outages: list[Outage]


@dataclass(frozen=True)
class _Sample:
    stamp_ms: int
    host_t: float
    left: float
    right: float
    left_v: float
    right_v: float


class FollowSession:
    """Follows ``trajectory``: the sans-I/O core of :class:`~bcnp.host.sessions.follow.Follower` (a
    :class:`~bcnp.host.sessions.core.session.Session`; see the module docs). It takes the robot's
    telemetry with the moment it arrived (:meth:`on_telemetry`), and the robot's own pose
    when it offers it (:meth:`on_pose`), and answers, at each step, the plan to send.

    Where the robot is: wheel odometry over the telemetry samples, and, once a robot pose
    has come, that pose (placed on the path's frame where the wheel estimate had the robot
    at its stamp) carried forward by what the wheels did since its stamp. A pose and a
    telemetry sample of the same tick share a stamp: that places the pose in time, whatever
    the order and moment either arrives in. Poses that stop coming leave the wheels to
    carry on from the last one."""

    def __init__(
        self,
        trajectory: Trajectory,
        limits: DriveLimits,
        *,
        horizon: float = HORIZON_S,
        correct_for: float = CORRECT_FOR_S,
        settle: float = SETTLE_S,
        tolerance: float = TOLERANCE_M,
        command_spec: MessageSpec,
    ) -> None:
        from wpimath.controller import LTVUnicycleController
        from wpimath.geometry import Pose2d, Rotation2d
        from wpimath.kinematics import DifferentialDriveOdometry

        if not correct_for <= horizon:
            raise ValueError("correct_for must not exceed horizon")
        self.trajectory = trajectory
        self.limits = limits
        self.horizon = horizon
        self.correct_for = correct_for
        self.settle = settle
        self.tolerance = tolerance
        self._drive = command_spec.message_class
        self.controller = LTVUnicycleController(correct_for, maxVelocity=max(limits.max_vx_mps * 1.5, 1.0))
        start = trajectory.start
        self._start_pose = Pose2d(start.x, start.y, Rotation2d(start.heading))
        self._odometry_type = DifferentialDriveOdometry
        self.odometry: DifferentialDriveOdometry | None = None
        self._heading_offset = start.heading
        self._pending: list[_Sample] = []
        #: Wheel odometry's pose at each recent telemetry stamp, oldest first.
        self._raw: deque[tuple[int, Pose2d]] = deque(maxlen=HISTORY)
        self._poses: list[StampedPose] = []  # robot poses not absorbed yet
        #: The path frame's pose of the robot odometry's origin (set by the first robot pose).
        self._origin: Pose2d | None = None
        #: The last robot pose absorbed: its pose on the path, wheel odometry's then, its stamp.
        self._base: tuple[Pose2d, Pose2d, int] | None = None
        #: Robot poses absorbed: the estimate rests on the robot's own pose when above 0.
        self.poses_used = 0
        self._last: _Sample | None = None
        self.reference_time = 0.0
        self.packets = 0
        self.max_error = 0.0
        self.outages: list[Outage] = []
        self._stall_since: tuple[int, float] | None = None
        self._stall_checked: int | None = None
        #: (reference time, estimated x, y) once per plan: what the follower believed.
        self.track: list[tuple[float, float, float]] = []
        self._last_now: float | None = None  # the last step's time
        self._clear = True  # the next plan clears the robot's queue (a new connection)
        self._hold = False  # the reference does not advance this step (a new connection)
        self._realign = False  # the first news after an outage moves the reference to the robot
        #: Back from an outage: the reference keeps to the robot (since when, the step's time).
        self._resuming: float | None = None
        self._last_plan = -math.inf
        self._planned_at = 0.0
        self.done = False

    # -- telemetry ---------------------------------------------------------------------------------

    def on_telemetry(self, packet: PacketView, now: float) -> None:
        """A telemetry packet that arrived at ``now``; its samples are used at the next step."""
        names = packet.spec.field_names
        if "leftPosition" not in names or "timestampMs" not in names:
            return
        messages = list(packet)
        if not messages:
            return
        rows = [m.as_dict() for m in messages]
        newest = rows[-1]["timestampMs"]
        samples = [
            _Sample(
                int(r["timestampMs"]),
                now - (newest - r["timestampMs"]) / 1000,
                r["leftPosition"],
                r["rightPosition"],
                r["leftVelocity"],
                r["rightVelocity"],
            )
            for r in rows
        ]
        self._pending.extend(samples)

    def on_pose(self, pose: StampedPose, now: float) -> None:
        """The robot's own pose (``Network/Pose``), arrived at ``now``; used at the next step,
        once the telemetry sample of its tick (the same stamp) has come too."""
        self._poses.append(pose)

    def _heading(self, sample: _Sample) -> float:
        return self._heading_offset + (sample.right - sample.left) / self.limits.track_width_m

    def _absorb(self) -> bool:
        """Feeds new samples to the odometry, then places the robot's poses; True if there
        were new samples."""
        from wpimath.geometry import Rotation2d

        samples, self._pending = self._pending, []
        fresh = False
        for s in sorted(samples, key=lambda s: s.stamp_ms):
            last = self._last
            if last is not None and s.stamp_ms == last.stamp_ms:
                continue  # a repeat
            if self.odometry is None or (last is not None and s.stamp_ms < last.stamp_ms):
                # the first sample, or a robot that restarted: carry on from the estimate
                pose = self._start_pose if self.odometry is None else self._pose()
                self._heading_offset = (
                    pose.rotation().radians() - (s.right - s.left) / self.limits.track_width_m
                )
                gyro = Rotation2d(self._heading(s))
                if self.odometry is None:
                    self.odometry = self._odometry_type(gyro, s.left, s.right, pose)
                else:
                    self.odometry.resetPosition(gyro, s.left, s.right, pose)
                    # Its odometry restarted too: the next pose is placed afresh, and none of
                    # the last run's is.
                    self._raw.clear()
                    self._origin = self._base = None
                    self._poses = [p for p in self._poses if p.stamp_ms <= s.stamp_ms]
            else:
                self.odometry.update(Rotation2d(self._heading(s)), s.left, s.right)
            self._raw.append((s.stamp_ms, self.odometry.getPose()))
            self._last = s
            fresh = True
        self._absorb_poses()
        return fresh

    def _absorb_poses(self) -> None:
        """Places each robot pose whose tick's telemetry sample has come: on the path, through
        the robot odometry's origin (the first pose sets it where the estimate then was)."""
        from wpimath.geometry import Pose2d, Rotation2d, Transform2d

        if not self._poses or not self._raw:
            return
        oldest, newest = self._raw[0][0], self._raw[-1][0]
        waiting = []
        for p in sorted(self._poses, key=lambda p: p.stamp_ms):
            if p.stamp_ms > newest:
                waiting.append(p)  # its tick's sample has not come yet
                continue
            base = self._base
            if p.stamp_ms < oldest or (base is not None and p.stamp_ms <= base[2]):
                continue  # older than what is kept, or than the pose in use
            raw = next((r for stamp, r in reversed(self._raw) if stamp == p.stamp_ms), None)
            if raw is None:
                continue  # no sample of that tick (a robot that recorded none)
            robot = Pose2d(p.x, p.y, Rotation2d(p.heading))
            if self._origin is None:
                self._origin = self._pose_from(raw).transformBy(Transform2d(robot, Pose2d()))
            self._base = (self._origin.transformBy(Transform2d(Pose2d(), robot)), raw, p.stamp_ms)
            self.poses_used += 1
        self._poses = waiting[-POSES_PENDING:]

    def _pose_from(self, raw: Pose2d) -> Pose2d:
        """The estimate when wheel odometry says ``raw``: the last robot pose, carried by what
        the wheels did since; wheel odometry alone before any robot pose."""
        from wpimath.geometry import Transform2d

        base = self._base
        if base is None:
            return raw
        return base[0].transformBy(Transform2d(base[1], raw))

    def _pose(self) -> Pose2d:
        assert self.odometry is not None
        return self._pose_from(self.odometry.getPose())

    # -- the loop ---------------------------------------------------------------------------------

    def estimate(self) -> tuple[float, float, float] | None:
        """The estimated pose (x, y, heading) as of the last sample absorbed."""
        if self.odometry is None:
            return None
        pose = self._pose()
        return pose.X(), pose.Y(), pose.rotation().radians()

    # -- the session ------------------------------------------------------------------------------

    def went(self, outage: Outage, elapsed: float) -> None:
        """The robot stopped when it stopped hearing us: the reference waits from there."""
        self.reference_time = max(0.0, self.reference_time - (elapsed - outage.lost_at))

    def back(self, outage: Outage, elapsed: float) -> None:
        self._clear, self._last_plan, self._hold = True, -math.inf, True
        self._realign = True

    def step(self, elapsed: float, now: float, connected: bool) -> Send | None:
        last, self._last_now = self._last_now, now
        if not connected or self.done:
            return None
        total = self.trajectory.total
        if self._hold:
            self._hold = False
        elif last is not None and not self._realign and self._resuming is None and not self._stalled():
            self.reference_time = min(self.reference_time + (now - last), total + self.settle)
        fresh = self._absorb()
        if fresh and self._realign:  # the first news after an outage
            self._realign = False
            self._resuming = now
            self._catch_up(REALIGN_M)
        elif fresh and self._resuming is not None:
            self._keep_to_robot(now)
        self._watch_stall()
        if (self.reference_time >= total and self._arrived()) or self.reference_time >= total + self.settle:
            self.done = True
            return None
        if fresh or self._clear or now - self._last_plan >= self.horizon - self.correct_for:
            self._planned_at = now
            return Send(self._plan(now), clear=True)
        return None

    def delivered(self, send: Send, packets: int) -> None:
        self.packets += packets
        self._clear, self._last_plan = False, self._planned_at

    def finished(self, elapsed: float, down: Outage | None) -> bool:
        return self.done  # a link that is down only holds the reference

    def where(self) -> str:
        return f"reference at {self.reference_time:.1f} of {self.trajectory.total:.1f} s"

    def result(self, elapsed: float) -> FollowResult:
        end = self.trajectory.end
        pose = self.estimate()
        final = math.inf if pose is None else math.hypot(pose[0] - end.x, pose[1] - end.y)
        return FollowResult(
            elapsed,
            min(self.reference_time, self.trajectory.total),
            self.packets,
            final,
            self.max_error,
            self.outages,
        )

    def _catch_up(self, least: float) -> None:
        """The reference moves on to the nearest point of the path to the robot within
        :data:`REALIGN_S` of it, if that is more than ``least`` metres on. Rewound to where the
        robot was last heard before an outage, a reference behind the robot would have it turn
        back for the path it already drove, or cut across to where the reference catches up."""
        pose = self.estimate()
        if pose is None:
            return
        t0 = self.reference_time
        end = min(self.trajectory.total, t0 + REALIGN_S)
        best_t, best = t0, math.inf
        t = t0
        while t <= end + 1e-9:
            ref = self.trajectory.sample(t)
            distance = math.hypot(ref.x - pose[0], ref.y - pose[1])
            if distance < best:
                best_t, best = t, distance
            t += TICK_S / 2
        start = self.trajectory.sample(t0)
        ahead = self.trajectory.sample(best_t)
        if math.hypot(ahead.x - start.x, ahead.y - start.y) > least:
            self.reference_time = best_t
            self._stall_since = None

    def _keep_to_robot(self, now: float) -> None:
        """Resuming: the reference where the robot is along the path while it moves, until it
        is up to the reference's speed (:data:`RESUME_DONE`) or :data:`RESUME_MAX_S` has passed;
        at rest, the reference waits."""
        sample = self._last
        assert sample is not None and self._resuming is not None
        speed = abs(sample.left_v + sample.right_v) / 2
        if speed > REST_MPS:
            self._catch_up(0.0)
        ref = self.trajectory.sample(self.reference_time)
        if speed >= RESUME_DONE * abs(ref.vx) or now - self._resuming >= RESUME_MAX_S:
            self._resuming = None

    def _watch_stall(self) -> None:
        """A robot that stands still while the reference moves is not running our commands
        (they are not arriving, or it stopped for a link timeout the host did not see): from
        :data:`STALL_S` of that on, the reference waits where it was when the stall began."""
        sample = self._last
        if sample is None or self._stall_checked == sample.stamp_ms:
            return
        self._stall_checked = sample.stamp_ms
        ref = self.trajectory.sample(self.reference_time)
        robot_still = abs(sample.left_v) <= REST_MPS and abs(sample.right_v) <= REST_MPS
        reference_moves = abs(ref.vx) > STALL_REF_MPS or abs(ref.omega) > STALL_REF_RADPS
        if not (robot_still and reference_moves):
            self._stall_since = None
            return
        if self._stall_since is None:
            self._stall_since = (sample.stamp_ms, self.reference_time)
        elif (sample.stamp_ms - self._stall_since[0]) / 1000 >= STALL_S:
            self.reference_time = min(self.reference_time, self._stall_since[1])

    def _stalled(self) -> bool:
        since = self._stall_since
        last = self._last
        return since is not None and last is not None and (last.stamp_ms - since[0]) / 1000 >= STALL_S

    def _arrived(self) -> bool:
        """At the end and at rest: a robot stopped while it still moves would coast on."""
        pose, last = self.estimate(), self._last
        if pose is None or last is None:
            return False
        end = self.trajectory.end
        v = (last.left_v + last.right_v) / 2
        w = (last.right_v - last.left_v) / self.limits.track_width_m
        close = math.hypot(pose[0] - end.x, pose[1] - end.y) <= self.tolerance
        return close and abs(v) <= REST_MPS and abs(w) <= REST_RADPS

    def _plan(self, now: float) -> list[Message]:
        """The correction and the reference's speeds up to the horizon."""
        from wpimath.geometry import Pose2d, Rotation2d, Twist2d

        limits = self.limits
        t0 = self.reference_time + HALF_TICK_S
        commands: list[Message] = []
        sample = self._last
        if self.odometry is not None and sample is not None:
            pose = self._pose()
            ref_now = self.trajectory.sample(self.reference_time)
            error = math.hypot(pose.X() - ref_now.x, pose.Y() - ref_now.y)
            self.max_error = max(self.max_error, error)
            self.track.append((self.reference_time, pose.X(), pose.Y()))
            # carried forward to when the robot acts on this plan, at the speeds it reported
            age = max(0.0, now - sample.host_t) + HALF_TICK_S
            v = (sample.left_v + sample.right_v) / 2
            w = (sample.right_v - sample.left_v) / limits.track_width_m
            predicted = pose.exp(Twist2d(v * age, 0.0, w * age))
            if self.reference_time >= self.trajectory.total:
                vx, omega = self._approach(predicted.X(), predicted.Y(), predicted.rotation().radians())
            else:
                ref = self.trajectory.sample(t0)
                goal = Pose2d(ref.x, ref.y, Rotation2d(ref.heading))
                u = self.controller.calculate(predicted, goal, ref.vx, ref.omega)
                vx, omega = u.vx, u.omega
            commands.append(self._command(vx, omega, self.correct_for))
            t = t0 + self.correct_for
        else:
            t = t0
        while t < t0 + self.horizon - 1e-9:
            ref = self.trajectory.sample(t)
            commands.append(self._command(ref.vx, ref.omega, TICK_S))
            t += TICK_S
        return commands

    def _approach(self, x: float, y: float, heading: float) -> tuple[float, float]:
        """After the path: straight for its end point, forwards or backwards, whichever faces
        it (a unicycle controller at rest cannot close a sideways error), slowing as it nears."""
        end = self.trajectory.end
        dx, dy = end.x - x, end.y - y
        distance = math.hypot(dx, dy)
        if distance <= self.tolerance / 2:
            return 0.0, 0.0
        bearing = math.remainder(math.atan2(dy, dx) - heading, math.tau)
        direction = 1.0
        if abs(bearing) > math.pi / 2:  # behind: back up to it
            direction = -1.0
            bearing = math.remainder(bearing + math.pi, math.tau)
        speed = min(APPROACH_MPS, APPROACH_GAIN * distance) * max(0.0, math.cos(bearing))
        return direction * speed, APPROACH_TURN_GAIN * bearing

    def _command(self, vx: float, omega: float, seconds: float) -> Message:
        limits = self.limits
        vx = max(-limits.max_vx_mps, min(limits.max_vx_mps, vx))
        omega = max(-limits.max_omega_radps, min(limits.max_omega_radps, omega))
        return self._drive(vx=round(vx, 4), omega=round(omega, 4), durationMs=round(seconds * 1000))
