// The pure parts of `run --approve-with`: a held event's data, the command's environment, and
// the answer its exit status and output make.
#include "launcher/approver.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace sandgate::launcher
