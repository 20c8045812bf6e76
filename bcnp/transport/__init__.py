"""Robot-side transports: socket loops around :class:`~bcnp.connection.Connection`.

* :class:`TcpServer` and :class:`UdpServer` serve one controller at a time,
  each peer's handshake and framing decided by its own ``Connection``, and
  hand every packet to a :class:`~bcnp.dispatcher.Dispatcher` from a daemon
  receive thread.
* :class:`ControllerSlot` shared by both servers makes "one controller" hold
  across transports.
* :class:`TransportConfig` holds a server's knobs, :class:`TransportCounters`
  its counters, :class:`TransportStatus` a snapshot a robot publishes.
* :class:`SharedQueue` is the command queue under a lock, for a queue fed by a
  receive thread and run by the robot loop.
* :class:`LoopPriority` lets the robot loop run its tick ahead of a flood.
* :data:`WARNING_LOGGERS` names the loggers the servers warn on, one per kind
  of warning a flood can repeat, for whoever runs them to rate-limit.
"""

from ..defaults import PORT as DEFAULT_PORT
from .base import Clock, ControllerSlot, PacketSink
from .config import COUNTER_NAMES, TransportConfig, TransportCounters, TransportStatus
from .netio import Waker, format_address
from .priority import LoopPriority
from .shared_queue import SharedQueue
from .tcp import TcpServer
from .udp import MAX_DATAGRAM, UdpServer

#: Every logger a server warns on (``bcnp.transport.<tcp|udp>.<warning>``), one
#: per kind of warning. Nothing in the library limits them.
WARNING_LOGGERS = TcpServer.warning_loggers() + UdpServer.warning_loggers()

__all__ = [
    "COUNTER_NAMES",
    "DEFAULT_PORT",
    "MAX_DATAGRAM",
    "Clock",
    "ControllerSlot",
    "LoopPriority",
    "PacketSink",
    "SharedQueue",
    "TcpServer",
    "TransportConfig",
    "TransportCounters",
    "TransportStatus",
    "UdpServer",
    "WARNING_LOGGERS",
    "Waker",
    "format_address",
]
