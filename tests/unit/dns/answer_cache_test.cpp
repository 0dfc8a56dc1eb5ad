#include "dns/answer_cache.hpp"

#include <gtest/gtest.h>

namespace sandgate::dns {
namespace {

using namespace std::chrono_literals;
using policy::IpAddress;

const IpAddress kOne = IpAddress::v4(0xc0000201);  // 192.0.2.1
const IpAddress kTwo = IpAddress::v4(0xc0000202);

TEST(AnswerCacheTest, PositiveEntryLivesForItsTtl) {
  AnswerCache cache(10);
  const auto t0 = AnswerCache::Clock::now();
  cache.put("a.test", {kOne, kTwo}, 10s, t0);
  struct Row {
    std::chrono::milliseconds after;
    bool hit;
    std::chrono::seconds ttl_left;
  };
  for (const Row& row :
       {Row{0ms, true, 10s}, Row{2500ms, true, 7s}, Row{9999ms, true, 0s}, Row{10s, false, 0s}}) {
    SCOPED_TRACE(row.after.count());
    const auto hit = cache.find("a.test", t0 + row.after);
    ASSERT_EQ(hit.has_value(), row.hit);
    if (!hit) continue;
    EXPECT_EQ(hit->addresses, (std::vector<IpAddress>{kOne, kTwo}));
    EXPECT_EQ(hit->ttl_left, row.ttl_left);
    EXPECT_FALSE(hit->negative);
  }
  EXPECT_EQ(cache.size(), 0u);  // the expired entry was dropped when found
}

TEST(AnswerCacheTest, NegativeEntry) {
  AnswerCache cache(10);
  const auto t0 = AnswerCache::Clock::now();
  cache.put_negative("gone.test", 5s, t0);
  const auto hit = cache.find("gone.test", t0 + 1s);
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(hit->negative);
  EXPECT_TRUE(hit->addresses.empty());
  EXPECT_FALSE(cache.find("gone.test", t0 + 5s).has_value());
}

TEST(AnswerCacheTest, ZeroTtlStoresNothingAndForgetsOldEntry) {
  AnswerCache cache(10);
  const auto t0 = AnswerCache::Clock::now();
  cache.put("a.test", {kOne}, 10s, t0);
  cache.put("a.test", {kTwo}, 0s, t0);
  EXPECT_FALSE(cache.find("a.test", t0).has_value());
  cache.put_negative("b.test", 0s, t0);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(AnswerCacheTest, ReplacingKeepsOneEntry) {
  AnswerCache cache(10);
  const auto t0 = AnswerCache::Clock::now();
  cache.put("a.test", {kOne}, 10s, t0);
  cache.put("a.test", {kTwo}, 20s, t0);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.find("a.test", t0 + 15s)->addresses, std::vector<IpAddress>{kTwo});
}

TEST(AnswerCacheTest, FullCacheDropsExpiredThenSoonestToExpire) {
  AnswerCache cache(2);
  const auto t0 = AnswerCache::Clock::now();
  cache.put("short.test", {kOne}, 1s, t0);
  cache.put("long.test", {kOne}, 100s, t0);
  cache.put("mid.test", {kOne}, 50s, t0);  // full: evicts short.test, closest to expiry
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.find("short.test", t0).has_value());
  EXPECT_TRUE(cache.find("long.test", t0).has_value());

  cache.put("late.test", {kOne}, 10s, t0 + 60s);  // mid.test has expired by then
  EXPECT_FALSE(cache.find("mid.test", t0 + 60s).has_value());
  EXPECT_TRUE(cache.find("long.test", t0 + 60s).has_value());
  EXPECT_TRUE(cache.find("late.test", t0 + 60s).has_value());
}

TEST(AnswerCacheTest, ZeroCapacityStoresNothing) {
  AnswerCache cache(0);
  cache.put("a.test", {kOne}, 10s, AnswerCache::Clock::now());
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace sandgate::dns
