#include "dns/server_address.hpp"

#include <arpa/inet.h>

#include <array>
#include <charconv>
#include <cstring>
#include <string>

namespace sandgate::dns {

namespace {

std::optional<policy::IpAddress> parse_v4(std::string_view text) {
  const std::string z(text);
  in_addr a{};
  if (inet_pton(AF_INET, z.c_str(), &a) != 1) return std::nullopt;
  return policy::IpAddress::v4(ntohl(a.s_addr));
}

std::optional<policy::IpAddress> parse_v6(std::string_view text) {
  const std::string z(text);
  std::array<std::uint8_t, 16> bytes{};
  if (inet_pton(AF_INET6, z.c_str(), bytes.data()) != 1) return std::nullopt;
  return policy::IpAddress::v6(bytes);
}

std::optional<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

}  // namespace

std::optional<ServerAddress> parse_server_address(std::string_view text) {
  ServerAddress out;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const auto addr = parse_v6(text.substr(1, close - 1));
    if (!addr) return std::nullopt;
    out.address = *addr;
    const std::string_view rest = text.substr(close + 1);
    if (rest.empty()) return out;
    if (!rest.starts_with(':')) return std::nullopt;
    const auto port = parse_port(rest.substr(1));
    if (!port) return std::nullopt;
    out.port = *port;
    return out;
  }
  const auto colon = text.find(':');
  if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
    const auto addr = parse_v6(text);  // bare IPv6, no port
    if (!addr) return std::nullopt;
    out.address = *addr;
    return out;
  }
  const auto addr = parse_v4(text.substr(0, colon));
  if (!addr) return std::nullopt;
  out.address = *addr;
  if (colon == std::string_view::npos) return out;
  const auto port = parse_port(text.substr(colon + 1));
  if (!port) return std::nullopt;
  out.port = *port;
  return out;
}

}  // namespace sandgate::dns
