#include "launcher/state.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

TEST(LauncherState, JsonRoundTrip) {
  SandboxState s;
  s.id = "a";
  s.slot = 2;
  s.host_ip = "10.201.0.9";
  s.sandbox_ip = "10.201.0.10";
  s.netns = "/proc/42/ns/net";
  s.owned_netns = false;
  s.host_if = "sg2h";
  s.table = "sandgate_2";
  s.dropin = "/etc/sandgate/sandboxes.d/a.toml";
  s.mode = "up";
  s.pid = 1234;
  s.ready = true;
  s.dns_address = "10.201.0.9";
  const auto back = state_from_json(to_json(s));
  ASSERT_TRUE(back);
  EXPECT_EQ(to_json(*back), to_json(s));
  EXPECT_EQ(back->netns_path(), "/proc/42/ns/net");
  s.owned_netns = true;
  s.netns = "sg-a";
  EXPECT_EQ(s.netns_path(), "/run/netns/sg-a");
}

TEST(LauncherState, RejectsIncomplete) {
  EXPECT_FALSE(state_from_json(""));
  EXPECT_FALSE(state_from_json("[]"));
  EXPECT_FALSE(state_from_json(R"({"id":"a","slot":1})"));
  EXPECT_FALSE(state_from_json(R"({"id":1})"));
}

}  // namespace
}  // namespace sandgate::launcher
