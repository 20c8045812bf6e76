"""Wire format: handshake, packet header, packet encode/decode, error codes.

Implements "Wire Format" of the BCNP 3.2 wire spec: an 8-byte handshake
(``b"BCNP"`` + big-endian schema hash) and data packets of a 7-byte header
(major 3, minor 2, flags, type id u16, count u16), ``count * wire_size`` bytes
of payload and an IEEE CRC-32 (u32) over header and payload. All integers are
big-endian.

A decoded packet is a :class:`PacketView`: the checked bytes plus an offset.
Messages are decoded when they are read, never on arrival.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, overload

from .schema import Message, MessageSpec, Schema

__all__ = [
    "CLEAR_QUEUE",
    "CRC_SIZE",
    "HANDSHAKE_MAGIC",
    "HANDSHAKE_SIZE",
    "HEADER_SIZE",
    "MAX_MESSAGES_PER_PACKET",
    "MIN_PACKET_SIZE",
    "PROTOCOL_MAJOR",
    "PROTOCOL_MINOR",
    "ErrorInfo",
    "HandshakeError",
    "PacketDecodeError",
    "PacketError",
    "PacketHeader",
    "PacketView",
    "check_header",
    "decode_packet",
    "encode_handshake",
    "encode_packet",
    "frame_size",
    "parse_handshake",
]

PROTOCOL_MAJOR = 3
PROTOCOL_MINOR = 2
HEADER_SIZE = 7
CRC_SIZE = 4
MIN_PACKET_SIZE = HEADER_SIZE + CRC_SIZE
MAX_MESSAGES_PER_PACKET = 0xFFFF
HANDSHAKE_MAGIC = b"BCNP"
HANDSHAKE_SIZE = 8

#: Header flag bit 0: clear the receiver's queue before queueing this packet.
CLEAR_QUEUE = 0x01

_HEADER = struct.Struct(">BBBHH")
_header_unpack = _HEADER.unpack_from
_U32 = struct.Struct(">I")
_HANDSHAKE = struct.Struct(">4sI")


class PacketError(enum.IntEnum):
    """The spec's parser error codes."""

    TOO_SMALL = 1
    UNSUPPORTED_VERSION = 2
    TOO_MANY_MESSAGES = 3
    TRUNCATED = 4
    CHECKSUM_MISMATCH = 5
    UNKNOWN_MESSAGE_TYPE = 6
    SCHEMA_MISMATCH = 7


class ErrorInfo(NamedTuple):
    """One parse error: its code, the stream offset of the bad frame's first
    byte, and how many errors in a row there have been (a good packet resets it)."""

    code: PacketError
    offset: int
    consecutive_errors: int

    def __str__(self) -> str:
        return f"{self.code.name} at stream offset {self.offset} ({self.consecutive_errors} in a row)"


class PacketDecodeError(ValueError):
    """A buffer that is not one valid packet; ``code`` says why."""

    def __init__(self, code: PacketError, message: str, offset: int = 0) -> None:
        self.code = code
        self.offset = offset
        super().__init__(f"{code.name}: {message}")


class HandshakeError(ValueError):
    """Bytes that are not a BCNP handshake."""


@dataclass(frozen=True)
class PacketHeader:
    """The 7-byte packet header, decoded."""

    major: int
    minor: int
    flags: int
    type_id: int
    count: int


def encode_handshake(schema_hash: int) -> bytes:
    """The 8-byte handshake: ``b"BCNP"`` + the schema hash (u32, big-endian)."""
    if not 0 <= schema_hash <= 0xFFFFFFFF:
        raise ValueError(f"schema hash {schema_hash!r} is not a 32-bit unsigned value")
    return _HANDSHAKE.pack(HANDSHAKE_MAGIC, schema_hash)


def parse_handshake(data: bytes | bytearray | memoryview) -> int:
    """The schema hash carried by an 8-byte handshake.

    Raises :class:`HandshakeError` on a wrong length or magic.
    """
    if len(data) != HANDSHAKE_SIZE:
        raise HandshakeError(
            f"handshake must be {HANDSHAKE_SIZE} bytes, got {len(data)}: {bytes(data[:16]).hex(' ')}"
        )
    magic, schema_hash = _HANDSHAKE.unpack(data)
    if magic != HANDSHAKE_MAGIC:
        raise HandshakeError(f"handshake magic must be b'BCNP', got {magic!r}")
    return int(schema_hash)


