// ChunkedMap and ShardedStringMap: each behaves as the std map it stands for, under any mix of
// changes, and a copy shares what a change does not touch.
#include "common/chunked_map.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/sharded_map.hpp"

namespace sandgate::common {
namespace {

using Map = ChunkedMap<std::string, int>;

std::vector<std::pair<std::string, int>> entries(const Map& map) {
  return {map.begin(), map.end()};
}

std::vector<std::pair<std::string, int>> entries(const std::map<std::string, int>& map) {
  return {map.begin(), map.end()};
}

std::string key(unsigned i) {
  std::string k = std::to_string(i);
  return std::string(6 - k.size(), '0') + k;
}

TEST(ChunkedMap, EmptyHasNothing) {
  const Map map;
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.begin(), map.end());
  EXPECT_EQ(map.find("a"), nullptr);
  Map copy = map;
  EXPECT_FALSE(copy.erase("a"));
}

// Random inserts, replacements and erases, checked against std::map after each, with a copy
// taken now and then that must keep what it held.
TEST(ChunkedMap, MatchesStdMapUnderRandomChanges) {
  std::mt19937 random(7);
  Map map;
  std::map<std::string, int> model;
  std::vector<std::pair<Map, std::map<std::string, int>>> copies;
  for (int step = 0; step < 20'000; ++step) {
    const std::string k = key(random() % 3'000);
    if (random() % 3 == 0) {
      EXPECT_EQ(map.erase(k), model.erase(k) == 1);
    } else {
      map.insert_or_assign(k, step);
      model.insert_or_assign(k, step);
    }
    ASSERT_EQ(map.size(), model.size());
    if (step % 1'000 == 0) copies.emplace_back(map, model);
  }
  EXPECT_EQ(entries(map), entries(model));
  for (const auto& [k, v] : model) ASSERT_NE(map.find(k), nullptr) << k;
  EXPECT_EQ(map.find("zzz"), nullptr);
  for (const auto& [copy, then] : copies) EXPECT_EQ(entries(copy), entries(then));
  // Chunks stay at least a quarter full on average (joins after erases).
  EXPECT_LE(map.chunk_count(), map.size() / (Map::kMaxChunk / 4) + 2);
}

TEST(ChunkedMap, ACopyChangedInOneChunkSharesTheOthers) {
  std::vector<std::pair<std::string, int>> sorted;
  for (unsigned i = 0; i < 10'000; ++i) sorted.emplace_back(key(i), static_cast<int>(i));
  const Map before = Map::from_sorted(sorted);
  ASSERT_EQ(before.size(), 10'000u);
  Map after = before;
  after.insert_or_assign(key(5'000) + "x", -1);
  ASSERT_EQ(before.size(), 10'000u);
  ASSERT_EQ(after.size(), 10'001u);
  std::size_t shared = 0;
  for (std::size_t i = 0; i < before.chunk_count(); ++i) shared += after.shares_chunk(before, i);
  EXPECT_GE(shared + 1, before.chunk_count() / 2);  // those before the change, at least
  std::size_t copied = 0;
  for (std::size_t i = 0; i < after.chunk_count(); ++i) copied += !after.shares_chunk(before, i);
  EXPECT_GT(copied, 0u);
  EXPECT_EQ(before.find(key(5'000) + "x"), nullptr);
  EXPECT_EQ(*after.find(key(5'000) + "x"), -1);
  after.erase(key(0));
  EXPECT_NE(before.find(key(0)), nullptr);
}

TEST(ShardedStringMap, MatchesStdMapAndCopiesStayApart) {
  std::mt19937 random(11);
  ShardedStringMap<int> map;
  std::map<std::string, int> model;
  ShardedStringMap<int> copy;
  std::map<std::string, int> copy_model;
  for (int step = 0; step < 20'000; ++step) {
    const std::string k = key(random() % 3'000);
    if (random() % 3 == 0) {
      EXPECT_EQ(map.erase(k), model.erase(k) == 1);
    } else {
      map.insert_or_assign(k, step);
      model.insert_or_assign(k, step);
    }
    if (step == 10'000) {
      copy = map;
      copy_model = model;
    }
  }
  ASSERT_EQ(map.size(), model.size());
  for (unsigned i = 0; i < 3'000; ++i) {
    const auto it = model.find(key(i));
    const int* found = map.find(key(i));
    ASSERT_EQ(found != nullptr, it != model.end()) << key(i);
    if (found != nullptr) {
      EXPECT_EQ(*found, it->second);
    }
    const auto then = copy_model.find(key(i));
    const int* kept = copy.find(key(i));
    ASSERT_EQ(kept != nullptr, then != copy_model.end()) << key(i);
    if (kept != nullptr) {
      EXPECT_EQ(*kept, then->second);
    }
  }
  ShardedStringMap<int> changed = map;
  changed.insert_or_assign("new", 1);
  EXPECT_FALSE(changed.shares_shard(map, "new"));
  EXPECT_EQ(map.find("new"), nullptr);
}

}  // namespace
}  // namespace sandgate::common
