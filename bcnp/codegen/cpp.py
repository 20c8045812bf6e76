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
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

from ..schema import FieldSpec, MessageSpec, Schema, is_cpp_namespace, version_is_supported
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

# Width the generated lines keep to where the names allow (aligned field comments may run over).
_LINE_WIDTH = 100

_LINE_SPLICE = re.compile(r"(\\|\?\?/)+$")

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
        _SCALAR_HELPERS,
        *(_message_struct(spec) for spec in schema.messages),
        _registry(schema),
        _packet_status(),
        _PACKET_HELPERS,
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


# --------------------------------------------------------------------------- text helpers


def _comment_text(text: str) -> str:
    """``text`` as comment text that stays on its line, however it is wrapped.

    Whitespace runs (newlines included) become one space and control
    characters a space. A backslash (or ``??/``) ending a word is dropped: at
    the end of a line it would splice the next source line into the comment.
    """
    printable = "".join(ch if ch.isprintable() else " " for ch in text)
    words = (_LINE_SPLICE.sub("", word) for word in printable.split())
    return " ".join(word for word in words if word)


def _cpp_type(field: FieldSpec) -> str:
    ftype = field.field_type
    if ftype.is_float:
        return "float"
    return f"std::{'' if ftype.raw_min < 0 else 'u'}int{ftype.size * 8}_t"


def _wire_suffix(field: FieldSpec) -> str:
    """Suffix of the detail::Put/Get helper for the field's wire integer: U8, I32, ..."""
    ftype = field.field_type
    return f"{'I' if ftype.raw_min < 0 else 'U'}{ftype.size * 8}"


def _aligned(rows: Iterable[tuple[str, str]], indent: str) -> list[str]:
    """Lines of ``code  // comment`` with the comments aligned."""
    rows = list(rows)
    width = max(len(code) for code, _ in rows)
    return [f"{indent}{code:<{width}}  // {comment}".rstrip() for code, comment in rows]


# --------------------------------------------------------------------------- sections


def _preamble(schema: Schema) -> str:
    source = _comment_text(source_name(schema))
    lines = [
        f"// Generated by {GENERATOR} from {source} (schema hash 0x{schema.hash:08X}). Do not edit:",
        "// change the schema and run the generator again.",
        "//",
        f"// BCNP {schema.version} message types for C++17, standard headers only.",
    ]
    if schema.description:
        text = f"Schema: {_comment_text(schema.description)}"
        lines += [f"// {line}" for line in textwrap.wrap(text, _LINE_WIDTH - 3, break_long_words=False)]
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
// ---------------------------------------------------------------------------- protocol constants

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
    lines = [
        "// ---------------------------------------------------------------------------- message types",
        "",
        "enum class MessageTypeId : std::uint16_t {",
        "  Unknown = 0,",
        *(f"  {spec.name} = {spec.id}," for spec in schema.messages),
        "};",
        "",
        "// Wire size of each message, in bytes.",
        *(f"inline constexpr std::size_t k{spec.name}Size = {spec.wire_size};" for spec in schema.messages),
        "",
    ]
    return "\n".join(lines)


def _field_comment(field: FieldSpec) -> str:
    parts = [field.type]
    if field.is_float:
        default = "" if field.scale is not None else " (default)"
        parts.append(f"scale {field.effective_scale}{default}")
    if field.unit:
        parts.append(_comment_text(field.unit))
    text = ", ".join(parts)
    if field.description:
        text += f": {_comment_text(field.description)}"
    return text


def _doc_comment(text: str, indent: str = "") -> list[str]:
    """``///`` lines holding ``text`` wrapped to the header's line width."""
    width = _LINE_WIDTH - len(indent) - 4
    return [f"{indent}/// {line}" for line in textwrap.wrap(text, width, break_long_words=False)]


def _if_any(conditions: list[str], indent: str) -> list[str]:
    """``if (a || b) {`` on one line, or one condition per line when that is too long."""
    line = f"{indent}if ({' || '.join(conditions)}) {{"
    if len(line) <= _LINE_WIDTH:
        return [line]
    head = f"{indent}if ("
    pad = " " * len(head)
    lines = [f"{head if i == 0 else pad}{cond} ||" for i, cond in enumerate(conditions)]
    lines[-1] = lines[-1].removesuffix(" ||") + ") {"
    return lines


