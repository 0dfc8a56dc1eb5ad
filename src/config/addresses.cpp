#include "config/addresses.hpp"

#include <arpa/inet.h>

#include <cstring>

#include "config/toml_reader.hpp"
#include "policy/address_class.hpp"

namespace sandgate::config::detail {

namespace {

// Digits only, 1-5 of them, value <= 65535.
std::optional<std::uint32_t> parse_port_digits(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  std::uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (value > 65535) return std::nullopt;
  return value;
}

// Splits "host:port" / "[v6]:port". `host` loses its brackets; `bracketed` says whether it
// had them. Returns false when there is no ":port" part at all.
bool split_host_port(std::string_view text, std::string_view* host, std::string_view* port,
                     bool* bracketed) {
  *bracketed = !text.empty() && text.front() == '[';
  if (*bracketed) {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return false;
    }
    *host = text.substr(1, close - 1);
    *port = text.substr(close + 2);
    return true;
  }
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return false;
  *host = text.substr(0, colon);
  *port = text.substr(colon + 1);
  return true;
}

}  // namespace

std::optional<policy::IpAddress> parse_strict_ip(std::string_view text) {
  // inet_pton needs a NUL-terminated string; anything longer than an IPv6 text is invalid.
  if (text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  char buffer[INET6_ADDRSTRLEN] = {};
  std::memcpy(buffer, text.data(), text.size());
  policy::IpAddress address;
  if (inet_pton(AF_INET, buffer, address.bytes.data()) == 1) {
    address.family = policy::IpAddress::Family::v4;
    return address;
  }
  if (inet_pton(AF_INET6, buffer, address.bytes.data()) == 1) {
    address.family = policy::IpAddress::Family::v6;
    return address;
  }
  return std::nullopt;
}

std::string invalid_ip_message(std::string_view text) {
  return "invalid IP address " + in_quotes(text) + ": use dotted-quad IPv4 or standard IPv6 text";
}

std::optional<ListenAddress> parse_listen_address(std::string_view text, std::string* error) {
  const std::string prefix = "invalid listen address " + in_quotes(text) + ": ";
  std::string_view host;
  std::string_view port_text;
  bool bracketed = false;
  if (!split_host_port(text, &host, &port_text, &bracketed)) {
    *error = prefix + "expected \"ip:port\" or \"[ipv6]:port\"";
    return std::nullopt;
  }
  if (!bracketed && host.find(':') != std::string_view::npos) {
    *error = prefix + "write an IPv6 address in brackets, e.g. \"[::1]:3128\"";
    return std::nullopt;
  }
  const auto address = parse_strict_ip(host);
  if (!address || (bracketed && address->is_v4())) {
    *error = prefix + in_quotes(host) + " is not an IP address";
    return std::nullopt;
  }
  const auto port = parse_port_digits(port_text);
  if (!port) {
    *error = prefix + "port must be between 0 and 65535";
    return std::nullopt;
  }
  return ListenAddress{*address, static_cast<std::uint16_t>(*port), std::string(text)};
}

std::optional<policy::Endpoint> parse_host_service(std::string_view text, std::string* error) {
  const std::string prefix = "invalid host service " + in_quotes(text) + ": ";
  std::string_view host;
  std::string_view port_text;
  bool bracketed = false;
  if (!split_host_port(text, &host, &port_text, &bracketed) ||
      (!bracketed && host.find(':') != std::string_view::npos)) {
    *error = prefix + "expected \"ip:port\" or \"[ipv6]:port\"";
    return std::nullopt;
  }
  const auto address = parse_strict_ip(host);
  if (!address || (bracketed && address->is_v4())) {
    *error = prefix + in_quotes(host) + " is not an IP address";
    return std::nullopt;
  }
  const auto port = parse_port_digits(port_text);
  if (!port || *port == 0) {
    *error = prefix + "port must be between 1 and 65535";
    return std::nullopt;
  }
  const policy::AddressClass cls = policy::classify(*address);
  if (policy::always_denied(cls)) {
    *error = prefix + std::string(policy::class_name(cls)) +
             " addresses are always refused and cannot be opened";
    return std::nullopt;
  }
  if (const auto inner = policy::embedded_ipv4(*address)) {
    *error = prefix + "write the IPv4 address itself (\"" + inner->to_string() + ":" +
             std::to_string(*port) + "\")";
    return std::nullopt;
  }
  return policy::Endpoint{*address, static_cast<std::uint16_t>(*port)};
}

bool check_dns_server(std::string_view text, std::string* error) {
  const std::string prefix = "invalid DNS server " + in_quotes(text) + ": ";
  // A bare address, IPv6 included ("::1"), has no port.
  if (parse_strict_ip(text)) return true;
  std::string_view host;
  std::string_view port_text;
  bool bracketed = false;
  if (!split_host_port(text, &host, &port_text, &bracketed) ||
      (!bracketed && host.find(':') != std::string_view::npos)) {
    *error = prefix + "expected \"ip\", \"ip:port\" or \"[ipv6]:port\"";
    return false;
  }
  const auto address = parse_strict_ip(host);
  if (!address || (bracketed && address->is_v4())) {
    *error = prefix + in_quotes(host) + " is not an IP address";
    return false;
  }
  const auto port = parse_port_digits(port_text);
  if (!port || *port == 0) {
    *error = prefix + "port must be between 1 and 65535";
    return false;
  }
  return true;
}

}  // namespace sandgate::config::detail
