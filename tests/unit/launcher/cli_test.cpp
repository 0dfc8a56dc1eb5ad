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

TEST(LauncherCli, AcceptsLimitsAndStatusOptions) {
  std::string error;
  auto o = parse({"run", "--sandbox", "a", "--timeout", "1.5s", "--kill-after", "200ms", "--memory",
                  "64M", "--pids", "32", "--json", "--", "true"},
                 &error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(o->kill_after, std::chrono::milliseconds(200));
  EXPECT_EQ(o->memory, 64U << 20);
  EXPECT_EQ(o->pids, 32U);
  EXPECT_TRUE(o->json);
  EXPECT_EQ(o->json_fd, -1);
  EXPECT_EQ(o->json_file, "");

  o = parse({"run", "--sandbox", "a", "--json-fd", "3", "--", "true"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_TRUE(o->json);
  EXPECT_EQ(o->json_fd, 3);
  EXPECT_FALSE(o->timeout);
  EXPECT_EQ(o->kill_after, Options::kDefaultKillAfter);

  o = parse({"run", "--sandbox", "a", "--json-file", "/tmp/s.json", "--", "true"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_TRUE(o->json);
  EXPECT_EQ(o->json_file, "/tmp/s.json");
}

// --approve-with takes one shell command (run only); its contract is in `run -h`.
TEST(LauncherCli, ApproveWithTakesAShellCommandForRun) {
  std::string error;
  auto o = parse(
      {"run", "--sandbox", "a", "--approve-with", "/opt/ask \"$SANDGATE_HOST\"", "--", "true"},
      &error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->approve_with, "/opt/ask \"$SANDGATE_HOST\"");
  EXPECT_EQ(o->command, (std::vector<std::string>{"true"}));
  o = parse({"run", "--sandbox", "a", "--", "true"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->approve_with, "");
  const std::string run = usage_text("run");
  EXPECT_NE(run.find("[--approve-with SHELL-COMMAND]"), std::string::npos) << run;
  EXPECT_NE(run.find("0 allow\n       once, 3 allow for the sandbox's life"), std::string::npos)
      << run;
}

// `COMMAND -h` (or --help) asks for that command's usage, even without its required options;
// after `--` it is the command's own argument. `env` needs --sandbox.
TEST(LauncherCli, PerCommandHelpAndEnv) {
  std::string error;
  auto o = parse({"run", "-h"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->verb, Verb::help);
  EXPECT_EQ(o->help_command, "run");
  const std::string run = usage_text("run");
  EXPECT_NE(run.find("  run  --sandbox ID"), std::string::npos) << run;
  EXPECT_EQ(run.find("  down "), std::string::npos) << run;
  EXPECT_NE(usage_text().find("  down --sandbox ID"), std::string::npos);
  o = parse({"--help"}, &error);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->help_command, "");
  o = parse({"exec", "--sandbox", "a", "--", "ls", "-h"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->verb, Verb::exec);
  EXPECT_EQ(o->command, (std::vector<std::string>{"ls", "-h"}));
  o = parse({"env", "--sandbox", "agent-1"}, &error);
  ASSERT_TRUE(o) << error;
  EXPECT_EQ(o->verb, Verb::env);
  EXPECT_FALSE(parse({"env"}, &error));
  EXPECT_EQ(error, "env needs --sandbox ID");
}

TEST(LauncherCli, Rejects) {
  struct Row {
    std::vector<std::string_view> args;
    const char* error;
  };
  const Row rows[] = {
      {{}, "missing command (run, up, exec, down, list, gc, env)"},
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
      {{"exec", "--sandbox", "a", "--timeout", "5s", "--", "x"},
       "unknown option --timeout for exec"},
      {{"up", "--sandbox", "a", "--memory", "1G"}, "unknown option --memory for up"},
      {{"run", "--sandbox", "a", "--timeout", "0", "--", "x"}, "--timeout must be > 0"},
      {{"run", "--sandbox", "a", "--timeout", "5x", "--", "x"},
       "--timeout: invalid duration \"5x\": unknown unit \"x\" (use ms, s, m or h)"},
      {{"run", "--sandbox", "a", "--timeout"}, "--timeout needs a value"},
      {{"run", "--sandbox", "a", "--memory", "64", "--", "x"},
       "--memory 64 is below 1M; sizes take K, M, G (512M)"},
      {{"run", "--sandbox", "a", "--memory", "1Q", "--", "x"},
       "--memory: invalid size \"1Q\": unknown unit \"Q\" (use K, M, G or T)"},
      {{"run", "--sandbox", "a", "--pids", "0", "--", "x"},
       "--pids: invalid count \"0\": use a whole number >= 1"},
      {{"run", "--sandbox", "a", "--json-fd", "1", "--", "x"},
       "--json-fd needs a descriptor from 3 to 1024 the caller opened"},
      {{"run", "--sandbox", "a", "--json-fd", "3", "--json-file", "/f", "--", "x"},
       "--json-file and --json-fd exclude each other"},
      {{"run", "--sandbox", "a", "--approve-with"}, "--approve-with needs a value"},
      {{"run", "--sandbox", "a", "--approve-with", "", "--", "x"}, "--approve-with needs a value"},
      {{"exec", "--sandbox", "a", "--approve-with", "true", "--", "x"},
       "unknown option --approve-with for exec"},
  };
  for (const Row& row : rows) {
    std::string error;
    EXPECT_FALSE(parse(row.args, &error));
    EXPECT_EQ(error, row.error);
  }
}

}  // namespace
}  // namespace sandgate::launcher