def _message_struct(spec: MessageSpec) -> str:
    summary = f"{spec.name}: type id {spec.id}, {spec.wire_size} bytes on the wire."
    if spec.description:
        summary = f"{_comment_text(spec.description)} ({summary[:-1]})."
    floats = [f for f in spec.fields if f.is_float]
    decode_head = f"  static std::optional<{spec.name}> Decode("
    decode_params = "const std::uint8_t* in_buf, std::size_t buf_size) {"
    if len(decode_head) + len(decode_params) <= _LINE_WIDTH:
        decode_signature = [decode_head + decode_params]
    else:
        pad = " " * len(decode_head)
        decode_signature = [f"{decode_head}const std::uint8_t* in_buf,", f"{pad}std::size_t buf_size) {{"]
    lines = [
        *_doc_comment(summary),
        f"struct {spec.name} {{",
        f"  static constexpr MessageTypeId kTypeId = MessageTypeId::{spec.name};",
        f"  static constexpr std::size_t kWireSize = {spec.wire_size};",
        "",
        *_aligned(
            (
                (f"{_cpp_type(f)} {f.name} = {'0.0F' if f.is_float else '0'};", _field_comment(f))
                for f in spec.fields
            ),
            "  ",
        ),
        "",
        "  /// Writes the kWireSize bytes of this message to out_buf. False, with nothing written, when",
        "  /// buf_size < kWireSize or a float32 field is NaN, infinite or out of the int32 range scaled.",
        "  bool Encode(std::uint8_t* out_buf, std::size_t buf_size) const {",
        *(
            f"    const auto {f.name}_wire = detail::ScaleToWire({f.name}, {f.effective_scale});"
            for f in floats
        ),
        *_if_any(["buf_size < kWireSize", *(f"!{f.name}_wire" for f in floats)], "    "),
        "      return false;",
        "    }",
    ]
    for f in spec.fields:
        value = f"*{f.name}_wire" if f.is_float else f.name
        lines.append(f"    detail::Put{_wire_suffix(f)}(out_buf + {f.offset}, {value});")
    lines += [
        "    return true;",
        "  }",
        "",
        "  /// Reads a message from the first kWireSize bytes of in_buf; nullopt when buf_size < kWireSize.",
        *decode_signature,
        "    if (buf_size < kWireSize) {",
        "      return std::nullopt;",
        "    }",
    ]
    reads = []
    for f in spec.fields:
        read = f"detail::Get{_wire_suffix(f)}(in_buf + {f.offset})"
        if f.is_float:
            read = f"detail::ScaleFromWire({read}, {f.effective_scale})"
        reads.append((f"{read},", f.name))
    lines += [
        f"    return {spec.name}{{",
        *_aligned(reads, "        "),
        "    };",
        "  }",
        "};",
        "",
    ]
    return "\n".join(lines)


def _registry(schema: Schema) -> str:
    entries = [f'    {{MessageTypeId::{s.name}, "{s.name}", k{s.name}Size}},' for s in schema.messages]
    return "\n".join(
        [
            "// ---------------------------------------------------------------------------- registry",
            "",
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
        ]
    )


def _status_name(error: PacketError) -> str:
    return "".join(word.capitalize() for word in error.name.split("_"))


def _packet_status() -> str:
    statuses = [("Ok", 0), *((_status_name(e), e.value) for e in PacketError)]
    statuses.append((_WRONG_MESSAGE_TYPE, max(e.value for e in PacketError) + 1))
    return "\n".join(
        [
            "// ---------------------------------------------------------------------------- packets",
            "",
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
        ]
    )


# --------------------------------------------------------------------------- fixed C++ text

