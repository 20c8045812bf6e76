"""Drive a 1 m square from a coprocessor: a complete BCNP host program to copy and adapt.

    python3 coprocessor_square.py --team 1234       # the robot at 10.12.34.2, port 5800
    python3 coprocessor_square.py                   # the simulator on this machine
    python3 coprocessor_square.py --robot 10.12.34.2 --port 5800 --udp

It needs only this project's wheel (docs/coprocessor.md): the ``bcnp`` package and the
generated ``messages`` module, which carries this robot's schema. The robot drives it in
autonomous, enabled, with the "BCNP host" mode chosen.

The plan: 4 x (1 m straight, a quarter turn left), one timed DriveCmd each, on the host's
clock. Each command is sent once its start is less than a lead (1 s; 0.15 s over UDP)
away, so the robot's queue holds little and nothing is sent long before it is due.

A lost link: the robot stops 200 ms into a silence and ends the connection; the client
reconnects by itself, and each new connection (``status().generation``) starts with an
empty queue on the robot. The plan's clock runs on meanwhile. Once the link is back, the
program sends the command that should be running *now*, cut to what is left of it, then
the rest: whatever fell due while the link was down is never sent, so nothing runs late.

Exit status: 0 done; 1 no link (unreachable, another schema, given up, down at the end);
130 Ctrl-C, after stopping the robot (a CLEAR_QUEUE with no commands).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
import time
from dataclasses import dataclass

from bcnp.host import Client, LinkClosedError, LinkDownError, LinkError, ReconnectPolicy
from messages import SCHEMA, DriveCmd

SIDE_M, SPEED_MPS, TURN_RADPS = 1.0, 0.5, math.pi / 2
TICK_MS = 20  # the robot's loop period: a remainder shorter than this is not worth sending
#: The plan ends with a zero command this long: the robot slows through its acceleration
#: limits. An empty queue is a stop that skips them: the last turn would end 0.2 rad short.
REST_MS = 300


@dataclass(frozen=True)
class Step:
    name: str
    vx: float  # m/s
    omega: float  # rad/s, positive turns left
    start_ms: int  # from the plan's start
    end_ms: int


def square() -> list[Step]:
    legs = [("side", SPEED_MPS, 0.0, SIDE_M / SPEED_MPS), ("turn", 0.0, TURN_RADPS, math.pi / 2 / TURN_RADPS)]
    steps: list[Step] = []
    for n in range(1, 5):
        for name, vx, omega, seconds in legs:
            start = steps[-1].end_ms if steps else 0
            steps.append(Step(f"{name} {n}", vx, omega, start, start + round(seconds * 1000)))
    return [*steps, Step("rest", 0.0, 0.0, steps[-1].end_ms, steps[-1].end_ms + REST_MS)]


class Driver:
    """Streams a plan just in time and rides through lost links (see the module docs)."""

    def __init__(self, robot: Client, plan: list[Step], lead_s: float) -> None:
        self.robot, self.plan, self.lead_ms = robot, plan, round(lead_s * 1000)
        self.start: float | None = None  # the plan's clock (time.monotonic()), started by its first read
        self.losses, self.down_s = 0, 0.0

    def now_ms(self) -> int:
        """Milliseconds on the plan's clock. Its first read starts it: the first step is due at 0
        and is sent whole. A clock started earlier would have moved on by the first read, however
        little, and the rule below (never send what is past due) would cut that much off it."""
        return self.ms_at(time.monotonic())

    def ms_at(self, when: float) -> int:
        """A ``time.monotonic()`` moment on the plan's clock (the first one starts it)."""
        if self.start is None:
            self.start = when
        return round((when - self.start) * 1000)

    def run(self) -> None:
        robot, plan = self.robot, self.plan
        generation = robot.status().generation
        sent_ms, clear = 0, True  # plan time sent on this connection; CLEAR_QUEUE first
        lost_ms: int | None = None  # while the link is down: when the robot was last heard
        while (now := self.now_ms()) < plan[-1].end_ms:
            status = robot.status()
            if not status.connected:
                if lost_ms is None:
                    lost_ms, self.losses = now, self.losses + 1
                    if status.lost_since is not None:
                        lost_ms = min(now, self.ms_at(status.lost_since))
                    why = status.lost_reason or status.last_error
                    print(f"link lost at {lost_ms / 1000:.2f} s ({why}); the robot stops; reconnecting")
                if not robot.wait_connected(TICK_MS / 1000) and robot.closed_reason is not None:
                    raise LinkClosedError(f"gave up: {robot.closed_reason}", robot.host, robot.port)
                continue
            if status.generation != generation:  # a new connection: the robot's queue is empty
                generation, sent_ms, clear = status.generation, now, True
                if lost_ms is None:  # lost and back between two looks
                    lost_ms, self.losses = now, self.losses + 1
                    print(f"link lost at {now / 1000:.2f} s and back at once; reconnected")
                resuming = next(s.name for s in plan if s.end_ms > now)
                down = (now - lost_ms) / 1000
                print(f"link back at {now / 1000:.2f} s after {down:.2f} s; resuming {resuming}")
                self.down_s += down
                lost_ms = None
            sent_ms = max(sent_ms, now)  # never anything past due, whatever was sent before
            batch = []
            for step in plan:
                if step.end_ms <= sent_ms:
                    continue  # sent, or its time has passed
                if step.start_ms > now + self.lead_ms:
                    break  # not due yet
                if step.end_ms - sent_ms >= TICK_MS:  # all of it, or what is left of it
                    batch.append(DriveCmd(vx=step.vx, omega=step.omega, durationMs=step.end_ms - sent_ms))
                sent_ms = step.end_ms
            if batch or clear:
                try:
                    # Only on the connection this look saw: a newer one starts empty and is
                    # resumed at the next look, CLEAR_QUEUE first.
                    robot.send(batch, clear_queue=clear, generation=generation)
                    clear = False
                except LinkDownError:
                    sent_ms = now  # nothing went; the next look finds the link down or new
            time.sleep(TICK_MS / 1000)
        if lost_ms is not None:
            raise LinkClosedError("the plan ended with the link down", robot.host, robot.port)


