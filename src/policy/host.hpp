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
  std::string name;   // kind == name: the normalised name; kind == invalid: the raw input,
                      // whole (logs shorten it keeping its rightmost labels)
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

// host [":" port] as a client writes it in a CONNECT target, an absolute-form URL or a Host
// field. Views into the input.
struct Authority {
  std::string_view host;              // brackets stripped for an IPv6 literal; raw otherwise
  std::optional<std::uint16_t> port;  // absent when the text has no ":port"
  bool ip_literal = false;            // written in brackets
};

// The one authority syntax of sandgate: the daemon's CONNECT targets, absolute-form URLs and
// Host fields, and `sandgate decide`, all go through it. Stricter than RFC 3986 on purpose: no
// userinfo, no empty or zero port, and the host is either a bracketed IPv6 literal (hex
// digits, ':' and '.'; no zone id) or made of letters, digits, '-', '.' and '_' only.
// Percent-encoded and sub-delim hosts, whitespace and bare IPv6 are refused: nothing a DNS
// lookup could use needs them, and they invite parser differentials. What passes is not yet a
// valid host: normalize_host(host) decides that (a bracketed "[a:b]" parses, then is invalid).
std::optional<Authority> parse_authority(std::string_view text);

// A target: an authority, or a URL "scheme://authority[/path][?query][#fragment]" whose scheme
// (any case) is http or https and supplies the default port (80, 443). A URL with userinfo is
// refused, like any authority parse_authority refuses.
struct Target {
  std::string_view scheme;                    // as written ("HTTP"); empty for a bare authority
  std::string_view host;                      // raw, brackets stripped from IPv6
  std::optional<std::uint16_t> port;          // absent when not given and no scheme default
  std::optional<std::uint16_t> written_port;  // as written: absent when the text has none
  bool ip_literal = false;                    // written in brackets
  std::string_view rest;                      // after the authority: "/path?query", "?q", or empty
};
std::optional<Target> parse_target(std::string_view text);

}  // namespace sandgate::policy
