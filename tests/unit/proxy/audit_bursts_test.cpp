#include "proxy/audit_bursts.hpp"

#include "gtest/gtest.h"

namespace sandgate::proxy {
namespace {

using namespace std::chrono_literals;
const AuditBursts::Clock::time_point kT0{};

// One event of a scenario and what admit() must say about it.
struct Event {
  const char* sandbox;
  const char* code;
  std::chrono::milliseconds at;
  bool write;
  std::uint64_t ended_suppressed = 0;
};

struct BurstRow {
  const char* label;
  std::vector<Event> events;
};

TEST(AuditBursts, WritesTheFirstLineOfABurstAndCountsTheRest) {
  const std::vector<BurstRow> rows = {
      {"a burst is one line",
       {{"a", "X", 0ms, true}, {"a", "X", 1ms, false}, {"a", "X", 4999ms, false}}},
      {"the next burst starts with the summary of the last",
       {{"a", "X", 0ms, true},
        {"a", "X", 1ms, false},
        {"a", "X", 2ms, false},
        {"a", "X", 5000ms, true, 2},
        {"a", "X", 5001ms, false}}},
      {"a window with nothing left out has no summary",
       {{"a", "X", 0ms, true}, {"a", "X", 6000ms, true, 0}}},
      {"sandboxes and codes have windows of their own",
       {{"a", "X", 0ms, true},
        {"b", "X", 1ms, true},
        {"a", "Y", 2ms, true},
        {"a", "X", 3ms, false},
        {"b", "X", 4ms, false}}},
  };
  for (const BurstRow& row : rows) {
    SCOPED_TRACE(row.label);
    AuditBursts bursts;
    for (const Event& e : row.events) {
      SCOPED_TRACE(e.at.count());
      const auto admit = bursts.admit(e.sandbox, e.code, kT0 + e.at);
      EXPECT_EQ(admit.write, e.write);
      EXPECT_EQ(admit.ended_suppressed, e.ended_suppressed);
    }
  }
}

// DNS denials (issue 9 item 7): the first lines_per_window lines of a window are written,
// the rest counted and summarised when the window ends.
TEST(AuditBursts, AWindowMayHoldSeveralLines) {
  AuditBursts bursts;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(bursts.admit("a", "D", kT0 + std::chrono::milliseconds(i), 3).write) << i;
  }
  EXPECT_FALSE(bursts.admit("a", "D", kT0 + 3ms, 3).write);
  EXPECT_FALSE(bursts.admit("a", "D", kT0 + 4ms, 3).write);
  EXPECT_TRUE(bursts.admit("b", "D", kT0 + 5ms, 3).write);  // another sandbox's own budget
  const auto next = bursts.admit("a", "D", kT0 + 5000ms, 3);
  EXPECT_TRUE(next.write);
  EXPECT_EQ(next.ended_suppressed, 2u);
  EXPECT_TRUE(bursts.admit("a", "D", kT0 + 5001ms, 3).write);
}

TEST(AuditBursts, TakeEndedSummarisesEndedWindowsOnce) {
  AuditBursts bursts;
  bursts.admit("a", "X", kT0);
  bursts.admit("a", "X", kT0 + 1s);
  bursts.admit("a", "X", kT0 + 2s);
  bursts.admit("b", "X", kT0 + 3s);  // nothing left out: no summary
  bursts.admit("c", "X", kT0 + 4s);
  bursts.admit("c", "X", kT0 + 4s);  // its window has not ended yet
  EXPECT_TRUE(bursts.take_ended(kT0 + 4s).empty());
  const auto ended = bursts.take_ended(kT0 + 8s);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].sandbox, "a");
  EXPECT_EQ(ended[0].code, "X");
  EXPECT_EQ(ended[0].suppressed, 2u);
  EXPECT_TRUE(bursts.take_ended(kT0 + 8s).empty());
  // A window swept away starts afresh: its first event is written again.
  EXPECT_TRUE(bursts.admit("a", "X", kT0 + 8s).write);
  const auto at_shutdown = bursts.take_ended(AuditBursts::Clock::time_point::max());
  ASSERT_EQ(at_shutdown.size(), 1u);
  EXPECT_EQ(at_shutdown[0].sandbox, "c");
}

}  // namespace
}  // namespace sandgate::proxy
