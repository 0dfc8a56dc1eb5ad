#include "launcher/layout.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

policy::Cidr cidr(const char* text) {
  return *policy::parse_cidr(text);
}

TEST(LauncherLayout, PoolCapacity) {
  struct Row {
    const char* pool;
    unsigned capacity;
  };
  for (const Row& row :
       {Row{"10.201.0.0/16", 16384}, Row{"10.201.0.0/29", 2}, Row{"10.201.0.0/30", 1},
        Row{"10.201.0.0/31", 0}, Row{"10.0.0.0/8", kMaxSlots}, Row{"fd00::/64", 0}}) {
    EXPECT_EQ(pool_capacity(cidr(row.pool)), row.capacity) << row.pool;
  }
}

TEST(LauncherLayout, LowestFreeSlot) {
  struct Row {
    const char* name;
    std::set<unsigned> used;
    unsigned capacity;
    std::optional<unsigned> slot;
  };
  const Row rows[] = {
      {"empty pool takes 0", {}, 4, 0},     {"next after a run", {0, 1, 2}, 4, 3},
      {"fills a hole", {0, 2, 3}, 4, 1},    {"hole at the start", {1, 2}, 4, 0},
      {"full", {0, 1}, 2, std::nullopt},    {"used beyond capacity ignored", {5}, 2, 0},
      {"no capacity", {}, 0, std::nullopt},
  };
  for (const Row& row : rows)
    EXPECT_EQ(lowest_free_slot(row.used, row.capacity), row.slot) << row.name;
}

// Another config's sandboxes (another state_dir) show on the host as links, tables and
// addresses; their slots are not taken again.
TEST(LauncherLayout, SlotsTakenOnHost) {
  const auto pool = cidr("10.201.0.0/16");
  const std::vector<policy::IpAddress> addresses = {
      *policy::parse_ip_literal("127.0.0.1"), *policy::parse_ip_literal("10.201.0.13"),
      *policy::parse_ip_literal("10.201.1.2"), *policy::parse_ip_literal("10.200.0.1"),
      *policy::parse_ip_literal("fd00::1")};
  EXPECT_EQ(slots_taken_on_host(pool, {"lo", "sg0h", "sg5s", "sg07h", "sgxh", "eth0", "sgh"},
                                {"sandgate_2", "sandgate_x", "nat", "sandgate_"}, addresses),
            (std::set<unsigned>{0, 2, 3, 5, 64}));
  // A pool elsewhere: names still count (they are host-wide), addresses outside it do not.
  EXPECT_EQ(slots_taken_on_host(cidr("10.202.0.0/16"), {"sg1h"}, {}, addresses),
            std::set<unsigned>{1});
}

TEST(LauncherLayout, AddressesAndNames) {
  const auto pool = cidr("10.201.0.0/16");
  EXPECT_EQ(host_address(pool, 0).to_string(), "10.201.0.1");
  EXPECT_EQ(sandbox_address(pool, 0).to_string(), "10.201.0.2");
  EXPECT_EQ(host_address(pool, 3).to_string(), "10.201.0.13");
  EXPECT_EQ(sandbox_address(pool, 64).to_string(), "10.201.1.2");
  EXPECT_EQ(host_if_name(12), "sg12h");
  EXPECT_EQ(sandbox_if_name(12), "sg12s");
  EXPECT_EQ(table_name(12), "sandgate_12");
  EXPECT_EQ(netns_name("agent-1"), "sg-agent-1");
  EXPECT_LE(host_if_name(kMaxSlots - 1).size(), 15U);  // IFNAMSIZ - 1
}

TEST(LauncherLayout, SandboxIds) {
  struct Row {
    const char* id;
    bool valid;
  };
  const std::string longest(64, 'a');
  const std::string too_long(65, 'a');
  for (const Row& row :
       {Row{"agent-1", true}, Row{"A_b.c-9", true}, Row{longest.c_str(), true},
        Row{too_long.c_str(), false}, Row{"", false}, Row{".", false}, Row{"..", false},
        Row{"-x", false}, Row{"a/b", false}, Row{"a b", false}, Row{"é", false}}) {
    EXPECT_EQ(valid_sandbox_id(row.id), row.valid) << row.id;
  }
}

}  // namespace
}  // namespace sandgate::launcher
