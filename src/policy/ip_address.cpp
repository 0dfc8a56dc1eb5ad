#include "policy/ip_address.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstddef>

namespace sandgate::policy {

namespace {

// Values this large are out of range for any IPv4 part; parsing saturates here so that a
// long run of digits cannot overflow and wrap back into range.
constexpr std::uint64_t kSaturated = std::uint64_t{1} << 33;

// Longest IPv6 text inet_pton can accept ("ffff:...:ffff:255.255.255.255" is 45 chars).
constexpr std::size_t kMaxIpv6Text = 63;

int digit_value(char c, unsigned base) {
  int d = -1;
  if (c >= '0' && c <= '9') {
    d = c - '0';
  } else if (c >= 'a' && c <= 'f') {
    d = c - 'a' + 10;
  } else if (c >= 'A' && c <= 'F') {
    d = c - 'A' + 10;
  }
  return d >= 0 && static_cast<unsigned>(d) < base ? d : -1;
}

bool is_hex_prefixed(std::string_view part) {
  return part.size() >= 2 && part[0] == '0' && (part[1] == 'x' || part[1] == 'X');
}

// One part of a WHATWG/inet_aton IPv4 literal: decimal, octal after a leading 0, or hex after
// 0x (where a bare "0x" is 0, as WHATWG has it).
std::optional<std::uint64_t> parse_v4_number(std::string_view part) {
  if (part.empty()) return std::nullopt;
  unsigned base = 10;
  if (is_hex_prefixed(part)) {
    base = 16;
    part.remove_prefix(2);
  } else if (part.size() >= 2 && part[0] == '0') {
    base = 8;
    part.remove_prefix(1);
  }
  std::uint64_t value = 0;
  for (const char c : part) {
    const int digit = digit_value(c, base);
    if (digit < 0) return std::nullopt;
    value = std::min(value * base + static_cast<unsigned>(digit), kSaturated);
  }
  return value;
}

// The loose IPv4 form browsers and inet_aton accept: 1-4 parts, the last filling the
// remaining bytes, and one trailing dot.
std::optional<IpAddress> parse_ipv4_loose(std::string_view text) {
  if (!text.empty() && text.back() == '.') text.remove_suffix(1);
  if (text.empty()) return std::nullopt;

  std::array<std::uint64_t, 4> parts{};
  std::size_t count = 0;
  for (;;) {
    if (count == parts.size()) return std::nullopt;
    const std::size_t dot = text.find('.');
    const auto number = parse_v4_number(text.substr(0, dot));
    if (!number) return std::nullopt;
    parts[count++] = *number;
    if (dot == std::string_view::npos) break;
    text.remove_prefix(dot + 1);
  }

  const std::uint64_t last_limit = std::uint64_t{1} << (8 * (5 - count));
  if (parts[count - 1] >= last_limit) return std::nullopt;
  std::uint64_t value = parts[count - 1];
  for (std::size_t i = 0; i + 1 < count; ++i) {
    if (parts[i] > 255) return std::nullopt;
    value |= parts[i] << (8 * (3 - i));
  }
  return IpAddress::v4(static_cast<std::uint32_t>(value));
}

// Exactly four decimal parts of 0-255 without leading zeros; the only IPv4 form a config may use.
std::optional<IpAddress> parse_dotted_quad(std::string_view text) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) {
      if (text.empty() || text.front() != '.') return std::nullopt;
      text.remove_prefix(1);
    }
    const std::size_t len = std::min(text.find('.'), text.size());
    const std::string_view part = text.substr(0, len);
    if (part.empty() || part.size() > 3 || (part.size() > 1 && part[0] == '0')) {
      return std::nullopt;
    }
    unsigned octet = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), octet);
    if (ec != std::errc{} || end != part.data() + part.size() || octet > 255) return std::nullopt;
    value = (value << 8) | octet;
    text.remove_prefix(len);
  }
  if (!text.empty()) return std::nullopt;
  return IpAddress::v4(value);
}

// Standard IPv6 text (inet_pton), without brackets. Zone ids and embedded NULs are rejected
// explicitly; the NUL check matters because inet_pton would stop reading at one.
std::optional<IpAddress> parse_ipv6_strict(std::string_view text) {
  if (text.empty() || text.size() > kMaxIpv6Text) return std::nullopt;
  if (text.find('%') != std::string_view::npos) return std::nullopt;
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  std::array<char, kMaxIpv6Text + 1> buf{};
  std::copy(text.begin(), text.end(), buf.begin());
  std::array<std::uint8_t, 16> bytes{};
  if (inet_pton(AF_INET6, buf.data(), bytes.data()) != 1) return std::nullopt;
  return IpAddress::v6(bytes);
}

