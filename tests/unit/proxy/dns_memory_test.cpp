#include "proxy/dns_memory.hpp"

#include "gtest/gtest.h"

namespace sandgate::proxy {
namespace {

using namespace std::chrono_literals;
using policy::IpAddress;

const IpAddress kA = IpAddress::v4(0xCB00710A);  // 203.0.113.10
const IpAddress kB = IpAddress::v4(0xCB007114);  // 203.0.113.20
const DnsMemory::Clock::time_point kT0{};

TEST(DnsMemory, NamesAnAddressPerSandboxNewestFirst) {
  DnsMemory m;
  m.remember("sb1", "a.test", {kA}, 300s, kT0);
  m.remember("sb1", "b.test", {kA, kB}, 300s, kT0 + 1s);
  m.remember("sb2", "c.test", {kA}, 300s, kT0);
  EXPECT_EQ(m.names_for("sb1", kA, kT0 + 2s), (std::vector<std::string>{"b.test", "a.test"}));
  EXPECT_EQ(m.names_for("sb1", kB, kT0 + 2s), (std::vector<std::string>{"b.test"}));
  EXPECT_EQ(m.names_for("sb2", kA, kT0 + 2s), (std::vector<std::string>{"c.test"}));
  EXPECT_TRUE(m.names_for("sb3", kA, kT0).empty());
}

TEST(DnsMemory, AnswersExpireAfterTheirTtlButNotBeforeTheMinimum) {
  DnsMemory m;
  m.remember("sb", "short.test", {kA}, 1s, kT0);
  m.remember("sb", "long.test", {kB}, 600s, kT0);
  EXPECT_EQ(m.names_for("sb", kA, kT0 + DnsMemory::kMinKeep - 1s).size(), 1u);
  EXPECT_TRUE(m.names_for("sb", kA, kT0 + DnsMemory::kMinKeep).empty());
  EXPECT_EQ(m.names_for("sb", kB, kT0 + 599s).size(), 1u);
  EXPECT_TRUE(m.names_for("sb", kB, kT0 + 600s).empty());
}

TEST(DnsMemory, ARepeatedAnswerMovesToTheFrontAndNamesPerAddressAreBounded) {
  DnsMemory m;
  for (std::size_t i = 0; i < DnsMemory::kMaxNamesPerAddress + 3; ++i) {
    m.remember("sb", "n" + std::to_string(i) + ".test", {kA}, 300s, kT0);
  }
  m.remember("sb", "n5.test", {kA}, 300s, kT0);
  const auto names = m.names_for("sb", kA, kT0);
  ASSERT_EQ(names.size(), DnsMemory::kMaxNamesPerAddress);
  EXPECT_EQ(names.front(), "n5.test");
  EXPECT_EQ(std::count(names.begin(), names.end(), "n5.test"), 1);
}

TEST(DnsMemory, RetainForgetsRemovedSandboxes) {
  DnsMemory m;
  m.remember("keep", "a.test", {kA}, 300s, kT0);
  m.remember("gone", "a.test", {kA}, 300s, kT0);
  m.retain([](const std::string& id) { return id == "keep"; });
  EXPECT_EQ(m.names_for("keep", kA, kT0).size(), 1u);
  EXPECT_TRUE(m.names_for("gone", kA, kT0).empty());
}

TEST(DnsMemory, StaysBoundedWhenASandboxResolvesWithoutEnd) {
  DnsMemory m;
  m.remember("neighbour", "ssh.test", {kA}, 300s, kT0);
  for (std::uint32_t i = 0; i < DnsMemory::kMaxAddressesPerSandbox + 10; ++i) {
    m.remember("sb", "x.test", {IpAddress::v4(0x0A000000 + i)}, 300s, kT0);
  }
  // The newest answer is always kept; older ones may have been dropped, never invented.
  EXPECT_EQ(
      m.names_for("sb", IpAddress::v4(0x0A000000 + DnsMemory::kMaxAddressesPerSandbox + 9), kT0),
      (std::vector<std::string>{"x.test"}));
  EXPECT_EQ(m.size("sb"), DnsMemory::kMaxAddressesPerSandbox);
  // The table used to be cleared when full: the neighbour's answer is still there.
  EXPECT_EQ(m.names_for("neighbour", kA, kT0), (std::vector<std::string>{"ssh.test"}));
}

// One remember() call of a scenario: `count` addresses from `first` up, all named `name`.
struct Remember {
  const char* sandbox;
  std::uint32_t first;
  std::uint32_t count;
  const char* name = "x.test";
};

// What a scenario must leave: how many addresses a sandbox holds, and whether one address
// (first + offset) is still named for it.
struct Expect {
  const char* sandbox;
  std::size_t held;
  std::vector<std::uint32_t> kept = {};
  std::vector<std::uint32_t> forgotten = {};
};

struct BoundRow {
  const char* label;
  std::size_t per_sandbox;
  std::size_t total;
  std::vector<Remember> steps;
  std::vector<Expect> expect;
};

IpAddress nth(std::uint32_t i) {
  return IpAddress::v4(0x0A000000 + i);
}

TEST(DnsMemory, BoundsPerSandboxAndInTotalNeverEraseANeighbour) {
  const std::vector<BoundRow> rows = {
      {"a sandbox over its own cap loses its own oldest answers only",
       4,
       100,
       {{"quiet", 1000, 2}, {"noisy", 0, 50}},
       {{"quiet", 2, {1000, 1001}}, {"noisy", 4, {46, 47, 48, 49}, {0, 45}}}},
      {"a full table evicts from the sandbox holding the most",
       10,
       12,
       {{"small", 1000, 2}, {"big", 0, 10}, {"third", 2000, 5}},
       // 17 asked for, 12 kept: the 5 over the total come out of "big" (10 -> 5).
       {{"small", 2, {1000, 1001}}, {"big", 5, {5, 9}, {0, 4}}, {"third", 5, {2000, 2004}}}},
      {"many sandboxes at their caps share the total evenly",
       3,
       6,
       {{"a", 0, 3}, {"b", 100, 3}, {"c", 200, 3}},
       {{"a", 2, {1, 2}, {0}}, {"b", 2, {101, 102}, {100}}, {"c", 2, {201, 202}, {200}}}},
      {"an address remembered again is the most recent, not the next to go",
       3,
       100,
       {{"sb", 0, 3}, {"sb", 0, 1, "again.test"}, {"sb", 10, 1}},
       {{"sb", 3, {0, 2, 10}, {1}}}},
  };
  for (const BoundRow& row : rows) {
    SCOPED_TRACE(row.label);
    DnsMemory m(row.per_sandbox, row.total);
    for (const Remember& step : row.steps) {
      for (std::uint32_t i = 0; i < step.count; ++i) {
        m.remember(step.sandbox, step.name, {nth(step.first + i)}, 300s, kT0);
      }
    }
    std::size_t total = 0;
    for (const Expect& e : row.expect) {
      SCOPED_TRACE(e.sandbox);
      EXPECT_EQ(m.size(e.sandbox), e.held);
      total += e.held;
      for (const std::uint32_t i : e.kept)
        EXPECT_FALSE(m.names_for(e.sandbox, nth(i), kT0).empty()) << i;
      for (const std::uint32_t i : e.forgotten) {
        EXPECT_TRUE(m.names_for(e.sandbox, nth(i), kT0).empty()) << i;
      }
    }
    EXPECT_EQ(m.size(), total);
    EXPECT_LE(m.size(), row.total);
  }
}

}  // namespace
}  // namespace sandgate::proxy
