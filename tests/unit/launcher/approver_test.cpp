// The pure parts of `run --approve-with`: a held event's data, the command's environment, and
// the answer its exit status and output make.
#include "launcher/approver.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace sandgate::launcher {
namespace {

using namespace std::chrono_literals;

TEST(Approver, ReadsAHeldEventAsTheDaemonWritesIt) {
  const auto h = parse_held(
      R"({"id":7,"sandbox":"sb1","host":"pypi.org","port":443,"mode":"connect","method":"",)"
      R"("path":"","since_ms":1700000000000,"waiting":1})");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->id, 7u);
  EXPECT_EQ(h->sandbox, "sb1");
  EXPECT_EQ(h->host, "pypi.org");
  EXPECT_EQ(h->port, 443);
  EXPECT_EQ(h->mode, "connect");
  EXPECT_EQ(h->since_ms, 1700000000000);
  for (const char* bad :
       {"", "[]", "{}", R"({"id":0,"sandbox":"s","host":"h","port":1,"since_ms":1})",
        R"({"id":1,"sandbox":"s","host":"h","port":70000,"since_ms":1})",
        R"({"id":1,"sandbox":"s","port":1,"since_ms":1})",
        R"({"id":"1","sandbox":"s","host":"h","port":1,"since_ms":1})"}) {
    EXPECT_FALSE(parse_held(bad)) << bad;
  }
}

TEST(Approver, TheCommandGetsTheHoldInItsEnvironmentOverTheLaunchersOwn) {
  HeldDestination h{9, "sb1", "example.com", 80, "http", "GET", "/a?b", 1};
  const auto env =
      hold_environment({"PATH=/bin", "SANDGATE_HOST=stale", "SANDGATE_HOSTNAME=kept"}, h);
  EXPECT_EQ(env, (std::vector<std::string>{
                     "PATH=/bin", "SANDGATE_HOSTNAME=kept", "SANDGATE_HOLD_ID=9",
                     "SANDGATE_SANDBOX=sb1", "SANDGATE_HOST=example.com", "SANDGATE_PORT=80",
                     "SANDGATE_MODE=http", "SANDGATE_METHOD=GET", "SANDGATE_PATH=/a?b"}));
}

TEST(Approver, TheExitStatusIsTheAnswer) {
  struct Row {
    const char* name;
    std::optional<int> exit_code;
    std::string out;
    HoldVerdict verdict;
  };
  const std::string long_line(300, 'x');
  const Row rows[] = {
      {"ZeroAllowsOnce", 0, "ignored\n", {"allow_once", ""}},
      {"ThreeAllowsForTheSandbox", 3, "", {"allow_sandbox", ""}},
      {"OneDeniesWithTheFirstLine", 1, "not that one\nmore\n", {"deny", "not that one"}},
      {"CrLfLine", 2, "no\r\n", {"deny", "no"}},
      {"KilledDenies", std::nullopt, "half a line", {"deny", "half a line"}},
      {"NoOutputNoMessage", 1, "", {"deny", ""}},
      {"ControlsMadePrintable", 1, "a\tb\x1b[31mc\xc3\xa9", {"deny", "a?b?[31mc??"}},
      {"CutAt200Bytes", 1, long_line, {"deny", std::string(kMaxMessage, 'x')}},
  };
  for (const Row& row : rows)
    EXPECT_EQ(verdict_of(row.exit_code, row.out), row.verdict) << row.name;
}

TEST(Approver, TheCommandHasWhatIsLeftOfTheHoldsDeadline) {
  EXPECT_EQ(time_left(1000, 1000, 5000ms), 5000ms);
  EXPECT_EQ(time_left(1000, 4000, 5000ms), 2000ms);
  EXPECT_EQ(time_left(1000, 7000, 5000ms), 0ms);
  EXPECT_EQ(time_left(9000, 1000, 5000ms), 5000ms);  // a clock behind the daemon's: capped
}

// --approve-with refuses to start (exit 2, one line) without a token it can send; control: a
// 0600 file gives its token without the line end.
TEST(Approver, RefusesToStartWithoutAReadableAdminToken) {
  char dir_template[] = "/tmp/approver-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const auto write = [&](const std::string& name, const std::string& text, mode_t mode) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  };
  Settings settings;
  settings.config_path = "/etc/sandgate/sandgate.toml";
  settings.admin_host = "127.0.0.1";
  settings.admin_port = 9090;
  const auto refusal = [&](const std::string& file) -> std::string {
    settings.admin_token_file = file;
    try {
      approver_settings(settings, "exit 0", "sb1");
    } catch (const LaunchError& e) {
      EXPECT_EQ(e.exit_code(), 2) << e.what();
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refusal(""),
            "--approve-with answers holds on the admin API, which needs "
            "listeners.admin_token_file in /etc/sandgate/sandgate.toml");
  EXPECT_NE(refusal(dir + "/missing").find("--approve-with: " + dir + "/missing"),
            std::string::npos);
  EXPECT_NE(refusal(write("open", "tok\n", 0644)).find("--approve-with: "), std::string::npos);
  EXPECT_EQ(refusal(write("empty", "\n", 0600)),
            "--approve-with: " + dir + "/empty: admin token file is empty");
  EXPECT_EQ(refusal(write("blank", "\r\n\n", 0600)), "--approve-with: " + dir + "/blank is empty");
  settings.admin_token_file = write("good", "tok-123\n", 0600);
  const ApproverSettings a = approver_settings(settings, "exit 0", "sb1");
  EXPECT_EQ(a.token, "tok-123");
  EXPECT_EQ(a.command, "exit 0");
  EXPECT_EQ(a.sandbox, "sb1");
  EXPECT_EQ(a.admin_port, 9090);
  for (const char* f : {"open", "empty", "blank", "good"}) ::unlink((dir + "/" + f).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace sandgate::launcher
