#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandgate::policy {

// An IPv4 or IPv6 address as plain bytes (network order). Pure value type: policy
// code never sees a socket address. IPv4 uses the first 4 bytes; the rest are zero.
struct IpAddress {
  enum class Family : std::uint8_t { v4, v6 };
  Family family = Family::v4;
  std::array<std::uint8_t, 16> bytes{};

  static IpAddress v4(std::uint32_t host_order);
  static IpAddress v6(const std::array<std::uint8_t, 16>& b);

  bool is_v4() const { return family == Family::v4; }
  std::uint32_t v4_value() const;  // host order; only meaningful for v4
  std::size_t size() const { return is_v4() ? 4 : 16; }
  // Canonical text: dotted quad, or RFC 5952 IPv6 (brackets not included).
  std::string to_string() const;

  auto operator<=>(const IpAddress&) const = default;
};

// Parses an IP literal in every spelling the C library (inet_aton) and browsers (WHATWG URL)
// accept: dotted decimal with 1-4 parts ("127.1", "2130706433"), octal ("0177.0.0.1") and hex
// ("0x7f.1") parts, IPv6 with or without brackets ("[::1]", "::ffff:127.0.0.1"). One trailing
// dot after an IPv4 literal is accepted, as browsers do. IPv6 zone ids ("fe80::1%eth0") are
// rejected (nullopt): they name an interface, not a destination a policy can reason about.
// Returns nullopt when the text is not an IP literal at all.
std::optional<IpAddress> parse_ip_literal(std::string_view text);

// True when the text looks numeric enough that a browser would treat it as an IPv4 literal
// (its last label is all digits or 0x-hex), even if parse_ip_literal rejects it as out of
// range. Such a host is never a valid name ("1.2.3.999" is neither an address nor a name).
bool looks_like_ipv4(std::string_view text);

// An address range ("10.0.0.0/8", "fd00::/8", or a single address as /32 or /128).
struct Cidr {
  IpAddress network;  // host bits zero
  unsigned prefix = 0;

  bool contains(const IpAddress& a) const;
  std::string to_string() const;
  auto operator<=>(const Cidr&) const = default;
};

// Strict: only canonical dotted-quad IPv4 or standard IPv6 text, then "/len". A bare address
// is a full-length prefix. Host bits set ("10.0.0.1/8") is an error, as is a bad length.
// Returns nullopt with a reason in *error.
std::optional<Cidr> parse_cidr(std::string_view text, std::string* error = nullptr);

// If the address is IPv6 that embeds an IPv4 address (IPv4-mapped ::ffff:0:0/96,
// IPv4-compatible ::/96 except :: and ::1, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4
// 2002::/16, Teredo 2001::/32 with its obfuscated client address), returns that IPv4 address.
std::optional<IpAddress> embedded_ipv4(const IpAddress& a);

}  // namespace sandgate::policy
