#include "launcher/ruleset.hpp"

#include <sstream>

#include "launcher/layout.hpp"

namespace sandgate::launcher {

std::string nft_ruleset(const RulesetParams& p) {
  const std::string in = "iifname \"" + p.host_if + "\" ";
  const std::string t = std::to_string(p.transparent_port);
  const std::string d = std::to_string(p.dns_port);
  std::ostringstream out;
  // The table is created empty and deleted first so a re-run replaces, never merges; the whole
  // file is one transaction.
  out << "table inet " << table_name(p.slot) << "\n"
      << "delete table inet " << table_name(p.slot) << "\n"
      << "table inet " << table_name(p.slot)
      << " {\n"
      // raw: before conntrack, so a spoofed packet never creates a connection entry.
      << "  chain pre {\n"
      << "    type filter hook prerouting priority raw; policy accept;\n"
      << "    " << in << "ip saddr != " << p.sandbox_ip << " drop\n"
      << "    " << in
      << "meta nfproto ipv6 drop\n"
      // Rejected here rather than in forward: with forwarding off (the default) the kernel
      // drops a packet for a foreign address before the forward hook, silently, so the sandbox
      // would wait for a timeout instead of failing fast. Needs Linux >= 5.10.
      << "    " << in << "meta l4proto tcp accept\n"
      << "    " << in << "udp dport 53 accept\n"
      << "    " << in << "reject with icmpx admin-prohibited\n"
      << "  }\n"
      << "  chain nat {\n"
      << "    type nat hook prerouting priority dstnat; policy accept;\n"
      << "    " << in << "udp dport 53 redirect to :" << d << "\n"
      << "    " << in << "tcp dport 53 redirect to :" << d << "\n"
      << "    " << in << "meta l4proto tcp redirect to :" << t << "\n"
      << "  }\n"
      // Only what the nat chain redirected may reach a local socket; a direct connection to a
      // host address (the daemon's admin port, sshd, ...) is refused.
      << "  chain input {\n"
      << "    type filter hook input priority filter; policy accept;\n"
      << "    " << in << "ct status dnat tcp dport { " << t << ", " << d << " } accept\n"
      << "    " << in << "ct status dnat udp dport " << d << " accept\n"
      << "    " << in << "meta l4proto tcp reject with tcp reset\n"
      << "    " << in << "reject with icmpx admin-prohibited\n"
      << "  }\n"
      // Defence in depth for hosts that forward: nothing from or to the sandbox is routed.
      << "  chain forward {\n"
      << "    type filter hook forward priority filter; policy accept;\n"
      << "    " << in << "meta l4proto tcp reject with tcp reset\n"
      << "    " << in << "reject with icmpx admin-prohibited\n"
      << "    oifname \"" << p.host_if << "\" drop\n"
      << "  }\n"
      << "}\n";
  return out.str();
}

}  // namespace sandgate::launcher
