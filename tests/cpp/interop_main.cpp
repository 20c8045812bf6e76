// Interop driver for the generated BCNP header, built by tests/test_codegen_cpp.py.
//
// Reads one command per line on stdin and writes exactly one line per command on stdout.
// Packets and buffers travel as hex ("-" for no bytes); float values travel as the 8 hex
// digits of their IEEE-754 bit pattern ("f:3fc00000"), so no decimal conversion stands
// between Python and C++. Integers are decimal.
//
//   info                              "key=value ..." of the constants, then for every message
//                                     "<Name>=<enum value>:<k<Name>Size>:<kWireSize>:<kTypeId>"
//   lookup <id>                       registry entry of a type id: "<name> <wireSize>" or "none"
//   crc <hex> [<crc>]                 Crc32 (continuing from <crc>, decimal, when given)
//   handshake <hash>                  EncodeHandshake(hash)
//   checkhs <hex>                     ParseHandshake and ValidateHandshake of <hex>
//   validate <hex>                    ValidatePacket: "<status> <major> <minor> <flags> <type> <count>"
//   encode <Msg> <flags> <n> <fields...> x n    EncodePacket: "<hex>" or "fail"
//   encode1 <Msg> <size> <fields...>  Encode into a buffer of kWireSize + 2 bytes of 0xAA,
//                                     passing <size>: "ok|fail <hex of the whole buffer>"
//   decode <Msg> <hex>                DecodePacket<Msg>: "<status> <flags> <n> | <fields> | ... |
//                                     <EncodePacket of the decoded messages, same flags>"
//   decode1 <Msg> <hex>               Msg::Decode(<hex>): "<fields>" or "none"
//
// The generated part (interop_messages.inc) supplies the namespace alias `msgs`, ReadFields and
// WriteFields for every message, RunMessageCommand (dispatch by message name) and
// PrintMessageInfo.

#include "bcnp/message_types.h"

#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string Hex(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return "-";
  }
  std::ostringstream out;
  out << std::hex << std::setfill('0');
  for (std::size_t i = 0; i < size; ++i) {
    out << std::setw(2) << static_cast<unsigned>(data[i]);
  }
  return out.str();
}

std::string Hex(const std::vector<std::uint8_t>& bytes) { return Hex(bytes.data(), bytes.size()); }

std::optional<std::vector<std::uint8_t>> ParseHex(const std::string& text) {
  std::vector<std::uint8_t> bytes;
  if (text == "-") {
    return bytes;
  }
  if (text.size() % 2 != 0) {
    return std::nullopt;
  }
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const std::string pair = text.substr(i, 2);
    if (pair.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return std::nullopt;
    }
    bytes.push_back(static_cast<std::uint8_t>(std::stoul(pair, nullptr, 16)));
  }
  return bytes;
}

std::optional<std::vector<std::uint8_t>> ReadHex(std::istream& in) {
  std::string text;
  if (!(in >> text)) {
    return std::nullopt;
  }
  return ParseHex(text);
}

template <typename Int>
bool ReadInt(std::istream& in, Int& value) {
  long long wide = 0;
  if (!(in >> wide) || wide < static_cast<long long>(std::numeric_limits<Int>::min()) ||
      wide > static_cast<long long>(std::numeric_limits<Int>::max())) {
    return false;
  }
  value = static_cast<Int>(wide);
  return true;
}

bool ReadFloat(std::istream& in, float& value) {
  std::string token;
  if (!(in >> token) || token.size() != 10 || token.compare(0, 2, "f:") != 0 ||
      token.find_first_not_of("0123456789abcdef", 2) != std::string::npos) {
    return false;
  }
  const auto bits = static_cast<std::uint32_t>(std::stoul(token.substr(2), nullptr, 16));
  static_assert(sizeof bits == sizeof value, "float is IEEE-754 binary32");
  std::memcpy(&value, &bits, sizeof value);
  return true;
}

template <typename Int>
void WriteInt(std::ostream& out, Int value) {
  out << ' ' << static_cast<long long>(value);  // int8_t would print as a character
}

void WriteFloat(std::ostream& out, float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  out << " f:" << std::hex << std::setw(8) << std::setfill('0') << bits << std::dec;
}

template <typename Message>
std::string MessageCommand(const std::string& command, std::istream& args);

}  // namespace

#include "interop_messages.inc"