void append_hex(std::string& out, unsigned value) {
  std::array<char, 8> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value, 16);
  out.append(buf.data(), end);
}

std::string v4_text(const std::uint8_t* b) {
  char buf[16];  // "255.255.255.255": within std::string's inline buffer, no allocation
  std::size_t n = 0;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) buf[n++] = '.';
    const unsigned v = b[i];
    if (v >= 100) buf[n++] = static_cast<char>('0' + v / 100);
    if (v >= 10) buf[n++] = static_cast<char>('0' + v / 10 % 10);
    buf[n++] = static_cast<char>('0' + v % 10);
  }
  return std::string(buf, n);
}

// RFC 5952: lowercase, no leading zeros, the longest run (first on a tie) of two or more zero
// groups becomes "::", and IPv4-mapped addresses use mixed notation (section 5).
std::string v6_text(const std::array<std::uint8_t, 16>& b) {
  const bool mapped =
      std::all_of(b.begin(), b.begin() + 10, [](std::uint8_t x) { return x == 0; }) &&
      b[10] == 0xff && b[11] == 0xff;
  if (mapped) return "::ffff:" + v4_text(b.data() + 12);

  std::array<unsigned, 8> words{};
  for (std::size_t i = 0; i < 8; ++i) words[i] = (unsigned{b[2 * i]} << 8) | b[2 * i + 1];

  std::size_t best_start = 8;
  std::size_t best_len = 1;  // a run must be at least 2 groups long to be compressed
  for (std::size_t i = 0; i < 8;) {
    if (words[i] != 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < 8 && words[j] == 0) ++j;
    if (j - i > best_len) {
      best_start = i;
      best_len = j - i;
    }
    i = j;
  }

  std::string out;
  for (std::size_t i = 0; i < 8; ++i) {
    if (i == best_start) {
      out += "::";
      i += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    append_hex(out, words[i]);
  }
  return out;
}

// Zeroes every bit past `prefix`.
IpAddress masked(IpAddress a, unsigned prefix) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    const unsigned bit = static_cast<unsigned>(i) * 8;
    if (bit >= prefix) {
      a.bytes[i] = 0;
    } else if (prefix - bit < 8) {
      a.bytes[i] &= static_cast<std::uint8_t>(0xff << (8 - (prefix - bit)));
    }
  }
  return a;
}

// A prefix length: 1-3 decimal digits, no sign, no leading zero.
std::optional<unsigned> parse_prefix_len(std::string_view text) {
  if (text.empty() || text.size() > 3 || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

IpAddress IpAddress::v4(std::uint32_t host_order) {
  IpAddress a;
  a.family = Family::v4;
  a.bytes[0] = static_cast<std::uint8_t>(host_order >> 24);
  a.bytes[1] = static_cast<std::uint8_t>(host_order >> 16);
  a.bytes[2] = static_cast<std::uint8_t>(host_order >> 8);
  a.bytes[3] = static_cast<std::uint8_t>(host_order);
  return a;
}

IpAddress IpAddress::v6(const std::array<std::uint8_t, 16>& b) {
  IpAddress a;
  a.family = Family::v6;
  a.bytes = b;
  return a;
}

std::uint32_t IpAddress::v4_value() const {
  return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) |
         (std::uint32_t{bytes[2]} << 8) | std::uint32_t{bytes[3]};
}

std::string IpAddress::to_string() const {
  return is_v4() ? v4_text(bytes.data()) : v6_text(bytes);
}

std::optional<IpAddress> parse_ip_literal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text.front() == '[') {
    if (text.size() < 2 || text.back() != ']') return std::nullopt;
    return parse_ipv6_strict(text.substr(1, text.size() - 2));
  }
  if (text.find(':') != std::string_view::npos) return parse_ipv6_strict(text);
  return parse_ipv4_loose(text);
}

bool looks_like_ipv4(std::string_view text) {
  if (!text.empty() && text.back() == '.') text.remove_suffix(1);
  const std::size_t dot = text.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? text : text.substr(dot + 1);
  if (last.empty()) return false;
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  if (std::all_of(last.begin(), last.end(), is_digit)) return true;
  if (!is_hex_prefixed(last)) return false;
  return std::all_of(last.begin() + 2, last.end(), [](char c) { return digit_value(c, 16) >= 0; });
}

