"""Whether the robot a host drives runs BCNP commands now, from its ``Network/Mode`` key.

A robot holds its BCNP link in every driver-station mode: the handshake passes,
telemetry flows and ``Network/MessagesRx`` counts, but only autonomous drives
the wheels (docs/robot.md, "Modes"). A host that streams to a disabled robot
sees nothing wrong unless it asks. :class:`ModeWatch` asks the robot's
NetworkTables server (an NT4 client of its own, on the robot's address) and says
one line when the robot is in a mode where commands do not move it, and one when
that changes. It speaks only of the robot that holds this host's link: the
robot's ``Network/Peer`` must be this host's address (a robot reached through a
proxy sees the proxy's, and is not spoken of). The watch never delays or stops
the host: no NetworkTables server (or no ``pyntcore``, as on a coprocessor with
only this package) means no line.

:func:`mode_line` holds the wording and the rule, without NetworkTables.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ...defaults import NT_PORT
from .instance import event_value, new_instance, start, stop

__all__ = ["DRIVING_MODE", "MODE_KEY", "PEER_KEY", "ModeWatch", "mode_line"]

MODE_KEY = "/SmartDashboard/Network/Mode"
PEER_KEY = "/SmartDashboard/Network/Peer"
#: The one mode in which the robot drives BCNP commands.
DRIVING_MODE = "autonomous"
#: No NetworkTables server answered this long after the watch started: none will soon.
NO_SERVER_S = 0.5

_WHY = {
    "disabled": "commands are queued and time out unrun; enable it in autonomous",
    "teleop": "the driver's controller drives; commands are queued but not driven",
    "test": "commands are queued and time out unrun",
}


def mode_line(robot: str, mode: str | None, was_driving: bool | None) -> str | None:
    """The line to print when the robot at ``robot`` is now in ``mode`` (``None``: not known).

    ``None`` when there is nothing to say: the mode is not known, or the robot drives
    BCNP commands and was not known to be stopped before (``was_driving`` is ``None``
    before the first mode heard)."""
    if mode is None:
        return None
    if mode == DRIVING_MODE:
        if was_driving is False:
            return f"robot at {robot} is now in {mode}, enabled: BCNP commands drive it"
        return None
    why = _WHY.get(mode, "BCNP commands drive it only in autonomous")
    return f"robot at {robot} is {mode}, not driving BCNP commands: {why}"


class ModeWatch:
    """Says (through ``say``) a :func:`mode_line` for the robot at ``host`` whenever one is due.

    ``peer()`` is this host's address as the robot names it (``"ip:port"``, ``Client.local_address``;
    ``None`` while not connected): the robot's mode counts only while its ``Network/Peer``
    is that. Runs on ntcore's own threads; :meth:`close` (or the ``with`` block's end) stops it."""

    def __init__(
        self,
        host: str,
        peer: Callable[[], str | None],
        port: int = NT_PORT,
        say: Callable[[str], object] = print,
    ) -> None:
        self.robot = host
        self.peer = peer
        self.say = say
        #: The robot's mode and its controller's address, as last heard.
        self.mode: str | None = None
        self.robot_peer: str | None = None
        self._driving: bool | None = None
        self._known = threading.Event()
        self._lock = threading.Lock()
        self._inst: Any = None
        self._subscribers: list[Any] = []
        self._started = time.monotonic()
        try:
            import ntcore
        except ImportError:  # a host without pyntcore: nothing to ask
            return
        inst = new_instance()
        for key in (MODE_KEY, PEER_KEY):
            subscriber = inst.getStringTopic(key).subscribe("")
            inst.addListener(
                subscriber, ntcore.EventFlags.kValueAll | ntcore.EventFlags.kImmediate, self._heard
            )
            self._subscribers.append(subscriber)
        start(inst, "bcnp-mode-watch", host, port)
        self._inst = inst

    @property
    def available(self) -> bool:
        """False without pyntcore: the watch cannot ask."""
        return self._inst is not None

    def _heard(self, event: Any) -> None:
        data = event.data
        text = event_value(event)
        if not isinstance(text, str):
            return
        line = None
        with self._lock:
            if data.topic.getName() == PEER_KEY:
                self.robot_peer = text
            elif text:
                self.mode = text
            mine = self.peer()
            if self.mode is None or mine is None or self.robot_peer != mine:
                return  # not known yet, or the robot holds another host's link
            if self._driving is None or self._driving != (self.mode == DRIVING_MODE):
                line = mode_line(self.robot, self.mode, self._driving)
                self._driving = self.mode == DRIVING_MODE
        self._known.set()
        if line is not None:
            self.say(line)

    def wait_known(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the mode of the robot that holds this host's link
        (and its line); False if it did not come, at once when no NetworkTables server
        answered within ``NO_SERVER_S`` of the watch's start."""
        inst = self._inst
        if inst is None:
            return False
        deadline = time.monotonic() + timeout
        while not self._known.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
            now = time.monotonic()
            if now >= deadline or (now - self._started >= NO_SERVER_S and not inst.isConnected()):
                return False
        return True

    def close(self) -> None:
        inst = self._inst
        if inst is None:
            return
        self._inst = None
        stop(inst, self._subscribers)

    def __enter__(self) -> ModeWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
