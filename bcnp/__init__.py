"""BCNP (Batched Command Network Protocol) 3.2 in Python: both ends of the link.

This package is the protocol and what speaks it, never the robot program itself (``robot.py``,
``subsystems/``, ``autonomous/`` beside it): the core both ends share, here; the robot's
transports (:mod:`bcnp.transport`: its TCP and UDP servers); the host's client, sessions, fault
proxy and command line (:mod:`bcnp.host`, ``python -m bcnp``); path files (:mod:`bcnp.paths`);
and the schema's code generator (:mod:`bcnp.codegen`).

The core is sans-I/O: it takes bytes and a ``now`` value in seconds and never
opens a socket, starts a thread or reads a clock.

* :func:`load_schema` → :class:`Schema` of :class:`MessageSpec` (hash, messages)
* :class:`Connection` → one connection's handshake, framing and liveness (sans-I/O)
* :func:`encode_handshake` / :func:`parse_handshake`
* :func:`encode_packet` / :func:`decode_packet` → :class:`PacketView`
* :class:`StreamParser` → packets out of a byte stream, with resync
* :class:`Dispatcher` → packets to per-type handlers, liveness
* :class:`MessageQueue` → timed execution of queued commands
* :class:`TelemetryAccumulator` → robot-to-host batching
"""

from .connection import (
    Connection,
    ConnectionState,
    HandshakeAccepted,
    HandshakeFailure,
    HandshakeRejected,
    IdleTimeout,
)
from .dispatcher import Dispatcher, PacketHandler
from .parser import StreamParser
from .queue import MessageQueue, MessageQueueConfig, QueueMetrics
from .schema import (
    DEFAULT_FLOAT_SCALE,
    FIELD_TYPES,
    FieldSpec,
    Message,
    MessageSpec,
    Schema,
    SchemaError,
    compute_schema_hash,
    load_schema,
    validate_schema_document,
)
from .telemetry import TelemetryAccumulator, TelemetryMetrics
from .wire import (
    CLEAR_QUEUE,
    HANDSHAKE_MAGIC,
    HANDSHAKE_SIZE,
    HEADER_SIZE,
    MAX_MESSAGES_PER_PACKET,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    ErrorInfo,
    HandshakeError,
    PacketDecodeError,
    PacketError,
    PacketHeader,
    PacketView,
    decode_packet,
    encode_handshake,
    encode_packet,
    frame_size,
    parse_handshake,
)

__version__ = "0.1.0"

__all__ = [
    "CLEAR_QUEUE",
    "DEFAULT_FLOAT_SCALE",
    "FIELD_TYPES",
    "HANDSHAKE_MAGIC",
    "HANDSHAKE_SIZE",
    "HEADER_SIZE",
    "MAX_MESSAGES_PER_PACKET",
    "PROTOCOL_MAJOR",
    "PROTOCOL_MINOR",
    "Connection",
    "ConnectionState",
    "Dispatcher",
    "ErrorInfo",
    "FieldSpec",
    "HandshakeAccepted",
    "HandshakeError",
    "HandshakeFailure",
    "HandshakeRejected",
    "IdleTimeout",
    "Message",
    "MessageQueue",
    "MessageQueueConfig",
    "MessageSpec",
    "PacketDecodeError",
    "PacketError",
    "PacketHandler",
    "PacketHeader",
    "PacketView",
    "QueueMetrics",
    "Schema",
    "SchemaError",
    "StreamParser",
    "TelemetryAccumulator",
    "TelemetryMetrics",
    "compute_schema_hash",
    "decode_packet",
    "encode_handshake",
    "encode_packet",
    "frame_size",
    "load_schema",
    "parse_handshake",
    "validate_schema_document",
]