// Families never mix: a v4 range does not contain "::ffff:10.0.0.1". Callers that want
// embedded addresses to match unwrap them with embedded_ipv4 first.
bool Cidr::contains(const IpAddress& a) const {
  return a.family == network.family && masked(a, prefix) == network;
}

std::string Cidr::to_string() const {
  return network.to_string() + "/" + std::to_string(prefix);
}

std::optional<Cidr> parse_cidr(std::string_view text, std::string* error) {
  const auto fail = [error](std::string message) -> std::optional<Cidr> {
    if (error != nullptr) *error = std::move(message);
    return std::nullopt;
  };

  const std::size_t slash = text.find('/');
  const std::string_view addr_text = text.substr(0, slash);
  const std::optional<IpAddress> addr = addr_text.find(':') != std::string_view::npos
                                            ? parse_ipv6_strict(addr_text)
                                            : parse_dotted_quad(addr_text);
  if (!addr) {
    return fail("'" + std::string(addr_text) +
                "' is not a canonical IPv4 (a.b.c.d) or IPv6 address");
  }

  const unsigned max_len = addr->is_v4() ? 32 : 128;
  unsigned prefix = max_len;
  if (slash != std::string_view::npos) {
    const std::string_view len_text = text.substr(slash + 1);
    const auto len = parse_prefix_len(len_text);
    if (!len) {
      return fail("invalid prefix length '" + std::string(len_text) +
                  "'; expected a decimal number");
    }
    if (*len > max_len) {
      return fail("prefix length " + std::to_string(*len) + " is out of range for " +
                  (addr->is_v4() ? "IPv4 (0-32)" : "IPv6 (0-128)"));
    }
    prefix = *len;
  }

  const Cidr cidr{masked(*addr, prefix), prefix};
  if (cidr.network != *addr) return fail("host bits set; did you mean " + cidr.to_string() + "?");
  return cidr;
}

std::optional<IpAddress> embedded_ipv4(const IpAddress& a) {
  if (a.is_v4()) return std::nullopt;
  const auto& b = a.bytes;
  const auto zero = [&b](std::size_t from, std::size_t to) {
    return std::all_of(b.begin() + static_cast<std::ptrdiff_t>(from),
                       b.begin() + static_cast<std::ptrdiff_t>(to),
                       [](std::uint8_t x) { return x == 0; });
  };
  const auto v4_at = [&b](std::size_t i, std::uint8_t xor_mask = 0) {
    return IpAddress::v4((std::uint32_t{static_cast<std::uint8_t>(b[i] ^ xor_mask)} << 24) |
                         (std::uint32_t{static_cast<std::uint8_t>(b[i + 1] ^ xor_mask)} << 16) |
                         (std::uint32_t{static_cast<std::uint8_t>(b[i + 2] ^ xor_mask)} << 8) |
                         std::uint32_t{static_cast<std::uint8_t>(b[i + 3] ^ xor_mask)});
  };

  // ::ffff:0:0/96, IPv4-mapped.
  if (zero(0, 10) && b[10] == 0xff && b[11] == 0xff) return v4_at(12);
  // ::ffff:0:0:0/96, IPv4-translated (SIIT, RFC 2765).
  if (zero(0, 8) && b[8] == 0xff && b[9] == 0xff && zero(10, 12)) return v4_at(12);
  // ::/96, IPv4-compatible (deprecated); :: and ::1 are IPv6's own unspecified and loopback.
  if (zero(0, 12)) {
    if (zero(12, 15) && b[15] <= 1) return std::nullopt;
    return v4_at(12);
  }
  // 64:ff9b::/96 NAT64 well-known prefix and 64:ff9b:1::/48 local-use NAT64 (RFC 8215).
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b) {
    if (zero(4, 12)) return v4_at(12);
    if (b[4] == 0x00 && b[5] == 0x01) return v4_at(12);
  }
  // 2002::/16, 6to4: the IPv4 address follows the prefix.
  if (b[0] == 0x20 && b[1] == 0x02) return v4_at(2);
  // 2001::/32, Teredo: the client's IPv4 address is the last 32 bits, inverted.
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00) return v4_at(12, 0xff);
  return std::nullopt;
}

}  // namespace sandgate::policy
