"""The C++ header's fixed text, the same for every schema.

* :data:`SCALAR_HELPERS`: ``detail::`` big-endian byte writers and readers of
  each field width, two's complement conversions, and the float32 scaling
  (``ScaleToWire`` refusing what leaves int32, ``ScaleFromWire``).
* :data:`PACKET_HELPERS`: ``PacketHeader``, the IEEE CRC-32, the handshake
  (``EncodeHandshake``, ``ParseHandshake``, ``ValidateHandshake``) and whole
  packets (``EncodePacket``, ``ValidatePacket``, ``DecodePacket``), written
  against the constants, registry and ``PacketStatus`` the header declares
  before them.
"""

__all__ = ["PACKET_HELPERS", "SCALAR_HELPERS"]

#: Placed before the message structs, which call these.
SCALAR_HELPERS = """\
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
"""

#: Placed after the registry and PacketStatus, which these use.
PACKET_HELPERS = """\
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
