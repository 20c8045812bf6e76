"""Every protocol default, defined once.

The library, the transports, the host tools and the robot import these;
``constants.py`` overrides only what this robot chooses differently.
Seconds unless a name says otherwise.
"""

from __future__ import annotations

__all__ = [
    "HANDSHAKE_TIMEOUT_S",
    "IDLE_TIMEOUT_S",
    "KITBOT_TRACK_WIDTH_M",
    "LINK_TIMEOUT_S",
    "MAX_COMMAND_LAG_S",
    "NT_PORT",
    "PORT",
    "QUEUE_CAPACITY",
    "UDP_HANDSHAKE_RETRY_S",
]

#: TCP and UDP both listen on this port (the reference robot's).
PORT = 5800
#: The link is lost when no packet arrived for this long: the queue is dropped
#: and the robot stops (spec: 200 ms).
LINK_TIMEOUT_S = 0.2
#: A queued command that would have ended more than this before now is skipped
#: as stale (spec: 100 ms).
MAX_COMMAND_LAG_S = 0.1
#: Commands the robot queues at most (spec: 200).
QUEUE_CAPACITY = 200
#: A TCP peer must complete its 8-byte handshake within this long of connecting.
HANDSHAKE_TIMEOUT_S = 2.0
#: A controller that sends nothing for this long is dropped (TCP) or unlocked (UDP).
IDLE_TIMEOUT_S = 5.0
#: A host repeats an unanswered UDP handshake this often while connecting.
UDP_HANDSHAKE_RETRY_S = 0.2
#: NetworkTables 4 server port of a robot (WPILib's), read by the host monitor.
NT_PORT = 5810
#: Wheel track of the FRC kit-of-parts chassis (26 in): the simulated robot's,
#: and the host plot's default for odometry from wheel telemetry.
KITBOT_TRACK_WIDTH_M = 0.6604

#: The command a hint names to start the simulated robot: headless, it starts in
#: autonomous, enabled, so a host can drive it at once (the GUI sim starts disabled).
START_SIM = "python run.py sim --nogui, in the robot project"
