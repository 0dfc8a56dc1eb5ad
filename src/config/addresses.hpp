#pragma once

// Internal to src/config: the address spellings a config file may use. Config addresses are
// written by an operator, so only the canonical spellings are accepted ("127.1" and
// "0x7f.0.0.1" are refused here even though policy treats them as addresses in requests).

#include <optional>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "policy/ip_address.hpp"

namespace sandgate::config::detail {

// Dotted-quad IPv4 ("192.0.2.1") or standard IPv6 text ("2001:db8::1"), no brackets or zone.
std::optional<policy::IpAddress> parse_strict_ip(std::string_view text);

// "ip:port" or "[ipv6]:port"; port 0-65535 (0: any free port). On failure returns nullopt
// and the whole message, naming the text, in *error.
std::optional<ListenAddress> parse_listen_address(std::string_view text, std::string* error);

// An allow_host_services entry: "ip:port" or "[ipv6]:port", port 1-65535, an address a
// connection can go to (not unspecified, multicast, broadcast, link-local or metadata) and
// not an IPv6 spelling of an IPv4 address. On failure returns nullopt and the whole message,
// naming the text, in *error.
std::optional<policy::Endpoint> parse_host_service(std::string_view text, std::string* error);

// A DNS server: "ip", "ipv6", "ip:port" or "[ipv6]:port"; port 1-65535. On failure returns
// false and the whole message in *error.
bool check_dns_server(std::string_view text, std::string* error);

// "invalid IP address "x": ..." for a text parse_strict_ip refused.
std::string invalid_ip_message(std::string_view text);

}  // namespace sandgate::config::detail
