"""C++17 header generator: ``message_types.h`` for a loaded schema.

The header gives a C++ host or robot program everything it needs to speak BCNP
3.2 with this schema and nothing else (standard headers only): the protocol
constants of the wire spec, ``MessageTypeId``, one struct per message with
big-endian ``Encode``/``Decode``, a registry of id, name and wire size, the
IEEE CRC-32, handshake helpers and whole-packet ``EncodePacket`` /
``ValidatePacket`` / ``DecodePacket``.

Everything is taken from the loaded :class:`~bcnp.schema.Schema` (ids, field
types, offsets, wire sizes, effective scales, hash) and the constants of
:mod:`bcnp.wire`, so the header and the Python codec cannot disagree. float32
fields are encoded as ``llround(double(value) * scale)`` — halves away from
zero, computed in double — which gives the bytes ``FieldSpec.to_wire`` gives
for every float; values that are NaN, infinite or leave int32 once scaled are
refused (``Encode`` returns false), never clamped.

This module checks that the header can express the schema and puts it
together: the preamble, constants, type ids, registry and packet statuses.
Each message's struct comes from :mod:`bcnp.codegen.cpp_message`, the text
that is the same for every schema from :mod:`bcnp.codegen.cpp_fixed`, and
the helpers for comment text, wrapping and section rules from
:mod:`bcnp.codegen.cpp_format`.
"""

from __future__ import annotations

from ..schema import Schema
from ..schema_rules import is_cpp_namespace, version_is_supported
from ..wire import (
    CLEAR_QUEUE,
    CRC_SIZE,
    HANDSHAKE_MAGIC,
    HANDSHAKE_SIZE,
    HEADER_SIZE,
    MAX_MESSAGES_PER_PACKET,
    MIN_PACKET_SIZE,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    PacketError,
)
from . import GENERATOR, source_name
from .cpp_fixed import PACKET_HELPERS, SCALAR_HELPERS
from .cpp_format import comment_lines, comment_text, rule, section
from .cpp_message import message_struct

__all__ = ["DEFAULT_NAMESPACE", "GENERATOR", "render_cpp"]

#: Namespace of the generated code when the schema names none.
DEFAULT_NAMESPACE = "bcnp"


# Names the header declares at namespace scope besides the per-message ones; a
# message called like one of them (or whose k<Name>Size is one) cannot be generated.
_NAMESPACE_NAMES = frozenset(
    """kProtocolMajorV3 kProtocolMinorV3 kSchemaVersion kSchemaHash kHandshakeSize
    kHandshakeMagic kHeaderSizeV3 kCrcSize kMinPacketSize kMaxMessagesPerPacket kFlagClearQueue
    kMessageRegistry MessageTypeId MessageInfo LookupMessage PacketStatus PacketStatusName
    PacketHeader DecodedPacket Crc32 EncodeHandshake ParseHandshake ValidateHandshake PacketSize
    EncodePacket ValidatePacket DecodePacket""".split()
)

# Extra PacketStatus value (C++ only): DecodePacket<T> got a valid packet of another type.
_WRONG_MESSAGE_TYPE = "WrongMessageType"


def render_cpp(schema: Schema) -> str:
    """The full text of ``message_types.h`` for ``schema``.

    Deterministic: the same schema always gives the same text. Raises
    ``ValueError`` for a schema the header cannot express (a namespace that is
    not a C++ namespace name, a message name that collides with a name the
    header declares, or a version whose packets are not major 3, minor 2).
    """
    namespace = _namespace(schema)
    _check_names(schema)
    if not version_is_supported(schema.version):
        raise ValueError(
            f"schema version {schema.version!r}: the C++ header speaks BCNP "
            f"{PROTOCOL_MAJOR}.{PROTOCOL_MINOR} only"
        )
    parts = [
        _preamble(schema),
        f"namespace {namespace} {{\n",
        _constants(schema),
        _type_ids(schema),
        SCALAR_HELPERS,
        section("messages", (message_struct(spec) for spec in schema.messages)),
        _registry(schema),
        _packet_status(),
        PACKET_HELPERS,
        f"}}  // namespace {namespace}\n",
    ]
    return "\n".join(parts)


# --------------------------------------------------------------------------- checks


def _namespace(schema: Schema) -> str:
    namespace = DEFAULT_NAMESPACE if schema.namespace is None else schema.namespace
    if not is_cpp_namespace(namespace):
        raise ValueError(
            f"namespace {namespace!r} is not usable in C++: each '::'-separated part must be an "
            "identifier that is not a keyword, 'std' or reserved (contains '__')"
        )
    return namespace


def _check_names(schema: Schema) -> None:
    # The loader already refuses the names of struct members (kTypeId, kWireSize) as field
    # names and a few of the header's names as message names; the rest are checked here.
    problems = [
        f"message {spec.name!r}: {name!r} is already declared by the C++ header"
        for spec in schema.messages
        for name in (spec.name, f"k{spec.name}Size")
        if name in _NAMESPACE_NAMES
    ]
    if problems:
        raise ValueError("\n".join(problems))


# --------------------------------------------------------------------------- sections


