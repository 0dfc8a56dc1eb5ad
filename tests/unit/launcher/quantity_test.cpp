#include "launcher/quantity.hpp"

#include <gtest/gtest.h>

namespace sandgate::launcher {
namespace {

using std::chrono::milliseconds;

TEST(LauncherQuantity, Durations) {
  struct Row {
    const char* text;
    long long ms;  // -1: rejected
    const char* error;
  };
  const Row rows[] = {
      {"30s", 30'000, ""},
      {"30", 30'000, ""},
      {"5m", 300'000, ""},
      {"1500ms", 1500, ""},
      {"2h", 7'200'000, ""},
      {"1.5s", 1500, ""},
      {"0.5", 500, ""},
      {"1.5m", 90'000, ""},
      {"0.0001s", 1, ""},  // rounded up: a deadline never comes early
      {"0", 0, ""},
      {"10S", 10'000, ""},
      {"2400h", 8'640'000'000, ""},
      {"", -1, "invalid duration \"\": use a number with ms, s, m or h (30s)"},
      {"s", -1, "invalid duration \"s\": use a number with ms, s, m or h (30s)"},
      {"-1s", -1, "invalid duration \"-1s\": use a number with ms, s, m or h (30s)"},
      {"5 s", -1, "invalid duration \"5 s\": unknown unit \" s\" (use ms, s, m or h)"},
      {"5d", -1, "invalid duration \"5d\": unknown unit \"d\" (use ms, s, m or h)"},
      {"1.s", -1, "invalid duration \"1.s\": a digit after '.'"},
      {"1.0000000001s", -1, "invalid duration \"1.0000000001s\": too many decimals"},
      {"2401h", -1, "duration \"2401h\" is too long (at most 100 days)"},
      {"99999999999999999999", -1,
       "invalid duration \"99999999999999999999\": use a number with ms, s, m or h (30s)"},
  };
  for (const Row& row : rows) {
    std::string error;
    const auto d = parse_duration(row.text, &error);
    if (row.ms < 0) {
      EXPECT_FALSE(d) << row.text;
      EXPECT_EQ(error, row.error) << row.text;
    } else {
      ASSERT_TRUE(d) << row.text << ": " << error;
      EXPECT_EQ(*d, milliseconds(row.ms)) << row.text;
    }
  }
}

TEST(LauncherQuantity, Sizes) {
  struct Row {
    const char* text;
    std::uint64_t bytes;  // 0: rejected
    const char* error;
  };
  const Row rows[] = {
      {"1048576", 1048576, ""},
      {"64K", 64 * 1024, ""},
      {"64k", 64 * 1024, ""},
      {"64KiB", 64 * 1024, ""},
      {"512M", 512ULL << 20, ""},
      {"512MB", 512ULL << 20, ""},
      {"1G", 1ULL << 30, ""},
      {"2gib", 2ULL << 30, ""},
      {"1T", 1ULL << 40, ""},
      {"100b", 100, ""},
      {"", 0, "invalid size \"\": use a whole number of bytes with K, M or G (512M)"},
      {"M", 0, "invalid size \"M\": use a whole number of bytes with K, M or G (512M)"},
      {"1.5G", 0, "invalid size \"1.5G\": unknown unit \".5G\" (use K, M, G or T)"},
      {"1 G", 0, "invalid size \"1 G\": unknown unit \" G\" (use K, M, G or T)"},
      {"16777216T", 0, "size \"16777216T\" is too large"},
  };
  for (const Row& row : rows) {
    std::string error;
    const auto b = parse_size(row.text, &error);
    if (row.bytes == 0) {
      EXPECT_FALSE(b) << row.text;
      EXPECT_EQ(error, row.error) << row.text;
    } else {
      ASSERT_TRUE(b) << row.text << ": " << error;
      EXPECT_EQ(*b, row.bytes) << row.text;
    }
  }
}

TEST(LauncherQuantity, Counts) {
  std::string error;
  EXPECT_EQ(parse_count("64", &error), 64U);
  EXPECT_EQ(parse_count("1", &error), 1U);
  for (const char* bad : {"0", "", "-1", "6x", "1.0", " 1"}) {
    error.clear();
    EXPECT_FALSE(parse_count(bad, &error)) << bad;
    EXPECT_EQ(error, "invalid count \"" + std::string(bad) + "\": use a whole number >= 1");
  }
}

}  // namespace
}  // namespace sandgate::launcher
