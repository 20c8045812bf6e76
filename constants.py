"""This robot's own choices: wiring, geometry, limits, gains, and where its link
differs from the protocol's defaults (``bcnp/defaults.py``, used as they are
unless overridden here).

Units are SI (metres, seconds, radians, volts) unless a name says otherwise.
The drivetrain numbers describe the FRC kit-of-parts chassis (two CIMs per
side, 10.71:1 Toughbox Mini, 6-inch wheels, 26-inch track), which is also
what ``physics.py`` simulates.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from bcnp import MessageQueueConfig
from bcnp.defaults import KITBOT_TRACK_WIDTH_M
from bcnp.transport import TransportConfig

# -- drivetrain wiring -------------------------------------------------------------------

#: Which wiring drives this robot (subsystems/drivetrain/io.py): "kitbot" (two PWM
#: controllers, DIO encoders, analog gyro; the sections below), "sparkmax" (four
#: SPARK MAX on CAN; the SPARK MAX section) or "talonfx" (four TalonFX and a Pigeon 2 on
#: CAN; the TalonFX section). The BCNP_DRIVETRAIN environment variable overrides it, so
#: the simulator and the tests can run any.
DRIVETRAIN = "kitbot"
DRIVETRAIN_ENV = "BCNP_DRIVETRAIN"
#: Motors not updated for this long are stopped by WPILib motor safety (every wiring).
MOTOR_SAFETY_TIMEOUT_S = 0.1

# -- kitbot wiring (roboRIO channels) ------------------------------------------------

LEFT_MOTOR_PWM = 0
RIGHT_MOTOR_PWM = 1  # mounted mirrored: inverted in code
LEFT_ENCODER_DIO = (0, 1)
RIGHT_ENCODER_DIO = (2, 3)
#: Both encoders must count up when the robot drives forward. The right one sits on the
#: mirrored gearbox, so it counts down unless reversed here; flip this if yours counts down
#: (the pre-flight check says so).
RIGHT_ENCODER_REVERSED = True
GYRO_ANALOG = 0
DRIVER_CONTROLLER_PORT = 0  # Xbox controller, driver station USB slot

# -- geometry ---------------------------------------------------------------------------

WHEEL_DIAMETER_M = 0.1524  # 6 in
TRACK_WIDTH_M = KITBOT_TRACK_WIDTH_M  # 26 in, wheel centre to wheel centre
GEAR_RATIO = 10.71  # motor turns per wheel turn
ENCODER_CPR = 360  # encoder cycles per wheel revolution (encoder on the output shaft)
ENCODER_DISTANCE_PER_PULSE_M = math.pi * WHEEL_DIAMETER_M / ENCODER_CPR

# -- SPARK MAX wiring (DRIVETRAIN = "sparkmax"): the reference robot's drivetrain ----------

SPARKMAX_LEFT_LEADER_CAN = 2
SPARKMAX_LEFT_FOLLOWER_CAN = 3
SPARKMAX_RIGHT_LEADER_CAN = 4
SPARKMAX_RIGHT_FOLLOWER_CAN = 5
POWER_DISTRIBUTION_CAN = 1  # not used by the code; where it sits on the bus
#: The right side is mounted mirrored: its leader (and so its follower) runs inverted.
SPARKMAX_RIGHT_INVERTED = True
#: False: brushed motors (CIMs) with an encoder on the SPARK MAX data port;
#: True: brushless NEOs, read through their built-in hall sensor.
SPARKMAX_BRUSHLESS = False
#: Encoder counts per motor revolution (brushed only; a NEO's sensor is fixed).
SPARKMAX_ENCODER_CPR = 42
#: Motor turns to metres at the wheel, and motor RPM to m/s at the wheel.
SPARKMAX_POSITION_FACTOR_M_PER_ROT = math.pi * WHEEL_DIAMETER_M / GEAR_RATIO
SPARKMAX_VELOCITY_FACTOR_MPS_PER_RPM = SPARKMAX_POSITION_FACTOR_M_PER_ROT / 60
#: The wheel-speed feedback in the controllers' own closed loop (slot 0), in the firmware's
#: units (REV, "Closed Loop Control": the loop runs every 1 ms on the measurement after the
#: conversion factor, here m/s): P in duty cycle (1 = full output) per m/s of error, the
#: kitbot's 2 V per m/s over 12 V. No I there: the integral is on the distance, on the roboRIO
#: (WHEEL_KI_V_PER_M), sent with the feedforward as the arbitrary feedforward in volts.
SPARKMAX_WHEEL_KP = 2.0 / 12.0
#: The controllers' velocity measurement (REVLib EncoderConfig): the count change over this
#: many ms, averaged over the last this-many samples (one per ms; a NEO's hall sensor: 8-64 ms
#: and 1, 2, 4 or 8). Its delay is period / 2 + (depth - 1) / 2 ms, as SysId counts it: 16 ms
#: and 4 give 9.5 ms, where REV's defaults (100 ms, 64; NEO 32 ms, 8) give 81.5 ms (NEO 112 ms).
SPARKMAX_VELOCITY_PERIOD_MS = 16
SPARKMAX_VELOCITY_AVERAGE_DEPTH = 4
#: Each controller's current limit (A): the SPARK MAX's continuous output rating (REV's spec
#: table, 60 A). A NEO's is REVLib's smart limit; a brushed motor's the secondary (hard) one.
SPARKMAX_CURRENT_LIMIT_A = 60
#: The gyro: "adis16470" (an ADIS16470 IMU on the roboRIO's onboard SPI port: it holds the
#: commanded turn rate), "analog" (an analog gyro on GYRO_ANALOG), or None (no gyro: the
#: wheels give the heading and the turn rate, as on the reference robot).
SPARKMAX_GYRO: str | None = "adis16470"

# -- TalonFX wiring (DRIVETRAIN = "talonfx"): Krakens or Falcons on Phoenix 6 ----------------------

TALONFX_LEFT_LEADER_CAN = 2
TALONFX_LEFT_FOLLOWER_CAN = 3
TALONFX_RIGHT_LEADER_CAN = 4
TALONFX_RIGHT_FOLLOWER_CAN = 5
TALONFX_PIGEON_CAN = 6
#: The CAN bus the devices sit on: "" the roboRIO's own, or a CANivore's name.
TALONFX_CANBUS = ""
#: The motor the TalonFX drives: "krakenx60" or "falcon500" (the gains below and the simulator's
#: motor model follow it).
TALONFX_MOTOR = "krakenx60"
TALONFX_MOTORS = ("krakenx60", "falcon500")
#: The right side is mounted mirrored: its leader runs inverted (MotorOutputConfigs.Inverted
#: Clockwise_Positive); each follower turns as its leader does (MotorAlignmentValue.Aligned).
TALONFX_RIGHT_INVERTED = True
#: The gyro: "pigeon2" (a Pigeon 2 on TALONFX_PIGEON_CAN, yaw counter-clockwise) or None (the
#: wheels give the heading).
TALONFX_GYRO: str | None = "pigeon2"
#: Rotor turns per wheel turn: Phoenix 6's SensorToMechanismRatio, so every position,
#: velocity and gain below is per wheel rotation (the "mechanism").
TALONFX_SENSOR_TO_MECHANISM = GEAR_RATIO
#: Metres a wheel rolls per rotation.
WHEEL_CIRCUMFERENCE_M = math.pi * WHEEL_DIAMETER_M
#: The wheel-speed loop on the TalonFX (Slot 0, VelocityVoltage), in Phoenix 6's units per wheel
#: rotation: kS volts; kV volts per rps; kA volts per rps/s; kP volts per rps of error. kS, kV, kA
#: are the kit chassis' with two of the motor a side (WPILib's DCMotor models, 60 lb, 10.71:1;
#: characterise a real robot with the SysId modes); kP is half the kitbot's, 1 V per m/s per wheel
#: rotation (0.479 m): the Kraken's chassis answers three times faster than the CIMs' (kA/kV
#: 0.031 s against 0.081 s), and with the velocity 100 ms late the kitbot's 2 V per m/s let the
#: chassis' turn rate swing, 0.44 rad/s peak to peak 10 s into a straight cruise (0.05 at 1 V per
#: m/s). kI is 0: the integral is on the distance, on the roboRIO (WHEEL_KI_V_PER_M), sent as the
#: request's feedforward in volts.
TALONFX_WHEEL_FEEDFORWARD = {
    # motor: (kS V, kV V/rps, kA V/(rps/s))
    "krakenx60": (0.0, 1.278, 0.0392),
    "falcon500": (0.0, 1.202, 0.0593),
}
TALONFX_WHEEL_KP_V_PER_RPS = 1.0 * WHEEL_CIRCUMFERENCE_M
#: Current limits (CTRE, CurrentLimitsConfigs): the stator limit bounds the torque (wheel slip,
#: brownouts during acceleration): "a reasonable starting point ... is 120 A, with values commonly
#: ranging from 80-160 A"; tune it down to the current at which the wheels slip. The supply limit
#: is CTRE's default: 70 A, down to 40 A after 1 s above it.
TALONFX_STATOR_LIMIT_A = 120.0
TALONFX_SUPPLY_LIMIT_A = 70.0
TALONFX_SUPPLY_LOWER_LIMIT_A = 40.0
TALONFX_SUPPLY_LOWER_TIME_S = 1.0
#: How often the devices send what the loops read (Hz): positions, velocities and the Pigeon 2's
#: yaw and rate at 100 Hz (a 10 ms status frame, twice a robot tick); applied outputs, currents,
#: bus voltage and faults at 50 Hz. Every other signal is left at its default.
TALONFX_FAST_SIGNALS_HZ = 100.0
TALONFX_SLOW_SIGNALS_HZ = 50.0
#: How long each configuration call may wait for the device's answer (Phoenix 6's default 0.1 s),
#: and how many times it is tried before its status is reported (Network/ConfigErrors).
TALONFX_CONFIG_TIMEOUT_S = 0.1
TALONFX_CONFIG_TRIES = 5

# -- limits -------------------------------------------------------------------------------

#: Commands are clamped to these before anything else (reference robot limits).
MAX_VX_MPS = 1.5
MAX_OMEGA_RADPS = 2.5
#: Acceleration limits (WPILib SlewRateLimiter) on vx and omega; None disables.
#: Stops (link loss, disable, CLEAR_QUEUE) always bypass them.
MAX_ACCEL_MPS2: float | None = 3.0
MAX_ALPHA_RADPS2: float | None = 6.0

# -- drive loops: wheel speeds and turn rate ------------------------------------------------------

#: One side's feedforward, both wirings: volts to overcome friction (kS), per m/s (kV) and per
#: m/s^2 (kA). These are the kit-of-parts model's (physics.py: dual CIM, 10.71:1, 60 lb);
#: characterise a real robot with SysId (the "SysId" autonomous modes, docs/robot.md) and
#: replace them.
DRIVE_KS_V = 0.0
DRIVE_KV_V_PER_MPS = 2.97
DRIVE_KA_V_PER_MPS2 = 0.24
#: The kitbot's wheel-speed feedback on the roboRIO: volts per m/s of error (P) and per metre
#: of accumulated error (I: the wheel's distance behind where it should be); the integral's
#: share of the output is bounded to WHEEL_I_LIMIT_V.
WHEEL_KP_V_PER_MPS = 2.0
WHEEL_KI_V_PER_M = 10.0
WHEEL_I_LIMIT_V = 4.0
#: The turn-rate loop (a gyro is needed): the commanded turn rates summed give the heading the
#: robot should have; rad/s of correction per radian it is behind (P) and per radian-second
#: (I), the correction bounded to TURN_MAX_CORRECTION_RADPS and the error to TURN_MAX_ERROR_RAD
#: (a robot pushed round is not spun back hard).
TURN_KP_RADPS_PER_RAD = 6.0
TURN_KI_RADPS_PER_RAD_S = 6.0
TURN_MAX_CORRECTION_RADPS = 1.0
TURN_MAX_ERROR_RAD = 0.3
#: A gyro whose reading stays exactly the same for this long while the wheels turn the chassis
#: faster than GYRO_STILL_RADPS has stopped answering (so has one that says so itself, or reads
#: NaN): the wheel loops drive alone, a WPILib Alert shows and the data log records it. It is
#: trusted again after answering for GYRO_TRUST_AGAIN_S.
GYRO_SILENT_S = 0.06
GYRO_STILL_RADPS = 0.1
GYRO_TRUST_AGAIN_S = 0.5

# -- interlocks: wrong wiring and failing sensors (subsystems/drivetrain/checks.py) ---------------------

#: The gyro's heading change is compared with the wheels' (from the encoder positions) over this
#: window: a healthy one turns between GYRO_CHECK_MIN_SHARE and GYRO_CHECK_MAX_SHARE of what the
#: wheels turn (scrub up to 1.25 gives 0.8), give or take GYRO_CHECK_TOLERANCE_RAD plus
#: GYRO_CHECK_LAG_S times the change in the wheels' turn rate over the window (a CAN encoder's
#: position arrives up to a 20 ms status frame late).
GYRO_CHECK_WINDOW_S = 0.1
GYRO_CHECK_MIN_SHARE = 0.5
GYRO_CHECK_MAX_SHARE = 1.25
GYRO_CHECK_TOLERANCE_RAD = 0.006
GYRO_CHECK_LAG_S = 0.03
#: Outside that band this long: the gyro is distrusted (the wheel loops drive alone, Network/Gyro
#: reads "disagrees with the wheels"); trusted again after agreeing through this much turning.
GYRO_DISAGREE_S = 0.04
GYRO_AGREE_AGAIN_S = 1.0
#: A side runs against its command when the command is beyond DRIVE_CHECK_MIN_COMMAND_MPS one
#: way, the wheel beyond DRIVE_CHECK_MIN_AGAINST_MPS the other, and the wheel has not closed on
#: the command by DRIVE_CHECK_CLOSING_MPS over the last DRIVE_CHECK_CLOSING_S; for DRIVE_AGAINST_S,
#: the drivetrain stops until the next enable (Network/DriveFault says why).
DRIVE_CHECK_MIN_COMMAND_MPS = 0.1
DRIVE_CHECK_MIN_AGAINST_MPS = 0.15
DRIVE_CHECK_CLOSING_MPS = 0.05
DRIVE_CHECK_CLOSING_S = 0.06
DRIVE_AGAINST_S = 0.08
#: The chassis spinning where its wheels say it goes straight (a side driven backward with its
#: encoder, as a wrong SPARKMAX_RIGHT_INVERTED does; or a gyro reporting a turn that is not
#: there) stops the drivetrain until the next enable too: the gyro beyond SPIN_CHECK_MIN_RADPS,
#: the wheels' rate (from their positions: a late speed reading would look like a spin) within
#: SPIN_CHECK_WHEEL_SHARE of it either way, for SPIN_CHECK_S.
SPIN_CHECK_MIN_RADPS = 1.0
SPIN_CHECK_WHEEL_SHARE = 0.3
SPIN_CHECK_S = 0.1

# -- teleop -------------------------------------------------------------------------------------

JOYSTICK_DEADBAND = 0.1

# -- BCNP link ----------------------------------------------------------------------------------

#: The BCNP_PORT environment variable overrides the port (0: any free port).
BCNP_PORT_ENV = "BCNP_PORT"
#: The command queue: the spec's limits (200 commands, 200 ms link timeout,
#: stale after 100 ms). Pass fields to change them.
BCNP_QUEUE = MessageQueueConfig()
#: Who may become controller: IP addresses or CIDR subnets; empty: anyone. On an
#: FRC robot network the driver station and coprocessors live in 10.TE.AM.0/24,
#: so team 1234 would set ("10.12.34.0/24",); add "127.0.0.1" to keep driving the sim.
BCNP_ALLOWED_PEERS: tuple[str, ...] = ()
#: Both servers' knobs (port 5800, handshake 2 s, idle 5 s, 1 MiB send buffer, ...);
#: see docs/transports.md. Pass fields to change them.
BCNP_TRANSPORT = TransportConfig(allowed_peers=BCNP_ALLOWED_PEERS)
#: Each kind of transport warning (bcnp.transport.WARNING_LOGGERS) prints at most
#: one line per this many seconds, so a flood of bad input cannot fill the console.
BCNP_WARNING_PERIOD_S = 1.0
TELEMETRY_FLUSH_TICKS = 2  # one packet every 2nd tick: 25 packets/s at 50 Hz
TELEMETRY_MAX_BUFFERED = 32

# -- loop timing (Network/Loop*, Network/Overruns, Network/CmdLatencyP99Ms) ---------------------

#: Longest wait of a thread for the interpreter lock while another holds it
#: (sys.setswitchinterval; CPython's default is 5 ms).
GIL_SWITCH_INTERVAL_S = 0.0005
#: The TimedRobot period (WPILib's default, 50 Hz).
LOOP_PERIOD_S = 0.02
#: Receive threads step aside this long before a tick is due (LoopPriority), so
#: the tick never starts while one is in the middle of a packet.
LOOP_PRIORITY_LEAD_S = 0.0005
#: A tick that starts more than period + margin after the previous one is an overrun.
LOOP_OVERRUN_MARGIN_S = 0.005
#: Rolling windows: robotPeriodic durations and periods over the last 500 ticks (10 s);
#: command latency over the last 500 packets whose first command was reached.
LOOP_TIMING_WINDOW_TICKS = 500
CMD_LATENCY_WINDOW_PACKETS = 500
#: The data log records each packet (BCNP/Packet/*) up to this many per second, a
#: second's worth in a burst; beyond, packets are only counted (BCNP/Packet/Unrecorded).
#: A host sends 50 to a few hundred a second; a flood of 300,000 a second would
#: otherwise write about 10 MB of log a second and cost ingest 40 %.
RECORD_PACKETS_PER_S = 2000

# -- autonomous modes (autonomous/; picked on SmartDashboard as "Autonomous Mode") ------------

#: Each *.csv and *.json path file here is an autonomous mode that plays it on the robot;
#: the files are read when the robot starts.
AUTO_PATHS_DIR = Path(__file__).resolve().parent / "paths"
#: "BCNP host, fallback path": when no controller has connected this long into
#: autonomous, the robot drives this path file (a name in AUTO_PATHS_DIR, or a full path).
AUTO_FALLBACK_WAIT_S = 3.0
AUTO_FALLBACK_PATH = "square.csv"
#: A path played on the robot is queued just in time, like a host's replay: every
#: command that starts within this many seconds, as far as the queue has room.
AUTO_PATH_LEAD_S = 1.0
#: The "SysId" modes (autonomous/sysid.py) apply the same voltage to both sides, open loop,
#: with WPILib SysIdRoutine's defaults: the quasistatic tests ramp it at this many volts per
#: second, the dynamic tests step to SYSID_STEP_V, and each test stops after SYSID_TIMEOUT_S
#: (at 1 V/s the ramp reaches 10 V). Leave room: 7 V takes the kit chassis to about 2.2 m/s.
SYSID_RAMP_V_PER_S = 1.0
SYSID_STEP_V = 7.0
SYSID_TIMEOUT_S = 10.0
#: A SysId test also stops once either wheel has travelled more than this from where the test
#: began: the dynamic step would otherwise run the kit chassis about 20 m in its 10 s.
SYSID_MAX_DISTANCE_M = 3.0

# -- pre-flight check (autonomous/preflight.py) ---------------------------------------------------

#: The check drives each side alone, then both, open loop at this voltage for at most
#: PREFLIGHT_STEP_S, then stops for PREFLIGHT_PAUSE_S so the chassis is at rest before the next
#: step. A step also ends once either wheel has moved PREFLIGHT_MAX_STEP_M in it.
PREFLIGHT_VOLTS = 3.0
PREFLIGHT_STEP_S = 0.5
PREFLIGHT_PAUSE_S = 0.3
PREFLIGHT_MAX_STEP_M = 0.3
#: An encoder counts forward when its side's step moved it at least this far forward.
PREFLIGHT_MIN_TRAVEL_M = 0.02
#: A gyro turned when its reading changed by more than this over a one-side step (0.05 rad is
#: about 3 deg, some 30 times a gyro's noise over a step); less is noise alone: on blocks.
PREFLIGHT_MIN_TURN_RAD = 0.05
#: A follower follows when its applied output is within this share of its leader's (and 0.02).
PREFLIGHT_FOLLOWER_TOLERANCE = 0.2
#: The wheels' speed may read this much later than the wiring's configured velocity filter says
#: (s) before the check fails it: the CAN frames' periods and the roboRIO's loop add some.
PREFLIGHT_LAG_MARGIN_S = 0.04


def drivetrain_wiring() -> str:
    """The drivetrain wiring: ``BCNP_DRIVETRAIN`` from the environment, else ``DRIVETRAIN``."""
    return os.environ.get(DRIVETRAIN_ENV, "").strip().lower() or DRIVETRAIN


def bcnp_port() -> int:
    """The BCNP port: ``BCNP_PORT`` from the environment (0 = any free port), else the configured one."""
    text = os.environ.get(BCNP_PORT_ENV, "").strip()
    if not text:
        return BCNP_TRANSPORT.port
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 0xFFFF:
        raise ValueError(f"{BCNP_PORT_ENV}={text!r} is not a port number (0..65535)")
    return port