def frame_size(spec: MessageSpec, count: int) -> int:
    """Bytes on the wire of a packet of ``count`` messages of ``spec``."""
    return MIN_PACKET_SIZE + count * spec.wire_size


#: A header :func:`check_header` accepted: ``(spec, flags, count, frame size in bytes)``.
#: A plain tuple, because the stream parser builds one per packet.
CheckedHeader = tuple[MessageSpec, int, int, int]


def check_header(
    data: bytes | bytearray | memoryview,
    pos: int,
    specs: Mapping[int, MessageSpec],
    max_messages: int = MAX_MESSAGES_PER_PACKET,
    max_frame: int | None = None,
) -> CheckedHeader | PacketError:
    """The one rule a packet header must pass, for the 7 bytes at ``data[pos:]``.

    Returns the header's spec, flags, count and frame size, or the first rule
    it breaks, in this order: ``UNSUPPORTED_VERSION`` (not 3.2),
    ``UNKNOWN_MESSAGE_TYPE`` (type id not in ``specs``), ``TOO_MANY_MESSAGES``
    (count above ``max_messages`` or frame above ``max_frame``). Whether the
    frame's bytes are all there and its CRC matches is the caller's to check.
    ``data`` must hold at least :data:`HEADER_SIZE` bytes from ``pos``.

    Tell the two apart with ``isinstance(result, tuple)``, as the stream
    parser does once per packet: an ``isinstance`` test against the enum class
    costs several times more (it goes through the enum's metaclass).
    """
    major, minor, flags, type_id, count = _header_unpack(data, pos)
    if major != PROTOCOL_MAJOR or minor != PROTOCOL_MINOR:
        return PacketError.UNSUPPORTED_VERSION
    spec = specs.get(type_id)
    if spec is None:
        return PacketError.UNKNOWN_MESSAGE_TYPE
    frame = MIN_PACKET_SIZE + count * spec.wire_size
    if count > max_messages or (max_frame is not None and frame > max_frame):
        return PacketError.TOO_MANY_MESSAGES
    return spec, flags, count, frame


class PacketView:
    """A checked packet: the bytes it arrived in and where its payload starts.

    ``len()`` is the message count; indexing and iteration decode messages
    when they are read. ``raw(i)`` gives the wire integers of message ``i``.
    The view keeps a reference to the immutable bytes it was parsed from,
    never a copy per message: readers that must not build a message object
    unpack fields straight from :attr:`buffer` at :attr:`payload_offset`.
    """

    # Plain slots, not properties, even for the two read-only ones: the queue
    # reads both for every packet it takes, and two property calls would cost
    # the small-packet ingest path about 5 %. ``Final`` keeps them read-only
    # for the type checker.
    __slots__ = ("spec", "flags", "type_id", "count", "buffer", "payload_offset")

    def __init__(self, spec: MessageSpec, flags: int, count: int, data: bytes, offset: int) -> None:
        self.spec = spec
        self.flags = flags
        self.type_id = spec.id
        self.count = count
        #: The immutable bytes this packet was parsed from, shared, never copied.
        #: They may hold other packets too: message ``i`` is the
        #: ``spec.wire_size`` bytes at ``payload_offset + i * spec.wire_size``.
        self.buffer: Final[bytes] = data
        #: Index in :attr:`buffer` of the first payload byte (the first message).
        self.payload_offset: Final[int] = offset

    @property
    def header(self) -> PacketHeader:
        return PacketHeader(PROTOCOL_MAJOR, PROTOCOL_MINOR, self.flags, self.type_id, self.count)

    @property
    def clear_queue(self) -> bool:
        return bool(self.flags & CLEAR_QUEUE)

    @property
    def payload(self) -> memoryview:
        start = self.payload_offset
        return memoryview(self.buffer)[start : start + self.count * self.spec.wire_size]

    @property
    def wire_size(self) -> int:
        """Size of the whole packet on the wire, header and CRC included."""
        return frame_size(self.spec, self.count)

    def to_bytes(self) -> bytes:
        """The packet exactly as it was on the wire."""
        start = self.payload_offset - HEADER_SIZE
        return bytes(self.buffer[start : start + self.wire_size])

    def __len__(self) -> int:
        return self.count

    def raw(self, index: int) -> tuple[int, ...]:
        if not 0 <= index < self.count:
            raise IndexError(f"message index {index} out of range 0..{self.count - 1}")
        spec = self.spec
        return spec.struct.unpack_from(self.buffer, self.payload_offset + index * spec.wire_size)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.count))]
        if index < 0:
            index += self.count
        return self.spec.message_from_raw(self.raw(index))

    def __iter__(self) -> Iterator[Message]:
        return map(self.spec.message_from_raw, self.iter_raw())

    def iter_raw(self) -> Iterator[tuple[int, ...]]:
        return self.spec.struct.iter_unpack(self.payload)

    def __repr__(self) -> str:
        flags = " CLEAR_QUEUE" if self.clear_queue else ""
        return f"<PacketView {self.spec.name} x{self.count}{flags}>"


