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
  for (std::uint32_t i = 0; i < DnsMemory::kMaxEntries + 10; ++i) {
    m.remember("sb", "x.test", {IpAddress::v4(0x0A000000 + i)}, 300s, kT0);
  }
  // The newest answer is always kept; older ones may have been dropped, never invented.
  EXPECT_EQ(m.names_for("sb", IpAddress::v4(0x0A000000 + DnsMemory::kMaxEntries + 9), kT0),
            (std::vector<std::string>{"x.test"}));
}

}  // namespace
}  // namespace sandgate::proxy
