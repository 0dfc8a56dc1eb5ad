#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policy/ip_address.hpp"

namespace sandgate::policy {

// A destination host after normalisation: a valid DNS name (lowercase, no trailing dot),
// an IP address, or invalid with the reason it was refused.
struct Host {
  enum class Kind { name, address, invalid };
  Kind kind = Kind::invalid;
  std::string name;   // kind == name: the normalised name; kind == invalid: the raw input
  IpAddress address;  // kind == address
  std::string_view invalid_reason;  // kind == invalid: a static string

  bool is_name() const { return kind == Kind::name; }
  bool is_address() const { return kind == Kind::address; }
  bool is_valid() const { return kind != Kind::invalid; }
  // The normalised host as text: the name, the address (IPv6 in brackets), or the raw input.
  std::string display() const;
};

// Normalises a host as a client sent it (Host header, CONNECT authority, SNI, URL host):
// IP literals in any spelling become addresses; otherwise the name is lowercased, one trailing
// dot is removed, and it must be a valid DNS host name (labels 1-63 of letters, digits, '-'
// and '_', not starting or ending with '-'; total <= 253). Anything else is invalid.
Host normalize_host(std::string_view raw);

// A target the operator or a client wrote: "host", "host:port", "[v6]:port", or a URL
// ("https://host:port/path"). URL schemes supply the default port (http 80, https 443).
struct Target {
  std::string host;                   // raw, brackets stripped from IPv6
  std::optional<std::uint16_t> port;  // absent when not given and no scheme default
};
std::optional<Target> parse_target(std::string_view text);

}  // namespace sandgate::policy