_SCALAR_HELPERS = """\
namespace detail {

inline void PutU8(std::uint8_t* out, std::uint8_t value) { out[0] = value; }

inline void PutU16(std::uint8_t* out, std::uint16_t value) {
  out[0] = static_cast<std::uint8_t>(value >> 8);
  out[1] = static_cast<std::uint8_t>(value);
}

inline void PutU32(std::uint8_t* out, std::uint32_t value) {
  out[0] = static_cast<std::uint8_t>(value >> 24);
  out[1] = static_cast<std::uint8_t>(value >> 16);
  out[2] = static_cast<std::uint8_t>(value >> 8);
  out[3] = static_cast<std::uint8_t>(value);
}

// Signed to unsigned conversion is modulo 2^N, so these write the two's complement bytes.
inline void PutI8(std::uint8_t* out, std::int8_t value) {
  PutU8(out, static_cast<std::uint8_t>(value));
}
inline void PutI16(std::uint8_t* out, std::int16_t value) {
  PutU16(out, static_cast<std::uint16_t>(value));
}
inline void PutI32(std::uint8_t* out, std::int32_t value) {
  PutU32(out, static_cast<std::uint32_t>(value));
}

constexpr std::uint8_t GetU8(const std::uint8_t* in) { return in[0]; }

constexpr std::uint16_t GetU16(const std::uint8_t* in) {
  return static_cast<std::uint16_t>((in[0] << 8) | in[1]);
}

constexpr std::uint32_t GetU32(const std::uint8_t* in) {
  return (static_cast<std::uint32_t>(in[0]) << 24) | (static_cast<std::uint32_t>(in[1]) << 16) |
         (static_cast<std::uint32_t>(in[2]) << 8) | static_cast<std::uint32_t>(in[3]);
}

// intN_t is two's complement without padding by definition, so copying the bits converts
// exactly (a cast to a signed type is implementation-defined before C++20).
template <typename Signed, typename Unsigned>
Signed FromTwosComplement(Unsigned bits) {
  static_assert(sizeof(Signed) == sizeof(Unsigned), "same width");
  Signed value{};
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline std::int8_t GetI8(const std::uint8_t* in) {
  return FromTwosComplement<std::int8_t>(GetU8(in));
}
inline std::int16_t GetI16(const std::uint8_t* in) {
  return FromTwosComplement<std::int16_t>(GetU16(in));
}
inline std::int32_t GetI32(const std::uint8_t* in) {
  return FromTwosComplement<std::int32_t>(GetU32(in));
}

// value * scale rounded half away from zero (std::round, like llround), in double: the one
// rounding of that product is the Python encoder's, so both give the same int32 for every
// float. NaN, infinities and results outside int32 give nullopt: refused, never clamped.
inline std::optional<std::int32_t> ScaleToWire(float value, std::int32_t scale) {
  if (!std::isfinite(value)) {
    return std::nullopt;
  }
  const double scaled = std::round(static_cast<double>(value) * scale);
  if (scaled < -2147483648.0 || scaled > 2147483647.0) {
    return std::nullopt;
  }
  return static_cast<std::int32_t>(scaled);
}

inline float ScaleFromWire(std::int32_t raw, std::int32_t scale) {
  return static_cast<float>(raw / static_cast<double>(scale));
}

}  // namespace detail

// ---------------------------------------------------------------------------- messages
"""

