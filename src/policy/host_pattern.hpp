#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandgate::policy {

// A host rule: "example.com" (exactly that host), "*.example.com" (any subdomain at any
// depth, not the apex), each with an optional ":PORT". Without a port the rule covers the
// sandbox's ports.
struct HostPattern {
  std::string domain;  // normalised; for a wildcard, the part after "*."
  bool wildcard = false;
  std::optional<std::uint16_t> port;

  std::string to_string() const;  // canonical text, e.g. "*.example.com:8443"
  bool operator==(const HostPattern&) const = default;
};

// Parses a pattern. Returns nullopt and a reason in *error for anything else: a '*' not as
// the whole first label, IP literals (address rules are CIDRs), invalid names, bad ports.
std::optional<HostPattern> parse_host_pattern(std::string_view text, std::string* error = nullptr);

}  // namespace sandgate::policy
