#pragma once

#include <string_view>

#include "policy/ip_address.hpp"

namespace sandgate::policy {

// What kind of range an address falls in, following the IANA IPv4 and IPv6 Special-Purpose
// Address Registries. `global` is an ordinary public address.
enum class AddressClass {
  global,
  loopback,       // 127/8, ::1
  unspecified,    // 0.0.0.0/8 ("this network"), ::
  private_net,    // RFC 1918: 10/8, 172.16/12, 192.168/16
  cgnat,          // 100.64/10 shared address space
  link_local,     // 169.254/16, fe80::/10
  metadata,       // 169.254.169.254, fd00:ec2::254 (cloud instance metadata)
  unique_local,   // fc00::/7
  multicast,      // 224/4, ff00::/8
  broadcast,      // 255.255.255.255
  documentation,  // 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20
  benchmarking,   // 198.18/15, 2001:2::/48
  reserved,       // 240/4, 192.0.0/24 protocol assignments, 192.88.99/24, 100::/64 discard,
                  // 2001::/23 IETF protocol assignments not otherwise listed, site-local fec0::/10
};

// Classifies an address. IPv6 addresses that embed an IPv4 address (see embedded_ipv4) are
// unwrapped and the embedded address is classified: "::ffff:127.0.0.1" is loopback,
// "64:ff9b::a9fe:a9fe" is metadata. A public 6to4/Teredo/NAT64 wrapper of a public IPv4
// address is global.
AddressClass classify(const IpAddress& a);

// Stable snake_case name ("loopback", "private", "metadata", ...) used in reasons and logs.
std::string_view class_name(AddressClass c);

// Classes a config can never open: link-local, metadata, unspecified, multicast, broadcast.
bool always_denied(AddressClass c);

// Anything that is not `global`.
inline bool is_special(AddressClass c) {
  return c != AddressClass::global;
}

}  // namespace sandgate::policy
