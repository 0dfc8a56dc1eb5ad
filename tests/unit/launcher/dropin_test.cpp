#include "launcher/dropin.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

TEST(LauncherDropin, Text) {
  struct Row {
    const char* name;
    std::optional<std::string> profile;
    std::vector<std::string> allow;
    std::string expected;
  };
  const std::string head = "# written by sandgate-launch; removed by `sandgate-launch down`\n";
  const Row rows[] = {
      {"bare", std::nullopt, {}, head + "id = \"a-1\"\nsources = [\"10.201.0.2\"]\nallow = []\n"},
      {"profile and rules",
       "default",
       {"example.com", "*.npmjs.org:443"},
       head + "id = \"a-1\"\nprofile = \"default\"\nsources = [\"10.201.0.2\"]\n"
              "allow = [\"example.com\", \"*.npmjs.org:443\"]\n"},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(dropin_text("a-1", row.profile, "10.201.0.2", row.allow), row.expected) << row.name;
  }
}

TEST(LauncherDropin, Marker) {
  EXPECT_TRUE(is_launcher_dropin(dropin_text("x", std::nullopt, "10.0.0.2", {})));
  EXPECT_FALSE(is_launcher_dropin("id = \"x\"\n"));
  EXPECT_FALSE(is_launcher_dropin("# written by hand\n"));
}

}  // namespace
}  // namespace sandgate::launcher
