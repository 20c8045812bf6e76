"""The TalonFX wiring's simulated side: CTRE's own firmware, fed the chassis.

Phoenix 6's simulation runs each TalonFX's and the Pigeon 2's device firmware on a thread of
its own, in wall-clock time (CTRE, "Simulation": the sim state is the device's physics
input). The chassis is stepped in 5 ms steps; each step applies each motor's output voltage
as the firmware applied it (``sim_state.motor_voltage``: its loop, current limits and neutral
mode) and writes back what the rotors did (position and velocity, through the velocity-delay
fault); each tick writes the supply voltage, and the chassis' yaw and turn rate to the
Pigeon 2.

Where simulated time is stepped as fast as a test can (``wpilib.simulation.isTimingPaused``:
pyfrc's tests), the firmware would see no time pass and never move: each step waits for the
wall clock (:class:`WallPacer`), the first ``FIRST_READ_S`` into the tick so the firmware has
taken the request the robot's code just sent, and the tick's end waits for the devices to send
what they were given (:meth:`TalonFXDevices.end`), so a stepped second takes a second. Where the
clock runs by itself (``robotpy sim``, the benchmarks), nothing waits: the output read at the
tick's start holds through it, and the firmware has the wall time between ticks.

The mounting is the sim state's ``orientation`` (CTRE: the mechanical linkage, independent of
the invert setting): the left gearbox counter-clockwise positive, the right one mirrored,
clockwise positive, so a wrong ``TALONFX_RIGHT_INVERTED`` drives that side backward here as on
the robot. ``BCNP_SIM_RIGHT_REVERSED`` turns the right side's motion and its rotor sensor
the other way (a TalonFX reads its own rotor, so the two always agree).

While the robot is disabled or browned out the outputs are off (the roboRIO disables its CAN
motor controllers); the firmware is told so through Phoenix 6's enable signal, fed each tick
(``unmanaged.feed_enable``: Phoenix 6's own feed runs on a WPILib Notifier that a test's reset
of the HAL leaves dead after the first robot of a process).
``BCNP_SIM_DEVICE=ideal`` changes nothing here: the firmware is CTRE's either way.
"""

from __future__ import annotations

import math
import random
import time

import wpilib.simulation as wsim
import wpimath.system.plant as plant
from phoenix6 import BaseStatusSignal, controls, sim, unmanaged, utils
from phoenix6.sim.talon_fx_sim_state import TalonFXSimState

import constants
from sim.chassis import MOTOR_MOUNT, Chassis
from sim.sensors import DelayLine
from sim.settings import SimSettings
from sim.wirings import Devices
from subsystems.drivetrain.talonfx import TalonFXIO

#: With simulated time stepped (tests, ``isTimingPaused``), each tick's physics runs in
#: ``STEPS`` steps whose output is read this far into the tick's 20 ms of wall time, then every
#: ``(tick - FIRST_READ_S) / STEPS`` (s): the firmware takes a request 4-6 ms after it is sent
#: and a new rotor state within its next 1 ms loop.
FIRST_READ_S = 0.006
#: ... and every this long after it (s): each step's rotor state has the firmware's 1 kHz loop
#: to itself at least once before the next step reads the output.
STEP_SPACING_S = 0.002
#: How long a stepped tick waits at its end for the devices to send what they were given (s):
#: the leaders' positions and velocities and the Pigeon 2's yaw and rate go at 100 Hz, so
#: within 10 ms.
FRAME_WAIT_S = 0.015
#: Behind the wall clock by more than this (a held machine), the pacing starts again from now
#: rather than rushing to catch up.
MAX_BEHIND_S = 0.05
#: A read this late against its time (s), short of a restart, counts as a starved machine too:
#: the firmware's threads, on the same cores, were held as the robot's was.
LATE_S = 0.01
#: A leader asked for more than this (V), or a follower whose leader applies more, that applies
#: exactly 0 V is silently neutral.
SILENT_DEMAND_V = 1.0
#: With simulated time stepped, how long a read waits (wall time, simulated time held) for a
#: silently neutral motor to apply its request (s): after a held machine, the firmware takes the
#: robot's next control and enable frames (100 Hz) within this.
LIVE_WAIT_S = 0.05
#: How long an enable lasts unless fed again (s): Phoenix 6 disables its devices after it. Fed
#: each tick and cut (a feed of 0) the tick the robot is disabled; longer than Phoenix 6's own
#: 0.1 s so that a machine holding the robot's thread a few ticks' worth of wall time does not
#: disable the firmware under a stepped test.
ENABLE_FEED_S = 0.5
#: The mounting of each side's gearbox, as CTRE's sim state takes it.
ORIENTATION = (sim.ChassisReference.COUNTER_CLOCKWISE_POSITIVE, sim.ChassisReference.CLOCKWISE_POSITIVE)


def drive_motor() -> plant.DCMotor:
    """One drive motor: a Kraken X60, or a Falcon 500 (``TALONFX_MOTOR``)."""
    if constants.TALONFX_MOTOR == "falcon500":
        return plant.DCMotor.falcon500(1)
    return plant.DCMotor.krakenX60(1)