namespace {

template <typename Message>
std::string MessageCommand(const std::string& command, std::istream& args) {
  if (command == "encode") {
    unsigned flags = 0;
    std::size_t count = 0;
    if (!(args >> flags >> count) || flags > 0xFF) {
      return "error: encode needs <flags> <count>";
    }
    std::vector<Message> messages(count);
    for (Message& message : messages) {
      if (!ReadFields(args, message)) {
        return "error: bad field values";
      }
    }
    const auto packet = msgs::EncodePacket(messages, static_cast<std::uint8_t>(flags));
    return packet ? Hex(*packet) : "fail";
  }
  if (command == "encode1") {
    std::size_t size = 0;
    Message message;
    if (!(args >> size) || size > Message::kWireSize + 2 || !ReadFields(args, message)) {
      return "error: encode1 needs <size> <fields>";
    }
    std::vector<std::uint8_t> buffer(Message::kWireSize + 2, 0xAA);
    const bool ok = message.Encode(buffer.data(), size);
    return (ok ? "ok " : "fail ") + Hex(buffer);
  }
  if (command == "decode") {
    const auto packet = ReadHex(args);
    if (!packet) {
      return "error: decode needs <hex>";
    }
    const msgs::DecodedPacket<Message> decoded = msgs::DecodePacket<Message>(*packet);
    std::ostringstream out;
    out << msgs::PacketStatusName(decoded.status) << ' ' << static_cast<unsigned>(decoded.header.flags)
        << ' ' << decoded.messages.size();
    for (const Message& message : decoded.messages) {
      out << " |";
      WriteFields(out, message);
    }
    const auto again = msgs::EncodePacket(decoded.messages, decoded.header.flags);
    out << " | " << (again ? Hex(*again) : "fail");
    return out.str();
  }
  if (command == "decode1") {
    const auto bytes = ReadHex(args);
    if (!bytes) {
      return "error: decode1 needs <hex>";
    }
    const std::optional<Message> message = Message::Decode(bytes->data(), bytes->size());
    if (!message) {
      return "none";
    }
    std::ostringstream out;
    WriteFields(out, *message);
    return out.str().substr(1);
  }
  return "error: unknown command " + command;
}

std::string Run(const std::string& line) {
  std::istringstream args(line);
  std::string command;
  args >> command;
  if (command == "info") {
    std::ostringstream out;
    out << "major=" << static_cast<unsigned>(msgs::kProtocolMajorV3)
        << " minor=" << static_cast<unsigned>(msgs::kProtocolMinorV3)
        << " version=" << msgs::kSchemaVersion << " hash=" << msgs::kSchemaHash
        << " handshake_size=" << msgs::kHandshakeSize
        << " magic=" << Hex(msgs::kHandshakeMagic.data(), msgs::kHandshakeMagic.size())
        << " header_size=" << msgs::kHeaderSizeV3 << " crc_size=" << msgs::kCrcSize
        << " min_packet=" << msgs::kMinPacketSize << " max_messages=" << msgs::kMaxMessagesPerPacket
        << " clear_queue=" << static_cast<unsigned>(msgs::kFlagClearQueue)
        << " Unknown=" << static_cast<unsigned>(msgs::MessageTypeId::Unknown);
    PrintMessageInfo(out);
    return out.str();
  }
  if (command == "lookup") {
    unsigned id = 0;
    if (!(args >> id) || id > 0xFFFF) {
      return "error: lookup needs <id>";
    }
    const msgs::MessageInfo* info = msgs::LookupMessage(static_cast<std::uint16_t>(id));
    if (info == nullptr) {
      return "none";
    }
    std::ostringstream out;
    out << info->name << ' ' << info->wireSize << ' ' << static_cast<unsigned>(info->id);
    return out.str();
  }
  if (command == "crc") {
    const auto bytes = ReadHex(args);
    unsigned long seed = 0;
    if (!bytes) {
      return "error: crc needs <hex>";
    }
    if (!(args >> seed)) {
      seed = 0;
    }
    std::ostringstream out;
    out << msgs::Crc32(bytes->data(), bytes->size(), static_cast<std::uint32_t>(seed));
    return out.str();
  }
  if (command == "handshake") {
    unsigned long hash = 0;
    if (!(args >> hash) || hash > 0xFFFFFFFFul) {
      return "error: handshake needs <hash>";
    }
    const auto bytes = msgs::EncodeHandshake(static_cast<std::uint32_t>(hash));
    return Hex(bytes.data(), bytes.size());
  }
  if (command == "checkhs") {
    const auto bytes = ReadHex(args);
    if (!bytes) {
      return "error: checkhs needs <hex>";
    }
    const std::optional<std::uint32_t> hash = msgs::ParseHandshake(bytes->data(), bytes->size());
    std::ostringstream out;
    out << (hash ? std::to_string(*hash) : "none") << ' '
        << (msgs::ValidateHandshake(bytes->data(), bytes->size()) ? "valid" : "invalid");
    return out.str();
  }
  if (command == "validate") {
    const auto bytes = ReadHex(args);
    if (!bytes) {
      return "error: validate needs <hex>";
    }
    msgs::PacketHeader header{};
    const msgs::PacketStatus status = msgs::ValidatePacket(bytes->data(), bytes->size(), header);
    std::ostringstream out;
    out << msgs::PacketStatusName(status) << ' ' << static_cast<unsigned>(header.major) << ' '
        << static_cast<unsigned>(header.minor) << ' ' << static_cast<unsigned>(header.flags) << ' '
        << header.typeId << ' ' << header.count;
    return out.str();
  }
  std::string name;
  if (!(args >> name)) {
    return "error: no message name";
  }
  return RunMessageCommand(name, command, args);
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::cout << Run(line) << '\n';
  }
  return 0;
}
