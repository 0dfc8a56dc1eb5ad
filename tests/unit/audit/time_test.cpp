#include "audit/time.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace sandgate::audit {
namespace {

constexpr std::int64_t k20261202 = 1'796'169'600'000;  // 2026-12-02T00:00:00Z

struct TimeRow {
  const char* name;
  std::string text;
  std::optional<std::int64_t> ms;
};

TEST(AuditTime, ParsesRfc3339) {
  const std::vector<TimeRow> rows = {
      {"epoch", "1970-01-01T00:00:00Z", 0},
      {"daemon form", "2026-12-02T13:53:06.123Z", k20261202 + 13 * 3'600'000 + 53 * 60'000 + 6123},
      {"no fraction", "2026-12-02T00:00:01Z", k20261202 + 1000},
      {"one fraction digit", "2026-12-02T00:00:00.5Z", k20261202 + 500},
      {"nanoseconds cut to ms", "2026-12-02T00:00:00.123456789Z", k20261202 + 123},
      {"offset east", "2026-12-02T02:00:00+02:00", k20261202},
      {"offset west", "2026-12-01T19:30:00-04:30", k20261202},
      {"space and lowercase z", "2026-12-02 00:00:00z", k20261202},
      {"bare date", "2026-12-02", k20261202},
      {"leap day", "2024-02-29T00:00:00Z", 1'709'164'800'000},
      {"not a leap year", "2026-02-29T00:00:00Z", std::nullopt},
      {"month 13", "2026-13-01T00:00:00Z", std::nullopt},
      {"hour 24", "2026-12-02T24:00:00Z", std::nullopt},
      {"no zone", "2026-12-02T00:00:00", std::nullopt},
      {"empty fraction", "2026-12-02T00:00:00.Z", std::nullopt},
      {"trailing bytes", "2026-12-02T00:00:00Zx", std::nullopt},
      {"bad offset", "2026-12-02T00:00:00+2:00", std::nullopt},
      {"empty", "", std::nullopt},
      {"a duration", "2h", std::nullopt},
  };
  for (const TimeRow& row : rows) {
    EXPECT_EQ(parse_rfc3339_ms(row.text), row.ms) << row.name;
  }
}

TEST(AuditTime, FormatsWhatItParses) {
  for (const std::int64_t ms :
       {std::int64_t{0}, k20261202 + 1, k20261202 + 86'399'999, std::int64_t{951'782'400'000}}) {
    const std::string text = format_rfc3339_ms(ms);
    EXPECT_EQ(parse_rfc3339_ms(text), ms) << text;
  }
  EXPECT_EQ(format_rfc3339_ms(k20261202 + 13 * 3'600'000 + 6123), "2026-12-02T13:00:06.123Z");
}

TEST(AuditTime, ParsesDurationsAndTimeArguments) {
  const std::vector<TimeRow> rows = {
      {"ms", "1500ms", 1500},
      {"seconds", "90s", 90'000},
      {"minutes", "15m", 900'000},
      {"hours", "2h", 7'200'000},
      {"days", "7d", 604'800'000},
      {"weeks", "1w", 604'800'000},
      {"combined", "1h30m", 5'400'000},
      {"no unit", "15", std::nullopt},
      {"unknown unit", "3y", std::nullopt},
      {"no number", "h", std::nullopt},
      {"negative", "-2h", std::nullopt},
      {"empty", "", std::nullopt},
  };
  for (const TimeRow& row : rows) EXPECT_EQ(parse_duration_ms(row.text), row.ms) << row.name;

  EXPECT_EQ(parse_time_arg("2h", k20261202), k20261202 - 7'200'000);
  EXPECT_EQ(parse_time_arg("2026-12-02", 0), k20261202);
  EXPECT_EQ(parse_time_arg("yesterday", k20261202), std::nullopt);
}

}  // namespace
}  // namespace sandgate::audit
