#include "launcher/ruleset.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

TEST(LauncherRuleset, WholeTable) {
  const std::string expected = R"(table inet sandgate_3
delete table inet sandgate_3
table inet sandgate_3 {
  chain pre {
    type filter hook prerouting priority raw; policy accept;
    iifname "sg3h" ip saddr != 10.201.0.14 drop
    iifname "sg3h" meta nfproto ipv6 drop
    iifname "sg3h" meta l4proto tcp accept
    iifname "sg3h" udp dport 53 accept
    iifname "sg3h" reject with icmpx admin-prohibited
  }
  chain nat {
    type nat hook prerouting priority dstnat; policy accept;
    iifname "sg3h" udp dport 53 redirect to :15053
    iifname "sg3h" tcp dport 53 redirect to :15053
    iifname "sg3h" meta l4proto tcp redirect to :15001
  }
  chain input {
    type filter hook input priority filter; policy accept;
    iifname "sg3h" ct status dnat tcp dport { 15001, 15053 } accept
    iifname "sg3h" ct status dnat udp dport 15053 accept
    iifname "sg3h" meta l4proto tcp reject with tcp reset
    iifname "sg3h" reject with icmpx admin-prohibited
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    iifname "sg3h" meta l4proto tcp reject with tcp reset
    iifname "sg3h" reject with icmpx admin-prohibited
    oifname "sg3h" drop
  }
}
)";
  EXPECT_EQ(nft_ruleset({3, "sg3h", "10.201.0.14", 15001, 15053}), expected);
}

}  // namespace
}  // namespace sandgate::launcher
