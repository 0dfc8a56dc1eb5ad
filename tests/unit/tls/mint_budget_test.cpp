#include "tls/mint_budget.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sandgate::tls {
namespace {

using namespace std::chrono_literals;

struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  MintBudget::Clock fn() {
    return [this] { return now; };
  }
};

TEST(MintBudget, BurstOfItsSizeThenRefusedUntilRefilled) {
  FakeClock clock;
  MintBudget budget(6, clock.fn());  // 6 per minute: one every 10 s
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(budget.take("a")) << i;
  EXPECT_FALSE(budget.take("a"));
  clock.now += 9s;
  EXPECT_FALSE(budget.take("a"));
  clock.now += 1s;
  EXPECT_TRUE(budget.take("a"));
  EXPECT_FALSE(budget.take("a"));
  // An hour idle refills to the burst, never beyond it.
  clock.now += 1h;
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(budget.take("a")) << i;
  EXPECT_FALSE(budget.take("a"));
}

TEST(MintBudget, SandboxesHaveTheirOwnBuckets) {
  FakeClock clock;
  MintBudget budget(2, clock.fn());
  EXPECT_TRUE(budget.take("a"));
  EXPECT_TRUE(budget.take("a"));
  EXPECT_FALSE(budget.take("a"));
  EXPECT_TRUE(budget.take("b"));
  EXPECT_TRUE(budget.take("b"));
  EXPECT_FALSE(budget.take("b"));
}

TEST(MintBudget, FullBucketsOfQuietSandboxesAreDropped) {
  FakeClock clock;
  MintBudget budget(60, clock.fn());
  for (int i = 0; i < 1024; ++i) ASSERT_TRUE(budget.take("s" + std::to_string(i)));
  EXPECT_EQ(budget.buckets(), 1024u);
  // A minute later every bucket is full again: the next new sandbox prunes them all.
  clock.now += 1min;
  EXPECT_TRUE(budget.take("new"));
  EXPECT_EQ(budget.buckets(), 1u);
  // A bucket short of full is kept through a prune, with its debt.
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(budget.take("busy"));
  clock.now += 30s;
  for (int i = 0; i < 2100; ++i) ASSERT_TRUE(budget.take("q" + std::to_string(i)));
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(budget.take("busy")) << i;
  EXPECT_FALSE(budget.take("busy"));
}

TEST(MintBudget, ZeroIsRefused) {
  EXPECT_THROW(MintBudget(0), std::invalid_argument);
}

}  // namespace
}  // namespace sandgate::tls
