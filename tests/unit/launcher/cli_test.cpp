#include "launcher/cli.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

std::optional<Options> parse(std::vector<std::string_view> args, std::string* error) {
  return parse_args(args, error);
}

TEST(LauncherCli, Accepts) {
  std::string error;
  auto o = parse({"--config", "/c.toml", "run", "--sandbox", "a", "--profile", "p", "--allow",
                  "x.com", "--allow", "*.y.com", "--", "sh", "-c", "exit 7"},
                 &error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->config_path, "/c.toml");
  EXPECT_EQ(o->verb, Verb::run);
  EXPECT_EQ(o->sandbox, "a");
  EXPECT_EQ(o->profile, "p");
  EXPECT_EQ(o->allow, (std::vector<std::string>{"x.com", "*.y.com"}));
  EXPECT_EQ(o->command, (std::vector<std::string>{"sh", "-c", "exit 7"}));

  o = parse({"up", "--sandbox", "a", "--netns", "/proc/1/ns/net", "--config", "/d.toml"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->netns_path, "/proc/1/ns/net");
  EXPECT_EQ(o->config_path, "/d.toml");

  o = parse({"exec", "--sandbox", "a", "--", "env", "--", "x"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->command, (std::vector<std::string>{"env", "--", "x"}));

  o = parse({"exec", "--sandbox", "a", "--share-run", "--", "id"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_TRUE(o->share_run);
  o = parse({"run", "--sandbox", "a", "--", "id"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_FALSE(o->share_run);

  o = parse({"list", "--json"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_TRUE(o->json);
  EXPECT_EQ(o->config_path, "/etc/sandgate/sandgate.toml");
}

TEST(LauncherCli, Rejects) {
  struct Row {
    std::vector<std::string_view> args;
    const char* error;
  };
  const Row rows[] = {
      {{}, "missing command (run, up, exec, down, list, gc)"},
      {{"start"}, "unknown command start"},
      {{"--verbose", "run"}, "unknown option --verbose before the command"},
      {{"--config"}, "--config needs a value"},
      {{"run", "--", "true"}, "run needs --sandbox ID"},
      {{"up", "--sandbox", "a", "--share-run"}, "unknown option --share-run for up"},
      {{"run", "--sandbox", "a"}, "run needs a command after --"},
      {{"run", "--sandbox", "a", "--"}, "run needs a command after --"},
      {{"up", "--sandbox"}, "--sandbox needs a value"},
      {{"up", "--sandbox", "a", "--", "x"}, "up takes no command"},
      {{"down", "--sandbox", "a", "--allow", "x"}, "unknown option --allow for down"},
      {{"exec", "--sandbox", "a", "--profile", "p", "--", "x"},
       "unknown option --profile for exec"},
      {{"list", "extra"}, "unknown option extra for list"},
      {{"gc", "--json"}, "unknown option --json for gc"},
      {{"up", "--sandbox", "a", "--user", "nobody"}, "unknown option --user for up"},
      {{"exec", "--sandbox", "a", "--user"}, "--user needs a value"},
  };
  for (const Row& row : rows) {
    std::string error;
    EXPECT_FALSE(parse(row.args, &error));
    EXPECT_EQ(error, row.error);
  }
}

}  // namespace
}  // namespace sandgate::launcher
