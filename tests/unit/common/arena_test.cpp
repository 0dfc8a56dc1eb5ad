// InlineArena and ArenaAllocator: allocations come from the inline block while they fit and
// from the heap after, every one freed where it came from (ASan checks the heap side), and
// Beast's fields work over it as over std::allocator.
#include "common/arena.hpp"

#include <gtest/gtest.h>

#include <boost/beast/http/fields.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace sandgate::common {
namespace {

using Arena = InlineArena<256>;

bool aligned(const void* p, std::size_t align) {
  return reinterpret_cast<std::uintptr_t>(p) % align == 0;
}

TEST(InlineArena, ServesFromTheBlockWhileItFits) {
  Arena arena;
  void* a = arena.allocate(10, 1);
  void* b = arena.allocate(24, 8);
  void* c = arena.allocate(16, 16);
  for (void* p : {a, b, c}) EXPECT_TRUE(arena.owns(p));
  EXPECT_TRUE(aligned(b, 8));
  EXPECT_TRUE(aligned(c, 16));
  EXPECT_EQ(static_cast<std::byte*>(b) - static_cast<std::byte*>(a), 16);  // 10 rounded to 8
  EXPECT_EQ(static_cast<std::byte*>(c) - static_cast<std::byte*>(a), 48);  // 16 + 24 to 16
  EXPECT_EQ(arena.used(), 64u);
}

TEST(InlineArena, GoesToTheHeapWhenFull) {
  Arena arena;
  void* most = arena.allocate(200, 8);
  void* too_big = arena.allocate(100, 8);  // 200 + 100 > 256
  void* fits = arena.allocate(56, 8);      // still room for this one
  EXPECT_TRUE(arena.owns(most));
  EXPECT_FALSE(arena.owns(too_big));
  EXPECT_TRUE(arena.owns(fits));
  EXPECT_EQ(arena.used(), 256u);
  void* after = arena.allocate(1, 1);
  EXPECT_FALSE(arena.owns(after));
  arena.deallocate(after, 1, 1);  // back to the heap (ASan would report a leak otherwise)
  arena.deallocate(too_big, 100, 8);
  arena.deallocate(fits, 56, 8);
  arena.deallocate(most, 200, 8);
}

TEST(InlineArena, OverAlignedAndHugeGoToTheHeap) {
  Arena arena;
  void* over = arena.allocate(8, 2 * alignof(std::max_align_t));
  EXPECT_FALSE(arena.owns(over));
  EXPECT_TRUE(aligned(over, 2 * alignof(std::max_align_t)));
  arena.deallocate(over, 8, 2 * alignof(std::max_align_t));
  void* huge = arena.allocate(1000, 1);
  EXPECT_FALSE(arena.owns(huge));
  arena.deallocate(huge, 1000, 1);
  EXPECT_EQ(arena.used(), 0u);
}

TEST(InlineArena, GivesBackOnlyTheLastAllocation) {
  Arena arena;
  void* a = arena.allocate(32, 8);
  void* b = arena.allocate(32, 8);
  arena.deallocate(a, 32, 8);  // not the last: stays used until reset
  EXPECT_EQ(arena.used(), 64u);
  arena.deallocate(b, 32, 8);  // the last: its room is reused
  EXPECT_EQ(arena.used(), 32u);
  EXPECT_EQ(arena.allocate(32, 8), b);
  arena.reset();
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_EQ(arena.allocate(8, 8), a);
}

TEST(ArenaAllocator, CopiesAndRebindsShareTheArena) {
  Arena arena;
  Arena other;
  const ArenaAllocator<char, 256> chars(arena);
  const ArenaAllocator<std::uint64_t, 256> words(chars);
  EXPECT_EQ(words.arena(), &arena);
  EXPECT_TRUE(chars == words);
  EXPECT_FALSE(chars == (ArenaAllocator<char, 256>(other)));
  std::vector<std::uint64_t, ArenaAllocator<std::uint64_t, 256>> v(words);
  for (std::uint64_t i = 0; i < 100; ++i) v.push_back(i);  // 800 bytes: outgrows the block
  EXPECT_FALSE(arena.owns(v.data()));
  for (std::uint64_t i = 0; i < 100; ++i) EXPECT_EQ(v[i], i);
}

// Beast's fields over an arena: the nodes are in the block until it is full, then on the
// heap; erasing, replacing and clearing work as with std::allocator, and nothing leaks.
TEST(ArenaAllocator, HoldsBeastFields) {
  using Fields = boost::beast::http::basic_fields<ArenaAllocator<char, 2048>>;
  InlineArena<2048> arena;
  Fields arena_fields{Fields::allocator_type(arena)};
  boost::beast::http::fields plain;
  for (int i = 0; i < 40; ++i) {
    const std::string name = "X-Field-" + std::to_string(i);
    const std::string value(static_cast<std::size_t>(i) * 3, 'v');
    arena_fields.insert(name, value);
    plain.insert(name, value);
    if (i % 5 == 0) {
      arena_fields.set(name, "replaced");
      plain.set(name, "replaced");
    }
    if (i % 7 == 0) {
      arena_fields.erase("X-Field-" + std::to_string(i / 2));
      plain.erase("X-Field-" + std::to_string(i / 2));
    }
  }
  EXPECT_GT(arena.used(), arena.capacity() / 2);
  std::size_t in_block = 0;
  std::size_t on_heap = 0;
  for (const auto& f : arena_fields) ++(arena.owns(f.value().data()) ? in_block : on_heap);
  EXPECT_GT(in_block, 0u);
  EXPECT_GT(on_heap, 0u);  // 40 fields of up to 117 bytes do not fit in 2 KiB
  std::vector<std::pair<std::string, std::string>> want;
  std::vector<std::pair<std::string, std::string>> got;
  for (const auto& f : plain) want.emplace_back(f.name_string(), f.value());
  for (const auto& f : arena_fields) got.emplace_back(f.name_string(), f.value());
  EXPECT_EQ(got, want);
  arena_fields.clear();
  EXPECT_EQ(arena_fields.begin(), arena_fields.end());
}

}  // namespace
}  // namespace sandgate::common
