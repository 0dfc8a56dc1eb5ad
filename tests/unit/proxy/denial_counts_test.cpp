#include "proxy/denial_counts.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sandgate::proxy {
namespace {

TEST(DenialCounts, CountsPerSandboxAndKey) {
  DenialCounts counts;
  counts.add("a", "http", "x.test", 80, "no_rule_matched");
  counts.add("a", "http", "x.test", 80, "no_rule_matched");
  counts.add("a", "dns", "x.test", 0, "no_rule_matched");
  counts.add("b", "tls", "y.test", 443, "deny_rule");
  counts.add("", "http", "z.test", 80, "no_rule_matched");  // no sandbox: not counted
  const auto a = counts.view("a");
  EXPECT_EQ(a.total, 3U);
  EXPECT_EQ(a.overflow, 0U);
  ASSERT_EQ(a.entries.size(), 2U);
  EXPECT_EQ(a.entries[0].protocol, "dns");
  EXPECT_EQ(a.entries[0].count, 1U);
  EXPECT_EQ(a.entries[1].protocol, "http");
  EXPECT_EQ(a.entries[1].port, 80);
  EXPECT_EQ(a.entries[1].count, 2U);
  EXPECT_EQ(counts.view("b").total, 1U);
  EXPECT_NE(counts.view("a").epoch, counts.view("b").epoch);
  EXPECT_EQ(counts.view("nobody").epoch, 0U);
  EXPECT_EQ(counts.keys(), 3U);
}

// Each key keeps the first suggestion a refusal of it reported, bounded.
TEST(DenialCounts, KeepsTheFirstSuggestionOfAKey) {
  DenialCounts counts;
  counts.add("a", "dns", "x.test", 0, "no_matching_rule");  // none yet
  counts.add("a", "dns", "x.test", 0, "no_matching_rule", "first");
  counts.add("a", "dns", "x.test", 0, "no_matching_rule", "second");
  counts.add("a", "http", "y.test", 80, "r", std::string(2000, 's'));
  const auto a = counts.view("a");
  ASSERT_EQ(a.entries.size(), 2U);
  EXPECT_EQ(a.entries[0].suggestion, "first");
  EXPECT_EQ(a.entries[0].count, 3U);
  EXPECT_EQ(a.entries[1].suggestion, std::string(DenialCounts::kMaxSuggestionBytes, 's'));
}

TEST(DenialCounts, BoundedKeysCountOverflow) {
  DenialCounts counts(DenialCounts::Limits{4, 6, 2});
  for (int i = 0; i < 10; ++i) counts.add("a", "http", "h" + std::to_string(i), 80, "r");
  auto a = counts.view("a");
  EXPECT_EQ(a.entries.size(), 4U);
  EXPECT_EQ(a.total, 10U);
  EXPECT_EQ(a.overflow, 6U);
  counts.add("a", "http", "h0", 80, "r");  // a known key still counts as itself
  EXPECT_EQ(counts.view("a").overflow, 6U);
  EXPECT_EQ(counts.view("a").entries[0].count, 2U);
  // The global cap: b gets the 2 keys left.
  for (int i = 0; i < 5; ++i) counts.add("b", "http", "h" + std::to_string(i), 80, "r");
  EXPECT_EQ(counts.view("b").entries.size(), 2U);
  EXPECT_EQ(counts.view("b").overflow, 3U);
  EXPECT_EQ(counts.keys(), 6U);
  // The sandbox cap.
  counts.add("c", "http", "h", 80, "r");
  EXPECT_EQ(counts.view("c").epoch, 0U);
  EXPECT_EQ(counts.dropped(), 1U);
  // Long hosts are cut.
  DenialCounts one;
  one.add("a", "http", std::string(5000, 'x'), 80, "r");
  EXPECT_EQ(one.view("a").entries[0].host.size(), DenialCounts::kMaxHostBytes);
}

TEST(DenialCounts, RetainDropsSandboxesAndStartsANewEpoch) {
  DenialCounts counts(DenialCounts::Limits{4, 4, 8});
  for (int i = 0; i < 4; ++i) counts.add("a", "http", "h" + std::to_string(i), 80, "r");
  counts.add("b", "http", "h", 80, "r");
  EXPECT_EQ(counts.view("b").overflow, 1U);  // the global cap is full
  const auto epoch = counts.view("a").epoch;
  counts.retain([](const std::string& id) { return id != "a"; });
  EXPECT_EQ(counts.view("a").epoch, 0U);
  EXPECT_EQ(counts.keys(), 0U);
  EXPECT_EQ(counts.view("b").total, 1U);
  counts.add("a", "http", "h0", 80, "r");
  EXPECT_GT(counts.view("a").epoch, epoch);
  EXPECT_EQ(counts.view("a").total, 1U);
  EXPECT_EQ(counts.keys(), 1U);
}

}  // namespace
}  // namespace sandgate::proxy