def _preamble(schema: Schema) -> str:
    source = comment_text(source_name(schema))
    lines = [
        f"// Generated by {GENERATOR} from {source} (schema hash 0x{schema.hash:08X}). Do not edit:",
        "// change the schema and run the generator again.",
        "//",
        f"// BCNP {schema.version} message types for C++17, standard headers only.",
    ]
    if schema.description:
        lines += comment_lines(f"Schema: {comment_text(schema.description)}", "// ")
    lines += [
        "//",
        "// All integers on the wire are big-endian. A float32 field travels as the int32",
        "// llround(double(value) * scale) (halves away from zero); Encode refuses NaN, infinities and",
        "// values whose scaled result leaves int32 rather than clamping them. Decode gives",
        "// static_cast<float>(raw / double(scale)).",
        "",
        "#pragma once",
        "",
        "#include <array>",
        "#include <cmath>",
        "#include <cstddef>",
        "#include <cstdint>",
        "#include <cstring>",
        "#include <optional>",
        "#include <vector>",
        "",
    ]
    return "\n".join(lines)


def _constants(schema: Schema) -> str:
    magic = ", ".join(f"0x{b:02X}" for b in HANDSHAKE_MAGIC)
    magic_text = HANDSHAKE_MAGIC.decode("ascii")
    return f"""\
{rule("protocol constants")}

inline constexpr std::uint8_t kProtocolMajorV3 = {PROTOCOL_MAJOR};
inline constexpr std::uint8_t kProtocolMinorV3 = {PROTOCOL_MINOR};
inline constexpr const char* kSchemaVersion = "{schema.version}";
/// CRC-32 of the schema's canonical JSON; both sides send it in the handshake.
inline constexpr std::uint32_t kSchemaHash = 0x{schema.hash:08X}u;

/// Handshake: the magic "{magic_text}" then kSchemaHash (u32), {HANDSHAKE_SIZE} bytes.
inline constexpr std::size_t kHandshakeSize = {HANDSHAKE_SIZE};
/// The handshake magic as its four wire bytes, in order: '{"', '".join(magic_text)}'.
inline constexpr std::array<std::uint8_t, 4> kHandshakeMagic = {{{magic}}};

/// Packet: header (major, minor, flags, type id u16, count u16), payload, CRC-32 (u32).
inline constexpr std::size_t kHeaderSizeV3 = {HEADER_SIZE};
inline constexpr std::size_t kCrcSize = {CRC_SIZE};
inline constexpr std::size_t kMinPacketSize = {MIN_PACKET_SIZE};
inline constexpr std::size_t kMaxMessagesPerPacket = {MAX_MESSAGES_PER_PACKET};
/// Header flag bit 0: clear the receiver's queue before queueing this packet.
inline constexpr std::uint8_t kFlagClearQueue = 0x{CLEAR_QUEUE:02X};
"""


def _type_ids(schema: Schema) -> str:
    return section(
        "message types",
        [
            "enum class MessageTypeId : std::uint16_t {",
            "  Unknown = 0,",
            *(f"  {spec.name} = {spec.id}," for spec in schema.messages),
            "};",
            "",
            "// Wire size of each message, in bytes.",
            *(
                f"inline constexpr std::size_t k{spec.name}Size = {spec.wire_size};"
                for spec in schema.messages
            ),
            "",
        ],
    )


def _registry(schema: Schema) -> str:
    entries = [f'    {{MessageTypeId::{s.name}, "{s.name}", k{s.name}Size}},' for s in schema.messages]
    return section(
        "registry",
        [
            "struct MessageInfo {",
            "  MessageTypeId id;",
            "  const char* name;",
            "  std::size_t wireSize;",
            "};",
            "",
            "/// Every message of the schema, by ascending type id.",
            f"inline constexpr std::array<MessageInfo, {len(schema.messages)}> kMessageRegistry = {{{{",
            *entries,
            "}};",
            "",
            "/// The registry entry of a type id, or nullptr when the schema has no such message.",
            "constexpr const MessageInfo* LookupMessage(std::uint16_t type_id) {",
            "  for (const MessageInfo& info : kMessageRegistry) {",
            "    if (static_cast<std::uint16_t>(info.id) == type_id) {",
            "      return &info;",
            "    }",
            "  }",
            "  return nullptr;",
            "}",
            "",
            "constexpr const MessageInfo* LookupMessage(MessageTypeId id) {",
            "  return LookupMessage(static_cast<std::uint16_t>(id));",
            "}",
            "",
        ],
    )


def _status_name(error: PacketError) -> str:
    return "".join(word.capitalize() for word in error.name.split("_"))


def _packet_status() -> str:
    statuses = [("Ok", 0), *((_status_name(e), e.value) for e in PacketError)]
    statuses.append((_WRONG_MESSAGE_TYPE, max(e.value for e in PacketError) + 1))
    return section(
        "packets",
        [
            "/// Outcome of reading a packet: Ok, or the wire spec's error codes (same numbers as the",
            f"/// Python PacketError), plus {_WRONG_MESSAGE_TYPE}: DecodePacket<T> was given a valid packet",
            "/// of another message type (use ValidatePacket and header.typeId to dispatch).",
            "enum class PacketStatus : std::uint8_t {",
            *(f"  {name} = {value}," for name, value in statuses),
            "};",
            "",
            "constexpr const char* PacketStatusName(PacketStatus status) {",
            "  switch (status) {",
            *(f'    case PacketStatus::{name}:\n      return "{name}";' for name, _ in statuses),
            "  }",
            '  return "?";',
            "}",
            "",
        ],
    )