class WallPacer:
    """Holds the simulated clock no faster than the wall clock, for devices that run on the wall
    clock."""

    def __init__(self, clock=time.monotonic, sleep=time.sleep) -> None:  # type: ignore[no-untyped-def]
        self._clock = clock
        self._sleep = sleep
        self._anchor: float | None = None  # wall time at simulated time 0
        #: Times the wall clock was found more than MAX_BEHIND_S ahead (the machine held us).
        self.restarts = 0
        #: Reads that came more than LATE_S after their time, short of a restart.
        self.late = 0

    def wait(self, sim_s: float, lead_s: float) -> None:
        """Return once the wall clock has reached ``sim_s`` (simulated seconds) plus ``lead_s``
        since the first call."""
        now = self._clock()
        if self._anchor is None or now - (self._anchor + sim_s) > MAX_BEHIND_S:
            if self._anchor is not None:
                self.restarts += 1
            self._anchor = now - sim_s
        delay = self._anchor + sim_s + lead_s - now
        if delay > 0.0:
            self._sleep(delay)
        elif delay < -LATE_S:
            self.late += 1

    def slip(self, wall_s: float) -> None:
        """The simulated clock stood still for ``wall_s`` of wall time: what follows keeps its
        spacing."""
        if self._anchor is not None:
            self._anchor += wall_s


