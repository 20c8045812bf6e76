"""Robot-side transports: thin shells between sockets and the sans-I/O core.

* :class:`TcpServer` and :class:`UdpServer` gate every peer on the schema
  handshake, serve one controller at a time and feed its bytes to a
  :class:`~bcnp.dispatcher.Dispatcher` from a daemon receive thread.
* :class:`ControllerSlot` shared by both servers makes "one controller" hold
  across transports.
* :class:`TransportStatus` is the snapshot a robot publishes.
* :class:`LoopPriority` lets the robot loop run its tick ahead of a flood.
"""

from .base import (
    DEFAULT_PORT,
    Clock,
    ControllerSlot,
    LoopPriority,
    PacketSink,
    TransportConfig,
    TransportStatus,
)
from .tcp import TcpServer
from .udp import MAX_DATAGRAM, UdpServer

__all__ = [
    "DEFAULT_PORT",
    "MAX_DATAGRAM",
    "Clock",
    "ControllerSlot",
    "LoopPriority",
    "PacketSink",
    "TcpServer",
    "TransportConfig",
    "TransportStatus",
    "UdpServer",
]