_PACKET_HELPERS = """\
/// The 7-byte packet header, decoded.
struct PacketHeader {
  std::uint8_t major;
  std::uint8_t minor;
  std::uint8_t flags;
  std::uint16_t typeId;
  std::uint16_t count;
};

namespace detail {

constexpr std::array<std::uint32_t, 256> MakeCrc32Table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1u) != 0 ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    table[byte] = crc;
  }
  return table;
}

inline constexpr std::array<std::uint32_t, 256> kCrc32Table = MakeCrc32Table();

}  // namespace detail

/// IEEE CRC-32 (reflected polynomial 0xEDB88320, what zlib.crc32 computes) of data[0, size).
/// Pass an earlier result as crc to continue it over more bytes, like zlib.crc32(data, crc).
inline std::uint32_t Crc32(const std::uint8_t* data, std::size_t size, std::uint32_t crc = 0) {
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) {
    crc = detail::kCrc32Table[(crc ^ data[i]) & 0xFFu] ^ (crc >> 8);
  }
  return ~crc;
}

/// The handshake both sides send first: kHandshakeMagic then schema_hash, big-endian.
constexpr std::array<std::uint8_t, kHandshakeSize> EncodeHandshake(
    std::uint32_t schema_hash = kSchemaHash) {
  std::array<std::uint8_t, kHandshakeSize> out{};
  for (std::size_t i = 0; i < kHandshakeMagic.size(); ++i) {
    out[i] = kHandshakeMagic[i];
  }
  out[4] = static_cast<std::uint8_t>(schema_hash >> 24);
  out[5] = static_cast<std::uint8_t>(schema_hash >> 16);
  out[6] = static_cast<std::uint8_t>(schema_hash >> 8);
  out[7] = static_cast<std::uint8_t>(schema_hash);
  return out;
}

/// The schema hash carried by the handshake in data[0, kHandshakeSize); nullopt when size is
/// smaller or the magic is wrong. Bytes after the handshake are not looked at.
constexpr std::optional<std::uint32_t> ParseHandshake(const std::uint8_t* data, std::size_t size) {
  if (size < kHandshakeSize) {
    return std::nullopt;
  }
  for (std::size_t i = 0; i < kHandshakeMagic.size(); ++i) {
    if (data[i] != kHandshakeMagic[i]) {
      return std::nullopt;
    }
  }
  return detail::GetU32(data + kHandshakeMagic.size());
}

/// True when data starts with a handshake carrying expected_hash (by default this schema's).
constexpr bool ValidateHandshake(const std::uint8_t* data, std::size_t size,
                                 std::uint32_t expected_hash = kSchemaHash) {
  const std::optional<std::uint32_t> hash = ParseHandshake(data, size);
  return hash.has_value() && *hash == expected_hash;
}

/// Bytes on the wire of a packet of count messages of wire_size bytes each.
constexpr std::size_t PacketSize(std::size_t wire_size, std::size_t count) {
  return kHeaderSizeV3 + count * wire_size + kCrcSize;
}

/// One packet (header, payload, CRC) of messages[0, count), all of type Message, with flags.
/// nullopt when count exceeds kMaxMessagesPerPacket or a message does not encode.
template <typename Message>
std::optional<std::vector<std::uint8_t>> EncodePacket(const Message* messages, std::size_t count,
                                                      std::uint8_t flags = 0) {
  if (count > kMaxMessagesPerPacket) {
    return std::nullopt;
  }
  std::vector<std::uint8_t> packet(PacketSize(Message::kWireSize, count));
  std::uint8_t* out = packet.data();
  out[0] = kProtocolMajorV3;
  out[1] = kProtocolMinorV3;
  out[2] = flags;
  detail::PutU16(out + 3, static_cast<std::uint16_t>(Message::kTypeId));
  detail::PutU16(out + 5, static_cast<std::uint16_t>(count));
  for (std::size_t i = 0; i < count; ++i) {
    if (!messages[i].Encode(out + kHeaderSizeV3 + i * Message::kWireSize, Message::kWireSize)) {
      return std::nullopt;
    }
  }
  const std::size_t body_size = packet.size() - kCrcSize;
  detail::PutU32(out + body_size, Crc32(out, body_size));
  return packet;
}

template <typename Message>
std::optional<std::vector<std::uint8_t>> EncodePacket(const std::vector<Message>& messages,
                                                      std::uint8_t flags = 0) {
  return EncodePacket(messages.data(), messages.size(), flags);
}

/// Checks that data[0, size) holds exactly one packet, in the order of the Python decode_packet:
/// TooSmall, UnsupportedVersion, UnknownMessageType (not in this schema), Truncated (fewer
/// bytes than header says), SchemaMismatch (more bytes), ChecksumMismatch. header is filled in
/// once the size allows reading it.
inline PacketStatus ValidatePacket(const std::uint8_t* data, std::size_t size,
                                   PacketHeader& header) {
  if (size < kMinPacketSize) {
    return PacketStatus::TooSmall;
  }
  header = PacketHeader{data[0], data[1], data[2], detail::GetU16(data + 3),
                        detail::GetU16(data + 5)};
  if (header.major != kProtocolMajorV3 || header.minor != kProtocolMinorV3) {
    return PacketStatus::UnsupportedVersion;
  }
  const MessageInfo* info = LookupMessage(header.typeId);
  if (info == nullptr) {
    return PacketStatus::UnknownMessageType;
  }
  const std::size_t expected = PacketSize(info->wireSize, header.count);
  if (size < expected) {
    return PacketStatus::Truncated;
  }
  if (size > expected) {
    return PacketStatus::SchemaMismatch;
  }
  const std::size_t body_size = expected - kCrcSize;
  if (detail::GetU32(data + body_size) != Crc32(data, body_size)) {
    return PacketStatus::ChecksumMismatch;
  }
  return PacketStatus::Ok;
}

/// A packet read by DecodePacket: messages is filled only when status is Ok.
template <typename Message>
struct DecodedPacket {
  PacketStatus status = PacketStatus::Ok;
  PacketHeader header{};
  std::vector<Message> messages;
};

/// Validates data[0, size) as one packet of Message (see ValidatePacket) and decodes its messages.
template <typename Message>
DecodedPacket<Message> DecodePacket(const std::uint8_t* data, std::size_t size) {
  DecodedPacket<Message> result;
  result.status = ValidatePacket(data, size, result.header);
  if (result.status != PacketStatus::Ok) {
    return result;
  }
  if (result.header.typeId != static_cast<std::uint16_t>(Message::kTypeId)) {
    result.status = PacketStatus::WrongMessageType;
    return result;
  }
  result.messages.reserve(result.header.count);
  for (std::size_t i = 0; i < result.header.count; ++i) {
    const std::uint8_t* in = data + kHeaderSizeV3 + i * Message::kWireSize;
    if (std::optional<Message> message = Message::Decode(in, Message::kWireSize)) {
      result.messages.push_back(*message);
    }
  }
  return result;
}

template <typename Message>
DecodedPacket<Message> DecodePacket(const std::vector<std::uint8_t>& packet) {
  return DecodePacket<Message>(packet.data(), packet.size());
}
"""