class TalonFXDevices(Devices):
    """Four TalonFX and a Pigeon 2, each running CTRE's firmware."""

    #: The chassis' integration step; a step's voltage is the firmware's output read at its start.
    step_s = 0.005

    def __init__(self, io: TalonFXIO, settings: SimSettings) -> None:
        faults = settings.faults
        self.motor = drive_motor()
        right = -1 if faults.right_reversed else 1
        #: Per side: the mounting's sense (the chassis' motor sense to CTRE's) and the fault's.
        self.sense_signs = (MOTOR_MOUNT[0], MOTOR_MOUNT[1] * right)
        self.sides = (
            tuple(t.sim_state for t in (io.left_leader, io.left_follower)),
            tuple(t.sim_state for t in (io.right_leader, io.right_follower)),
        )
        for side, states in enumerate(self.sides):
            for state in states:
                state.orientation = ORIENTATION[side]
                if constants.TALONFX_MOTOR == "krakenx60":
                    state.set_motor_type(TalonFXSimState.MotorType.KRAKEN_X60)
                state.set_supply_voltage(12.0)
        self.delays = (
            DelayLine(faults.velocity_delay_s, self.step_s),
            DelayLine(faults.velocity_delay_s, self.step_s),
        )
        pigeon = io.pigeon
        self.pigeon = pigeon.sim_state if pigeon is not None else None
        #: What the robot's code reads each tick at 100 Hz: a stepped tick ends once they are sent.
        self._read = [t.get_position() for t in (io.left_leader, io.right_leader)]
        self._read += [t.get_velocity() for t in (io.left_leader, io.right_leader)]
        if pigeon is not None:
            self.gyro_sink = self._write_gyro
            self._read += [pigeon.get_yaw(), pigeon.get_angular_velocity_z_world()]
        #: Stepped ticks whose end did not see every reading sent within FRAME_WAIT_S.
        self.unsent_ticks = 0
        self.gyro_part = None  # the Pigeon 2's firmware reads what it is given
        self.pacer = WallPacer()
        self._steps_per_tick = round(constants.LOOP_PERIOD_S / self.step_s)
        self._step = 0  # this tick's steps so far
        self._now = 0.0  # simulated time at the end of the last step
        self._tick_start = 0.0
        self._enabled = False
        self._stepped = True
        self._volts: list[list[float]] = [[0.0, 0.0], [0.0, 0.0]]
        #: Ticks a motor's firmware held its output at exactly 0 V while the robot was enabled and
        #: the motor should drive (SILENT_DEMAND_V), still after a wait for it: a disabled
        #: firmware, silently neutral. Counted at the start of the tick after. The robot's tests
        #: fail on more than a few beyond the first ticks of an enable.
        self.silent_ticks = 0
        self._silent = False  # this tick's
        #: Stepped reads that found a motor silent and waited until it applied its request
        #: (:meth:`_wait_live`).
        self.live_waits = 0
        self._waited_in_vain = False  # the last wait ended silent: no wait again until it is not
        self._end_holds = 0  # holds seen while a tick's end waited for the devices' frames
        self._leaders = (io.left_leader, io.right_leader)
        self._kv = constants.TALONFX_WHEEL_FEEDFORWARD[constants.TALONFX_MOTOR][1]

    @property
    def holds(self) -> int:
        # Held (the pacing restarted, a tick's end waited through a hold), starved (a read came
        # late), or the devices did not send in time: the firmware saw wall time the chassis did not.
        pacer = self.pacer
        return pacer.restarts + pacer.late + self._end_holds + self.unsent_ticks

    def _write_gyro(self, angle: float, rate: float) -> None:
        assert self.pigeon is not None
        self.pigeon.set_raw_yaw(angle)
        self.pigeon.set_angular_velocity_z(rate)

    def end(self) -> None:
        """In a stepped tick, wait until the devices have sent what they were given this tick
        (every reading the robot's code takes at 100 Hz stamped after the tick's last write). The
        robot's code reads them as soon as the tick ends, where on a robot (and in ``robotpy
        sim``) a tick passes between: without the wait it would read this tick's yaw or the last
        one's by the chance of a frame's phase, and its turn-rate loop would chatter on that."""
        if not self._stepped:
            return
        written = utils.get_current_time_seconds()
        now = time.monotonic()
        deadline = now + FRAME_WAIT_S
        read = self._read
        while True:
            BaseStatusSignal.refresh_all(*read, report_error=False)
            if all(signal.timestamp.time > written for signal in read):
                return
            before, now = now, time.monotonic()
            if now - before > FRAME_WAIT_S:  # the machine held us: the devices were held too
                self._end_holds += 1
                deadline = now + FRAME_WAIT_S
            elif now > deadline:
                self.unsent_ticks += 1
                return
            time.sleep(0.0005)

    def begin(self, enabled: bool) -> None:
        self._enabled = enabled
        unmanaged.feed_enable(ENABLE_FEED_S if enabled else 0.0)
        self._stepped = wsim.isTimingPaused()
        self._step = 0
        self._tick_start = self._now
        if self._silent:
            self.silent_ticks += 1
            self._silent = False

    def _demand(self, side: int) -> float:
        """The voltage a leader's request asks for, roughly (0 for a neutral one)."""
        request = self._leaders[side].control_request
        if isinstance(request, controls.VoltageOut):
            return abs(request.output)
        if isinstance(request, controls.VelocityVoltage):
            return abs(request.velocity * self._kv + request.feed_forward)
        return 0.0

    def volts(self, chassis: Chassis, vbus: float) -> tuple[list[float], list[float]]:
        step = self._step
        self._step += 1
        if self._stepped:  # the firmware has its own share of the tick's wall time first
            self.pacer.wait(self._tick_start, FIRST_READ_S + step * STEP_SPACING_S)
        elif step:  # in real time, the output read at the tick's start holds through it
            return self._volts[0], self._volts[1]
        enabled = self._enabled
        if enabled:
            silent = self._silent_motors()
            if silent and self._stepped and not self._waited_in_vain:
                silent = self._wait_live()
                self._waited_in_vain = silent
            elif not silent:
                self._waited_in_vain = False
            if not step:
                self._silent = silent
        for side, states in enumerate(self.sides):
            sign = self.sense_signs[side]
            self._volts[side] = [state.motor_voltage * sign if enabled else 0.0 for state in states]
        return self._volts[0], self._volts[1]

    def _silent_motors(self) -> bool:
        """Whether a motor applies exactly 0 V where it should drive: a leader asked for more
        than SILENT_DEMAND_V, or a follower whose leader applies more than that."""
        for side, (leader, follower) in enumerate(self.sides):
            volts = leader.motor_voltage
            if volts == 0.0 and self._demand(side) > SILENT_DEMAND_V:
                return True
            if follower.motor_voltage == 0.0 and abs(volts) > SILENT_DEMAND_V:
                return True
        return False

    def _wait_live(self) -> bool:
        """With simulated time held, wait up to LIVE_WAIT_S of wall time for silent motors to
        apply their requests; whether one is silent still. A machine that held this process (or
        starved Phoenix 6's threads) for longer than the firmware's timeouts leaves the firmware
        neutral until its next frames arrive: wall time the robot's code never saw, which the
        chassis must not see either."""
        unmanaged.feed_enable(ENABLE_FEED_S)  # a hold longer than the last feed disabled them
        start = time.monotonic()
        silent = True
        while silent and time.monotonic() - start < LIVE_WAIT_S:
            time.sleep(0.001)
            silent = self._silent_motors()
        self.pacer.slip(time.monotonic() - start)
        self.live_waits += not silent
        return silent

    def sense(self, chassis: Chassis, now_s: float) -> None:
        self._now = now_s
        for side, states in enumerate(self.sides):
            sign = self.sense_signs[side]
            rotations = chassis.motor_rotations(side) * sign
            rps = self.delays[side](chassis.motor_speed(side) / math.tau * sign)
            for state in states:
                state.set_raw_rotor_position(rotations)
                state.set_rotor_velocity(rps)

    def report(self, chassis: Chassis, vbus: float) -> None:
        for states in self.sides:
            for state in states:
                state.set_supply_voltage(vbus)
        if self.pigeon is not None:
            self.pigeon.set_supply_voltage(vbus)


def build(io: TalonFXIO, settings: SimSettings, rng: random.Random) -> TalonFXDevices:
    return TalonFXDevices(io, settings)
