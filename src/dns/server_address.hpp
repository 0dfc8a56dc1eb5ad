#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "policy/ip_address.hpp"

namespace sandgate::dns {

// One upstream DNS server from ResolverOptions::servers.
struct ServerAddress {
  policy::IpAddress address;
  std::uint16_t port = 53;

  bool operator==(const ServerAddress&) const = default;
};

// Strict parse of "1.2.3.4", "1.2.3.4:5353", "::1", "[::1]" or "[::1]:5353": canonical address
// text only (no "127.1"), port 1-65535. Returns nullopt for anything else.
std::optional<ServerAddress> parse_server_address(std::string_view text);

}  // namespace sandgate::dns