def encode_packet(
    spec: MessageSpec, messages: Iterable[Message | Sequence[Any] | dict[str, Any]] = (), flags: int = 0
) -> bytes:
    """One packet of ``messages`` (all of ``spec``'s type) with ``flags``.

    ``messages`` may hold messages built by ``spec`` or plain sequences /
    mappings of field values (validated here). Raises ``ValueError`` for a
    batch over 65,535 messages, bad flags or a value out of range.
    """
    if not isinstance(messages, Sequence):
        messages = list(messages)
    count = len(messages)
    if count > MAX_MESSAGES_PER_PACKET:
        raise ValueError(
            f"{count} messages do not fit one packet (at most {MAX_MESSAGES_PER_PACKET}); split the batch"
        )
    if not 0 <= flags <= 0xFF:
        raise ValueError(f"flags must fit one byte, got {flags!r}")
    header = _HEADER.pack(PROTOCOL_MAJOR, PROTOCOL_MINOR, flags, spec.id, count)
    payload = spec.pack_messages(messages)
    crc = zlib.crc32(payload, zlib.crc32(header))
    return b"".join((header, payload, _U32.pack(crc)))


def decode_packet(schema: Schema, data: bytes | bytearray | memoryview) -> PacketView:
    """Decode one complete packet held in ``data`` (exactly one, nothing more).

    Raises :class:`PacketDecodeError` with the matching :class:`PacketError`.
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    size = len(data)
    if size < MIN_PACKET_SIZE:
        raise PacketDecodeError(
            PacketError.TOO_SMALL, f"{size} bytes is below the {MIN_PACKET_SIZE}-byte minimum packet"
        )
    header = check_header(data, 0, schema.by_id)
    if not isinstance(header, tuple):
        major, minor, _, type_id, _ = _header_unpack(data)
        if header is PacketError.UNSUPPORTED_VERSION:
            detail = f"version {major}.{minor}, this implementation speaks {PROTOCOL_MAJOR}.{PROTOCOL_MINOR}"
        else:  # without limits, an unknown type is the only other reason
            detail = f"message type id {type_id} is not in the schema"
        raise PacketDecodeError(header, detail)
    spec, flags, count, expected = header
    if size < expected:
        raise PacketDecodeError(
            PacketError.TRUNCATED,
            f"{count} x {spec.name} needs {expected} bytes, the buffer holds {size}",
        )
    if size > expected:
        raise PacketDecodeError(
            PacketError.SCHEMA_MISMATCH,
            f"{count} x {spec.name} is {expected} bytes but the buffer holds {size}: "
            "the sender's message layout differs from this schema, or extra bytes follow",
        )
    body = memoryview(data)[: expected - CRC_SIZE]
    (sent_crc,) = _U32.unpack_from(data, expected - CRC_SIZE)
    crc = zlib.crc32(body)
    if crc != sent_crc:
        raise PacketDecodeError(
            PacketError.CHECKSUM_MISMATCH, f"CRC 0x{sent_crc:08X} sent, 0x{crc:08X} computed"
        )
    return PacketView(spec, flags, count, data, HEADER_SIZE)
