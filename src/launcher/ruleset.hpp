#pragma once

// The host-side nftables ruleset of one sandbox, as text for `nft -f -` (applied atomically).

#include <cstdint>
#include <string>

namespace sandgate::launcher {

// What the ruleset needs to know about one sandbox and the daemon's listeners.
struct RulesetParams {
  unsigned slot = 0;
  std::string host_if;     // "sg<k>h"
  std::string sandbox_ip;  // the only source address accepted from host_if
  std::uint16_t transparent_port = 0;
  std::uint16_t dns_port = 0;
};

// `table inet sandgate_<k>`: every TCP connection from the sandbox is redirected to the
// transparent listener, DNS (UDP and TCP 53, any address) to the DNS listener; everything else
// the sandbox sends is rejected (TCP reset, ICMP admin-prohibited); spoofed sources and IPv6 are
// dropped before conntrack sees them; nothing is forwarded to or from the sandbox.
std::string nft_ruleset(const RulesetParams& params);

}  // namespace sandgate::launcher
