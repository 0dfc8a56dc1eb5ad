#include "launcher/state.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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

TEST(LauncherState, OlderStateFilesHaveNothingToRestore) {
  const auto s = state_from_json(
      R"({"id":"a","slot":1,"host_ip":"10.201.0.5","sandbox_ip":"10.201.0.6","netns":"/x",)"
      R"("owned_netns":false,"host_if":"sg1h","table":"sandgate_1","dropin":"/d/a.toml",)"
      R"("mode":"up","pid":1,"ready":true,"dns_address":"10.201.0.5"})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ipv6_all_before, "");
  EXPECT_EQ(s->ipv6_default_before, "");
  EXPECT_FALSE(s->lo_down_before);
}

// What a state directory made is marked there, so gc removes only that.
TEST(LauncherState, MarksArePerKindAndSorted) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("sg-marks-" + std::to_string(::getpid()));
  {
    const StateDir dir(root.string());
    EXPECT_EQ(dir.marks("links"), std::vector<std::string>{});
    dir.mark("links", "sg3h");
    dir.mark("links", "sg10h");
    dir.mark("tables", "sandgate_3");
    dir.mark("links", "sg3h");  // again: still one
    EXPECT_EQ(dir.marks("links"), (std::vector<std::string>{"sg10h", "sg3h"}));
    EXPECT_EQ(dir.marks("tables"), std::vector<std::string>{"sandgate_3"});
    dir.unmark("links", "sg3h");
    dir.unmark("links", "never-made");
    EXPECT_EQ(dir.marks("links"), std::vector<std::string>{"sg10h"});
  }
  std::filesystem::remove_all(root);
}

TEST(LauncherState, RejectsIncomplete) {
  EXPECT_FALSE(state_from_json(""));
  EXPECT_FALSE(state_from_json("[]"));
  EXPECT_FALSE(state_from_json(R"({"id":"a","slot":1})"));
  EXPECT_FALSE(state_from_json(R"({"id":1})"));
}

}  // namespace
}  // namespace sandgate::launcher
