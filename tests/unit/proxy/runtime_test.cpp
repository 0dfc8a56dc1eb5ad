// The pending pool (ConnectionCounter::enter_pending): who is ended when it is full. An ended
// connection's place is gone at once, so giving it back later changes nothing; that is how
// these tests see which one was chosen.
#include "proxy/runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace sandgate::proxy {
namespace {

using namespace std::chrono_literals;

struct Entry {
  std::string source;
  std::uint64_t ticket = 0;
};

struct Case {
  const char* name;
  std::size_t total_cap, source_cap;
  std::vector<std::string> held;  // sources, oldest first
  std::string newcomer;
  std::vector<std::size_t> ended;  // indices into `held`
  // How long before the newcomer the held ones came (all at once): the source cap counts only
  // connections silent for ConnectionCounter::kSourceCapGrace.
  std::chrono::milliseconds waited = std::chrono::seconds(5);
};

class PendingPool : public ::testing::TestWithParam<Case> {};

TEST_P(PendingPool, EndsTheOldestOfTheRightSourceNeverTheNewcomer) {
  const Case& c = GetParam();
  ConnectionCounter counter;
  std::vector<Entry> held;
  const auto then = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  for (const std::string& source : c.held) {
    held.push_back({source, counter.enter_pending(source, {}, c.total_cap, c.source_cap, then)});
  }
  ASSERT_EQ(counter.pending.load(), c.held.size());
  const std::uint64_t newcomer =
      counter.enter_pending(c.newcomer, {}, c.total_cap, c.source_cap, then + c.waited);
  EXPECT_EQ(counter.pending.load(), c.held.size() + 1 - c.ended.size());
  for (std::size_t i = 0; i < held.size(); ++i) {
    const std::size_t before = counter.pending.load();
    counter.leave_pending(held[i].source, held[i].ticket);
    const bool was_ended = before == counter.pending.load();
    const bool expected = std::find(c.ended.begin(), c.ended.end(), i) != c.ended.end();
    EXPECT_EQ(was_ended, expected) << "connection " << i;
  }
  counter.leave_pending(c.newcomer, newcomer);  // the newcomer kept its place
  EXPECT_EQ(counter.pending.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PendingPool,
    ::testing::Values(
        Case{"RoomLeft", 10, 10, {"a", "b"}, "a", {}},
        Case{"SourceFullEndsItsOldest", 10, 2, {"a", "b", "a"}, "a", {0}},
        Case{"SourceFullLeavesOtherSources", 10, 2, {"b", "a", "a", "b"}, "a", {1}},
        Case{"TotalFullEndsTheLargestSourcesOldest", 4, 10, {"b", "a", "a", "a"}, "b", {1}},
        Case{"TotalFullTieTakesEither", 2, 10, {"a", "b"}, "c", {0}},
        Case{"BothFull", 3, 2, {"b", "a", "a"}, "a", {1}}, Case{"CapOfOne", 1, 1, {"a"}, "a", {0}},
        // A burst: the source is over its cap, but none of it has been silent for long.
        Case{"SourceFullButYoungEndsNone", 10, 2, {"a", "a", "a"}, "a", {}, 100ms},
        Case{"SourceFullButYoungStillMeetsTheTotalCap",
             4,
             2,
             {"a", "a", "b", "a"},
             "a",
             {0},
             100ms}),
    [](const auto& row) { return std::string(row.param.name); });

}  // namespace
}  // namespace sandgate::proxy