def address(args: argparse.Namespace) -> str:
    """--robot, or 10.TE.AM.2 for --team (team 1234: 10.12.34.2; 254: 10.2.54.2)."""
    if args.team is not None:
        return f"10.{args.team // 100}.{args.team % 100}.2"
    return str(args.robot)


def main() -> int:
    parser = argparse.ArgumentParser(description="Drive a 1 m square over BCNP.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--robot", default="127.0.0.1", help="the robot's address (default 127.0.0.1)")
    where.add_argument("--team", type=int, help="team number: the robot at 10.TE.AM.2")
    parser.add_argument("--port", type=int, default=5800, help="BCNP port (default 5800)")
    parser.add_argument("--udp", action="store_true", help="UDP instead of TCP")
    parser.add_argument("--give-up-after", type=float, default=10.0, metavar="S", help="without a link (10)")
    args = parser.parse_args()
    if args.team is not None and not 1 <= args.team <= 25599:
        parser.error("--team: a team number from 1 to 25599")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # to a pipe or a log, too
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # systemctl stop: as Ctrl-C
    # Ctrl-C and `kill -INT` stop it however it was started: a shell starts a program run in the
    # background (`&`, a script's) with SIGINT ignored, and Python then leaves it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    policy = ReconnectPolicy(give_up_after=args.give_up_after)
    robot = Client(SCHEMA, address(args), args.port, udp=args.udp, reconnect=policy)
    driver = Driver(robot, square(), lead_s=0.15 if args.udp else 1.0)
    code, outcome = 0, "done"
    try:
        robot.connect()
        print(f"connected to {robot.address}; driving a {SIDE_M:g} m square")
        driver.run()
    except KeyboardInterrupt:
        code, outcome = 130, "interrupted, the robot stopped"
    except LinkError as exc:  # unreachable, another schema, given up, down at the end
        print(f"error: {exc}", file=sys.stderr)
        code, outcome = 1, "no link"
    finally:
        with contextlib.suppress(LinkError):
            robot.stop()  # a CLEAR_QUEUE with no commands: the robot stops now
        robot.close()
    elapsed = driver.now_ms() / 1000 if driver.start is not None else 0.0  # of the plan, if it started
    losses, down = driver.losses, driver.down_s
    print(f"{outcome} after {elapsed:.2f} s: {losses} lost link(s), {down:.2f} s without a link")
    return code


if __name__ == "__main__":
    sys.exit(main())
